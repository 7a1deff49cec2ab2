"""The report's "Cost per sample" section (functional-memorization paper, Table 1) and the closest training
duplicates beside memorized examples (Figure 43), on the synthetic run of tests/report/_fake_run.py with
cost columns, duplicates and a hosted server's spending written in. Statistics are recomputed with the
standard library (``statistics``), the closest duplicates by a direct search over the pairs written here.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from calib.report import write_report
from calib.study.tables import DUPLICATES_TABLE_SCHEMA
from tests.report._fake_run import make_run
from tests.report.test_docs_report import DOC, _keys


def _with_cost(root: Path) -> dict[str, dict[str, Any]]:
    """Write per-sample cost columns into the run's executions table and the seconds as sample_cost events
    (an earlier value of a sample first: the last event counts); returns sample -> its cost."""
    path = root / "tables" / "executions.parquet"
    execs = pl.read_parquet(path)
    ids = sorted(execs["sample_id"].unique().to_list())
    cost = {}
    for i, sid in enumerate(ids):
        agent = i % 3 == 0  # a third of the samples as if an agent executed them, with tokens
        cost[sid] = {"executor": "agent" if agent else "sandbox", "runs": 20 + (7 * i) % 31,
                     "seconds": round(0.5 + ((13 * i) % 17) * 1.25, 3),
                     "input_tokens": 1000 + 37 * i if agent else None, "output_tokens": 200 + 11 * i if agent else None}
    execs = execs.with_columns(
        pl.col("sample_id").replace_strict({s: c["executor"] for s, c in cost.items()}).alias("executor"),
        *[pl.col("sample_id").replace_strict({s: c[k] for s, c in cost.items()}, return_dtype=dtype).alias(k)
          for k, dtype in (("runs", pl.Int64), ("input_tokens", pl.Int64), ("output_tokens", pl.Int64))])
    execs.write_parquet(path)
    with (root / "events.jsonl").open("a") as log:
        for sid, c in cost.items():
            if sid == ids[0]:  # a first attempt (an older invocation), then the one that counts
                log.write(json.dumps({"event": "sample_cost", "sample_id": sid, "seconds": 99.0}) + "\n")
            log.write(json.dumps({"event": "sample_cost", "stage": "execute", "sample_id": sid,
                                  "seconds": c["seconds"]}) + "\n")
        log.write('{"event": "sample_cost", "sample_id": "s00", "sec')  # a partial last line is skipped
    return cost


PAIRS = [  # sample, corpus document, kind, similarity, copies, source, text
    ("s00", "d1", "semantic", 0.93, 1, "repo/a.py", "def rule_a(x):\n    return x * 2\n"),
    ("s00", "d2", "semantic", 0.97, 3, "repo/b.py", "def rule_b(y):\n    return y + y\n"),
    ("s00", "d0", "semantic", 0.97, 1, "repo/c.py", "def rule_c(z):\n    return 2 * z\n"),  # tie: d0 < d2
    ("s06", "d3", "textual", 0.61, 1, "repo/d.py", "def copy_one():\n    pass\n"),
    ("s06", "d4", "textual", 0.88, 2, "repo/e.py", "def copy_two():\n    pass\n"),
    ("s06", "d5", "semantic", 0.95, 1, "repo/f.py", "def other_form():\n    pass\n"),
    ("s30", "d6", "textual", 0.45, 1, None, "def control_dup():\n    pass\n"),
]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("cost")
    pairs = pl.DataFrame([(*p[:6], p[6]) for p in PAIRS], schema=DUPLICATES_TABLE_SCHEMA, orient="row")
    make_run(root, examples=12, duplicates=pairs)
    cost = _with_cost(root)
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["spending"] = {"servers": {"target": {"requests": 40, "input_tokens": 8000, "output_tokens": 2400}}}
    (root / "manifest.json").write_text(json.dumps(manifest))
    paths = write_report(root)
    return {"cost": cost, "summary": json.loads(paths["summary"].read_text()), "md": paths["markdown"].read_text(),
            "html": paths["html"].read_text()}


def _expected(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "mean": statistics.fmean(values), "median": statistics.median(values),
            "p90": statistics.quantiles(values, n=10, method="inclusive")[-1], "total": sum(values)}


def test_cost_per_executor_and_in_total_equals_the_standard_library(rendered):
    cost, summary = rendered["cost"], rendered["summary"]["cost"]
    assert summary["recorded"] and [e["executor"] for e in summary["executors"]] == ["agent", "sandbox"]
    groups = {"agent": [c for c in cost.values() if c["executor"] == "agent"],
              "sandbox": [c for c in cost.values() if c["executor"] == "sandbox"], "total": list(cost.values())}
    for record in [*summary["executors"], summary["total"]]:
        rows = groups[record.get("executor", "total")]
        assert record["samples"] == len(rows)
        for column in ("seconds", "runs", "input_tokens", "output_tokens"):
            values = [float(r[column]) for r in rows if r[column] is not None]
            if not values:
                assert record[column] is None
                continue
            expected = _expected(values)
            assert record[column] == {k: pytest.approx(v, rel=1e-12) for k, v in expected.items()}


def test_generation_tokens_come_from_the_manifest_spending(rendered):
    generation = {g["role"]: g for g in rendered["summary"]["cost"]["generation"]}
    target, reference = generation["target"], generation["reference"]
    assert (target["recorded"], target["input_tokens"], target["output_tokens"]) == (True, 8000, 2400)
    assert target["per_sample"] == {"input_tokens": pytest.approx(8000 / target["samples"]),
                                    "output_tokens": pytest.approx(2400 / target["samples"])}
    assert reference["recorded"] is False and reference["per_sample"] is None


def test_the_section_states_the_table(rendered):
    md = rendered["md"]
    assert "## Cost per sample" in md and "| `agent` |" in md and "| all executors |" in md
    assert 'id="cost-table"' in rendered["html"] and "| target | `target` |" in md and "8000 / 2400" in md


def test_every_cost_key_is_documented(rendered):
    cost = rendered["summary"]["cost"]
    keys = _keys({"cost": cost}) | _keys(cost["total"]) | _keys(cost["generation"][0])
    for key in keys:
        assert f"`{key}`" in DOC, f"summary.json cost key {key} is not documented in docs/report.md"


def test_a_run_without_cost_columns_says_so(tmp_path):
    make_run(tmp_path, examples=0)
    path = tmp_path / "tables" / "executions.parquet"
    pl.read_parquet(path).drop("runs", "input_tokens", "output_tokens").write_parquet(path)
    paths = write_report(tmp_path)
    summary = json.loads(paths["summary"].read_text())["cost"]
    assert summary["recorded"] is False and summary["executors"] == [] and summary["total"] is None
    assert "written by an older calib" in paths["markdown"].read_text()


def test_memorized_examples_show_their_closest_duplicates(rendered):
    examples = {e["sample_id"]: e for e in rendered["summary"]["examples"]}
    # s00 functional: the closest semantic duplicate is the highest cosine, ties by corpus id; no textual one
    assert examples["s00"]["duplicates"] == {
        "textual": None, "semantic": {"corpus_id": "d0", "source": "repo/c.py", "similarity": 0.97, "copies": 1}}
    assert examples["s06"]["duplicates"] == {
        "textual": {"corpus_id": "d4", "source": "repo/e.py", "similarity": 0.88, "copies": 2},
        "semantic": {"corpus_id": "d5", "source": "repo/f.py", "similarity": 0.95, "copies": 1}}
    # a control that is functionally memorized shows its duplicate by id when the source is unknown
    assert examples["s30"]["duplicates"]["textual"]["source"] is None
    # examples that are not memorized show none
    assert all(e["duplicates"] is None for e in examples.values() if e["verdict"] not in ("textual", "functional"))
    md = rendered["md"]
    assert "closest semantic-only duplicate: cosine 0.970, `repo/c.py`" in md and "def rule_c(z):" in md
    assert "closest textual duplicate: Jaccard 0.880, `repo/e.py`, 2 copies" in md and "def copy_two():" in md
    assert "`d6`" in md and "def rule_b(y)" not in md  # only the closest of each kind
    assert "No textual near-duplicate of x" in md
