"""Threshold sensitivity (summary.json ``sensitivity``, docs/report.md "Threshold sensitivity").

On the synthetic run of tests/report/_fake_run.py (see the table in test_report.py): the run's own
operating point gives the main rates exactly, the counts move the way the definitions say, and one
grid point is counted again by hand from the parquet tables with scipy's Clopper–Pearson bounds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from scipy import stats

from calib.report import write_report
from tests.report._fake_run import make_run


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper & Pearson (1934) from scipy.stats.beta quantiles."""
    gamma = 1 - confidence
    low = 0.0 if k == 0 else stats.beta.ppf(gamma / 2, k, n - k + 1)
    high = 1.0 if k == n else stats.beta.ppf(1 - gamma / 2, k + 1, n - k)
    return float(low), float(high)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = make_run(tmp_path_factory.mktemp("run"))
    paths = write_report(run)
    return {"run": run, "summary": json.loads(paths["summary"].read_text()), "md": paths["markdown"].read_text()}


def _point(summary: dict[str, Any], parameter: str, value: float) -> dict[str, Any]:
    return next(p for p in summary["sensitivity"]["sweeps"][parameter]["points"] if p["value"] == value)


def _group(point: dict[str, Any], label: str) -> dict[str, Any]:
    return next(g for g in point["groups"] if g["label"] == label)


def test_the_run_operating_point_gives_the_main_rates_exactly(rendered):
    summary = rendered["summary"]
    sens = summary["sensitivity"]
    assert sens["operating_point"] == {"tau_text": 0.75, "tau_func": 0.8, "coverage": 0.8, "min_valid": 8}
    main = {g["label"]: g for g in summary["groups"] if g["kind"] is None}
    assert set(main) == {"all", "member", "control"}
    for parameter, sweep in sens["sweeps"].items():
        at_run = [p for p in sweep["points"] if p["at_run"]]
        assert len(at_run) == 1 and at_run[0]["value"] == sweep["run_value"] == sens["operating_point"][parameter]
        assert [g["label"] for g in at_run[0]["groups"]] == ["all", "member", "control"]
        for group in at_run[0]["groups"]:
            expected = main[group["label"]]
            assert group["rates"] == expected["rates"], (parameter, group["label"])
            assert (group["n_scored"], group["n_conclusive"]) == (expected["n_scored"], expected["n_conclusive"])


def _ks(sweep: dict[str, Any], label: str, rate: str) -> list[int]:
    return [_group(p, label)["rates"][rate]["k"] for p in sweep["points"]]


@pytest.mark.parametrize("label", ["all", "member", "control"])
def test_counts_move_as_the_definitions_say(rendered, label):
    sweeps = rendered["summary"]["sensitivity"]["sweeps"]
    assert sweeps["tau_text"]["values"] == sorted(sweeps["tau_text"]["values"])
    for rate in ("text_target", "text_reference"):  # a higher τ_text flags fewer completions
        ks = _ks(sweeps["tau_text"], label, rate)
        assert all(a >= b for a, b in zip(ks, ks[1:])), (rate, ks)
    for rate in ("func_target", "func_reference"):  # a higher τ_func flags fewer completions
        ks = _ks(sweeps["tau_func"], label, rate)
        assert all(a >= b for a, b in zip(ks, ks[1:])), (rate, ks)
    for parameter in ("coverage", "min_valid"):  # stricter validity: never more conclusive samples
        conclusive = [_group(p, label)["n_conclusive"] for p in sweeps[parameter]["points"]]
        assert all(a >= b for a, b in zip(conclusive, conclusive[1:])), (parameter, conclusive)
        # validity does not touch the text scores
        assert {_group(p, label)["n_scored"] for p in sweeps[parameter]["points"]} == {
            _group(sweeps["tau_text"]["points"][0], label)["n_scored"]}
    assert _ks(sweeps["tau_text"], "all", "text_target")[-1] == 0  # nothing has bleu >= 1.0 here


def _by_hand(run: Path, tau_func: float) -> dict[str, tuple[int, int]]:
    """Counts of the 'all' group at τ_func = ``tau_func`` (τ_text 0.75) straight from the parquet tables."""
    tables = run / "tables"
    sims = pl.read_parquet(tables / "similarities.parquet").filter(pl.col("metric") == "bleu")
    execs = pl.read_parquet(tables / "executions.parquet")
    text = {(r["sample_id"], r["role"]): r["value"] for r in sims.iter_rows(named=True) if r["value"] is not None}
    func = {(r["sample_id"], r["role"]): r["sim_func"] for r in execs.iter_rows(named=True)
            if r["conclusive"] and r["sim_func"] is not None}
    truth_ok = {r["sample_id"] for r in execs.iter_rows(named=True) if r["role"] == "truth" and r["conclusive"]}
    ids = pl.read_parquet(tables / "samples.parquet")["sample_id"].to_list()
    scored = [s for s in ids if (s, "target") in text and (s, "reference") in text]
    conclusive = [s for s in scored if s in truth_ok and (s, "target") in func and (s, "reference") in func]
    target = [s for s in conclusive if func[s, "target"] >= tau_func]
    reference = [s for s in conclusive if func[s, "reference"] >= tau_func]
    memorized = [s for s in target if s not in reference and text[s, "target"] < 0.75]
    return {"func_target": (len(target), len(conclusive)), "func_reference": (len(reference), len(conclusive)),
            "func_memorized": (len(memorized), len(conclusive))}


