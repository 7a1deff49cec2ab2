"""``calib stats budget``: generation probability within n queries, or queries needed for confidence."""

from __future__ import annotations

import click

from calib._exceptions import InvalidParameterError
from calib.cli.stats._output import Probability, emit, json_option, pct, translate_errors
from calib.stats.budget import attempts_needed, generation_probability


@click.command("budget")
@click.option("--p", "p", type=Probability(one=True), required=True,
              help="Per-query generation probability, in (0, 1].")
@click.option("--confidence", type=Probability(), default=None, help="Wanted probability of at least one generation.")
@click.option("--attempts", type=float, default=None, help="Number of queries n (may be written 1e21).")
@json_option
@translate_errors
def budget(p: float, confidence: float | None, attempts: float | None, as_json: bool) -> None:
    """Query budget: give exactly one of --confidence (attempts needed) or --attempts (probability)."""
    if (confidence is None) == (attempts is None):
        raise InvalidParameterError("give exactly one of --confidence C or --attempts N")
    if confidence is not None:
        r = attempts_needed(p, confidence)
        record = {"p": r.p, "confidence": r.confidence, "attempts": r.attempts}
        emit(record, as_json, lambda d: (
            f"p={d['p']:.6g}: {d['attempts']:.6g} attempts give at least one generation with "
            f"probability {pct(d['confidence'])}"))
    else:
        r = generation_probability(p, attempts)
        record = {"p": r.p, "attempts": r.attempts, "probability": r.probability}
        emit(record, as_json, lambda d: (
            f"p={d['p']:.6g}: P(at least one generation in {d['attempts']:.6g} attempts) = {d['probability']:.6g}"))
