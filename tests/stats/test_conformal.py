"""The matched-control conformal test against the extraction paper's numbers and closed forms."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats as st
from statsmodels.stats.proportion import proportion_confint

from calib.stats.conformal import (
    alpha_dagger,
    calibrate,
    conformal_k,
    conformal_test,
    p_values,
    parse_alpha,
    sweep,
)

# --- K and the certified level ------------------------------------------------------------------

def test_k_for_the_papers_operating_point():
    # Extraction paper App. C.1: N = 5000, alpha = 0.1 % gives K = 5 and alpha_N = 5/5001.
    assert conformal_k(0.001, 5000) == 5
    cal = calibrate(np.arange(5000.0), 0.001)
    assert cal.k == 5
    assert cal.certified_alpha == pytest.approx(5 / 5001, rel=1e-15)


def test_k_for_the_decontaminated_pool():
    # Extraction paper App. D.2: the decontaminated pool of 4,988 controls has alpha_N = 4/4989.
    cal = calibrate(np.arange(4988.0), 0.001)
    assert (cal.k, cal.certified_alpha) == (4, pytest.approx(4 / 4989, rel=1e-15))


def test_rounded_decimal_of_a_grid_point_gives_its_k():
    # docs/architecture.md: alpha = 6/5001 written as 0.0011997600479904018 gives K = 6 (floor alone gives 5).
    assert 0.0011997600479904018 * 5001 < 6
    assert conformal_k(0.0011997600479904018, 5000) == 6
    assert conformal_k("6/5001", 5000) == 6
    assert conformal_k("6/(5000+1)", 5000) == 6
    # Targets from 5/5001 up to just below 6/5001 all give K = 5 (App. C.1: many-to-one).
    assert conformal_k(0.00119, 5000) == 5
    assert conformal_k(5 / 5001, 5000) == 5


@pytest.mark.parametrize("n", [1, 2, 19, 999, 5000, 10**7])
def test_k_is_floor_of_alpha_n_plus_one_on_exact_grid(n):
    for k in sorted({1, min(2, n), max(1, n // 3), n}):
        assert conformal_k(k / (n + 1), n) == k
    assert conformal_k(0.5 / (n + 1), n) == 0


@pytest.mark.parametrize("bad", [0, 1, -0.1, 1.5, float("nan"), float("inf"), "abc", "1/0", "5/4", True])
def test_alpha_outside_the_open_unit_interval_is_rejected(bad):
    with pytest.raises(ValueError, match="alpha"):
        parse_alpha(bad)


def test_alpha_parses_decimal_strings():
    assert parse_alpha("0.001") == 0.001
    assert parse_alpha(" 5/5001 ") == 5 / 5001


# --- threshold, claims, in-sample FPR ----------------------------------------------------------

def test_threshold_is_the_kth_largest_and_claims_are_strict():
    rng = np.random.default_rng(7)
    controls = rng.normal(size=5000)
    cal = calibrate(controls, 0.001)
    descending = np.sort(controls)[::-1]
    assert cal.threshold == descending[4]  # the 5th largest, closed form
    # App. C.1: with K = 5 and distinct scores, 4 of 5000 controls lie above: in-sample FPR 0.08 %.
    assert cal.in_sample_fpr == 4 / 5000
    scores = np.array([descending[4], np.nextafter(descending[4], np.inf), descending[0] + 1, -10.0])
    assert cal.claims(scores).tolist() == [False, True, True, False]


def test_ties_at_the_threshold_are_conservative():
    controls = np.array([1.0, 2.0, 3.0, 3.0, 3.0, 4.0, 5.0, 6.0, 7.0])  # N = 9
    cal = calibrate(controls, 0.5)  # K = floor(0.5 * 10) = 5 -> 5th largest = 3.0
    assert (cal.k, cal.threshold) == (5, 3.0)
    assert cal.in_sample_fpr == 4 / 9  # only 4, 5, 6, 7 lie strictly above
    assert not cal.claims([3.0])[0]


def test_k_zero_is_an_explicit_cannot_certify_result():
    cal = calibrate(np.arange(100.0), 0.001)  # K = floor(0.101) = 0
    assert cal.k == 0 and not cal.certifiable
    assert cal.threshold is None and cal.in_sample_fpr is None
    assert "cannot certify" in cal.note and "999 controls" in cal.note  # ceil(1/0.001) - 1 = 999
    assert not cal.claims([1e9]).any()
    assert cal.calibrated_rate([1.0, 2.0]) is None
    law = cal.fpr_law()
    assert not law.certifiable and law.interval is None and law.upper is None


def test_single_control():
    cal = calibrate([0.3], 0.5)  # N = 1: K = floor(0.5 * 2) = 1, alpha_N = 1/2
    assert (cal.k, cal.certified_alpha, cal.threshold, cal.in_sample_fpr) == (1, 0.5, 0.3, 0.0)
    assert cal.alpha_dagger == 1.0
    assert calibrate([0.3], 0.49).k == 0


def test_all_scores_tied():
    cal = calibrate(np.zeros(50), 0.1)  # K = 5, threshold = 0, nothing lies above the atom
    assert cal.threshold == 0.0 and cal.in_sample_fpr == 0.0
    assert cal.alpha_dagger == 0.0  # App. C.4.4: alpha_dagger = 0 collapses the sweep to one point
    assert cal.at_atom and "atom" in cal.note
    assert cal.claims([0.0, 1e-12]).tolist() == [False, True]


def test_alpha_dagger_is_the_share_above_a_tied_minimum():
    # App. C.4.2: with top-k decoding the atom is the block of zero scores; alpha_dagger is the share
    # of controls scoring above it. 896 zeros and 104 positive scores give 10.4 %, as in App. C.4.4.
    rng = np.random.default_rng(3)
    controls = np.concatenate([np.zeros(896), rng.uniform(1e-9, 1e-3, 104)])
    assert alpha_dagger(controls) == pytest.approx(0.104)
    assert alpha_dagger([0.0, 1.0, 1.0, 2.0]) == 1.0  # unique minimum: no atom at the bottom
    low = calibrate(controls, 0.05)
    assert not low.at_atom and low.threshold > 0
    high = calibrate(controls, 0.2)  # K = 200 > 104 positives: the threshold sits on the zeros
    assert high.at_atom and high.threshold == 0.0 and not high.fpr_law().exact


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_controls_are_rejected_with_their_position(bad):
    with pytest.raises(ValueError, match=r"controls\[2\]"):
        calibrate([0.1, 0.2, bad, 0.3], 0.1)


def test_empty_controls_are_rejected():
    with pytest.raises(ValueError, match="controls is empty"):
        calibrate([], 0.1)


# --- p-values -----------------------------------------------------------------------------------

def test_p_values_follow_the_definition_and_match_claims():
    rng = np.random.default_rng(11)
    controls = rng.integers(0, 30, size=200).astype(float)  # many ties
    scores = rng.integers(-2, 33, size=300).astype(float)
    p = p_values(controls, scores)
    brute = np.array([(1 + np.sum(controls >= s)) / 201 for s in scores])
    np.testing.assert_array_equal(p, brute)
    for alpha in (0.01, 0.05, 0.2, 0.5):
        cal = calibrate(controls, alpha)
        np.testing.assert_array_equal(cal.claims(scores), p <= cal.certified_alpha + 1e-15)


# --- calibrated memorization rate ---------------------------------------------------------------

def test_calibrated_rate_is_the_member_clopper_pearson_shifted_down():
    controls = np.arange(1.0, 1001.0)  # N = 1000, alpha = 0.01 -> K = 10, threshold = 991
    members = np.concatenate([np.full(37, 2000.0), np.full(63, 5.0), [991.0]])  # 37 of 101 above
    cal = calibrate(controls, 0.01)
    rate = cal.calibrated_rate(members, 0.95)
    alpha_n = 10 / 1001
    # Reference: statsmodels proportion_confint(37, 101, alpha=0.05, method="beta") (Clopper-Pearson).
    lo, hi = proportion_confint(37, 101, alpha=0.05, method="beta")
    assert (rate.n, rate.claims) == (101, 37)
    assert rate.member_rate == pytest.approx(37 / 101)
    assert rate.calibrated_rate == pytest.approx(37 / 101 - alpha_n)
    assert rate.low == pytest.approx(lo - alpha_n, rel=1e-9)
    assert rate.high == pytest.approx(hi - alpha_n, rel=1e-9)


def test_calibrated_band_is_not_clipped_at_zero():
    rate = calibrate(np.arange(100.0), 0.1).calibrated_rate(np.zeros(20))  # no member above
    assert rate.claims == 0 and rate.low < 0 and rate.calibrated_rate == pytest.approx(-10 / 101)


def test_conformal_test_record_has_every_key():
    rec = conformal_test(np.arange(5000.0), 0.001, members=np.arange(5000.0, 5010.0))
    for key in ("n_controls", "k", "certified_alpha", "threshold", "in_sample_fpr", "alpha_dagger", "fpr_law"):
        assert key in rec
    assert rec["members"]["claims"] == 10
    assert rec["fpr_law"]["interval"][0] == pytest.approx(st.beta.ppf(0.025, 5, 4996))


# --- sweep ----------------------------------------------------------------------------------------

def test_sweep_matches_one_calibration_per_level():
    rng = np.random.default_rng(5)
    controls = rng.lognormal(size=3000)
    members = rng.lognormal(mean=1.0, size=400)
    alphas = [1e-4, "1/3001", 0.001, 0.01, 0.05, 0.3]
    table = sweep(controls, alphas, members=members)
    assert isinstance(table, pl.DataFrame) and table.height == len(alphas)
    for row, a in zip(table.iter_rows(named=True), alphas):
        cal = calibrate(controls, a)
        assert row["k"] == cal.k and row["certified_alpha"] == cal.certified_alpha
        assert row["threshold"] == cal.threshold and row["in_sample_fpr"] == cal.in_sample_fpr
        rate = cal.calibrated_rate(members)
        if rate is None:
            assert row["claims"] is None and row["fpr_upper"] is None
        else:
            assert (row["claims"], row["low"]) == (rate.claims, rate.low)
            assert row["fpr_upper"] == pytest.approx(st.beta.ppf(0.95, cal.k, 3000 - cal.k + 1))
    assert table["k"][0] == 0  # 1e-4 * 3001 < 1: cannot certify
    assert table.columns[:4] == ["alpha", "k", "certified_alpha", "threshold"]


def test_sweep_collapses_to_one_point_when_alpha_dagger_is_zero():
    table = sweep(np.zeros(200), [0.01, 0.1, 0.5])
    assert table["threshold"].to_list() == [0.0, 0.0, 0.0]
    assert table["at_atom"].all()
