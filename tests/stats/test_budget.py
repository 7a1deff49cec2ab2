"""Query budgets against closed forms and 600-digit arithmetic (mpmath)."""

from __future__ import annotations

import math

import mpmath
import pytest

from calib.stats.budget import attempts_needed, generation_probability, min_probability_within


def _exact_probability(p: float, n: float) -> float:
    with mpmath.workdps(600):
        return float(1 - (1 - mpmath.mpf(p)) ** mpmath.mpf(n))


def test_the_papers_budget_example():
    # Extraction paper §6: p = 10^-21 needs about 3 x 10^21 attempts for 95 % generation probability.
    r = attempts_needed(1e-21, 0.95)
    assert r.attempts == pytest.approx(3e21, rel=0.002)
    assert r.attempts == pytest.approx(-math.log(0.05) / 1e-21, rel=1e-12)  # closed form, ~3/p


@pytest.mark.parametrize("p", [1e-300, 1e-200, 1e-21, 1e-9, 0.3, 0.999])
@pytest.mark.parametrize("n", [1, 7, 1e6, 1e21, 1e300])
def test_probability_is_exact_for_tiny_p(p, n):
    got = generation_probability(p, n).probability
    assert got == pytest.approx(_exact_probability(p, n), rel=1e-12, abs=1e-300)


def test_naive_formula_underflows_where_ours_does_not():
    assert 1 - (1 - 1e-300) ** 1e299 == 0.0  # 1 - p rounds to 1
    assert generation_probability(1e-300, 1e299).probability == pytest.approx(-math.expm1(-0.1), rel=1e-14)


@pytest.mark.parametrize("p", [1e-300, 1e-21, 1e-5, 0.5])
@pytest.mark.parametrize("c", [0.5, 0.95, 0.999])
def test_attempts_are_the_fewest_that_reach_the_confidence(p, c):
    n = attempts_needed(p, c).attempts
    assert generation_probability(p, n).probability >= c * (1 - 1e-12)
    if n < 2**53 and n > 1:
        assert generation_probability(p, n - 1).probability < c


def test_edges():
    assert attempts_needed(1.0, 0.99).attempts == 1
    assert generation_probability(1.0, 1).probability == 1.0
    assert attempts_needed(0.5, 0.5).attempts == 1
    assert min_probability_within(1e22) == pytest.approx(-math.log(0.05) / 1e22, rel=1e-9)
    for bad in (0.0, -1e-3, 1.5, float("nan")):
        with pytest.raises(ValueError, match="^p must"):
            attempts_needed(bad)
    with pytest.raises(ValueError, match="confidence"):
        attempts_needed(0.1, 1.0)
    with pytest.raises(ValueError, match="attempts"):
        generation_probability(0.1, 0.5)
