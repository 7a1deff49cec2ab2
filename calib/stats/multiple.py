"""Multiple testing across candidates that share one control set (extraction paper App. C.5).

Conformal guarantees are marginal: each candidate's claim holds at α_N, but one control sample reused
for m candidates makes the claims dependent and bounds neither the family-wise error nor the false
discovery rate. Two remedies:

* Bonferroni at FWER δ tests each of m candidates at δ/m, which needs δ/m ≥ 1/(N+1) (the smallest
  certifiable level). With 5,000 controls, 5 % FWER supports at most 250 candidates and 0.1 % at
  most 5; 0.1 % across 5,000 candidates needs about five million controls (App. C.5).
* Benjamini–Hochberg on conformal p-values controls FDR at π₀δ ≤ δ when the p-values are independent
  or PRDS (Benjamini & Hochberg 1995, JRSS-B 57(1):289–300; Bates et al. 2023, "Testing for outliers
  with conformal p-values", Ann. Statist. 51(1):149–178, show conformal p-values sharing one
  calibration set are PRDS). Atoms in the scores make p-values conservative, not invalid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from calib.stats._checks import check_count, check_finite_array, check_probability
from calib.stats._levels import K_TOLERANCE, min_controls
from calib.stats.result import Result

__all__ = [
    "BenjaminiHochberg",
    "BonferroniPlan",
    "benjamini_hochberg",
    "bonferroni_max_candidates",
    "bonferroni_min_controls",
]


@dataclass(frozen=True)
class BonferroniPlan(Result):
    """A Bonferroni plan: N controls, m candidates, FWER δ and the per-candidate level δ/m."""

    n_controls: int
    n_candidates: int
    fwer: float
    per_candidate_alpha: float
    method: str = "bonferroni"


def bonferroni_max_candidates(n_controls: int, fwer: float) -> BonferroniPlan:
    """The most candidates m that N controls support at family-wise error ``fwer``.

    m = floor(δ (N + 1)) (with the same 1e-9 relative tolerance as K), so that δ/m ≥ 1/(N+1).
    Zero when even one candidate cannot be tested (δ < 1/(N+1)).
    """
    n = check_count("n_controls", n_controls, minimum=1)
    delta = check_probability("fwer", fwer)
    x = delta * (n + 1)
    nearest = round(x)
    m = int(nearest) if nearest >= 1 and abs(x - nearest) <= K_TOLERANCE * nearest else math.floor(x)
    return BonferroniPlan(n_controls=n, n_candidates=m, fwer=delta,
                          per_candidate_alpha=delta / m if m else math.nan)


def bonferroni_min_controls(n_candidates: int, fwer: float) -> BonferroniPlan:
    """The fewest controls N with which ``n_candidates`` can be tested at family-wise error ``fwer``.

    N = ceil(m/δ) − 1 (the smallest N with 1/(N+1) ≤ δ/m, same tolerance as K).
    """
    m = check_count("n_candidates", n_candidates, minimum=1)
    delta = check_probability("fwer", fwer)
    per = delta / m
    n = min_controls(per)
    return BonferroniPlan(n_controls=n, n_candidates=m, fwer=delta, per_candidate_alpha=per)


@dataclass(frozen=True)
class BenjaminiHochberg(Result):
    """Benjamini–Hochberg step-up on p-values.

    ``rejected[i]`` says whether candidate i is a discovery; ``adjusted`` holds the BH-adjusted
    p-values (q-values: the smallest FDR level at which candidate i would be rejected);
    ``p_threshold`` is the largest rejected p-value (``None`` when nothing is rejected).
    """

    fdr: float
    n: int
    n_rejected: int
    p_threshold: float | None
    rejected: NDArray[np.bool_]
    adjusted: NDArray[np.float64]
    method: str = "benjamini-hochberg"


def benjamini_hochberg(p_values: ArrayLike, fdr: float) -> BenjaminiHochberg:
    """Benjamini–Hochberg at level ``fdr``: reject the k smallest p-values, k the largest i with
    p_(i) ≤ i·δ/m (Benjamini & Hochberg 1995, eq. 1).

    Parameters
    ----------
    p_values
        One p-value per candidate, in (0, 1] (e.g. conformal p-values).
    fdr
        Target false discovery rate δ in (0, 1).
    """
    p = check_finite_array("p_values", p_values)
    if (p <= 0).any() or (p > 1).any():
        i = int(np.argmax((p <= 0) | (p > 1)))
        raise ValueError(f"p_values[{i}] is {p[i]!r}; p-values must lie in (0, 1]")
    delta = check_probability("fdr", fdr)
    m = p.size
    order = np.argsort(p, kind="stable")
    ranked = p[order]
    below = ranked <= delta * np.arange(1, m + 1) / m
    n_rej = int(np.nonzero(below)[0][-1] + 1) if below.any() else 0
    rejected = np.zeros(m, dtype=bool)
    rejected[order[:n_rej]] = True
    adjusted_sorted = np.minimum.accumulate((ranked * m / np.arange(1, m + 1))[::-1])[::-1]
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(adjusted_sorted, 1.0)
    return BenjaminiHochberg(fdr=delta, n=m, n_rejected=n_rej,
                             p_threshold=float(ranked[n_rej - 1]) if n_rej else None,
                             rejected=rejected, adjusted=adjusted)
