"""Clopper–Pearson, shifted intervals and Newcombe's paired difference against independent references."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.proportion import proportion_confint

from calib.stats.intervals import (
    PairedDifference,
    ProportionInterval,
    ShiftedInterval,
    clopper_pearson,
    paired_difference,
)

BAD_CONFIDENCES = [0, 1, 1.5, -0.1, float("nan"), float("inf"), True, "0.95", None]


# --- Clopper–Pearson ------------------------------------------------------------------------------

GRID = [(k, n) for n in (1, 2, 3, 5, 10, 17, 50) for k in range(n + 1)] + [
    (k, 1000) for k in (0, 1, 2, 10, 500, 998, 999, 1000)
]


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
def test_clopper_pearson_matches_statsmodels_beta(confidence: float) -> None:
    for k, n in GRID:
        r = clopper_pearson(k, n, confidence)
        # Reference: statsmodels.stats.proportion.proportion_confint(k, n, alpha, method="beta")
        low, high = proportion_confint(k, n, alpha=1 - confidence, method="beta")
        assert r.low == pytest.approx(low, abs=1e-12), (k, n)
        assert r.high == pytest.approx(high, abs=1e-12), (k, n)
        assert r.estimate == k / n


@pytest.mark.parametrize("n", [1, 2, 7, 100])
def test_clopper_pearson_closed_form_at_the_ends(n: int) -> None:
    # Closed form: at k = 0 the upper limit solves (1 - p)^n = γ/2, so high = 1 - (γ/2)^(1/n);
    # at k = n the lower limit solves p^n = γ/2, so low = (γ/2)^(1/n).
    zero, full = clopper_pearson(0, n), clopper_pearson(n, n)
    assert zero.low == 0.0
    assert zero.high == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-12)
    assert full.high == 1.0
    assert full.low == pytest.approx(0.025 ** (1 / n), rel=1e-12)


def test_clopper_pearson_n1_values() -> None:
    # Closed form for n = 1: k = 0 gives [0, 1 - γ/2] = [0, 0.975]; k = 1 gives [γ/2, 1] = [0.025, 1].
    assert (clopper_pearson(0, 1).low, clopper_pearson(0, 1).high) == (0.0, pytest.approx(0.975))
    assert (clopper_pearson(1, 1).low, clopper_pearson(1, 1).high) == (pytest.approx(0.025), 1.0)


def test_clopper_pearson_result_shape() -> None:
    r = clopper_pearson(3, 10, 0.9)
    assert isinstance(r, ProportionInterval)
    assert (r.k, r.n, r.confidence, r.method) == (3, 10, 0.9, "clopper-pearson")
    with pytest.raises(AttributeError):
        r.low = 0.0  # type: ignore[misc]
    assert r.to_dict() == {
        "k": 3,
        "n": 10,
        "estimate": 0.3,
        "low": r.low,
        "high": r.high,
        "confidence": 0.9,
        "method": "clopper-pearson",
    }


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 10_000), frac=st.floats(0, 1), confidence=st.floats(0.5, 0.999))
def test_clopper_pearson_brackets_estimate(n: int, frac: float, confidence: float) -> None:
    k = round(frac * n)
    r = clopper_pearson(k, n, confidence)
    assert 0.0 <= r.low <= r.estimate <= r.high <= 1.0


def test_clopper_pearson_accepts_integral_floats() -> None:
    assert clopper_pearson(3.0, 10.0) == clopper_pearson(3, 10)


@pytest.mark.parametrize(
    ("k", "n", "name"),
    [(-1, 10, "k"), (11, 10, "k"), (1.5, 10, "k"), (0, 0, "n"), (0, -3, "n"), (True, 10, "k")],
)
def test_clopper_pearson_rejects_bad_counts(k: object, n: object, name: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name} "):
        clopper_pearson(k, n)  # type: ignore[arg-type]


@pytest.mark.parametrize("confidence", BAD_CONFIDENCES)
def test_clopper_pearson_rejects_bad_confidence(confidence: object) -> None:
    with pytest.raises(ValueError, match="confidence"):
        clopper_pearson(3, 10, confidence)  # type: ignore[arg-type]


# --- shifted (calibrated memorization rate) ------------------------------------------------------


def test_shifted_moves_every_value_and_does_not_clip() -> None:
    member = clopper_pearson(0, 100)
    alpha_n = 6 / 5001  # docs/architecture.md's worked grid point
    s = member.shifted(alpha_n)
    assert isinstance(s, ShiftedInterval)
    assert s.estimate == pytest.approx(-alpha_n)
    assert s.low == pytest.approx(-alpha_n)  # negative: consistent with a rate of zero
    assert s.high == pytest.approx(member.high - alpha_n)
    assert (s.shift, s.confidence, s.method) == (alpha_n, 0.95, "clopper-pearson")
    assert s.to_dict()["shift"] == alpha_n


def test_shifted_by_zero_is_identity() -> None:
    r = clopper_pearson(7, 40)
    s = r.shifted(0)
    assert (s.estimate, s.low, s.high) == (r.estimate, r.low, r.high)


@pytest.mark.parametrize("delta", [float("nan"), float("inf"), "0.1", None, True])
def test_shifted_rejects_bad_delta(delta: object) -> None:
    with pytest.raises(ValueError, match="^delta "):
        clopper_pearson(3, 10).shifted(delta)  # type: ignore[arg-type]


# --- Newcombe's paired difference ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "low", "high"),
    [
        # Newcombe (1998), Stat. Med. 17:2635, Table II, method 10, examples (a)-(d), as quoted in the
        # tests of the R package propint (github.com/m-Py/propint,
        # tests/testthat/test_Two_Dependent_Props_CI.R, "results reported in Newcombe1998").
        ((36, 12, 2, 0), 0.0569, 0.3404),
        ((18, 12, 2, 18), 0.0562, 0.3290),  # the plain (uncorrected) phi would give 0.0618, 0.3239
        ((53, 0, 0, 1), -0.0729, 0.0729),  # the plain phi would give -0.0640, 0.0640
        ((0, 30, 0, 0), 0.8395, 1.0),
        # Fagerland, Lydersen & Laake (2017), Statistical Analysis of Contingency Tables, ch. 8,
        # Cavo et al. (2012) data, "Newcombe square-and-add": -0.0621 (-0.1186 to -0.0046), as
        # quoted in github.com/ocbe-uio/contingencytables tests/testthat/test-ch8.R.
        ((59, 6, 16, 80), -0.1186, -0.0046),
    ],
)
def test_paired_difference_published_values(
    table: tuple[int, int, int, int], low: float, high: float
) -> None:
    r = paired_difference(*table)
    n11, n10, n01, n00 = table
    assert r.estimate == pytest.approx((n10 - n01) / sum(table), abs=1e-15)
    # Published to 4 decimals.
    assert r.low == pytest.approx(low, abs=5.1e-5)
    assert r.high == pytest.approx(high, abs=5.1e-5)


def _newcombe_reference(n11: int, n10: int, n01: int, n00: int, confidence: float) -> tuple[float, float]:
    """Method 10 written from Newcombe (1998) with statsmodels' Wilson limits."""
    n = n11 + n10 + n01 + n00
    p1, p2 = (n11 + n10) / n, (n11 + n01) / n
    # Reference: statsmodels.stats.proportion.proportion_confint(method="wilson")
    l1, u1 = proportion_confint(n11 + n10, n, alpha=1 - confidence, method="wilson")
    l2, u2 = proportion_confint(n11 + n01, n, alpha=1 - confidence, method="wilson")
    margins = (n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)
    cross = n11 * n00 - n10 * n01
    if margins == 0:
        phi = 0.0
    elif cross > 0:
        phi = max(cross - n / 2, 0) / math.sqrt(margins)
    else:
        phi = cross / math.sqrt(margins)
    theta = p1 - p2
    low = theta - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    high = theta + math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    return low, high


