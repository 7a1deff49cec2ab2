"""Query budgets: how likely a sequence of per-query probability p is generated within n attempts.

P(at least once in n attempts) = 1 − (1 − p)^n, and the attempts needed for confidence c are
ln(1 − c) / ln(1 − p) ≈ −ln(1 − c)/p (≈ 3/p at 95 %). Both are computed with log1p/expm1, so they
stay exact for p down to 1e-300, where 1 − p rounds to 1 in floating point.

Reference: Cooper et al., "Extractable Memorization From First Principles", §6 and App. F.1
(p = 10^-21 needs about 3 × 10^21 attempts for 95 %: "nearly seven times the age of the universe
at 1,000 queries per second").
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from calib.stats._checks import check_confidence, check_probability
from calib.stats.result import Result

__all__ = [
    "BudgetResult",
    "attempts_needed",
    "generation_probability",
    "log10_min_probability_within",
    "min_probability_within",
]

#: Attempt counts at or above this are reported as floats (exact integers are not meaningful there).
_INT_LIMIT = 2**53


@dataclass(frozen=True)
class BudgetResult(Result):
    """A query-budget statement: per-query probability ``p``, ``attempts`` and the ``probability``
    (or the ``confidence`` asked for) of at least one generation."""

    p: float
    attempts: int | float
    probability: float | None = None
    confidence: float | None = None
    method: str = "1 - (1 - p)^n (log1p/expm1)"


def _attempts(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"attempts must be a finite number >= 1, got {value!r}")
    if float(value) < 1:
        raise ValueError(f"attempts must be >= 1, got {value!r}")
    return float(value)


def generation_probability(p: float, attempts: float) -> BudgetResult:
    """P(at least one generation in ``attempts`` independent queries) = 1 − (1 − p)^n.

    ``attempts`` may be any real n ≥ 1 (budgets such as 1e21 exceed integer ranges).
    """
    prob = check_probability("p", p, allow_one=True)
    n = _attempts(attempts)
    value = 1.0 if prob == 1.0 else -math.expm1(n * math.log1p(-prob))
    return BudgetResult(p=prob, attempts=int(n) if n.is_integer() and n < _INT_LIMIT else n, probability=value)


def attempts_needed(p: float, confidence: float = 0.95) -> BudgetResult:
    """The fewest attempts n with P(at least one generation) ≥ ``confidence``: ceil(ln(1−c)/ln(1−p)).

    Returned as an int below 2^53 and as a float above, where the count is only meaningful to
    floating-point precision.
    """
    prob = check_probability("p", p, allow_one=True)
    c = check_confidence(confidence)
    if prob == 1.0:
        return BudgetResult(p=prob, attempts=1, confidence=c)
    n = max(1.0, math.ceil(math.log1p(-c) / math.log1p(-prob)))
    return BudgetResult(p=prob, attempts=int(n) if n < _INT_LIMIT else float(n), confidence=c)


def min_probability_within(attempts: float, confidence: float = 0.95) -> float:
    """The smallest per-query p generated at least once within ``attempts`` queries with
    ``confidence``: p = 1 − (1 − c)^(1/n) = −expm1(ln(1 − c)/n)."""
    n = _attempts(attempts)
    c = check_confidence(confidence)
    return -math.expm1(math.log1p(-c) / n)


def log10_min_probability_within(attempts: float, confidence: float = 0.95) -> float:
    """log10 of :func:`min_probability_within`, finite even for budgets beyond 1e300.

    Used by the census, which works in log10 because window probabilities reach 1e-27 and below.
    ``attempts`` may be a Python int too large for a float (e.g. 10**400).
    """
    c = check_confidence(confidence)
    log_miss = math.log1p(-c)
    if isinstance(attempts, numbers.Integral) and not isinstance(attempts, bool) and attempts > 10**300:
        log10_n = math.log10(attempts)  # math.log10 takes ints of any size
    else:
        n = _attempts(attempts)
        if n <= 1e300:
            return math.log10(-math.expm1(log_miss / n))
        log10_n = math.log10(n)
    # Here p ≈ −ln(1 − c)/n to relative precision p/2, far below a double's resolution.
    return math.log10(-log_miss) - log10_n
