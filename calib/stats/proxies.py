"""How well a cheap similarity proxy recovers an execution-verified binary ground truth.

A proxy (textual, structural, embedding or LLM-judge similarity) gives every sample a continuous
``score``; execution gives it a binary ``label`` (e.g. ``1[SIM_func >= 0.8]``). The paper evaluates
proxies by Pearson correlation with the continuous execution similarity, ROC AUC, and the true
positive rate at fixed low false positive rates, with ROC curves drawn on log-log axes
(functional-memorization paper, Section 5.2, Figure 3 and Table 4).

The classifier behind every operating point is "flag when score >= t": samples that share a score are
always flagged together, so no point is interpolated or randomised between two thresholds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from numpy.typing import ArrayLike, NDArray

from calib.stats._checks import check_finite_array
from calib.stats.result import Result
from calib.stats.roc import (
    DEFAULT_LEVELS,
    OperatingPoint,
    RocCurve,
    _auc,
    _check_levels,
    _curve,
    _operating_points,
    _scores_and_labels,
    roc_auc,
    roc_curve,
    tpr_at_fpr,
)

__all__ = [
    "OperatingPoint",
    "ProxyEvaluation",
    "RocCurve",
    "evaluate_proxy",
    "roc_auc",
    "roc_curve",
    "tpr_at_fpr",
]


_OPERATING_POINT_SCHEMA = {
    "level": pl.Float64,
    "tpr": pl.Float64,
    "fpr": pl.Float64,
    "threshold": pl.Float64,
}


@dataclass(frozen=True, eq=False)
class ProxyEvaluation(Result):
    """How a proxy score recovers binary ground truth (functional-memorization paper, Section 5.2).

    Attributes
    ----------
    n, n_positive, n_negative
        Samples, and how many are labelled 1 and 0.
    pearson_r
        Pearson correlation of the scores with the reference (the continuous execution similarity
        when given, else the 0/1 labels, i.e. the point-biserial correlation). NaN when the scores or
        the reference are constant, where the correlation is undefined.
    auc
        ROC AUC, ties counted one half.
    operating_points
        One :class:`OperatingPoint` per requested FPR level, in the order asked.
    roc
        The full ROC curve.
    """

    n: int
    n_positive: int
    n_negative: int
    pearson_r: float
    auc: float
    operating_points: tuple[OperatingPoint, ...]
    roc: RocCurve

    def to_frame(self) -> pl.DataFrame:
        """The operating points as a Polars table with columns ``level``, ``tpr``, ``fpr``,
        ``threshold`` (one row per level; Table 4 of the functional-memorization paper)."""
        return pl.DataFrame(
            {k: [getattr(p, k) for p in self.operating_points] for k in _OPERATING_POINT_SCHEMA},
            schema=_OPERATING_POINT_SCHEMA,
        )


def _pearson(x: NDArray[np.float64], z: NDArray[np.float64]) -> float:
    # A constant input has no variance: the correlation is undefined, not 0.
    if np.ptp(x) == 0.0 or np.ptp(z) == 0.0:
        return math.nan
    xc = x - x.mean()
    zc = z - z.mean()
    r = float((xc / math.sqrt(float(xc @ xc))) @ (zc / math.sqrt(float(zc @ zc))))
    return min(1.0, max(-1.0, r))


def evaluate_proxy(
    scores: ArrayLike,
    labels: ArrayLike,
    *,
    reference: ArrayLike | None = None,
    levels: float | Sequence[float] = DEFAULT_LEVELS,
) -> ProxyEvaluation:
    """Evaluate a proxy score against execution ground truth: Pearson r, ROC AUC, TPR at fixed FPR.

    Parameters
    ----------
    scores
        The proxy's scores (e.g. CodeBLEU, an embedding cosine, an LLM judge's grade), finite.
    labels
        The binary ground truth, e.g. ``sim_func >= 0.8``; 0/1 or bool.
    reference
        The continuous ground truth for the Pearson correlation (the paper correlates each proxy with
        SIM_func in [0, 1]). When omitted, ``labels`` is used (point-biserial correlation).
    levels
        FPR levels for :func:`tpr_at_fpr`.

    Returns
    -------
    ProxyEvaluation
        ``pearson_r`` is NaN when the scores or the reference are constant (undefined correlation);
        AUC is 0.5 for constant scores.

    References
    ----------
    Functional-memorization paper, Section 5.2 (Figure 3, Table 4); Hanley & McNeil (1982);
    Pearson, K. (1895). Note on regression and inheritance in the case of two parents. Proc. R. Soc.
    Lond. 58, 240–242.
    """
    s, y = _scores_and_labels(scores, labels)
    parsed_levels = _check_levels(levels)
    if reference is None:
        ref = y.astype(np.float64)
    else:
        ref = check_finite_array("reference", reference)
        if ref.size != s.size:
            raise ValueError(
                f"reference must have the same length as scores, got {ref.size} and {s.size}"
            )
    roc = _curve(s, y)
    return ProxyEvaluation(
        n=int(s.size),
        n_positive=roc.n_positive,
        n_negative=roc.n_negative,
        pearson_r=_pearson(s, ref),
        auc=_auc(s, y),
        operating_points=_operating_points(roc, parsed_levels),
        roc=roc,
    )
