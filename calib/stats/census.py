"""The single-document census (docs/architecture.md "Statistics": Census and Budget; extraction paper §5, §6,
App. C, E.1, E.2 and F.1).

Every window of a document (a prefix and the suffix it should generate, located by half-open
character offsets ``[start, end)``; windows overlap) is scored by the probability that the extraction
procedure generates it. A matched control document (same author, published after the model's
training cutoff, its verified reused passages removed) is scored the same way, and

* the threshold is the largest control-window score rounded **up** to the next power of ten (a score
  that already is a power of ten stays), because mantissas of probabilities near 1e-20 and below are
  not reliable (App. E.1);
* a window is above the threshold when its score is strictly greater (ties are conservative);
* coverage is the share of the document's characters inside at least one window above the threshold;
  every window is scored, so coverage is exact, not an estimate (App. E);
* the margin of a window is log10(score / threshold); a character's margin is the largest margin of the
  windows covering it (App. D.5, E.2);
* a window is extractable within a budget of n queries at confidence c when 1 − (1 − p)^n ≥ c, i.e.
  p ≥ −expm1(log1p(−c)/n) ≈ −ln(1 − c)/n (§6, App. F.1).

The threshold is a measured maximum of overlapping, context-sharing windows, not an exchangeable rank:
unlike the conformal test it certifies no false-positive rate (App. C, App. G).

Scores as small as 1e-27 are routine, and products of token probabilities underflow, so everything is
computed on log10 scores; probabilities are accepted and converted, log10 scores are accepted as they
are (``log10=True``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from calib.stats._checks import check_confidence, check_count
from calib.stats.budget import log10_min_probability_within
from calib.stats.census_threshold import CensusThreshold, _threshold_of, _to_log10, census_threshold
from calib.stats.result import Result

__all__ = [
    "CensusResult",
    "CensusThreshold",
    "census",
    "census_threshold",
    "character_margins",
]


@dataclass(frozen=True)
class CensusResult(Result):
    """The census of one document against the threshold of its matched control.

    Attributes
    ----------
    threshold, log10_threshold, max_control_score_log10, n_control_windows
        As in :class:`CensusThreshold`.
    document_length : int
        Characters in the document (the denominator of every coverage).
    n_windows : int
        Windows scored in the document.
    windows_above : int
        Windows scoring strictly above the threshold.
    covered_characters : int
        Characters inside at least one window above the threshold.
    coverage : float
        ``covered_characters / document_length``.
    max_margin : float or None
        The largest window margin log10(score / threshold), negative when no window is above the
        threshold; ``None`` when the document has no windows.
    budget : int or None
        The query budget n, or ``None`` when no budget was asked for.
    budget_confidence : float or None
        The confidence c of generating a window at least once within ``budget`` queries.
    min_log10_score_within_budget : float or None
        log10 of the smallest probability p with 1 − (1 − p)^n >= c.
    windows_within_budget : int or None
        Windows above the threshold whose score is at least that probability.
    covered_characters_within_budget : int or None
        Characters inside at least one such window.
    coverage_within_budget : float or None
        ``covered_characters_within_budget / document_length``.
    method : str
        How the census was computed.
    """

    threshold: float
    log10_threshold: int
    max_control_score_log10: float
    n_control_windows: int
    document_length: int
    n_windows: int
    windows_above: int
    covered_characters: int
    coverage: float
    max_margin: float | None
    budget: int | None
    budget_confidence: float | None
    min_log10_score_within_budget: float | None
    windows_within_budget: int | None
    covered_characters_within_budget: int | None
    coverage_within_budget: float | None
    method: str = "census: character coverage of windows scoring > threshold"


def _offsets(name: str, values: ArrayLike) -> NDArray[np.int64]:
    """Return character offsets as a 1-D int64 array of non-negative integers."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind == "f":
        integral = np.isfinite(arr) & (arr == np.floor(arr))
        if not integral.all():
            i = int(np.argmin(integral))
            raise ValueError(f"{name}[{i}] is {arr[i].item()!r}; character offsets must be integers")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iu" and arr.size:
        raise ValueError(f"{name} must hold integer character offsets, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    negative = arr < 0
    if negative.any():
        i = int(np.argmax(negative))
        raise ValueError(f"{name}[{i}] is {int(arr[i])}; character offsets must be >= 0")
    return arr


def _windows(
    starts: ArrayLike, ends: ArrayLike, scores: ArrayLike, log10: bool, document_length: Any
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64], int]:
    """Validate the document's windows; return starts, ends, log10 scores and the document length."""
    s = _offsets("starts", starts)
    e = _offsets("ends", ends)
    values = _to_log10("scores", scores, log10, allow_empty=True)
    if not s.size == e.size == values.size:
        raise ValueError(
            f"starts, ends and scores must have one entry per window, got {s.size}, {e.size} and "
            f"{values.size} entries"
        )
    empty = s >= e
    if empty.any():
        i = int(np.argmax(empty))
        raise ValueError(
            f"window {i} has start {int(s[i])} >= end {int(e[i])}; windows are half-open character "
            f"ranges [start, end) and must not be empty"
        )
    if document_length is None:
        if s.size == 0:
            raise ValueError("document_length is required when the document has no windows")
        return s, e, values, int(e.max())
    length = check_count("document_length", document_length, minimum=1)
    if s.size and int(e.max()) > length:
        i = int(np.argmax(e))
        raise ValueError(
            f"document_length is {length} but window {i} ends at {int(e[i])}; every window must end "
            f"within the document"
        )
    return s, e, values, length


