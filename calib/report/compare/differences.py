"""The difference of two runs' rates, paired or independent, and the multiplicity adjustment across comparisons.

Shared by the study kinds compare-runs compares (docs/compare-runs.md): a paired difference of two runs
that flagged the same items is Newcombe's method-10 interval with McNemar's exact test; a difference of
independent samples is Newcombe's hybrid score interval with Fisher's exact test. Every interval and test
comes from :mod:`calib.stats`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from calib.stats import independent_difference, paired_difference
from calib.stats.compare import adjust_p_values, mcnemar_exact

__all__ = ["adjust_comparisons", "independent_body", "paired_body"]


def paired_body(flags_a: ArrayLike, flags_b: ArrayLike, confidence: float) -> dict[str, Any]:
    """rate(b) − rate(a) over items both runs counted: ``difference`` (paired_difference's dict), ``p_value``, ``test``.

    ``flags_a[i]`` and ``flags_b[i]`` say whether run a and run b flagged item i; model 1 of the paired
    table is run b.
    """
    fa, fb = np.asarray(flags_a, dtype=bool), np.asarray(flags_b, dtype=bool)
    n11, n10 = int((fb & fa).sum()), int((fb & ~fa).sum())
    n01, n00 = int((~fb & fa).sum()), int((~fb & ~fa).sum())
    diff = paired_difference(n11, n10, n01, n00, confidence).to_dict()
    return {"difference": diff, "p_value": mcnemar_exact(n10, n01), "test": "mcnemar-exact", "note": None}


def independent_body(k_a: int, n_a: int, k_b: int, n_b: int, confidence: float) -> dict[str, Any]:
    """rate(b) − rate(a) of independent samples (k of n flagged in each): Newcombe's hybrid interval, Fisher's test."""
    diff = independent_difference(k_b, n_b, k_a, n_a, confidence)
    return {"difference": diff.to_dict(), "p_value": diff.p_value, "test": "fisher-exact", "note": None}


def adjust_comparisons(comparisons: list[dict[str, Any]], adjust: str, confidence: float) -> None:
    """Set ``p_adjusted`` and ``significant`` (adjusted p <= 1 − confidence) on every comparison, in place.

    The p-values of all tested comparisons are adjusted together by ``adjust`` (``holm`` or ``bh``); a
    comparison without a test gets null for both.
    """
    tested = [c for c in comparisons if c["p_value"] is not None]
    adjusted = adjust_p_values([c["p_value"] for c in tested], adjust)
    alpha = 1.0 - confidence
    for comparison, value in zip(tested, adjusted, strict=True):
        comparison["p_adjusted"] = float(value)
        comparison["significant"] = bool(value <= alpha)
    for comparison in comparisons:
        comparison.setdefault("p_adjusted", None)
        comparison.setdefault("significant", None)
