"""Executor agreement in ``calib compare-runs`` (App. C, Figure 25) on synthetic runs: the verdict cross-tables
against a count made here from the planted verdicts, and κ against scikit-learn and statsmodels.

Runs a and b audit the same 40 samples (tests/report/_fake_run.py); their executions tables are rewritten here
with a planted verdict per (sample, role) in each run, executed as if by the sandbox in a and by an ``llm``
executor in b. One target candidate differs between the runs (left out), one sample was not executed in b
(null ``runs``: left out).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa

from calib.report.compare import compare_runs, write_comparison
from tests.report._fake_run import make_run

LABELS = ("inconclusive", "equivalent", "not equivalent")
#: (verdict in a, verdict in b) for sample i, role by role, drawn with a seed; most agree.
RNG = np.random.default_rng(20260102)
PLANTED = {role: [(int(a), int(a) if RNG.random() < 0.75 else int(RNG.integers(0, 3)))
                  for a in RNG.choice(3, size=40, p=[0.2, 0.3, 0.5])] for role in ("target", "reference")}
CHANGED = "s05"  # its target candidate differs in b
NOT_RUN = "s07"  # not executed in b


def _rewrite(root: Path, run: str) -> None:
    path = root / "tables" / "executions.parquet"
    execs = pl.read_parquet(path).filter(pl.col("role") != "truth")
    rows = []
    for r in execs.iter_rows(named=True):
        i = int(r["sample_id"][1:])
        verdict = LABELS[PLANTED[r["role"]][i][0 if run == "a" else 1]]
        # x's conclusiveness is the sample's: planted on the target row, shared by both roles
        conclusive = LABELS[PLANTED["target"][i][0 if run == "a" else 1]] != "inconclusive"
        if not conclusive:
            verdict = "inconclusive"
        sim = None if not conclusive else (0.9 if verdict == "equivalent" else 0.3)
        ran = not (run == "b" and r["sample_id"] == NOT_RUN)
        rows.append({**r, "executor": "sandbox" if run == "a" else "llm", "conclusive": conclusive, "sim_func": sim,
                     "runs": 10 if ran else None})
    pl.DataFrame(rows, schema=execs.schema).write_parquet(path)


def _verdicts(root: Path, gens: set[tuple[str, str]]) -> dict[tuple[str, str], tuple[bool, str]]:
    """(sample, role) -> (x conclusive, verdict) of the rows written by :func:`_rewrite` that were executed and have
    a candidate."""
    out = {}
    for r in pl.read_parquet(root / "tables" / "executions.parquet").iter_rows(named=True):
        if r["runs"] is None or (r["sample_id"], r["role"]) not in gens:
            continue
        verdict = "inconclusive" if not r["conclusive"] else ("equivalent" if r["sim_func"] >= 0.8 else
                                                              "not equivalent")
        out[(r["sample_id"], r["role"])] = (r["conclusive"], verdict)
    return out


def _candidates(root: Path) -> dict[tuple[str, str], str | None]:
    return {(r["sample_id"], r["role"]): r["function"] if r["function"] is not None else r["text"]
            for r in pl.read_parquet(root / "tables" / "generations.parquet").iter_rows(named=True)}


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("agreement")
    for run in ("a", "b"):
        make_run(root / run)
        _rewrite(root / run, run)
        spec = json.loads((root / run / "spec.json").read_text())
        spec.setdefault("execute", {}).update({"executor": "llm", "level": "bare", "server": "chat"}
                                              if run == "b" else {"executor": "sandbox"})
        (root / run / "spec.json").write_text(json.dumps(spec))
    gens = root / "b" / "tables" / "generations.parquet"
    pl.read_parquet(gens).with_columns(pl.when((pl.col("sample_id") == CHANGED) & (pl.col("role") == "target"))
                       .then(pl.col("function") + "# changed\n").otherwise(pl.col("function")).alias("function")
                       ).write_parquet(gens)
    found = compare_runs([root / "a", root / "b"])
    paths = write_comparison(found, root / "out")
    ca, cb = _candidates(root / "a"), _candidates(root / "b")
    va = _verdicts(root / "a", {k for k, v in ca.items() if v is not None})
    vb = _verdicts(root / "b", {k for k, v in cb.items() if v is not None})
    return {"result": found, "md": paths["markdown"].read_text(), "a": va, "b": vb,
            "same": {k for k in va if k in vb and ca[k] == cb[k]}, "shared": {k for k in va if k in vb}}


def test_cross_tables_and_kappa_equal_direct_counts_sklearn_and_statsmodels(result):
    [record] = result["result"]["agreement"]
    assert (record["executor_a"], record["executor_b"]) == ("sandbox", "llm (level bare)")
    assert record["different_candidate"] == 1 and (CHANGED, "target") in result["shared"] - result["same"]
    assert not any(k[0] == NOT_RUN for k in result["shared"])
    for role in ("target", "reference"):
        keep = sorted(k for k in result["same"] if k[1] == role)
        a, b = [result["a"][k][1] for k in keep], [result["b"][k][1] for k in keep]
        table = np.zeros((3, 3), dtype=int)
        for va, vb in zip(a, b):
            table[LABELS.index(va), LABELS.index(vb)] += 1
        cross = record["roles"][role]
        assert cross["table"] == table.tolist() and cross["n"] == len(keep) > 20
        kappa = cross["kappa"]
        assert kappa["kappa"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
        ref = cohens_kappa(table)
        assert kappa["std_error"] == pytest.approx(ref.std_kappa, abs=1e-12)
        assert (kappa["low"], kappa["high"]) == (pytest.approx(max(-1, ref.kappa_low), abs=1e-12),
                                                 pytest.approx(min(1, ref.kappa_upp), abs=1e-12))
        assert 0.2 < kappa["kappa"] < 1.0  # mostly agreeing, not perfectly: the test can fail both ways


def test_conclusiveness_is_counted_once_per_sample(result):
    [record] = result["result"]["agreement"]
    ids = sorted({k[0] for k in result["shared"]})
    first = {}
    for k in sorted(result["shared"], key=lambda k: (k[0], k[1] != "target")):
        first.setdefault(k[0], k)
    a = ["conclusive" if result["a"][first[s]][0] else "inconclusive" for s in ids]
    b = ["conclusive" if result["b"][first[s]][0] else "inconclusive" for s in ids]
    cross = record["conclusive"]
    assert cross["n"] == len(ids) == record["shared_samples"]
    assert cross["kappa"]["kappa"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    both = sorted(k for k in result["same"] if result["a"][k][0] and result["b"][k][0])
    assert record["equivalent_if_conclusive"]["n"] == len(both)


def test_the_report_shows_the_tables(result):
    md = result["md"]
    assert "## Executor agreement" in md and "executor `llm (level bare)`" in md
    assert "| a: inconclusive |" in md and "b: not equivalent" in md and "κ = " in md
    assert md.index("## Executor agreement") < md.index("## Method")


def test_runs_without_shared_samples_have_no_agreement(tmp_path):
    from tests.report.compare._runs import samples_c

    make_run(tmp_path / "a")
    make_run(tmp_path / "c", samples_c())
    assert compare_runs([tmp_path / "a", tmp_path / "c"])["agreement"] == []