def _union_length(starts: NDArray[np.int64], ends: NDArray[np.int64]) -> int:
    """Characters inside the union of half-open intervals, by a sort and a running maximum."""
    if starts.size == 0:
        return 0
    if starts.size > 1 and not bool(np.all(starts[1:] >= starts[:-1])):
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    previous = np.empty_like(reach)
    previous[0] = starts[0]
    previous[1:] = reach[:-1]
    # Window i adds the characters from max(its start, the furthest earlier end) to the new furthest
    # end; reach is non-decreasing and each end exceeds its start, so no term is negative.
    return int((reach - np.maximum(starts, previous)).sum())


def census(
    starts: ArrayLike,
    ends: ArrayLike,
    scores: ArrayLike,
    control_scores: ArrayLike | CensusThreshold,
    *,
    log10: bool = False,
    document_length: int | None = None,
    budget: int | None = None,
    budget_confidence: float = 0.95,
) -> CensusResult:
    """Census of one document: the share of its characters covered by windows above the threshold.

    Parameters
    ----------
    starts, ends : array_like of int
        Character offsets of each window, half-open ``[start, end)``; windows may overlap, nest or
        touch and may come in any order.
    scores : array_like of float
        Each window's generation probability in (0, 1], or its log10 (<= 0) with ``log10=True``.
    control_scores : array_like of float or CensusThreshold
        Every window score of the decontaminated matched control document (same scale as
        ``scores``), or a threshold already computed by :func:`census_threshold`.
    log10 : bool, default False
        Whether ``scores`` (and ``control_scores``, when given as scores) are log10 probabilities.
    document_length : int, optional
        Characters in the document; defaults to the largest window end.
    budget : int, optional
        A query budget n: also report the coverage of windows above the threshold that are generated
        at least once in n queries with probability >= ``budget_confidence``.
    budget_confidence : float, default 0.95
        The confidence c for ``budget``, in (0, 1).

    Returns
    -------
    CensusResult

    Raises
    ------
    ValueError
        Naming the parameter: offsets that are negative, not integers, or give an empty window
        (start >= end); a window ending past ``document_length``; arrays of different lengths;
        scores that are not finite or not probabilities; empty ``control_scores``; a ``budget``
        below 1; a ``budget_confidence`` outside (0, 1).

    Notes
    -----
    O(W log W) for W windows (one sort, skipped when the windows come ordered by start); 10^6 windows
    take a fraction of a second.

    References
    ----------
    A. F. Cooper et al., "Extractable Memorization From First Principles", arXiv:2607.12649, §5
    (coverage), §6 and App. F.1 (budgets: p = 10^-21 needs about 3 × 10^21 queries for 95 %),
    App. E.1 (thresholds).
    """
    s, e, values, length = _windows(starts, ends, scores, log10, document_length)
    thr = _threshold_of(control_scores, log10)
    above = values > thr.log10_threshold
    covered = _union_length(s[above], e[above])

    n_budget: int | None = None
    conf: float | None = None
    min_log10: float | None = None
    within_count: int | None = None
    covered_within: int | None = None
    coverage_within: float | None = None
    if budget is not None:
        n_budget = check_count("budget", budget, minimum=1)
        conf = check_confidence(budget_confidence, "budget_confidence")
        min_log10 = log10_min_probability_within(n_budget, conf)
        within = above & (values >= min_log10)
        within_count = int(np.count_nonzero(within))
        covered_within = _union_length(s[within], e[within])
        coverage_within = covered_within / length
    else:
        check_confidence(budget_confidence, "budget_confidence")

    return CensusResult(
        threshold=thr.threshold,
        log10_threshold=thr.log10_threshold,
        max_control_score_log10=thr.max_control_score_log10,
        n_control_windows=thr.n_control_windows,
        document_length=length,
        n_windows=int(values.size),
        windows_above=int(np.count_nonzero(above)),
        covered_characters=covered,
        coverage=covered / length,
        max_margin=float(values.max()) - thr.log10_threshold if values.size else None,
        budget=n_budget,
        budget_confidence=conf,
        min_log10_score_within_budget=min_log10,
        windows_within_budget=within_count,
        covered_characters_within_budget=covered_within,
        coverage_within_budget=coverage_within,
    )


