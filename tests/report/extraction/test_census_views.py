"""The census report's τ_global, coverage-versus-Δ and recovery sections on runs that lack their columns.

A run from before the ``*_global`` and ``recovery_*`` census columns still renders: those sections say so
instead of failing; a run whose τ_global lies below a pair's own threshold is flagged as inconsistent.
"""

from __future__ import annotations

import json

import polars as pl

from calib.report import write_report
from tests.report.extraction.test_census_report import build_run

_NEW = ("log10_threshold_global", "n_control_windows_global", "windows_above_global", "covered_characters_global",
        "coverage_global", "recovery_windows", "recovered_verbatim", "recovered_near_verbatim",
        "recovery_coverage_verbatim", "recovery_coverage_near_verbatim", "recovery_coverage_beyond_budget")


def test_a_run_without_the_new_columns_still_renders(tmp_path):
    run = build_run(tmp_path)
    path = run / "tables" / "census.parquet"
    pl.read_parquet(path).drop(*_NEW).write_parquet(path)
    md = write_report(run)["markdown"].read_text()
    assert "no τ_global columns (a run from before them)" in md
    assert "did not score `near_verbatim`" in md
    assert "| novel | target | `base` | 10^-28 | 6.8% |" in md  # the coverage curve comes from windows and scores


def test_a_shared_threshold_below_a_pairs_own_is_flagged(tmp_path):
    run = build_run(tmp_path)
    path = run / "tables" / "census.parquet"
    frame = pl.read_parquet(path)
    frame.with_columns(pl.when(pl.col("document") == "novel").then(-30).otherwise(
        pl.col("log10_threshold_global")).alias("log10_threshold_global")).write_parquet(path)
    write_report(run)
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert any("τ_global 10^-30 is below the pair's threshold 10^-28" in p for p in summary["consistency"])
