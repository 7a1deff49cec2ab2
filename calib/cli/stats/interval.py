"""``calib stats interval``: the Clopper–Pearson interval for k of n."""

from __future__ import annotations

import click

from calib.cli.stats._output import Count, confidence_option, emit, json_option, translate_errors
from calib.stats.intervals import clopper_pearson


@click.command("interval")
@click.option("--k", "k", type=Count(), required=True, help="Number of successes (e.g. claims).")
@click.option("--n", "n", type=Count(minimum=1), required=True,
              help="Number of trials (e.g. candidates; at most 1e12).")
@confidence_option
@json_option
@translate_errors
def interval(k: int, n: int, confidence: float, as_json: bool) -> None:
    """Clopper–Pearson interval for K successes out of N (keys: k, n, estimate, low, high, method)."""
    ci = clopper_pearson(k, n, confidence)
    record = {"k": ci.k, "n": ci.n, "estimate": ci.estimate, "low": ci.low, "high": ci.high,
              "confidence": ci.confidence, "method": ci.method}
    emit(record, as_json, lambda r: (
        f"{r['k']} of {r['n']}: estimate {r['estimate']:.6g}, {100 * r['confidence']:g}% "
        f"{r['method']} interval [{r['low']:.6g}, {r['high']:.6g}]"))