def _paint_max(
    starts: NDArray[np.int64], ends: NDArray[np.int64], values: NDArray[np.float64], length: int
) -> NDArray[np.float64]:
    """out[c] = max of ``values`` over the intervals covering c, −inf where none does.

    Each interval is split into the O(log L) canonical nodes of a segment tree over the characters
    (a loop over tree levels, vectorised over intervals); the maxima are then pushed from the root to
    the leaves, again one vectorised step per level.
    """
    depth = max(0, (length - 1).bit_length())
    size = 1 << depth
    tree = np.full(2 * size, -np.inf)
    lo, hi, v = starts + size, ends + size, values
    while lo.size:
        left = (lo & 1).astype(bool)
        np.maximum.at(tree, lo[left], v[left])
        lo = lo + left
        right = (hi & 1).astype(bool)
        hi = hi - right
        np.maximum.at(tree, hi[right], v[right])
        lo, hi = lo >> 1, hi >> 1
        keep = lo < hi
        lo, hi, v = lo[keep], hi[keep], v[keep]
    for level in range(depth):
        parents = tree[1 << level : 2 << level]
        children = tree[2 << level : 4 << level]
        np.maximum(children, np.repeat(parents, 2), out=children)
    return tree[size : size + length].copy()


def character_margins(
    starts: ArrayLike,
    ends: ArrayLike,
    scores: ArrayLike,
    control_scores: ArrayLike | CensusThreshold,
    *,
    log10: bool = False,
    document_length: int | None = None,
) -> NDArray[np.float64]:
    """Per-character margin: the largest log10(score / threshold) of the windows covering it.

    This is the heatmap of the extraction paper's App. E.2 (Figure 18): a character's margin is
    positive exactly when it counts towards the census coverage, and a margin of Δ means it is
    covered by a window scoring 10^Δ times the threshold.

    Parameters
    ----------
    starts, ends, scores, control_scores, log10, document_length
        As for :func:`census`.

    Returns
    -------
    numpy.ndarray
        ``document_length`` floats; NaN for characters no window covers.

    Raises
    ------
    ValueError
        As for :func:`census`.
    """
    s, e, values, length = _windows(starts, ends, scores, log10, document_length)
    thr = _threshold_of(control_scores, log10)
    painted = _paint_max(s, e, values - thr.log10_threshold, length)
    painted[np.isneginf(painted)] = np.nan
    return painted
