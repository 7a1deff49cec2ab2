"""Tests for calib.stats.census: thresholds, coverage, margins and query budgets."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calib.stats.census import (
    CensusThreshold,
    census,
    census_threshold,
    character_margins,
)

# --- threshold -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("score", "exponent"),
    [
        (1e-21, -21),
        (np.nextafter(1e-21, 1.0), -20),
        (np.nextafter(1e-21, 0.0), -21),
        (1e-5, -5),
        (np.nextafter(1e-5, 1.0), -4),
        (3e-6, -5),
        (1.0, 0),
        (np.nextafter(1.0, 0.0), 0),
        (0.11, 0),
        (0.1, -1),
        (5e-324, -323),
    ],
)
def test_threshold_rounds_up_to_a_power_of_ten(score: float, exponent: int) -> None:
    thr = census_threshold([score, 5e-324])
    assert thr.log10_threshold == exponent
    assert thr.threshold == float(f"1e{exponent}")
    assert thr.n_control_windows == 2


def test_every_exact_power_of_ten_keeps_its_exponent() -> None:
    # np.log10 is off by an ulp for 1e-323 ... 1e-312 (they are subnormal); the threshold must not be.
    for k in range(-323, 1):
        power = float(f"1e{k}")
        assert census_threshold([power]).log10_threshold == k
        if k < 0:
            assert census_threshold([np.nextafter(power, 1.0)]).log10_threshold == k + 1


@pytest.mark.parametrize(
    ("score", "exponent"),
    [(-21.0, -21), (float(np.log10(1e-21)), -21), (-21.0 + 1e-12, -20), (-20.5, -20), (0.0, 0), (-0.25, 0)],
)
def test_threshold_from_log10_scores(score: float, exponent: int) -> None:
    assert census_threshold([-40.0, score], log10=True).log10_threshold == exponent


def test_threshold_below_double_range_keeps_its_exponent() -> None:
    thr = census_threshold([-400.5, -401.0], log10=True)
    assert thr.log10_threshold == -400
    assert thr.threshold == 0.0
    assert thr.max_control_score_log10 == -400.5


def test_threshold_above_is_strict() -> None:
    thr = census_threshold([1e-21])
    assert thr.above([1e-21, np.nextafter(1e-21, 1.0), 1e-22, 0.5]).tolist() == [False, True, False, True]
    assert thr.above([-21.0, -20.9], log10=True).tolist() == [False, True]


# --- coverage and margins on a hand-built document ------------------------------------------------

# Controls [3e-6, 1e-7]: the largest, 3e-6, rounds up to the threshold 1e-5.
CONTROLS = [3e-6, 1e-7]
# A 100-character document with overlapping, nested, adjacent and disjoint windows:
#   A [0, 10)   1e-3  above, margin log10(1e-3/1e-5) = 2
#   B [5, 20)   1e-4  above, margin 1, overlaps A      -> union [0, 20)
#   C [8, 12)   1e-2  above, margin 3, nested in A ∪ B -> no new character
#   D [20, 30)  2e-5  above, margin log10 2, adjacent to B -> union [0, 30)
#   E [40, 50)  1e-5  exactly the threshold: not above (ties are conservative), margin 0
#   F [60, 70)  1e-6  below, margin -1
#   G [80, 90)  0.5   above, margin log10(5e4), disjoint -> union [0, 30) ∪ [80, 90) = 40 characters
STARTS = [0, 5, 8, 20, 40, 60, 80]
ENDS = [10, 20, 12, 30, 50, 70, 90]
SCORES = [1e-3, 1e-4, 1e-2, 2e-5, 1e-5, 1e-6, 0.5]


def test_hand_built_document() -> None:
    r = census(STARTS, ENDS, SCORES, CONTROLS, document_length=100)
    assert r.threshold == 1e-5
    assert r.log10_threshold == -5
    assert r.max_control_score_log10 == pytest.approx(math.log10(3e-6))
    assert r.n_control_windows == 2
    assert r.n_windows == 7
    assert r.windows_above == 5  # A, B, C, D, G
    assert r.covered_characters == 40
    assert r.coverage == pytest.approx(0.4)
    assert r.document_length == 100
    assert r.max_margin == pytest.approx(math.log10(5e4))
    assert r.budget is None
    assert r.budget_confidence is None
    assert r.coverage_within_budget is None
    assert r.windows_within_budget is None


def test_hand_built_document_within_budget() -> None:
    # n = 1e5 queries at 95 %: p_min = 1 - 0.05**(1/1e5) ≈ 2.9957e-5 (≈ 3/n). D (2e-5) is above the
    # threshold but not within budget; A, B, C, G are: [0, 20) ∪ [80, 90) = 30 characters.
    r = census(STARTS, ENDS, SCORES, CONTROLS, document_length=100, budget=10**5)
    assert r.budget == 10**5
    assert r.budget_confidence == 0.95
    assert 10**r.min_log10_score_within_budget == pytest.approx(1 - 0.05 ** (1 / 1e5), rel=1e-9)
    assert r.windows_within_budget == 4
    assert r.covered_characters_within_budget == 30
    assert r.coverage_within_budget == pytest.approx(0.3)
    # The budget view never changes the census itself.
    assert r.coverage == pytest.approx(0.4)


def test_hand_built_character_margins() -> None:
    m = character_margins(STARTS, ENDS, SCORES, CONTROLS, document_length=100)
    expected = np.full(100, np.nan)
    expected[0:5] = 2.0  # A
    expected[5:8] = 2.0  # A, B: max(2, 1)
    expected[8:12] = 3.0  # A, B, C (C ends at 12; A ends at 10)
    expected[12:20] = 1.0  # B
    expected[20:30] = math.log10(2.0)  # D
    expected[40:50] = 0.0  # E, at the threshold
    expected[60:70] = -1.0  # F
    expected[80:90] = math.log10(5e4)  # G
    np.testing.assert_allclose(m, expected, rtol=0, atol=1e-12)
    assert int(np.count_nonzero(m > 0)) == 40  # the census coverage


def test_document_length_defaults_to_last_end_and_order_does_not_matter() -> None:
    order = [6, 2, 0, 4, 1, 5, 3]
    r = census(np.take(STARTS, order), np.take(ENDS, order), np.take(SCORES, order), CONTROLS)
    assert r.document_length == 90
    assert r.covered_characters == 40
    assert r.coverage == pytest.approx(40 / 90)


def test_log10_scores_give_the_same_census() -> None:
    a = census(STARTS, ENDS, SCORES, CONTROLS, document_length=100, budget=10**5)
    b = census(STARTS, ENDS, np.log10(SCORES), np.log10(CONTROLS), log10=True, document_length=100,
               budget=10**5)
    assert a == b


def test_precomputed_threshold_is_accepted() -> None:
    thr = census_threshold(CONTROLS)
    assert census(STARTS, ENDS, SCORES, thr, document_length=100) == census(
        STARTS, ENDS, SCORES, CONTROLS, document_length=100
    )
    np.testing.assert_array_equal(
        character_margins(STARTS, ENDS, np.log10(SCORES), thr, log10=True, document_length=100),
        character_margins(STARTS, ENDS, SCORES, CONTROLS, document_length=100),
    )


def test_control_max_exactly_a_power_of_ten() -> None:
    # Control max 1e-21 is the threshold itself: a window at 1e-21 ties (not above, margin 0); the
    # next double up is above, with the smallest positive margin a log10 value near -21 can carry.
    r = census([0, 10], [10, 20], [1e-21, np.nextafter(1e-21, 1.0)], [1e-21, 1e-25])
    assert r.log10_threshold == -21
    assert r.windows_above == 1
    assert r.covered_characters == 10
    assert 0.0 < r.max_margin < 1e-14
    m = character_margins([0, 10], [10, 20], [1e-21, np.nextafter(1e-21, 1.0)], [1e-21, 1e-25])
    assert np.all(m[:10] == 0.0) and np.all(m[10:] > 0.0)


def test_all_scores_tied() -> None:
    # Every window ties with the control max 1e-8: nothing is above and the margin is exactly 0.
    starts = np.arange(0, 50, 5)
    r = census(starts, starts + 10, np.full(10, 1e-8), [1e-8] * 3)
    assert (r.windows_above, r.covered_characters, r.coverage, r.max_margin) == (0, 0, 0.0, 0.0)
    m = character_margins(starts, starts + 10, np.full(10, 1e-8), [1e-8] * 3)
    assert np.all(m == 0.0)
    # Tied above the threshold: the union [0, 55) of the ten windows is covered.
    r = census(starts, starts + 10, np.full(10, 0.1), [1e-3])
    assert (r.windows_above, r.covered_characters, r.coverage) == (10, 55, 1.0)
    assert r.max_margin == pytest.approx(2.0)


def test_no_windows() -> None:
    r = census([], [], [], [1e-3], document_length=10, budget=100)
    assert (r.n_windows, r.windows_above, r.coverage, r.max_margin) == (0, 0, 0.0, None)
    assert r.coverage_within_budget == 0.0
    assert np.isnan(character_margins([], [], [], [1e-3], document_length=10)).all()


def test_control_threshold_of_one_admits_no_window() -> None:
    r = census([0], [5], [1.0], [1.0])
    assert r.threshold == 1.0
    assert r.windows_above == 0
    assert r.max_margin == 0.0


def test_result_is_json_ready() -> None:
    r = census(STARTS, ENDS, SCORES, CONTROLS, budget=10**30)
    data = json.loads(json.dumps(r.to_dict()))
    assert data["budget"] == 10**30
    assert data["coverage"] == pytest.approx(40 / 90)


# --- budgets: the paper's number -------------------------------------------------------------------


def test_paper_budget_for_p_1e_21() -> None:
    # Extraction paper §6: p = 1e-21 needs about 3e21 attempts for 95 % (ln(0.05)/ln(1 - 1e-21) =
    # 2.9957e21). A window at 1e-21 above a 1e-22 threshold is not extractable within 1e20 queries
    # but is within 1e22, and the cut lies between 2.99e21 and 3.0e21.
    needed = math.log(0.05) / math.log1p(-1e-21)
    assert needed == pytest.approx(2.9957e21, rel=1e-4)
    for scores, log10 in (([1e-21], False), ([-21.0], True)):
        controls = [5e-23] if not log10 else [math.log10(5e-23)]
        within = {
            b: census([0], [100], scores, controls, log10=log10, budget=b).coverage_within_budget
            for b in (10**20, 2.99e21, 3.0e21, 10**22)
        }
        assert within == {10**20: 0.0, 2.99e21: 0.0, 3.0e21: 1.0, 10**22: 1.0}
        assert census([0], [100], scores, controls, log10=log10).coverage == 1.0


def test_budget_far_beyond_double_range() -> None:
    # p_min ≈ -ln(1 - c)/n; with n = 10**400 only its log10 is representable.
    r = census([0], [10], [-500.0], [-600.0], log10=True, budget=10**400)
    assert r.min_log10_score_within_budget == pytest.approx(math.log10(-math.log(0.05)) - 400, abs=1e-12)
    assert r.windows_within_budget == 0
    r = census([0], [10], [-390.0], [-600.0], log10=True, budget=10**400, budget_confidence=0.5)
    assert r.windows_within_budget == 1


# --- brute-force reference on random documents ----------------------------------------------------


def _reference(starts, ends, log10_scores, exponent, length):
    """Paint every window character by character (independent of the vectorised code)."""
    covered = np.zeros(length, dtype=bool)
    margins = np.full(length, -np.inf)
    for s, e, v in zip(starts, ends, log10_scores):
        for c in range(s, e):
            margins[c] = max(margins[c], v - exponent)
            if v > exponent:
                covered[c] = True
    margins[np.isneginf(margins)] = np.nan
    return int(covered.sum()), margins


@pytest.mark.parametrize("seed", range(8))
def test_random_documents_match_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    length = int(rng.integers(1, 300))
    n = int(rng.integers(0, 80))
    starts = rng.integers(0, length, n)
    ends = np.minimum(starts + rng.integers(1, 40, n), length)
    # Coarse scores make ties with each other and with the threshold common.
    scores = np.round(rng.uniform(-12.0, 0.0, n), 1)
    controls = np.round(rng.uniform(-12.0, -2.0, 5), 1)
    exponent = math.ceil(controls.max())
    covered, margins = _reference(starts, ends, scores, exponent, length)

    r = census(starts, ends, scores, controls, log10=True, document_length=length)
    assert r.log10_threshold == exponent
    assert r.covered_characters == covered
    assert r.coverage == covered / length
    assert r.windows_above == int(np.count_nonzero(scores > exponent))
    got = character_margins(starts, ends, scores, controls, log10=True, document_length=length)
    np.testing.assert_allclose(got, margins, rtol=0, atol=1e-12)
    assert int(np.count_nonzero(got > 0)) == covered


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 40), st.integers(1, 15), st.integers(-8, 0)),
        max_size=25,
    ),
    st.integers(-8, 0),
)
def test_property_coverage_matches_brute_force(windows, control: int) -> None:
    length = 60
    starts = [s for s, _, _ in windows]
    ends = [s + w for s, w, _ in windows]
    scores = [float(v) for _, _, v in windows]
    covered, margins = _reference(starts, ends, scores, control, length)
    r = census(starts, ends, scores, [float(control)], log10=True, document_length=length)
    assert r.covered_characters == covered
    got = character_margins(starts, ends, scores, [float(control)], log10=True, document_length=length)
    np.testing.assert_array_equal(got, margins)


# --- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"starts": [0, 5], "ends": [5, 5]}, "window 1 has start 5 >= end 5"),
        ({"starts": [-1, 0], "ends": [5, 6]}, r"starts\[0\] is -1"),
        ({"starts": [0.5, 0], "ends": [5, 6]}, r"starts\[0\] is 0.5"),
        ({"starts": ["a", "b"], "ends": [5, 6]}, "starts must hold integer"),
        ({"ends": [5, 6, 7]}, "starts, ends and scores"),
        ({"scores": [0.1, float("nan")]}, r"scores\[1\] is .*nan"),
        ({"scores": [0.1, 0.0]}, r"scores\[1\] is 0.0.*log10=True"),
        ({"scores": [0.1, 1.5]}, r"scores\[1\] is 1.5"),
        ({"scores": [-1.0, 0.5], "control_scores": [-3.0], "log10": True}, r"scores\[1\] is 0.5"),
        ({"control_scores": []}, "control_scores is empty"),
        ({"control_scores": [2.0]}, r"control_scores\[0\] is 2.0"),
        ({"document_length": 5}, "document_length is 5 but window 1 ends at 6"),
        ({"document_length": 0}, "document_length"),
        ({"budget": 0}, "budget"),
        ({"budget": 1.5}, "budget"),
        ({"budget": float("inf")}, "budget"),
        ({"budget": 10, "budget_confidence": 1.0}, "budget_confidence"),
        ({"log10": "yes"}, "log10"),
    ],
)
def test_bad_input_names_the_parameter(kwargs: dict, match: str) -> None:
    args = {"starts": [0, 1], "ends": [5, 6], "scores": [0.1, 0.2], "control_scores": [1e-3]}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        census(**args)


def test_no_windows_needs_a_document_length() -> None:
    with pytest.raises(ValueError, match="document_length is required"):
        census([], [], [], [1e-3])
    with pytest.raises(ValueError, match="document_length is required"):
        character_margins([], [], [], [1e-3])


def test_census_threshold_validates() -> None:
    with pytest.raises(ValueError, match="control_scores is empty"):
        census_threshold([])
    with pytest.raises(ValueError, match=r"control_scores\[0\] is 0.5; log10 scores"):
        census_threshold([0.5], log10=True)
    assert isinstance(census_threshold([0.5]), CensusThreshold)
