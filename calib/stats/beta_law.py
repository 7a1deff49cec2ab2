"""The law of the population FPR of a realized conformal threshold, and planning the control count.

The certified level α_N = K/(N+1) is an average over control draws, not a bound on the threshold one
draw produced. For i.i.d. continuous non-member scores the population false-positive rate α* of the
realized threshold (the K-th largest of N controls) follows Beta(K, N − K + 1), with mean α_N.
Where the lowest control score is an atom, the law is exact below α† and the probability at or above
α† equals P(fewer than K controls score above the atom), which is the same Beta tail by the
Beta–binomial identity (extraction paper App. C.4.1–C.4.2).

Reference: Cooper et al., "Extractable Memorization From First Principles", App. C.4
(Beta(5, 4996) for N = 5000, α = 0.1 %: mean α_N, 95 % central interval [0.032 %, 0.205 %],
90 % and 95 % upper bounds 0.16 % and 0.18 %, P(α* > α_N) ≈ 44 %); David & Nagaraja (2003),
*Order Statistics*, 3rd ed., §2.2 (uniform order statistics are Beta distributed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as st

from calib.stats._checks import check_confidence, check_count, check_probability
from calib.stats._levels import K_TOLERANCE, conformal_k, min_controls, parse_alpha
from calib.stats.result import Result

__all__ = ["ControlsPlan", "FprLaw", "fpr_law", "plan_controls"]

#: The one-sided upper quantiles every FPR law reports.
UPPER_LEVELS = (0.9, 0.95, 0.99)


@dataclass(frozen=True)
class FprLaw(Result):
    """Beta(K, N − K + 1), the law of the population FPR α* of a realized threshold.

    Attributes
    ----------
    n, alpha, k, certified_alpha
        N controls, the target α, K and α_N = K/(N+1).
    certifiable
        False when K = 0 (no threshold exists; every law field is ``None``).
    mean
        E[α*] = α_N.
    confidence, interval
        The central interval of α* at ``confidence`` as ``(low, high)``.
    upper
        One-sided upper quantiles {"0.9": q, "0.95": q, "0.99": q}: α* ≤ q for that share of control draws.
    prob_exceeds_certified
        P(α* > α_N), the share of control draws whose threshold is looser than the certified level.
    alpha_dagger, exact
        α† of the control set; ``exact`` is False when α_N > α† (the threshold sits on an atom).
    prob_at_or_above_dagger
        P(α* ≥ α†), the mass the Beta law places where it is no longer exact (0 when α† = 1).
    """

    n: int
    alpha: float
    k: int
    certified_alpha: float
    certifiable: bool
    mean: float | None
    confidence: float
    interval: tuple[float, float] | None
    upper: dict[str, float] | None
    prob_exceeds_certified: float | None
    alpha_dagger: float = 1.0
    exact: bool = True
    prob_at_or_above_dagger: float | None = None
    method: str = "beta-law (order statistics)"

    @property
    def low(self) -> float | None:
        """Lower end of the central interval."""
        return None if self.interval is None else self.interval[0]

    @property
    def high(self) -> float | None:
        """Upper end of the central interval."""
        return None if self.interval is None else self.interval[1]

    def upper_quantile(self, level: float) -> float | None:
        """The bound q with P(α* ≤ q) = ``level``; ``None`` when K = 0."""
        lv = check_probability("level", level)
        return None if not self.certifiable else float(st.beta.ppf(lv, self.k, self.n - self.k + 1))

    def prob_exceeds(self, fpr: float) -> float | None:
        """P(α* > ``fpr``) under the law; ``None`` when K = 0."""
        x = check_probability("fpr", fpr, allow_zero=True, allow_one=True)
        return None if not self.certifiable else float(st.beta.sf(x, self.k, self.n - self.k + 1))


def fpr_law(n: int, alpha: float, confidence: float = 0.95, *, alpha_dagger: float = 1.0) -> FprLaw:
    """The law of the population FPR of the threshold calibrated on ``n`` controls at level ``alpha``.

    Parameters
    ----------
    n
        Number of controls N ≥ 1.
    alpha
        Target level in (0, 1) (a number or ``"k/(N+1)"``).
    confidence
        Level of the central interval.
    alpha_dagger
        α† of the control set (1 for continuous scores); see :func:`calib.stats.conformal.alpha_dagger`.

    Returns
    -------
    FprLaw
        With every law field ``None`` when K = 0.
    """
    n = check_count("n", n, minimum=1)
    a = parse_alpha(alpha)
    conf = check_confidence(confidence)
    dagger = check_probability("alpha_dagger", alpha_dagger, allow_zero=True, allow_one=True)
    k = conformal_k(a, n)
    certified = k / (n + 1)
    if k == 0:
        return FprLaw(n=n, alpha=a, k=0, certified_alpha=0.0, certifiable=False, mean=None,
                      confidence=conf, interval=None, upper=None, prob_exceeds_certified=None,
                      alpha_dagger=dagger, exact=False)
    b = n - k + 1
    low, high = st.beta.ppf([(1 - conf) / 2, (1 + conf) / 2], k, b)
    upper = {f"{q:g}": float(v) for q, v in zip(UPPER_LEVELS, st.beta.ppf(UPPER_LEVELS, k, b))}
    return FprLaw(
        n=n,
        alpha=a,
        k=k,
        certified_alpha=certified,
        certifiable=True,
        mean=float(st.beta.mean(k, b)),
        confidence=conf,
        interval=(float(low), float(high)),
        upper=upper,
        prob_exceeds_certified=float(st.beta.sf(certified, k, b)),
        alpha_dagger=dagger,
        exact=certified <= dagger,
        prob_at_or_above_dagger=0.0 if dagger >= 1.0 else float(st.beta.sf(dagger, k, b)),
    )


@dataclass(frozen=True)
class ControlsPlan(Result):
    """The fewest controls N such that level α is certified and α* ≤ ``upper`` with ``confidence``."""

    alpha: float
    upper: float
    confidence: float
    n_controls: int
    k: int
    certified_alpha: float
    achieved_upper: float
    method: str = "beta-law planning"


def plan_controls(alpha: float, upper: float, confidence: float = 0.95) -> ControlsPlan:
    """The smallest number of controls N for which the Beta law bounds α* ≤ ``upper`` at ``confidence``.

    With K = floor(α(N+1)) ≥ 1, the condition is Beta(K, N−K+1).ppf(confidence) ≤ ``upper``. Within
    a run of N sharing one K the quantile falls as N grows and it jumps up when K steps, so the
    search scans K upward (vectorised) for the first run whose last N satisfies the condition, then
    bisects inside that run.

    Parameters
    ----------
    alpha
        The target level to certify, in (0, 1).
    upper
        The bound on the population FPR; must exceed ``alpha`` (the law's mean is ≈ α).
    confidence
        The share of control draws for which α* ≤ ``upper`` must hold.
    """
    a = parse_alpha(alpha)
    u = check_probability("upper", upper)
    conf = check_confidence(confidence)
    if u <= a:
        raise ValueError(f"upper must exceed alpha ({a:g}): the law of the FPR has mean ≈ alpha, got upper={u:g}")

    def last_n(k: np.ndarray) -> np.ndarray:
        # The largest N with K = k is one below the first N reaching k + 1 (the exact N comes below).
        return np.ceil((k + 1) * (1 - K_TOLERANCE) / a).astype(np.int64) - 2

    lo_k, span = 1, 64
    while True:
        ks = np.arange(lo_k, lo_k + span, dtype=np.int64)
        ns = last_n(ks)
        q = st.beta.ppf(conf, ks, ns - ks + 1)
        ok = np.nonzero(q <= u)[0]
        if ok.size:
            k = int(ks[ok[0]])
            break
        lo_k += span
        span *= 2
        if lo_k > 10**7:
            raise ValueError(
                f"upper={u:g} at confidence={conf:g} would need K > 10^7 (over {1e7 / a:.3g} controls) "
                f"for alpha={a:g}; loosen upper or confidence"
            )
    lo, hi = min_controls(a, k), min_controls(a, k + 1) - 1
    while lo < hi:  # smallest N in [lo, hi] meeting the bound (monotone inside a run of one K)
        mid = (lo + hi) // 2
        if st.beta.ppf(conf, k, mid - k + 1) <= u:
            hi = mid
        else:
            lo = mid + 1
    assert conformal_k(a, lo) == k
    return ControlsPlan(alpha=a, upper=u, confidence=conf, n_controls=lo, k=k, certified_alpha=k / (lo + 1),
                        achieved_upper=float(st.beta.ppf(conf, k, lo - k + 1)))

