"""``calib.stats.coverage_by_margin`` and ``window_coverage`` against character-by-character painting.

The reference paints a boolean array one window at a time in plain Python (the definition of coverage in
the extraction paper §5: characters inside at least one window above the threshold), with the threshold
raised to 10^(e + Δ) for the margin Δ (App. E.2, Figure 6's margin plots).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from calib.stats import census, census_threshold, coverage_by_margin, window_coverage


def _painted(length: int, starts, ends, values, exponent: float) -> int:
    covered = np.zeros(length, dtype=bool)
    for s, e, v in zip(starts, ends, values):
        if v > exponent:
            covered[s:e] = True
    return int(covered.sum())


def test_a_small_document_by_hand():
    # threshold 10^-22 (control max 10^-22.5 rounded up); windows of margin 19, 12 and -3
    curve = coverage_by_margin([0, 5, 10], [10, 15, 20], [-3.0, -10.0, -25.0], [-22.5, -40.0], [0, 1, 12, 19, 30],
                               log10=True, document_length=25)
    assert curve.log10_threshold == -22 and curve.document_length == 25
    # Δ < 12: [0, 15); Δ = 12: only the margin-19 window [0, 10) (ties are not above); Δ = 19: nothing
    assert curve.covered_characters == (15, 15, 10, 0, 0)
    assert curve.coverage == pytest.approx((0.6, 0.6, 0.4, 0.0, 0.0))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_windows_match_painting_and_never_rise(seed):
    rng = np.random.default_rng(seed)
    length = 3000
    starts = rng.integers(0, length - 60, 400)
    ends = starts + rng.integers(1, 60, 400)
    values = rng.uniform(-40, -1, 400)
    controls = rng.uniform(-45, -20.3, 50)
    exponent = math.ceil(controls.max())  # the threshold by hand: the control maximum rounded up
    deltas = np.array([0.0, 0.5, 1.0, 2.5, 5.0, 7.0, 10.0, 19.0, 25.0])
    curve = coverage_by_margin(starts, ends, values, controls, deltas, log10=True, document_length=length)
    assert curve.log10_threshold == exponent
    expected = [_painted(length, starts, ends, values, exponent + d) for d in deltas]
    assert list(curve.covered_characters) == expected
    assert all(a >= b for a, b in zip(curve.coverage, curve.coverage[1:]))  # monotone non-increasing in Δ
    # Δ = 0 is the census coverage; a shared (higher) threshold object is accepted as is
    assert curve.coverage[0] == census(starts, ends, values, controls, log10=True, document_length=length).coverage
    shared = census_threshold([-5.2], log10=True)
    at_shared = coverage_by_margin(starts, ends, values, shared, [0.0], log10=True, document_length=length)
    assert at_shared.covered_characters == (_painted(length, starts, ends, values, -5),)


def test_probabilities_are_accepted_and_deltas_keep_their_order():
    curve = coverage_by_margin([0, 4], [4, 8], [1e-3, 1e-9], [1e-12], [5.0, 0.0, 9.5])
    assert curve.deltas == (5.0, 0.0, 9.5) and curve.covered_characters == (4, 8, 0)


def test_window_coverage_is_the_union_of_the_windows():
    rng = np.random.default_rng(7)
    starts = rng.integers(0, 900, 200)
    ends = starts + rng.integers(1, 100, 200)
    union: set[int] = set()
    for s, e in zip(starts, ends):
        union.update(range(s, e))
    assert window_coverage(starts, ends, document_length=1000) == len(union)
    assert window_coverage([], [], document_length=10) == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"deltas": []}, "deltas"),
    ({"deltas": [0.0, math.nan]}, "deltas"),
    ({"deltas": [0.0], "document_length": 5}, "document_length is 5"),
])
def test_bad_input_names_the_parameter(kwargs, message):
    args = {"starts": [0], "ends": [10], "scores": [-3.0], "control_scores": [-9.0], "log10": True, **kwargs}
    with pytest.raises(ValueError, match=message):
        coverage_by_margin(**args)


def test_window_coverage_refuses_a_window_past_the_document():
    with pytest.raises(ValueError, match="window 0 ends at 12"):
        window_coverage([2], [12], document_length=10)