REFERENCE_TABLES = [
    (36, 12, 2, 0),
    (18, 12, 2, 18),
    (1, 10, 10, 1),  # negative cross product: phi keeps its sign
    (2, 1, 1, 2),  # 0 < cross product <= n/2: corrected phi is 0
    (40, 3, 5, 52),  # cross product > n/2: corrected phi is positive
    (0, 5, 0, 5),  # a zero marginal total: phi = 0
    (0, 0, 0, 7),  # nobody flags anything
    (7, 0, 0, 0),  # both flag everything
    (0, 1, 0, 0),  # n = 1
    (0, 0, 1, 0),
    (3, 200, 1, 5000),
]


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
@pytest.mark.parametrize("table", REFERENCE_TABLES)
def test_paired_difference_matches_definition_with_statsmodels_wilson(
    table: tuple[int, int, int, int], confidence: float
) -> None:
    low, high = _newcombe_reference(*table, confidence)
    r = paired_difference(*table, confidence=confidence)
    assert r.low == pytest.approx(low, abs=1e-9)
    assert r.high == pytest.approx(high, abs=1e-9)


@settings(max_examples=80, deadline=None)
@given(table=st.tuples(*[st.integers(0, 60)] * 4).filter(lambda t: sum(t) > 0))
def test_paired_difference_properties(table: tuple[int, int, int, int]) -> None:
    r = paired_difference(*table)
    assert -1.0 <= r.low <= r.estimate <= r.high <= 1.0
    # Swapping the models negates the interval.
    n11, n10, n01, n00 = table
    s = paired_difference(n11, n01, n10, n00)
    assert s.low == pytest.approx(-r.high, abs=1e-12)
    assert s.high == pytest.approx(-r.low, abs=1e-12)
    low, high = _newcombe_reference(*table, 0.95)
    assert r.low == pytest.approx(low, abs=1e-9)
    assert r.high == pytest.approx(high, abs=1e-9)


