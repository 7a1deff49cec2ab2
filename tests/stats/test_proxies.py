"""Tests for calib.stats.proxies: ROC AUC, ROC curve, TPR at fixed FPR, proxy evaluation.

Reference values come from scipy.stats (mannwhitneyu, pearsonr, pointbiserialr), from O(n^2) /
per-threshold brute force written here, and from small cases computed by hand (arithmetic in comments).
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from calib.stats.proxies import (
    OperatingPoint,
    ProxyEvaluation,
    RocCurve,
    evaluate_proxy,
    roc_auc,
    roc_curve,
    tpr_at_fpr,
)


def brute_auc(scores, labels) -> float:
    """The pairwise definition: mean over (positive, negative) pairs of 1(s+ > s-) + 0.5 1(s+ = s-)."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=bool)
    pos, neg = s[y], s[~y]
    total = 0.0
    for a in pos:
        for b in neg:
            total += 1.0 if a > b else 0.5 if a == b else 0.0
    return total / (pos.size * neg.size)


def brute_operating_point(scores, labels, level: float) -> tuple[float, float, float]:
    """Try every threshold (+inf and each score): the largest TPR with FPR <= level, ties in TPR broken
    by the smallest FPR, then the largest threshold."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=bool)
    best = None
    for t in [math.inf, *np.unique(s)]:
        tpr = float(np.mean(s[y] >= t))
        fpr = float(np.mean(s[~y] >= t))
        if fpr <= level:
            key = (tpr, -fpr, t)
            if best is None or key > best:
                best = key
    assert best is not None
    return best[0], -best[1], best[2]


def tied_sample(rng: np.random.Generator, n: int, n_values: int = 7):
    """Scores on a coarse grid (many ties), labels correlated with the score, both classes present."""
    scores = rng.integers(0, n_values, size=n).astype(float) / (n_values - 1)
    labels = rng.random(n) < 0.2 + 0.6 * scores
    labels[0], labels[1] = True, False
    return scores, labels


# ---------------------------------------------------------------------------------------------- AUC


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auc_matches_mann_whitney_and_brute_force_with_ties(seed):
    rng = np.random.default_rng(seed)
    scores, labels = tied_sample(rng, 300)
    pos, neg = scores[labels], scores[~labels]
    # scipy.stats.mannwhitneyu(pos, neg).statistic is U for the first sample (ties count one half).
    u = stats.mannwhitneyu(pos, neg).statistic
    expected = u / (pos.size * neg.size)
    assert roc_auc(scores, labels) == pytest.approx(expected, abs=1e-12)
    assert roc_auc(scores, labels) == pytest.approx(brute_auc(scores, labels), abs=1e-12)


def test_auc_continuous_scores_against_brute_force():
    rng = np.random.default_rng(7)
    scores = rng.normal(size=400)
    labels = rng.random(400) < 1 / (1 + np.exp(-2 * scores))
    assert roc_auc(scores, labels) == pytest.approx(brute_auc(scores, labels), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=4), st.booleans()), min_size=2, max_size=25
    ).filter(lambda rows: len({lab for _, lab in rows}) == 2)
)
def test_auc_equals_brute_force_and_area_under_the_curve(rows):
    scores = [float(s) for s, _ in rows]
    labels = [lab for _, lab in rows]
    auc = roc_auc(scores, labels)
    assert auc == pytest.approx(brute_auc(scores, labels), abs=1e-12)
    # Ties are one diagonal step of the curve, so the trapezoidal area is the same number.
    curve = roc_curve(scores, labels)
    assert float(np.trapezoid(curve.tpr, curve.fpr)) == pytest.approx(auc, abs=1e-12)


def test_auc_of_constant_scores_is_one_half():
    assert roc_auc([0.3] * 5, [1, 0, 0, 1, 0]) == 0.5


def test_auc_perfect_and_reversed():
    assert roc_auc([0.9, 0.8, 0.1, 0.2], [1, 1, 0, 0]) == 1.0
    assert roc_auc([0.1, 0.2, 0.9, 0.8], [1, 1, 0, 0]) == 0.0


@pytest.mark.parametrize(
    ("scores", "labels", "expected"),
    [
        ([0.2, 0.7], [0, 1], 1.0),  # the one pair is ordered correctly
        ([0.7, 0.2], [0, 1], 0.0),  # ... incorrectly
        ([0.5, 0.5], [True, False], 0.5),  # a tie counts one half
    ],
)
def test_auc_two_samples(scores, labels, expected):
    assert roc_auc(scores, labels) == expected


@pytest.mark.parametrize(
    ("labels", "message"),
    [([0, 0, 0], "no positives"), ([1, 1, 1], "no negatives")],
)
def test_auc_rejects_a_missing_class(labels, message):
    with pytest.raises(ValueError, match=message):
        roc_auc([0.1, 0.2, 0.3], labels)


@pytest.mark.parametrize(
    ("scores", "labels", "message"),
    [
        ([0.1, float("nan"), 0.3], [0, 1, 1], r"scores\[1\] is .*nan"),
        ([0.1, 0.2, float("inf")], [0, 1, 1], r"scores\[2\] is .*inf"),
        ([0.1, 0.2, 0.3], [0, 1, 2], r"labels\[2\] is 2"),
        ([0.1, 0.2, 0.3], [0.0, 0.5, 1.0], r"labels\[1\] is 0.5"),
        ([0.1, 0.2, 0.3], [0, float("nan"), 1], r"labels\[1\] is nan"),
        ([0.1, 0.2, 0.3], ["no", "yes", "yes"], r"labels\[0\] is 'no'"),
        ([0.1, 0.2, 0.3], [0, 1], "same length"),
        ([[0.1, 0.2]], [0, 1], "one-dimensional"),
        ([], [], "scores is empty"),
    ],
)
def test_bad_input_is_named(scores, labels, message):
    with pytest.raises(ValueError, match=message):
        roc_auc(scores, labels)
    with pytest.raises(ValueError, match=message):
        evaluate_proxy(scores, labels)


# ---------------------------------------------------------------------------------------- ROC curve


def test_roc_curve_by_hand():
    scores = [0.9, 0.8, 0.8, 0.3, 0.1]
    labels = [1, 1, 0, 0, 1]  # 3 positives, 2 negatives
    curve = roc_curve(scores, labels)
    # t = inf: nothing flagged.            (fpr, tpr) = (0, 0)
    # t = 0.9: {0.9+}                      -> (0/2, 1/3)
    # t = 0.8: + the tied {0.8+, 0.8-}     -> (1/2, 2/3)  (one diagonal step)
    # t = 0.3: + {0.3-}                    -> (2/2, 2/3)
    # t = 0.1: + {0.1+}                    -> (2/2, 3/3)
    np.testing.assert_array_equal(curve.thresholds, [np.inf, 0.9, 0.8, 0.3, 0.1])
    np.testing.assert_allclose(curve.fpr, [0, 0, 0.5, 1, 1])
    np.testing.assert_allclose(curve.tpr, [0, 1 / 3, 2 / 3, 2 / 3, 1])
    assert (curve.n_positive, curve.n_negative) == (3, 2)
    fpr, tpr, thr = curve.log_points()
    np.testing.assert_allclose(fpr, [0.5, 1, 1])
    np.testing.assert_allclose(tpr, [2 / 3, 2 / 3, 1])
    np.testing.assert_array_equal(thr, [0.8, 0.3, 0.1])


def test_roc_curve_matches_per_threshold_counts():
    rng = np.random.default_rng(3)
    scores, labels = tied_sample(rng, 200, n_values=11)
    curve = roc_curve(scores, labels)
    assert curve.thresholds[0] == np.inf
    assert np.all(np.diff(curve.thresholds) < 0)
    assert (curve.fpr[0], curve.tpr[0], curve.fpr[-1], curve.tpr[-1]) == (0, 0, 1, 1)
    assert curve.thresholds.size == np.unique(scores).size + 1
    for t, fpr, tpr in zip(curve.thresholds, curve.fpr, curve.tpr):
        assert fpr == pytest.approx(np.mean(scores[~labels] >= t), abs=1e-15)
        assert tpr == pytest.approx(np.mean(scores[labels] >= t), abs=1e-15)


def test_roc_curve_is_read_only_and_tabular():
    curve = roc_curve([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    assert isinstance(curve, RocCurve)
    with pytest.raises(ValueError):
        curve.fpr[0] = 0.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        curve.n_positive = 3  # type: ignore[misc]
    frame = curve.to_frame()
    assert frame.columns == ["threshold", "fpr", "tpr"]
    assert frame.height == 5
    json.dumps(curve.to_dict())  # +inf becomes null


# ----------------------------------------------------------------------------------- TPR at FPR


HAND_SCORES = [0.95, 0.9, 0.7, 0.4] + [0.9, 0.8, 0.6, 0.5, 0.3, 0.3, 0.2, 0.1, 0.1, 0.0]
HAND_LABELS = [1, 1, 1, 1] + [0] * 10
# 4 positives, 10 negatives. Operating points of "score >= t":
#   t = inf : tp 0, fp 0 -> (fpr, tpr) = (0.0, 0.00)
#   t = 0.95: tp 1, fp 0 -> (0.0, 0.25)
#   t = 0.9 : tp 2, fp 1 -> (0.1, 0.50)   the positive at 0.9 is tied with a negative
#   t = 0.8 : tp 2, fp 2 -> (0.2, 0.50)
#   t = 0.7 : tp 3, fp 2 -> (0.2, 0.75)
#   t = 0.6 : tp 3, fp 3 -> (0.3, 0.75)
#   t = 0.5 : tp 3, fp 4 -> (0.4, 0.75)
#   t = 0.4 : tp 4, fp 4 -> (0.4, 1.00)


@pytest.mark.parametrize(
    ("level", "tpr", "fpr", "threshold"),
    [
        (0.0, 0.25, 0.0, 0.95),  # no false positive allowed
        (0.05, 0.25, 0.0, 0.95),  # 0.05 < 1/10: still none; the 0.9 tie cannot be split
        (0.1, 0.50, 0.1, 0.9),  # the boundary fpr = level is admitted
        (0.25, 0.75, 0.2, 0.7),
        (0.35, 0.75, 0.2, 0.7),  # t = 0.6 also has tpr 0.75 but fpr 0.3: the smaller fpr is reported
        (0.4, 1.0, 0.4, 0.4),
        (1.0, 1.0, 0.4, 0.4),
    ],
)
def test_tpr_at_fpr_by_hand(level, tpr, fpr, threshold):
    (point,) = tpr_at_fpr(HAND_SCORES, HAND_LABELS, levels=[level])
    assert point == OperatingPoint(level=level, tpr=tpr, fpr=pytest.approx(fpr), threshold=threshold)


def test_tpr_at_fpr_default_levels_and_order():
    points = tpr_at_fpr(HAND_SCORES, HAND_LABELS)
    assert [p.level for p in points] == [0.001, 0.01, 0.1]
    points = tpr_at_fpr(HAND_SCORES, HAND_LABELS, levels=(0.25, 0.0))
    assert [(p.level, p.tpr) for p in points] == [(0.25, 0.75), (0.0, 0.25)]
    (point,) = tpr_at_fpr(HAND_SCORES, HAND_LABELS, levels=0.1)
    assert point.tpr == 0.5


def test_tpr_at_fpr_nothing_within_level_gives_the_empty_classifier():
    # The top score is a negative: any threshold that flags something has fpr >= 1/3 > 0.1.
    (point,) = tpr_at_fpr([0.9, 0.5, 0.4, 0.3], [0, 1, 0, 0], levels=[0.1])
    assert (point.tpr, point.fpr, point.threshold) == (0.0, 0.0, math.inf)


@pytest.mark.parametrize("seed", range(4))
def test_tpr_at_fpr_matches_brute_force_over_thresholds(seed):
    rng = np.random.default_rng(seed)
    scores, labels = tied_sample(rng, 150, n_values=9)
    n_neg = int((~labels).sum())
    # Levels on, just below and just above the FPR grid k / n_neg, plus the paper's levels.
    levels = [0.0, 0.001, 0.01, 0.1, 1.0] + [k / n_neg for k in (1, 5, 17)]
    levels += [k / n_neg - 1e-9 for k in (1, 5, 17)] + [0.3, 0.5, 0.77]
    for point in tpr_at_fpr(scores, labels, levels=levels):
        tpr, fpr, threshold = brute_operating_point(scores, labels, point.level)
        assert point.tpr == pytest.approx(tpr, abs=1e-15)
        assert point.fpr == pytest.approx(fpr, abs=1e-15)
        assert point.threshold == threshold
        assert point.fpr <= point.level


def test_tpr_at_fpr_two_samples():
    (point,) = tpr_at_fpr([0.2, 0.7], [0, 1], levels=[0.0])
    assert (point.tpr, point.fpr, point.threshold) == (1.0, 0.0, 0.7)
    (point,) = tpr_at_fpr([0.5, 0.5], [0, 1], levels=[0.5])
    assert (point.tpr, point.fpr, point.threshold) == (0.0, 0.0, math.inf)  # the tie moves as one


@pytest.mark.parametrize(
    ("levels", "message"),
    [
        ([-0.1], r"levels\[0\] must lie in \[0, 1\]"),
        ([0.01, 1.5], r"levels\[1\] must lie in \[0, 1\]"),
        ([float("nan")], r"levels\[0\]"),
        ([], "levels is empty"),
        (["0.1"], r"levels\[0\] must be a number"),
        (None, "levels must be a number or a sequence"),
    ],
)
def test_tpr_at_fpr_rejects_bad_levels(levels, message):
    with pytest.raises(ValueError, match=message):
        tpr_at_fpr(HAND_SCORES, HAND_LABELS, levels=levels)


# ------------------------------------------------------------------------------------ evaluate_proxy


def test_evaluate_proxy_fields():
    rng = np.random.default_rng(11)
    sim_func = np.clip(rng.normal(0.3, 0.3, size=500), 0.0, 1.0)
    labels = sim_func >= 0.8
    scores = sim_func + rng.normal(0, 0.2, size=500)
    result = evaluate_proxy(scores, labels, reference=sim_func, levels=(0.01, 0.1))
    assert isinstance(result, ProxyEvaluation)
    assert (result.n, result.n_positive, result.n_negative) == (500, labels.sum(), (~labels).sum())
    # Reference value: scipy.stats.pearsonr(scores, sim_func).statistic
    assert result.pearson_r == pytest.approx(stats.pearsonr(scores, sim_func).statistic, abs=1e-12)
    assert result.auc == roc_auc(scores, labels)
    assert result.operating_points == tpr_at_fpr(scores, labels, levels=(0.01, 0.1))
    np.testing.assert_array_equal(result.roc.fpr, roc_curve(scores, labels).fpr)


def test_evaluate_proxy_default_reference_is_point_biserial():
    rng = np.random.default_rng(12)
    scores, labels = tied_sample(rng, 80)
    result = evaluate_proxy(scores, labels)
    # Reference value: scipy.stats.pointbiserialr(labels, scores).statistic (= pearsonr on 0/1).
    assert result.pearson_r == pytest.approx(stats.pointbiserialr(labels, scores).statistic, abs=1e-12)


def test_evaluate_proxy_constant_scores_is_nan_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = evaluate_proxy([0.4] * 6, [1, 0, 1, 0, 0, 0])
        by_reference = evaluate_proxy([0.1, 0.5, 0.4, 0.2], [1, 0, 1, 0], reference=[0.7] * 4)
    assert math.isnan(result.pearson_r)
    assert result.auc == 0.5
    # Only the empty and the all-flagging classifiers exist: tpr 0 below fpr 1.
    assert [p.tpr for p in result.operating_points] == [0.0, 0.0, 0.0]
    assert math.isnan(by_reference.pearson_r)
    assert result.to_dict()["pearson_r"] is None


def test_evaluate_proxy_two_samples():
    result = evaluate_proxy([0.2, 0.7], [False, True])
    # With two points the correlation of the scores with 0/1 labels is +1.
    assert (result.n, result.auc, result.pearson_r) == (2, 1.0, pytest.approx(1.0))


@pytest.mark.parametrize(
    ("reference", "message"),
    [([0.1, 0.2], "same length"), ([0.1, float("nan"), 0.3], r"reference\[1\] is .*nan")],
)
def test_evaluate_proxy_rejects_bad_reference(reference, message):
    with pytest.raises(ValueError, match=message):
        evaluate_proxy([0.1, 0.2, 0.3], [0, 1, 1], reference=reference)


def test_evaluate_proxy_frame_and_dict():
    result = evaluate_proxy(HAND_SCORES, HAND_LABELS, levels=(0.0, 0.1, 0.25))
    frame = result.to_frame()
    assert frame.schema == pl.Schema(
        {"level": pl.Float64, "tpr": pl.Float64, "fpr": pl.Float64, "threshold": pl.Float64}
    )
    assert frame["tpr"].to_list() == [0.25, 0.5, 0.75]
    assert frame["threshold"].to_list() == [0.95, 0.9, 0.7]
    data = result.to_dict()
    json.dumps(data)
    assert data["operating_points"][1] == {"level": 0.1, "tpr": 0.5, "fpr": 0.1, "threshold": 0.9}
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.auc = 1.0  # type: ignore[misc]


# ------------------------------------------------------ scikit-learn against the previous hand-written code


def handwritten_curve(scores, labels):
    """The hand-written curve calib used before scikit-learn: one point per distinct score, ties crossed together."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=bool)
    order = np.argsort(-s, kind="stable")
    s_sorted, y_sorted = s[order], y[order]
    tp, fp = np.cumsum(y_sorted), np.cumsum(~y_sorted)
    last = np.flatnonzero(np.append(s_sorted[1:] != s_sorted[:-1], True))
    return (np.concatenate(([0.0], fp[last] / fp[-1])), np.concatenate(([0.0], tp[last] / tp[-1])),
            np.concatenate(([np.inf], s_sorted[last])))


