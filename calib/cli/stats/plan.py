"""``calib stats plan``: how many candidates N controls support, or how many controls are needed."""

from __future__ import annotations

import click

from calib._exceptions import InvalidParameterError
from calib.cli.stats._output import MAX_COUNT, Count, Probability, emit, json_option, pct, translate_errors
from calib.stats.beta_law import plan_controls
from calib.stats.multiple import bonferroni_max_candidates, bonferroni_min_controls


@click.command("plan")
@click.option("--controls", "n_controls", type=Count(minimum=1), default=None, help="Number of controls N you have.")
@click.option("--candidates", "n_candidates", type=Count(minimum=1), default=None,
              help="Number of candidates m to test.")
@click.option("--fwer", type=Probability(), default=None, help="Family-wise error rate for Bonferroni, in (0, 1).")
@click.option("--alpha", default=None, help="Level to certify (with --upper): plan N by the Beta law.")
@click.option("--upper", type=Probability(), default=None, help="Wanted bound on the population FPR (with --alpha).")
@click.option("--confidence", type=Probability(), default=0.95, show_default=True,
              help="With --alpha/--upper: share of control draws whose FPR stays below --upper.")
@json_option
@translate_errors
def plan(n_controls: int | None, n_candidates: int | None, fwer: float | None, alpha: str | None,
         upper: float | None, confidence: float, as_json: bool) -> None:
    """Plan an audit: (--controls N | --candidates M) --fwer D for Bonferroni, or --alpha A --upper U."""
    if alpha is not None or upper is not None:
        if alpha is None or upper is None or n_controls is not None or n_candidates is not None or fwer is not None:
            raise InvalidParameterError("Beta-law planning takes --alpha A --upper U [--confidence C] and nothing else")
        p = plan_controls(alpha, upper, confidence)
        record = {"alpha": p.alpha, "upper": p.upper, "confidence": p.confidence, "min_controls": p.n_controls,
                  "k": p.k, "certified_alpha": p.certified_alpha, "achieved_upper": p.achieved_upper}
        emit(record, as_json, lambda r: (
            f"{r['min_controls']} controls certify alpha={r['alpha']:g} (K={r['k']}, "
            f"alpha_N={pct(r['certified_alpha'])}) with population FPR <= {pct(r['achieved_upper'])} "
            f"for {pct(r['confidence'])} of control draws"))
        return
    if fwer is None or (n_controls is None) == (n_candidates is None):
        raise InvalidParameterError("give exactly one of --controls N or --candidates M, and --fwer D")
    if n_controls is not None:
        b = bonferroni_max_candidates(n_controls, fwer)
        record = {"n_controls": b.n_controls, "fwer": b.fwer, "max_candidates": b.n_candidates,
                  "per_candidate_alpha": b.per_candidate_alpha}
        emit(record, as_json, lambda r: (
            f"{r['n_controls']} controls support at most {r['max_candidates']} candidates at FWER "
            f"{pct(r['fwer'])} (Bonferroni)"))
    else:
        if n_candidates / fwer > MAX_COUNT:
            raise InvalidParameterError(
                f"--candidates {n_candidates} at --fwer {fwer:g} needs about {n_candidates / fwer:.3g} controls, more "
                f"than the 10^12 calib plans for; lower --candidates or raise --fwer")
        b = bonferroni_min_controls(n_candidates, fwer)
        record = {"n_candidates": b.n_candidates, "fwer": b.fwer, "min_controls": b.n_controls,
                  "per_candidate_alpha": b.per_candidate_alpha}
        emit(record, as_json, lambda r: (
            f"{r['n_candidates']} candidates at FWER {pct(r['fwer'])} need at least {r['min_controls']} "
            f"controls (Bonferroni)"))
