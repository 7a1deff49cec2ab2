"""pass@k against the closed form and brute-force enumeration; Jensen–Shannon against scipy."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon

from calib.stats.bootstrap import bootstrap_ci
from calib.stats.passk import PassAtK, jensen_shannon, pass_at_k, pass_at_k_summary

# --- pass@k per problem ---------------------------------------------------------------------------


def test_pass_at_k_matches_closed_form_with_math_comb() -> None:
    for n in range(1, 31):
        for c in range(n + 1):
            for k in range(1, n + 1):
                # Closed form, Chen et al. (2021) eq. (1): 1 - C(n-c, k)/C(n, k), exact in Fractions.
                expected = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
                assert pass_at_k(n, c, k) == pytest.approx(float(expected), abs=1e-12), (n, c, k)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_matches_brute_force_enumeration(n: int) -> None:
    for c in range(n + 1):
        samples = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            # Brute force: the share of all k-subsets of the n samples holding a correct sample.
            subsets = list(itertools.combinations(samples, k))
            expected = sum(any(s) for s in subsets) / len(subsets)
            assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12), (n, c, k)


def test_pass_at_k_is_stable_for_large_n() -> None:
    # Exact rational closed form; C(1000, 100) has 140 digits, far past float range of the naive form.
    expected = 1 - Fraction(math.comb(990, 100), math.comb(1000, 100))
    assert pass_at_k(1000, 10, 100) == pytest.approx(float(expected), rel=1e-12)


def test_pass_at_k_special_values() -> None:
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 6, 5) == 1.0  # n - c < k: every 5-subset holds a correct sample
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 = c/n
    assert pass_at_k(1, 1, 1) == 1.0
    assert pass_at_k(1, 0, 1) == 0.0


@pytest.mark.parametrize(
    ("n", "c", "k", "name"),
    [(0, 0, 1, "n"), (5, 6, 1, "c"), (5, -1, 1, "c"), (5, 2, 6, "k"), (5, 2, 0, "k"), (5, 2, 1.5, "k")],
)
def test_pass_at_k_rejects_bad_arguments(n: int, c: int, k: int, name: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name} "):
        pass_at_k(n, c, k)


# --- pass@k over problems -------------------------------------------------------------------------


def test_summary_estimate_and_interval() -> None:
    ns = [20, 20, 15, 30, 20, 25]
    cs = [0, 3, 15, 1, 10, 7]
    r = pass_at_k_summary(ns, cs, 5, n_resamples=2000, seed=3)
    # Closed form per problem (Chen et al. 2021, eq. 1), averaged over problems.
    per_problem = [1 - math.comb(n - c, 5) / math.comb(n, 5) for n, c in zip(ns, cs)]
    assert r.estimate == pytest.approx(sum(per_problem) / len(per_problem), abs=1e-12)
    boot = bootstrap_ci(np.array(per_problem), n_resamples=2000, seed=3)
    assert (r.low, r.high) == pytest.approx((boot.low, boot.high), abs=1e-12)
    assert isinstance(r, PassAtK)
    assert (r.k, r.n_problems, r.n_resamples, r.confidence, r.seed) == (5, 6, 2000, 0.95, 3)
    assert r.method == "unbiased-percentile-bootstrap"
    assert set(r.to_dict()) == {
        "estimate", "low", "high", "k", "n_problems", "n_resamples", "confidence", "seed", "method"
    }


def test_summary_broadcasts_a_single_n() -> None:
    cs = [1, 2, 3, 0]
    assert pass_at_k_summary(10, cs, 2, n_resamples=200) == pass_at_k_summary(
        [10] * 4, cs, 2, n_resamples=200
    )


def test_summary_is_seeded() -> None:
    cs = np.arange(0, 40) % 11
    a = pass_at_k_summary(10, cs, 3, n_resamples=500, seed=1)
    b = pass_at_k_summary(10, cs, 3, n_resamples=500, seed=2)
    assert a == pass_at_k_summary(10, cs, 3, n_resamples=500, seed=1)
    assert (a.low, a.high) != (b.low, b.high)


def test_summary_single_problem_collapses() -> None:
    r = pass_at_k_summary([10], [4], 3, n_resamples=100)
    assert r.estimate == r.low == r.high == pytest.approx(1 - math.comb(6, 3) / math.comb(10, 3))


def test_summary_names_the_problem_with_too_few_samples() -> None:
    with pytest.raises(ValueError, match=r"^problem 2: k=5 exceeds n\[2\]=4"):
        pass_at_k_summary([10, 10, 4, 10], [1, 1, 1, 1], 5)


@pytest.mark.parametrize(
    ("n", "c", "k", "match"),
    [
        ([10, 10], [3, 11], 1, r"^problem 1: c\[1\]=11"),
        ([10, 0], [3, 0], 1, r"^problem 1: n\[1\]"),
        ([10, 10, 10], [1, 2], 1, r"^n must be one number or one per problem"),
        (10, [1, -2], 1, r"^c\[1\]"),
        (10, [1, 2.5], 1, r"^c\[1\]"),
        (10, [1, float("nan")], 1, r"^c\[1\]"),
        ([10, 9.5], [1, 2], 1, r"^n\[1\]"),
        (10, [], 1, r"^c is empty"),
        (10, [[1, 2]], 1, r"^c must be one-dimensional"),
        (10, [1, 2], 0, r"^k "),
        (10, ["a"], 1, r"^c must hold integers"),
    ],
)
def test_summary_rejects_bad_arguments(n: object, c: object, k: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        pass_at_k_summary(n, c, k, n_resamples=10)  # type: ignore[arg-type]


@pytest.mark.parametrize("confidence", [0, 1, 1.5, float("nan")])
def test_summary_rejects_bad_confidence(confidence: float) -> None:
    with pytest.raises(ValueError, match=r"^confidence "):
        pass_at_k_summary(10, [1, 2], 1, confidence=confidence)


# --- Jensen–Shannon -------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 12).flatmap(
        lambda m: st.tuples(
            st.lists(st.integers(0, 50), min_size=m, max_size=m).filter(any),
            st.lists(st.integers(0, 50), min_size=m, max_size=m).filter(any),
        )
    )
)
def test_jensen_shannon_matches_scipy(pq: tuple[list[int], list[int]]) -> None:
    p, q = pq
    # Reference: scipy.spatial.distance.jensenshannon(p, q, base=2) is the square root of the
    # divergence (it normalises p and q itself).
    expected = jensenshannon(p, q, base=2) ** 2
    assert jensen_shannon(p, q) == pytest.approx(expected, abs=1e-12)
    assert jensen_shannon(q, p) == pytest.approx(jensen_shannon(p, q), abs=1e-15)
    assert 0.0 <= jensen_shannon(p, q) <= 1.0


def test_jensen_shannon_closed_forms() -> None:
    # Identical distributions (up to scale): 0.
    assert jensen_shannon([1, 2, 3], [2, 4, 6]) == 0.0
    # Disjoint supports: M halves each mass, so each KL term is log2(2) = 1 and JS = 1.
    assert jensen_shannon([1, 0, 0], [0, 2, 3]) == pytest.approx(1.0, abs=1e-15)
    # P = (1, 0), Q = (1/2, 1/2): JS = H(M) - H(P)/2 - H(Q)/2 with M = (3/4, 1/4), H(P) = 0,
    # H(Q) = 1 bit (Lin 1991's entropy form).
    h_m = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))
    assert jensen_shannon([1, 0], [1, 1]) == pytest.approx(h_m - 0.5, abs=1e-15)


def test_jensen_shannon_counts_and_probabilities_agree() -> None:
    assert jensen_shannon([3, 1], [1, 1]) == pytest.approx(jensen_shannon([0.75, 0.25], [0.5, 0.5]))


def test_jensen_shannon_dicts_use_the_union_of_keys() -> None:
    p = {"LOAD": 3, "ADD": 1}
    q = {"ADD": 1, "MUL": 2}
    # Union support (LOAD, ADD, MUL), missing = 0.
    expected = jensenshannon([3, 1, 0], [0, 1, 2], base=2) ** 2
    assert jensen_shannon(p, q) == pytest.approx(expected, abs=1e-12)
    assert jensen_shannon(p, {"ADD": 1, "LOAD": 3}) == 0.0


@pytest.mark.parametrize(
    ("p", "q", "match"),
    [
        ([1, -1], [1, 1], r"^p_counts\[1\]"),
        ([1, 1], [float("nan"), 1], r"^q_counts\[0\]"),
        ([1, 1], [float("inf"), 1], r"^q_counts\[0\]"),
        ([0, 0], [1, 1], r"^p_counts is all zeros"),
        ([1, 1], [0, 0], r"^q_counts is all zeros"),
        ([1, 1], [1, 1, 1], r"^p_counts and q_counts must have the same length"),
        ([], [], r"^p_counts is empty"),
        ([[1, 2]], [[1, 2]], r"^p_counts must be one-dimensional"),
        (["a"], [1], r"^p_counts must be a sequence"),
        ({"a": 1}, [1], r"^p_counts and q_counts must both be dicts"),
        ({"a": 1}, {"a": -2}, r"^q_counts\['a'\] is -2"),
        ({"a": 1}, {"a": float("nan")}, r"^q_counts\['a'\] is nan"),
        ({"a": 0}, {"b": 0}, r"^p_counts is all zeros"),
        ({"a": "1"}, {"a": 1}, r"^p_counts\['a'\] must be a number"),
    ],
)
def test_jensen_shannon_rejects_bad_input(p: object, q: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        jensen_shannon(p, q)  # type: ignore[arg-type]
