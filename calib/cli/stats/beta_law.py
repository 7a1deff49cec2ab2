"""``calib stats beta-law``: the law of the population FPR of a threshold from N controls at level α."""

from __future__ import annotations

from typing import Any

import click

from calib.cli.stats._output import Count, confidence_option, emit, json_option, pct, translate_errors
from calib.stats.beta_law import FprLaw, fpr_law

#: The keys of an FPR law in the output, in order (shared with ``calib stats conformal``).
LAW_KEYS = ("n", "alpha", "k", "certified_alpha", "certifiable", "mean", "confidence", "interval", "upper",
            "prob_exceeds_certified", "alpha_dagger", "exact")


def law_record(law: FprLaw | dict[str, Any]) -> dict[str, Any]:
    """The JSON keys of an FPR law (:data:`LAW_KEYS`), from the law or its ``to_dict()`` record."""
    data = law.to_dict() if isinstance(law, FprLaw) else law
    return {key: data[key] for key in LAW_KEYS}


def law_summary(r: dict[str, Any]) -> str:
    """Human-readable lines for an FPR law record."""
    if not r["certifiable"]:
        return (f"N={r['n']} controls cannot certify alpha={r['alpha']:g}: K=floor(alpha(N+1))=0, "
                f"so no threshold exists and no claim is possible")
    up = ", ".join(f"{100 * float(q):g}%: {pct(v)}" for q, v in r["upper"].items())
    return "\n".join([
        f"N={r['n']} controls, target alpha={r['alpha']:g}: K={r['k']}, certified alpha_N={r['k']}/{r['n'] + 1}"
        f" = {pct(r['certified_alpha'])}",
        f"population FPR of the realized threshold ~ Beta({r['k']}, {r['n'] - r['k'] + 1}): mean {pct(r['mean'])}, "
        f"{100 * r['confidence']:g}% central interval [{pct(r['interval'][0])}, {pct(r['interval'][1])}]",
        f"upper bounds ({up}); P(FPR > alpha_N) = {r['prob_exceeds_certified']:.3f}",
    ])


@click.command("beta-law")
@click.option("--n", "n", type=Count(minimum=1), required=True, help="Number of controls N (at most 1e12).")
@click.option("--alpha", required=True, help="Target level: a decimal (0.001) or a fraction k/(N+1) (6/5001).")
@confidence_option
@json_option
@translate_errors
def beta_law(n: int, alpha: str, confidence: float, as_json: bool) -> None:
    """Beta(K, N-K+1) law of the FPR of a threshold calibrated on N controls at level ALPHA."""
    emit(law_record(fpr_law(n, alpha, confidence)), as_json, law_summary)