def test_paired_difference_result_fields() -> None:
    r = paired_difference(36, 12, 2, 0, confidence=0.9)
    assert isinstance(r, PairedDifference)
    assert (r.n, r.n11, r.n10, r.n01, r.n00) == (50, 36, 12, 2, 0)
    assert (r.confidence, r.method) == (0.9, "newcombe-10")
    assert set(r.to_dict()) == {
        "estimate", "low", "high", "n", "n11", "n10", "n01", "n00", "confidence", "method"
    }


@pytest.mark.parametrize("position", range(4))
@pytest.mark.parametrize("bad", [-1, 2.5, "3", None])
def test_paired_difference_rejects_bad_counts(position: int, bad: object) -> None:
    counts: list[object] = [5, 4, 3, 2]
    counts[position] = bad
    name = ("n11", "n10", "n01", "n00")[position]
    with pytest.raises(ValueError, match=rf"^{name} "):
        paired_difference(*counts)  # type: ignore[arg-type]


def test_paired_difference_rejects_empty_table() -> None:
    with pytest.raises(ValueError, match=r"n11 \+ n10 \+ n01 \+ n00"):
        paired_difference(0, 0, 0, 0)


@pytest.mark.parametrize("confidence", BAD_CONFIDENCES)
def test_paired_difference_rejects_bad_confidence(confidence: object) -> None:
    with pytest.raises(ValueError, match="confidence"):
        paired_difference(1, 2, 3, 4, confidence)  # type: ignore[arg-type]


# --- Newcombe's difference of independent proportions ------------------------------------------------

# R. G. Newcombe (1998), Statistics in Medicine 17:873–890, Table II, method 10 (hybrid score, no continuity
# correction): examples (a), (b), (d), (e), limits to four decimals.
NEWCOMBE_1998_TABLE_II = [
    ((56, 70, 48, 80), (0.0524, 0.3339)),
    ((9, 10, 3, 10), (0.1705, 0.8090)),
    ((5, 56, 0, 29), (-0.0381, 0.1926)),
    ((0, 10, 0, 20), (-0.1611, 0.2775)),
]


@pytest.mark.parametrize("counts,limits", NEWCOMBE_1998_TABLE_II)
def test_independent_difference_reproduces_newcombes_table(counts, limits):
    from calib.stats.intervals import independent_difference

    got = independent_difference(*counts)
    assert (round(got.low, 4), round(got.high, 4)) == limits
    assert got.estimate == pytest.approx(counts[0] / counts[1] - counts[2] / counts[3])


@given(n1=st.integers(1, 60), n2=st.integers(1, 60), data=st.data(),
       confidence=st.sampled_from([0.8, 0.9, 0.95, 0.99]))
@settings(max_examples=200, deadline=None)
def test_independent_difference_matches_statsmodels_and_scipy(n1, n2, data, confidence):
    from scipy.stats import fisher_exact
    from statsmodels.stats.proportion import confint_proportions_2indep

    from calib.stats.intervals import independent_difference

    k1, k2 = data.draw(st.integers(0, n1)), data.draw(st.integers(0, n2))
    got = independent_difference(k1, n1, k2, n2, confidence)
    low, high = confint_proportions_2indep(k1, n1, k2, n2, method="newcomb", compare="diff", alpha=1 - confidence)
    assert got.low == pytest.approx(max(-1.0, float(low)), abs=1e-12)
    assert got.high == pytest.approx(min(1.0, float(high)), abs=1e-12)
    assert got.low <= got.estimate <= got.high
    assert got.p_value == pytest.approx(fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue)


@pytest.mark.parametrize("args,name", [((3, 2, 0, 5), "k1"), ((0, 5, 6, 5), "k2"), ((0, 0, 0, 5), "n1"),
                                       ((0, 5, -1, 5), "k2")])
def test_independent_difference_rejects_bad_counts(args, name):
    from calib.stats.intervals import independent_difference

    with pytest.raises(ValueError, match=name):
        independent_difference(*args)
