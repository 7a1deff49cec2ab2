"""The blocks of an extraction comparison's report and the flat table of its comparisons (comparisons.parquet)."""

from __future__ import annotations

from typing import Any

import polars as pl

from calib.report.compare.render import comparison_table, difference_cell, p_cell, samples_cell
from calib.report.document import Bullets, Heading, Paragraph, Table
from calib.report.format import DASH, number, rate_cell, setting_pct
from calib.stats.compare import ADJUSTMENTS

__all__ = ["EXTRACTION_COMPARISON_SCHEMA", "extraction_blocks", "extraction_table"]

#: The columns of an extraction comparison's ``comparisons.parquet``: one row per comparison.
EXTRACTION_COMPARISON_SCHEMA: dict[str, Any] = {
    "run_a": pl.String, "run_b": pl.String, "role": pl.String, "procedure": pl.String, "suffix_tokens": pl.Int64,
    "model_a": pl.String, "model_b": pl.String, "population": pl.String, "rate": pl.String,
    "certified_alpha_a": pl.Float64, "certified_alpha_b": pl.Float64, "design": pl.String, "shared": pl.Int64,
    "conflicting_ids": pl.Int64, "n_a": pl.Int64, "n_b": pl.Int64, "n_paired": pl.Int64, "dropped_a": pl.Int64,
    "dropped_b": pl.Int64, "k_a": pl.Int64, "k_b": pl.Int64, "n11": pl.Int64, "n10": pl.Int64, "n01": pl.Int64,
    "n00": pl.Int64, "estimate": pl.Float64, "low": pl.Float64, "high": pl.Float64, "confidence": pl.Float64,
    "method": pl.String, "test": pl.String, "p_value": pl.Float64, "p_adjusted": pl.Float64,
    "significant": pl.Boolean, "note": pl.String,
}


def extraction_table(comparisons: list[dict[str, Any]]) -> pl.DataFrame:
    """The comparisons as rows of :data:`EXTRACTION_COMPARISON_SCHEMA` (the difference's fields flattened)."""
    return comparison_table(comparisons, EXTRACTION_COMPARISON_SCHEMA)


def _group(r: dict[str, Any]) -> str:
    return f"{r['role']} · {r['procedure']} · ℓs={r['suffix_tokens']}"


def _alpha(value: float | None) -> str:
    return DASH if value is None else f"{value:.3g}"


def _run_rows(runs: list[dict[str, Any]]) -> tuple[tuple[str, ...], ...]:
    return tuple((f"`{r['label']}`", f"`{r['path']}`", r["study"] or DASH, r["target"] or DASH,
                  r["reference"] or DASH, number(r["windows"]), number(r["members"]), number(r["controls"]))
                 for r in runs)


def _unmatched(result: dict[str, Any]) -> list[Any]:
    if not result["unmatched"]:
        return []
    shown = "; ".join(f"{_group(u)} only in `{u['only_in']}`" for u in result["unmatched"][:20])
    more = len(result["unmatched"]) - 20
    return [Paragraph(f"Not compared (scored by one run of a pair only): {shown}"
                      + (f"; and {more} more (comparison.json `unmatched`)." if more > 0 else "."))]


def extraction_blocks(result: dict[str, Any]) -> list[Any]:
    """The report's blocks: the runs, their claim rates, the differences and how they were computed."""
    point, conf = result["operating_point"], setting_pct(result["confidence"])
    pairs = ("the first run (the baseline) against each other run" if result["pairing"] == "baseline"
             else "every pair of runs")
    point_text = ", ".join(f"`{key}` = {value}" for key, value in point.items())
    comparisons = result["comparisons"]
    return [
        Heading(1, f"calib compare-runs: {len(result['runs'])} extraction runs", "top"),
        Paragraph(f"Compares {pairs} for every (role, procedure, suffix length ℓs) both scored; a difference is "
                  f"rate(b) − rate(a), run a being the earlier run on the command line. Every run has one "
                  f"operating point: {point_text}."),
        Heading(2, "Runs", "runs"),
        Table(("run", "path", "study", "target", "reference", "windows", "member windows", "control windows"),
              _run_rows(result["runs"]), anchor="runs-table"),
        Heading(2, "Rates", "rates"),
        Paragraph(f"Each run's rate over the windows it decided, with its {conf} Clopper–Pearson interval: members "
                  "claimed (score above the conformal threshold τ at α), members discovered by Benjamini–Hochberg "
                  "at the run's FDR level, and controls claimed (the empirical false-positive rate). The certified "
                  "level α_N = K/(N + 1) depends on each run's N controls in the pool that set τ."),
        Table(("run", "role · procedure · ℓs", "model", "population", "rate", "pool (N)", "certified α",
               "estimate [interval] k/n"),
              tuple((f"`{r['run']}`", _group(r), r["model"] or DASH, r["population"], r["label"],
                     f"{r['pool'] or DASH} ({number(r['n_controls'])})", _alpha(r["certified_alpha"]),
                     rate_cell(r["interval"])) for r in result["rates"]), anchor="rates-table"),
        Heading(2, "Differences", "differences"),
        Paragraph(f"Differences rate(b) − rate(a) in percentage points with {conf} intervals: Newcombe's paired "
                  "score interval (method 10) and McNemar's exact test where the runs scored the same windows, "
                  "Newcombe's hybrid score interval and Fisher's exact test otherwise. p-values are adjusted "
                  f"across all {sum(c['p_value'] is not None for c in comparisons)} comparisons by "
                  f"`{result['adjust']}`, which controls the {ADJUSTMENTS[result['adjust']]}; **significant** "
                  f"means the adjusted p-value is at most {1 - result['confidence']:.3g}."),
        Table(("run a", "run b", "role · procedure · ℓs", "population", "rate", "certified α (a, b)", "design",
               "windows", "difference [interval]", "test", "p", "p adjusted", "significant"),
              tuple((f"`{c['run_a']}`", f"`{c['run_b']}`", _group(c), c["population"], c["label"],
                     f"{_alpha(c['certified_alpha_a'])}, {_alpha(c['certified_alpha_b'])}", c["design"],
                     samples_cell(c), difference_cell(c), c["test"] or DASH, p_cell(c["p_value"]),
                     p_cell(c["p_adjusted"]),
                     DASH if c["significant"] is None else ("**yes**" if c["significant"] else "no"))
                    for c in comparisons), anchor="differences-table"),
        *_unmatched(result),
        Heading(2, "Method", "method"),
        Bullets((
            "Two runs scored the same window when it has the same `window_id` (sample, prefix and suffix length, "
            "offset), the same sample and the same prefix and suffix text in both; an id whose text differs "
            "(another tokenizer cut another window) is not shared (`conflicting_ids`).",
            "Runs that share windows are compared on the shared windows both runs decided (a threshold existed "
            "at α); the others are dropped and counted. Runs that share none are compared as independent samples.",
            "A claim is the conformal test of the extraction paper (§3): score > τ, τ the ⌈(1 − α)(N + 1)⌉-th "
            "smallest control score; its false-positive rate is at most α_N for exchangeable controls.",
            "R. G. Newcombe (1998), Statistics in Medicine 17(22):2635–2650 (paired, method 10) and 17(8):873–890 "
            "(independent); Q. McNemar (1947), Psychometrika 12(2):153–157; S. Holm (1979), Scandinavian Journal "
            "of Statistics 6(2):65–70; Y. Benjamini and Y. Hochberg (1995), JRSS-B 57(1):289–300.",
        )),
    ]
