"""ROC analysis of a score against binary labels: the AUC, the curve and the operating points at fixed FPRs.

The classifier behind every operating point is "flag when score >= t": samples that share a score are
always flagged together, so no point is interpolated or randomised between two thresholds. The curve and
the AUC come from scikit-learn (``sklearn.metrics.roc_curve``, ``roc_auc_score``); the operating points are
read off that curve here. :mod:`calib.stats.proxies` evaluates similarity proxies with these and re-exports
every public name.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from numpy.typing import ArrayLike, NDArray

from calib.stats._checks import check_binary, check_finite_array, check_probability
from calib.stats.result import Result

__all__ = ["OperatingPoint", "RocCurve", "roc_auc", "roc_curve", "tpr_at_fpr"]


DEFAULT_LEVELS: tuple[float, ...] = (0.001, 0.01, 0.1)


def _scores_and_labels(
    scores: ArrayLike, labels: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    s = check_finite_array("scores", scores)
    y = check_binary("labels", labels)
    if s.size != y.size:
        raise ValueError(
            f"scores and labels must have the same length, got {s.size} scores and {y.size} labels"
        )
    n_pos = int(y.sum())
    if n_pos == 0:
        raise ValueError("labels has no positives (every label is 0); ROC needs both classes")
    if n_pos == y.size:
        raise ValueError("labels has no negatives (every label is 1); ROC needs both classes")
    return s, y


def _frozen(a: NDArray[np.float64]) -> NDArray[np.float64]:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class RocCurve(Result):
    """The empirical ROC curve of the classifier "score >= threshold".

    One point per distinct score, thresholds descending, starting at ``(fpr, tpr) = (0, 0)`` with
    threshold ``+inf`` and ending at ``(1, 1)`` with the smallest score. Arrays are read-only.

    Attributes
    ----------
    fpr, tpr
        False and true positive rate at each threshold (non-decreasing).
    thresholds
        The thresholds, strictly decreasing; the first is ``+inf``.
    n_positive, n_negative
        Number of positive and negative labels behind the rates.
    """

    fpr: NDArray[np.float64]
    tpr: NDArray[np.float64]
    thresholds: NDArray[np.float64]
    n_positive: int
    n_negative: int

    def log_points(self) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """``(fpr, tpr, thresholds)`` restricted to points with fpr > 0 and tpr > 0, for log-log axes
        (Figure 3(b) of the functional-memorization paper)."""
        keep = (self.fpr > 0) & (self.tpr > 0)
        return self.fpr[keep], self.tpr[keep], self.thresholds[keep]

    def to_frame(self) -> pl.DataFrame:
        """The curve as a Polars table with columns ``threshold``, ``fpr``, ``tpr``."""
        return pl.DataFrame(
            {"threshold": self.thresholds, "fpr": self.fpr, "tpr": self.tpr},
            schema={"threshold": pl.Float64, "fpr": pl.Float64, "tpr": pl.Float64},
        )


@dataclass(frozen=True)
class OperatingPoint(Result):
    """The best ROC operating point whose false positive rate does not exceed ``level``.

    Attributes
    ----------
    level
        The false positive rate asked for.
    tpr
        The largest true positive rate among operating points with ``fpr <= level``.
    fpr
        The false positive rate actually achieved there (``<= level``; often below it, because FPR
        moves in steps of 1/n_negative and tied scores move together).
    threshold
        The classifier flags ``score >= threshold``; ``+inf`` when only the empty classifier
        (tpr = fpr = 0) stays within the level.
    """

    level: float
    tpr: float
    fpr: float
    threshold: float


def roc_auc(scores: ArrayLike, labels: ArrayLike) -> float:
    """Area under the ROC curve, with tied scores counted one half.

    .. math::

        \\mathrm{AUC} = \\frac{1}{n_+ n_-} \\sum_{s^+} \\sum_{s^-}
        \\left[ 1(s^+ > s^-) + \\tfrac12\\, 1(s^+ = s^-) \\right]

    computed by :func:`sklearn.metrics.roc_auc_score` as the trapezoidal area under :func:`roc_curve`,
    which equals the Mann–Whitney statistic ``U = R_+ - n_+(n_+ + 1)/2`` over average ranks divided by
    ``n_+ n_-``.

    Parameters
    ----------
    scores
        Proxy scores, finite; higher means "more likely positive".
    labels
        Ground truth, 0/1 or bool, same length; both classes must be present.

    Returns
    -------
    float
        The AUC in [0, 1]; 0.5 for constant scores.

    Raises
    ------
    ValueError
        Non-finite scores (naming the index), labels other than 0/1, a length mismatch, or a class
        with no members.

    References
    ----------
    Hanley, J. A. & McNeil, B. J. (1982). The meaning and use of the area under a receiver operating
    characteristic (ROC) curve. Radiology 143(1), 29–36.
    Mann, H. B. & Whitney, D. R. (1947). On a test of whether one of two random variables is
    stochastically larger than the other. Ann. Math. Statist. 18(1), 50–60.
    Scale-aware diagnostics paper, Section 5.3 (the AUC formula with ties counted one half).
    """
    s, y = _scores_and_labels(scores, labels)
    return _auc(s, y)


def _auc(s: NDArray[np.float64], y: NDArray[np.bool_]) -> float:
    # scikit-learn's trapezoidal area under the curve of every distinct threshold: the Mann–Whitney
    # statistic U / (n_+ n_-) with ties counted one half (Hanley & McNeil 1982).
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, s))


def roc_curve(scores: ArrayLike, labels: ArrayLike) -> RocCurve:
    """The empirical ROC curve of the classifier "flag when score >= t", one point per distinct score.

    Point ``j`` has threshold ``t_j`` (the j-th largest distinct score; ``t_0 = +inf``),
    ``tpr_j = #{positives with score >= t_j} / n_+`` and
    ``fpr_j = #{negatives with score >= t_j} / n_-``.
    Samples with equal scores enter together, so a run of ties is a single (possibly diagonal) step.
    Computed by :func:`sklearn.metrics.roc_curve` with ``drop_intermediate=False``.

    Parameters
    ----------
    scores, labels
        As for :func:`roc_auc`.

    Returns
    -------
    RocCurve
        Use :meth:`RocCurve.log_points` for log-log plots (Figure 3(b) of the functional-memorization
        paper).

    References
    ----------
    Fawcett, T. (2006). An introduction to ROC analysis. Pattern Recognition Letters 27(8), 861–874.
    """
    s, y = _scores_and_labels(scores, labels)
    return _curve(s, y)


def _curve(s: NDArray[np.float64], y: NDArray[np.bool_]) -> RocCurve:
    from sklearn.metrics import roc_curve as sk_roc_curve

    # drop_intermediate=False keeps one point per distinct score: each run of tied scores is crossed in one
    # step, and the first point is (0, 0) at threshold +inf (scikit-learn >= 1.3).
    fpr, tpr, thresholds = sk_roc_curve(y, s, drop_intermediate=False)
    return RocCurve(
        fpr=_frozen(np.asarray(fpr, dtype=np.float64)),
        tpr=_frozen(np.asarray(tpr, dtype=np.float64)),
        thresholds=_frozen(np.asarray(thresholds, dtype=np.float64)),
        n_positive=int(y.sum()),
        n_negative=int(y.size - y.sum()),
    )


def _check_levels(levels: float | Sequence[float]) -> tuple[float, ...]:
    if isinstance(levels, numbers.Real) and not isinstance(levels, bool):
        levels = (levels,)
    try:
        items = tuple(levels)  # type: ignore[arg-type]
    except TypeError as exc:
        raise ValueError(f"levels must be a number or a sequence of numbers, got {levels!r}") from exc
    if not items:
        raise ValueError("levels is empty; give at least one false positive rate, e.g. (0.01,)")
    return tuple(
        check_probability(f"levels[{i}]", v, allow_zero=True, allow_one=True)
        for i, v in enumerate(items)
    )


def tpr_at_fpr(
    scores: ArrayLike,
    labels: ArrayLike,
    levels: float | Sequence[float] = DEFAULT_LEVELS,
) -> tuple[OperatingPoint, ...]:
    """True positive rate at fixed false positive rates (Table 4 of the functional-memorization paper).

    For each level α: the largest TPR among the ROC operating points of "score >= t" whose
    FPR <= α, with the threshold and FPR of that point. Where several thresholds reach that TPR the
    highest is reported (the smallest FPR). No interpolation between points and no randomisation
    within ties: every reported point is achievable by a fixed threshold.

    Parameters
    ----------
    scores, labels
        As for :func:`roc_auc`.
    levels
        One FPR level or a sequence of them, each in [0, 1]. Default (0.001, 0.01, 0.1).

    Returns
    -------
    tuple of OperatingPoint
        One per level, in the order given.

    Notes
    -----
    The achieved FPR moves in steps of 1/n_negative, so a level below 1/n_negative admits no false
    positive at all; with no positive scoring above every negative, the answer is then TPR = 0 at
    threshold +inf.

    References
    ----------
    Functional-memorization paper ("Detecting Functional Memorization in Code Language Models"),
    Section 5.2 and Table 4; Fawcett (2006), Section 4.
    """
    s, y = _scores_and_labels(scores, labels)
    return _operating_points(_curve(s, y), _check_levels(levels))


def _operating_points(roc: RocCurve, levels: tuple[float, ...]) -> tuple[OperatingPoint, ...]:
    points = []
    for level in levels:
        # fpr is non-decreasing along the curve, and (0, 0) always qualifies.
        j = int(np.searchsorted(roc.fpr, level, side="right")) - 1
        best_tpr = roc.tpr[j]
        # tpr is non-decreasing too: the first point reaching best_tpr has the highest threshold.
        k = int(np.searchsorted(roc.tpr, best_tpr, side="left"))
        points.append(
            OperatingPoint(
                level=level,
                tpr=float(roc.tpr[k]),
                fpr=float(roc.fpr[k]),
                threshold=float(roc.thresholds[k]),
            )
        )
    return tuple(points)
