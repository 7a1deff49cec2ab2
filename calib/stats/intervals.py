"""Confidence intervals for proportions: a single rate, a shifted rate, and a paired difference.

A counterfactual rate (k of n candidates flagged) gets the Clopper–Pearson interval; the calibrated
memorization rate is that interval shifted down by the certified level α_N; two models judged on the
same candidates are compared with Newcombe's paired score interval (docs/architecture.md, "Statistics").
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from scipy import stats

from ._checks import check_confidence, check_count
from .result import Result

__all__ = [
    "IndependentDifference",
    "PairedDifference",
    "ProportionInterval",
    "ShiftedInterval",
    "clopper_pearson",
    "independent_difference",
    "paired_difference",
]


@dataclass(frozen=True)
class ShiftedInterval(Result):
    """A proportion and its interval moved down by a fixed ``shift`` (values are not clipped at 0).

    Attributes
    ----------
    estimate, low, high : float
        The source interval's estimate and limits minus ``shift``.
    shift : float
        The amount subtracted, e.g. the certified level α_N of a conformal threshold.
    confidence : float
        The confidence level of the source interval (shifting a band does not change its coverage).
    method : str
        The method of the source interval, e.g. ``"clopper-pearson"``.
    """

    estimate: float
    low: float
    high: float
    shift: float
    confidence: float
    method: str


@dataclass(frozen=True)
class ProportionInterval(Result):
    """An interval for a binomial proportion: ``k`` successes in ``n`` trials.

    Attributes
    ----------
    k, n : int
        Successes and trials.
    estimate : float
        ``k / n``.
    low, high : float
        The interval limits, inside [0, 1].
    confidence : float
        The confidence level, e.g. 0.95.
    method : str
        ``"clopper-pearson"``.
    """

    k: int
    n: int
    estimate: float
    low: float
    high: float
    confidence: float
    method: str

    def shifted(self, delta: float) -> ShiftedInterval:
        """Return the estimate and both limits moved down by ``delta``.

        The calibrated memorization rate is the share of member candidates scoring above the
        threshold minus the certified false-positive level α_N, with the member interval shifted down
        by α_N (docs/architecture.md, "Statistics"): ``rate.shifted(alpha_n)``. The values are deliberately not
        clipped at 0: a negative lower limit says the member rate is consistent with the controls'
        false-positive level alone, i.e. with a memorization rate of zero, and clipping would hide how
        far the data are from excluding zero.

        Parameters
        ----------
        delta : float
            The shift, a finite number (usually α_N in [0, 1)).

        Returns
        -------
        ShiftedInterval
        """
        if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not math.isfinite(delta):
            raise ValueError(f"delta must be a finite number, got {delta!r}")
        d = float(delta)
        return ShiftedInterval(
            estimate=self.estimate - d,
            low=self.low - d,
            high=self.high - d,
            shift=d,
            confidence=self.confidence,
            method=self.method,
        )


@dataclass(frozen=True)
class PairedDifference(Result):
    """An interval for the difference p1 − p2 of two proportions measured on the same ``n`` items.

    Attributes
    ----------
    estimate : float
        ``p1 - p2 = (n10 - n01) / n``.
    low, high : float
        The interval limits, inside [-1, 1].
    n : int
        Items judged by both models, ``n11 + n10 + n01 + n00``.
    n11, n10, n01, n00 : int
        Items flagged by both, only model 1, only model 2, neither.
    confidence : float
        The confidence level.
    method : str
        ``"newcombe-10"``.
    """

    estimate: float
    low: float
    high: float
    n: int
    n11: int
    n10: int
    n01: int
    n00: int
    confidence: float
    method: str


@dataclass(frozen=True)
class IndependentDifference(Result):
    """The difference p1 − p2 of two proportions measured on two independent samples (members, controls).

    Attributes
    ----------
    estimate : float
        ``k1 / n1 - k2 / n2``.
    low, high : float
        Newcombe's hybrid score interval, inside [-1, 1].
    k1, n1, k2, n2 : int
        Successes and trials of each sample.
    p_value : float
        Two-sided Fisher exact test of p1 = p2 (the conditional test of the 2×2 table).
    confidence : float
        The confidence level.
    method : str
        ``"newcombe-independent"``.
    """

    estimate: float
    low: float
    high: float
    k1: int
    n1: int
    k2: int
    n2: int
    p_value: float
    confidence: float
    method: str


def independent_difference(k1: int, n1: int, k2: int, n2: int,
                           confidence: float = 0.95) -> IndependentDifference:
    """Interval and test for p1 − p2 from two independent binomial samples (k1 of n1, k2 of n2).

    With Wilson score limits (l_i, u_i) of each proportion, Newcombe's hybrid score interval is

        low  = p1 − p2 − sqrt((p1 − l1)² + (u2 − p2)²)
        high = p1 − p2 + sqrt((u1 − p1)² + (p2 − l2)²)

    (Newcombe 1998, method 10 for unpaired samples; statsmodels' ``confint_proportions_2indep`` with
    ``method="newcomb"`` gives the same limits). ``p_value`` is Fisher's exact test of equal proportions
    (scipy.stats.fisher_exact, two-sided), which holds its level at any sample size.

    Raises
    ------
    ValueError
        Naming ``k1``, ``n1``, ``k2``, ``n2`` or ``confidence`` when it is out of range.

    References
    ----------
    R. G. Newcombe (1998). Interval estimation for the difference between independent proportions:
    comparison of eleven methods. *Statistics in Medicine* 17(8):873–890.
    """
    n1, n2 = check_count("n1", n1, minimum=1), check_count("n2", n2, minimum=1)
    k1, k2 = check_count("k1", k1), check_count("k2", k2)
    for name, k, n in (("k1", k1, n1), ("k2", k2, n2)):
        if k > n:
            raise ValueError(f"{name} must be an integer in [0, {n}], got {k}")
    conf = check_confidence(confidence)
    z = float(stats.norm.ppf(1.0 - (1.0 - conf) / 2.0))
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = _wilson(k1, n1, z)
    l2, u2 = _wilson(k2, n2, z)
    d = p1 - p2
    low = max(-1.0, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2))
    high = min(1.0, d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))
    p_value = float(stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]], alternative="two-sided").pvalue)
    return IndependentDifference(estimate=d, low=low, high=high, k1=k1, n1=n1, k2=k2, n2=n2, p_value=p_value,
                                 confidence=conf, method="newcombe-independent")


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> ProportionInterval:
    """Clopper–Pearson ("exact") interval for a binomial proportion.

    With γ = 1 − confidence, the limits are the Beta quantiles

        low  = B(γ/2; k, n − k + 1)      (low = 0 when k = 0)
        high = B(1 − γ/2; k + 1, n − k)  (high = 1 when k = n)

    which invert two one-sided binomial tests, so the coverage is at least ``confidence`` for every
    true proportion (Clopper & Pearson 1934, the central interval with γ/2 in each tail; docs/architecture.md,
    "Statistics").

    Parameters
    ----------
    k : int
        Successes, 0 <= k <= n.
    n : int
        Trials, n >= 1.
    confidence : float, default 0.95
        Confidence level in (0, 1).

    Returns
    -------
    ProportionInterval
        ``method == "clopper-pearson"``.

    Raises
    ------
    ValueError
        Naming ``k``, ``n`` or ``confidence`` when it is out of range.

    References
    ----------
    C. J. Clopper and E. S. Pearson (1934). The use of confidence or fiducial limits illustrated in
    the case of the binomial. *Biometrika* 26(4):404–413.
    """
    n = check_count("n", n, minimum=1)
    k = check_count("k", k)
    if k > n:
        raise ValueError(f"k must be an integer in [0, n] = [0, {n}], got {k}")
    conf = check_confidence(confidence)
    gamma = 1.0 - conf
    low = 0.0 if k == 0 else float(stats.beta.ppf(gamma / 2.0, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(1.0 - gamma / 2.0, k + 1, n - k))
    return ProportionInterval(
        k=k, n=n, estimate=k / n, low=low, high=high, confidence=conf, method="clopper-pearson"
    )


def _wilson(k: int, n: int, z: float) -> tuple[float, float]:
    """Wilson (1927) score limits for k of n; exactly 0 at k = 0 and 1 at k = n."""
    p = k / n
    z2 = z * z
    centre = (2 * k + z2) / (2 * (n + z2))
    half = z * math.sqrt(z2 + 4 * k * (1 - p)) / (2 * (n + z2))
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


def _newcombe_phi(n11: int, n10: int, n01: int, n00: int) -> float:
    """Newcombe's (1998) corrected phi coefficient of the paired 2×2 table.

    φ = 0 when any marginal total is 0; otherwise the numerator n11·n00 − n10·n01 is kept as it is
    when not positive and replaced by max(n11·n00 − n10·n01 − n/2, 0) when positive (Newcombe 1998,
    method 10). The plain phi coefficient does not reproduce the paper's Table II limits.
    """
    n = n11 + n10 + n01 + n00
    margins = (n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)
    if margins == 0:
        return 0.0
    cross = n11 * n00 - n10 * n01
    numerator = max(cross - n / 2.0, 0.0) if cross > 0 else float(cross)
    return numerator / math.sqrt(margins)


def paired_difference(
    n11: int, n10: int, n01: int, n00: int, confidence: float = 0.95
) -> PairedDifference:
    """Interval for the difference of two paired proportions (Newcombe 1998, method 10).

    Two models judge the same n items; p1 = (n11 + n10)/n and p2 = (n11 + n01)/n are their flag
    rates and θ = p1 − p2. With Wilson score limits (l1, u1) for p1 and (l2, u2) for p2 and Newcombe's
    corrected phi coefficient φ (see below),

        low  = θ − sqrt((p1 − l1)² − 2φ (p1 − l1)(u2 − p2) + (u2 − p2)²)
        high = θ + sqrt((u1 − p1)² − 2φ (u1 − p1)(p2 − l2) + (p2 − l2)²)

    φ = 0 when any marginal total of the 2×2 table is zero; otherwise with D = n11·n00 − n10·n01,
    φ = max(D − n/2, 0)/sqrt(product of the four marginal totals) when D > 0 and
    φ = D/sqrt(product of the four marginal totals) when D <= 0. The limits lie in [-1, 1].

    Parameters
    ----------
    n11 : int
        Items flagged by both models.
    n10 : int
        Items flagged by model 1 only.
    n01 : int
        Items flagged by model 2 only.
    n00 : int
        Items flagged by neither.
    confidence : float, default 0.95
        Confidence level in (0, 1).

    Returns
    -------
    PairedDifference
        ``method == "newcombe-10"``.

    Raises
    ------
    ValueError
        Naming the count or ``confidence`` that is out of range, or when all four counts are 0.

    References
    ----------
    R. G. Newcombe (1998). Improved confidence intervals for the difference between binomial
    proportions based on paired data. *Statistics in Medicine* 17(22):2635–2650, method 10.
    E. B. Wilson (1927). Probable inference, the law of succession, and statistical inference.
    *Journal of the American Statistical Association* 22(158):209–212.
    """
    counts = {
        "n11": check_count("n11", n11),
        "n10": check_count("n10", n10),
        "n01": check_count("n01", n01),
        "n00": check_count("n00", n00),
    }
    a, b, c, d = counts.values()
    n = a + b + c + d
    if n == 0:
        raise ValueError("n11 + n10 + n01 + n00 must be at least 1 (no items were judged), got 0")
    conf = check_confidence(confidence)
    z = float(stats.norm.ppf(1.0 - (1.0 - conf) / 2.0))
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = _wilson(a + b, n, z)
    l2, u2 = _wilson(a + c, n, z)
    phi = _newcombe_phi(a, b, c, d)
    theta = (b - c) / n
    # |φ| <= 1 makes both radicands non-negative; max() only absorbs rounding.
    delta = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    epsilon = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return PairedDifference(
        estimate=theta,
        low=max(-1.0, theta - delta),
        high=min(1.0, theta + epsilon),
        n=n,
        n11=a,
        n10=b,
        n01=c,
        n00=d,
        confidence=conf,
        method="newcombe-10",
    )
