"""The blocks of the comparison report (report.html and report.md) and the flat table of its comparisons."""

from __future__ import annotations

from typing import Any

import polars as pl

from calib.report.document import Bullets, Heading, Paragraph, Table
from calib.report.format import DASH, number, rate_cell, setting_pct
from calib.stats.compare import ADJUSTMENTS

__all__ = ["COMPARISON_SCHEMA", "comparison_blocks", "comparison_counts", "comparison_table", "difference_cell",
           "p_cell", "samples_cell"]

#: The columns of ``comparisons.parquet``: one row per comparison (docs/compare-runs.md).
COMPARISON_SCHEMA: dict[str, Any] = {
    "run_a": pl.String, "run_b": pl.String, "population": pl.String, "rate": pl.String, "design": pl.String,
    "shared": pl.Int64, "conflicting_ids": pl.Int64, "n_a": pl.Int64, "n_b": pl.Int64, "n_paired": pl.Int64,
    "dropped_a": pl.Int64, "dropped_b": pl.Int64, "k_a": pl.Int64, "k_b": pl.Int64, "n11": pl.Int64,
    "n10": pl.Int64, "n01": pl.Int64, "n00": pl.Int64, "estimate": pl.Float64, "low": pl.Float64,
    "high": pl.Float64, "confidence": pl.Float64, "method": pl.String, "test": pl.String, "p_value": pl.Float64,
    "p_adjusted": pl.Float64, "significant": pl.Boolean, "note": pl.String,
}


def comparison_counts(c: dict[str, Any]) -> dict[str, Any]:
    """``k_a, k_b`` (flagged samples of each run among those compared) and the paired table's cells."""
    d = c["difference"] or {}
    if c["design"] == "paired" and d:
        return {"k_a": d["n11"] + d["n01"], "k_b": d["n11"] + d["n10"],
                **{key: d[key] for key in ("n11", "n10", "n01", "n00")}}
    return {"k_a": d.get("k2"), "k_b": d.get("k1"), "n11": None, "n10": None, "n01": None, "n00": None}


def comparison_table(comparisons: list[dict[str, Any]], schema: dict[str, Any] | None = None) -> pl.DataFrame:
    """The comparisons as rows of ``schema`` (default :data:`COMPARISON_SCHEMA`), the difference's fields flattened."""
    schema = COMPARISON_SCHEMA if schema is None else schema
    rows = []
    for c in comparisons:
        d = c["difference"] or {}
        rows.append({**{key: c[key] for key in schema if key in c}, **comparison_counts(c),
                     **{key: d.get(key) for key in ("estimate", "low", "high", "confidence", "method")}})
    return pl.DataFrame(rows, schema=schema)


def _pp(value: float | None) -> str:
    """A difference of two shares in percentage points, signed: ``+12.5 pp``."""
    return DASH if value is None else f"{100 * value:+.1f} pp"


def p_cell(value: float | None) -> str:
    """A p-value: three decimals, two significant digits below 0.001 (``–`` for none)."""
    if value is None:
        return DASH
    return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"


def samples_cell(c: dict[str, Any]) -> str:
    if c["design"] == "paired":
        return (f"{c['n_paired']} paired of {c['shared']} shared (dropped {c['dropped_a']} of a, "
                f"{c['dropped_b']} of b)")
    return f"{c['n_a']} vs {c['n_b']}"


def difference_cell(c: dict[str, Any]) -> str:
    d = c["difference"]
    if d is None:
        return f"{DASH} ({c['note']})"
    return f"{_pp(d['estimate'])} [{_pp(d['low'])}, {_pp(d['high'])}]"


def _run_rows(runs: list[dict[str, Any]]) -> tuple[tuple[str, ...], ...]:
    return tuple((f"`{r['label']}`", f"`{r['path']}`", r["study"] or DASH, r["target"] or DASH,
                  r["reference"] or DASH, number(r["samples"]), number(r["members"]), number(r["controls"]))
                 for r in runs)


def comparison_blocks(result: dict[str, Any]) -> list[Any]:
    """The report's blocks: the runs, their rates, the differences and how they were computed."""
    point, conf = result["operating_point"], setting_pct(result["confidence"])
    pairs = ("the first run (the baseline) against each other run" if result["pairing"] == "baseline"
             else "every pair of runs")
    point_text = ", ".join(f"`{key}` = {value}" for key, value in point.items())
    blocks: list[Any] = [
        Heading(1, f"calib compare-runs: {len(result['runs'])} {result['kind']} runs", "top"),
        Paragraph(f"Compares {pairs}; a difference is rate(b) − rate(a), run a being the earlier run on the "
                  f"command line. Every run has one operating point: {point_text}."),
        Heading(2, "Runs", "runs"),
        Table(("run", "path", "study", "target", "reference", "samples", "members", "controls"),
              _run_rows(result["runs"]), anchor="runs-table"),
        Heading(2, "Rates", "rates"),
        Paragraph(f"Each run's rate with its {conf} Clopper–Pearson interval, as in the run's own report "
                  "(near-verbatim and textual rates of scored samples, the functional rate of conclusive ones)."),
        Table(("run", "population", "rate", "estimate [interval] k/n"),
              tuple((f"`{r['run']}`", r["population"], r["label"], rate_cell(r["interval"]))
                    for r in result["rates"]), anchor="rates-table"),
        Heading(2, "Differences", "differences"),
        Paragraph(f"Differences rate(b) − rate(a) in percentage points with {conf} intervals: Newcombe's paired "
                  "score interval (method 10) and McNemar's exact test where the runs audited the same samples, "
                  "Newcombe's hybrid score interval and Fisher's exact test otherwise. p-values are adjusted "
                  f"across all {sum(c['p_value'] is not None for c in result['comparisons'])} comparisons by "
                  f"`{result['adjust']}`, which controls the {ADJUSTMENTS[result['adjust']]}; **significant** "
                  f"means the adjusted p-value is at most {1 - result['confidence']:.3g}."),
        Table(("run a", "run b", "population", "rate", "design", "samples", "difference [interval]", "test", "p",
               "p adjusted", "significant"),
              tuple((f"`{c['run_a']}`", f"`{c['run_b']}`", c["population"], c["label"], c["design"], samples_cell(c),
                     difference_cell(c), c["test"] or DASH, p_cell(c["p_value"]), p_cell(c["p_adjusted"]),
                     DASH if c["significant"] is None else ("**yes**" if c["significant"] else "no"))
                    for c in result["comparisons"]), anchor="differences-table"),
        Heading(2, "Method", "method"),
        Bullets((
            "Two runs audited the same sample when it has the same `sample_id`, the same function x and the same "
            "membership in both; an id naming another function in the other run is not shared (`conflicting_ids`).",
            "Runs that share samples are compared on the shared samples both runs counted (scored; for the "
            "functional rate, conclusive in both); the others are dropped and counted. Runs that share none are "
            "compared as independent samples.",
            "R. G. Newcombe (1998). Improved confidence intervals for the difference between binomial proportions "
            "based on paired data. Statistics in Medicine 17(22):2635–2650 (method 10); and Interval estimation "
            "for the difference between independent proportions, Statistics in Medicine 17(8):873–890.",
            "Q. McNemar (1947), Psychometrika 12(2):153–157; S. Holm (1979), Scandinavian Journal of "
            "Statistics 6(2):65–70; Y. Benjamini and Y. Hochberg (1995), JRSS-B 57(1):289–300.",
        )),
    ]
    return blocks