def handwritten_auc(scores, labels) -> float:
    """The hand-written AUC calib used before scikit-learn: U from average ranks over n+ n-."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=bool)
    n_pos = int(y.sum())
    u = float(stats.rankdata(s, method="average")[y].sum()) - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * (y.size - n_pos))


@pytest.mark.parametrize("seed", range(6))
def test_sklearn_curve_and_auc_equal_the_handwritten_computation(seed):
    rng = np.random.default_rng(100 + seed)
    # half the seeds on a coarse grid (many ties), half continuous (no ties)
    scores, labels = tied_sample(rng, 250) if seed % 2 else (rng.random(250), rng.random(250) < 0.3)
    labels[0], labels[1] = True, False
    curve = roc_curve(scores, labels)
    fpr, tpr, thresholds = handwritten_curve(scores, labels)
    np.testing.assert_array_equal(curve.thresholds, thresholds)
    np.testing.assert_allclose(curve.fpr, fpr, rtol=0, atol=1e-15)
    np.testing.assert_allclose(curve.tpr, tpr, rtol=0, atol=1e-15)
    assert curve.thresholds[0] == math.inf and np.all(np.diff(curve.thresholds) < 0)
    assert (curve.n_positive, curve.n_negative) == (int(labels.sum()), int((~labels).sum()))
    pos, neg = scores[labels], scores[~labels]
    # independent: scipy.stats.mannwhitneyu(pos, neg).statistic is U of the positives, ties one half
    mann_whitney = stats.mannwhitneyu(pos, neg).statistic / (pos.size * neg.size)
    assert roc_auc(scores, labels) == pytest.approx(handwritten_auc(scores, labels), abs=1e-12)
    assert roc_auc(scores, labels) == pytest.approx(mann_whitney, abs=1e-12)
    # ties are flagged together: one point per distinct score, plus (0, 0) at +inf
    assert curve.thresholds.size == np.unique(scores).size + 1