def test_one_grid_point_counted_by_hand(rendered):
    point = _group(_point(rendered["summary"], "tau_func", 0.5), "all")
    counts = _by_hand(rendered["run"], 0.5)
    # By hand from the table in test_report.py, target SIM_func >= 0.5 among the 32 conclusive samples:
    # s00-s05 (0.9), s06-s07 (1.0), s08-s09 (0.5), s10-s13 (1.0, 0.8), s28-s29 (0.5, 0.6), s30 (0.9),
    # s38-s39 (0.5, 0.6): 19.
    assert counts["func_target"] == (19, 32)
    assert point["n_conclusive"] == 32
    for rate, (k, n) in counts.items():
        interval = point["rates"][rate]
        low, high = clopper_pearson(k, n)
        assert (interval["k"], interval["n"]) == (k, n), rate
        assert interval["estimate"] == pytest.approx(k / n)
        assert interval["low"] == pytest.approx(low, abs=1e-12)
        assert interval["high"] == pytest.approx(high, abs=1e-12)


def test_validity_grids_start_at_the_run_values(rendered):
    sweeps = rendered["summary"]["sensitivity"]["sweeps"]
    assert sweeps["coverage"]["values"] == [0.8, 0.85, 0.9, 0.95, 1.0]
    assert sweeps["min_valid"]["values"] == [8, 9, 10]  # N = execute.n_inputs = 10
    assert "not computable" in sweeps["coverage"]["looser"] and sweeps["tau_text"]["looser"] is None
    # every conclusive sample has coverage 0.9 (so none at C >= 0.95); s23-s25 have 9 valid inputs
    assert [_group(p, "all")["n_conclusive"] for p in sweeps["coverage"]["points"]] == [32, 32, 32, 0, 0]
    assert [_group(p, "all")["n_conclusive"] for p in sweeps["min_valid"]["points"]] == [32, 32, 29]
    assert _group(_point(rendered["summary"], "coverage", 1.0), "all")["rates"]["func_target"] is None


def test_a_looser_spec_gives_a_longer_n_in_grid(tmp_path):
    run = make_run(tmp_path)
    spec = json.loads((run / "spec.json").read_text())
    spec["execute"]["min_valid"], spec["execute"]["coverage"] = 5, 0.9
    (run / "spec.json").write_text(json.dumps(spec))
    sens = json.loads(write_report(run)["summary"].read_text())["sensitivity"]
    assert sens["sweeps"]["min_valid"]["values"] == [5, 6, 7, 8, 9, 10]
    assert sens["sweeps"]["coverage"]["values"] == [0.9, 0.95, 1.0]


def test_the_coverage_sweep_leaves_native_samples_as_judged(tmp_path):
    """Native executors record no coverage (calib.executors.validity.criteria_of): C does not apply to them."""
    run = make_run(tmp_path)
    path = run / "tables" / "executions.parquet"
    execs = pl.read_parquet(path)
    native = ["s00", "s01", "s30"]  # conclusive: two members, one control
    execs.with_columns(
        pl.when(pl.col("sample_id").is_in(native)).then(pl.lit("native-go")).otherwise(pl.col("executor"))
        .alias("executor"),
        pl.when(pl.col("sample_id").is_in(native)).then(None).otherwise(pl.col("coverage")).alias("coverage"),
    ).write_parquet(path)
    paths = write_report(run)
    summary = json.loads(paths["summary"].read_text())
    assert summary["sensitivity"]["samples_without_coverage"] == 3
    strictest = _point(summary, "coverage", 1.0)
    assert [(g["label"], g["n_conclusive"]) for g in strictest["groups"]] == [("all", 3), ("member", 2),
                                                                               ("control", 1)]
    # all three are functionally memorized, and stay so at C = 100%
    assert _group(strictest, "all")["rates"]["func_memorized"]["k"] == 3
    assert "3 conclusive sample(s) were executed without line coverage" in paths["markdown"].read_text()


def test_the_report_shows_the_section(rendered):
    md = rendered["md"]
    section = md[md.index("## Threshold sensitivity"):md.index("## Inconclusive and unscored samples")]
    assert "![" in section and "figures/sensitivity.svg" in section
    assert (rendered["run"] / "report" / "figures" / "sensitivity.svg").read_text().lstrip().startswith("<?xml")
    for symbol in ("τ_text", "τ_func", "C", "N_in"):
        assert f"*Rates as {symbol} (" in section
    # the run's row, members then controls, with the estimate and k/n of the main rates
    assert "| **0.8** (run) | member | 27 | 23 | 29.6% 8/27 |" in section
    assert "| **80%** (run) | control | 10 | 9 | 0.0% 0/10 |" in section
    assert "| 10 | member | 27 | 20 |" in section  # N_in = 10 drops s23-s25 (members)
    assert "cannot be computed" in section
