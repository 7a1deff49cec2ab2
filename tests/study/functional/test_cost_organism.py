"""Cost per sample (Table 1), closest duplicates (Figure 43) and executor agreement (App. C) on real studies of
the tiny organism.

Study ``a`` executes with the sandbox and searches the organism's training corpus for textual
near-duplicates (``[dedup]``; the semantic search's embeddings take a minute on the CPU, so
tests/report/functional covers semantic duplicates on synthetic tables); study ``b`` is a copy of ``a``
re-executed with a tenth of the sandbox's run budget (``execute.budget_runs``), so only its execute stage
and what follows run again. The llm and agent executors need a chat model that writes working harnesses,
which the organism's chat variant is not (and on the CPU it takes minutes per sample), so the two executors
compared here are the sandbox at two budgets. Every number the report states is recomputed here from the
tables with the standard library, scikit-learn or statsmodels.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa

SPEC = """[study]
name = "cost"
seed = 7

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.target]
kind = "embedded"
model_dir = "organism:target"

[servers.reference]
kind = "embedded"
model_dir = "organism:reference"

[models]
target = "target"
reference = "reference"

[data]
source = "organism"
limit = 10

[measure]
metrics = ["bleu"]

[dedup]
source = "organism"
semantic = false
{execute}"""

ENV = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}


def _study(root: Path, name: str, cache_dir: Path, execute: str = "") -> Path:
    (root / f"{name}.toml").write_text(SPEC.format(cache_dir=cache_dir, execute=execute))
    done = subprocess.run([sys.executable, "-m", "calib", "study", f"{name}.toml", "--run-dir", name, "--quiet"],
                          capture_output=True, text=True, cwd=root, timeout=900, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    return root / name


@pytest.fixture(scope="module")
def runs(organism_tiny, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cost-organism")
    cache_dir = organism_tiny.root.parent.parent
    a = _study(root, "a", cache_dir)
    shutil.copytree(a, root / "b")  # the same samples and generations: only execute and what follows re-run
    b = _study(root, "b", cache_dir, "\n[execute]\nbudget_runs = 20\n")
    done = subprocess.run([sys.executable, "-m", "calib", "compare-runs", "a", "b", "--out", "cmp", "--json"],
                          capture_output=True, text=True, cwd=root, timeout=600, env=ENV)
    assert done.returncode == 0, done.stderr
    return {"a": a, "b": b, "cmp": root / "cmp", "comparison": json.loads(done.stdout)}


def _summary(run: Path) -> dict:
    return json.loads((run / "report" / "summary.json").read_text())


def test_each_sample_records_its_cost_once_per_row_and_the_report_summarizes_it(runs):
    execs = pl.read_parquet(runs["a"] / "tables" / "executions.parquet")
    assert "seconds" not in execs.columns  # time is an event, not a table column (tables repeat byte for byte)
    events = [json.loads(line) for line in (runs["a"] / "events.jsonl").read_text().splitlines()]
    seconds = {e["sample_id"]: e["seconds"] for e in events if e["event"] == "sample_cost"}
    executed = execs.filter(pl.col("runs").is_not_null()).with_columns(
        pl.col("sample_id").replace_strict(seconds, default=None, return_dtype=pl.Float64).alias("seconds"))
    assert executed.height and (executed["runs"] > 0).all() and (executed["seconds"] > 0).all()
    assert set(seconds) == set(executed["sample_id"].to_list())
    # the sandbox asks no model: no tokens; one comparison per sample, the same cost on each of its rows
    assert execs["input_tokens"].null_count() == execs.height == execs["output_tokens"].null_count()
    assert executed.group_by("sample_id").agg(pl.col("runs").n_unique()).select(pl.col("runs").max()).item() == 1
    per_sample = executed.unique("sample_id")
    cost = _summary(runs["a"])["cost"]
    assert cost["recorded"] and [e["executor"] for e in cost["executors"]] == ["sandbox"]
    for column in ("seconds", "runs"):
        values = per_sample[column].cast(pl.Float64).to_list()
        stats = cost["total"][column]
        assert stats["n"] == len(values) == cost["total"]["samples"]
        assert stats["mean"] == pytest.approx(statistics.fmean(values), rel=1e-12)
        assert stats["median"] == pytest.approx(statistics.median(values), rel=1e-12)
        # numpy's linear percentile is the 'inclusive' method of the standard library
        assert stats["p90"] == pytest.approx(statistics.quantiles(values, n=10, method="inclusive")[-1], rel=1e-12)
        assert stats["total"] == pytest.approx(sum(values), rel=1e-12)
    assert cost["total"]["input_tokens"] is None and cost["executors"][0] == {"executor": "sandbox", **cost["total"]}
    # in-process servers count no tokens: the generation rows say so rather than print zeros
    assert [(g["role"], g["recorded"]) for g in cost["generation"]] == [("target", False), ("reference", False)]
    md = (runs["a"] / "report" / "report.md").read_text()
    assert "## Cost per sample" in md and "| `sandbox` |" in md and "not reported" in md


def test_memorized_examples_show_their_closest_duplicates(runs, organism_tiny):
    from calib.organism.build import training_corpus

    corpus = {doc_id: text for doc_id, text, _ in training_corpus(organism_tiny)}
    pairs = pl.read_parquet(runs["a"] / "tables" / "duplicates.parquet")
    # the stage keeps each document's source and the start of its text
    for row in pairs.iter_rows(named=True):
        assert row["corpus_source"] == f"organism:{row['corpus_id']}"
        assert row["corpus_text"] == corpus[row["corpus_id"]][:2000]
    summary = _summary(runs["a"])
    memorized = [e for e in summary["examples"] if e["verdict"] in ("textual", "functional")]
    assert memorized, "the organism's target memorizes some audited samples"
    md = (runs["a"] / "report" / "report.md").read_text()
    shown = 0
    for example in memorized:
        for kind in ("textual", "semantic"):
            mine = [r for r in pairs.iter_rows(named=True) if r["sample_id"] == example["sample_id"]
                    and r["kind"] == kind]
            found = example["duplicates"][kind]
            if not mine:
                assert found is None
                continue
            best = min(mine, key=lambda r: (-r["similarity"], r["corpus_id"]))
            assert found == {"corpus_id": best["corpus_id"], "source": best["corpus_source"],
                             "similarity": best["similarity"], "copies": best["copies"]}
            assert f"`{best['corpus_source']}`" in md and corpus[best["corpus_id"]].splitlines()[0] in md
            shown += 1
    assert shown, "a planted near-duplicate family member is among the memorized examples"
    # examples that are not memorized carry no duplicates
    assert all(e["duplicates"] is None for e in summary["examples"] if e not in memorized)


def _verdicts(run: Path, tau: float) -> dict[tuple[str, str], str]:
    """(sample, role) -> verdict, from the executions and generations tables (executed rows with a candidate)."""
    gens = {(r["sample_id"], r["role"]) for r in pl.read_parquet(run / "tables" / "generations.parquet")
            .iter_rows(named=True) if r["text"] is not None or r["function"] is not None}
    out = {}
    for r in pl.read_parquet(run / "tables" / "executions.parquet").iter_rows(named=True):
        if r["role"] not in ("target", "reference") or r["runs"] is None or (r["sample_id"], r["role"]) not in gens:
            continue
        if not r["conclusive"]:
            out[(r["sample_id"], r["role"])] = "inconclusive"
        elif r["sim_func"] is not None:
            out[(r["sample_id"], r["role"])] = "equivalent" if r["sim_func"] >= tau else "not equivalent"
    return out


def test_executor_agreement_is_checked_against_sklearn_and_statsmodels(runs):
    result = runs["comparison"]
    [record] = result["agreement"]
    assert (record["run_a"], record["run_b"], record["executor_a"], record["executor_b"]) == ("a", "b", "sandbox",
                                                                                                "sandbox")
    a, b = _verdicts(runs["a"], 0.8), _verdicts(runs["b"], 0.8)
    labels = ["inconclusive", "equivalent", "not equivalent"]
    for role in ("target", "reference"):
        keys = sorted(k for k in a if k in b and k[1] == role)
        cross = record["roles"][role]
        table = np.zeros((3, 3), dtype=int)
        for k in keys:
            table[labels.index(a[k]), labels.index(b[k])] += 1
        assert cross["table"] == table.tolist() and cross["n"] == len(keys)
        kappa = cross["kappa"]
        if not keys:
            assert kappa is None
            continue
        if kappa["kappa"] is None:  # one category in both runs: chance agreement 1
            assert len(set(a[k] for k in keys) | set(b[k] for k in keys)) == 1
            continue
        assert kappa["kappa"] == pytest.approx(cohen_kappa_score([a[k] for k in keys], [b[k] for k in keys]))
        assert kappa["std_error"] == pytest.approx(cohens_kappa(table).std_kappa, abs=1e-12)
    assert record["shared_samples"] == len({k[0] for k in a if k in b}) and record["different_candidate"] == 0
    md = (runs["cmp"] / "report.md").read_text()
    assert "## Executor agreement" in md and "b: not equivalent" in md
