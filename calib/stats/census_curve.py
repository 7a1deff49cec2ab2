"""Census views beyond one threshold: coverage versus the margin Δ, and the coverage of any set of windows.

* **Coverage versus Δ** (extraction paper §5, App. E.2, Figure 6's margin plots): the share of the
  document's characters covered by windows scoring strictly above 10^Δ·τ, i.e. whose margin
  log10(score / τ) exceeds Δ. A character counts at Δ exactly when its margin — the largest margin of
  the windows covering it (:func:`calib.stats.character_margins`) — exceeds Δ, so the curve is the
  survival function of the per-character margins: at Δ = 0 it is the census coverage, and it never
  rises as Δ grows (raising a threshold can only remove windows).
* **Window coverage**: the characters inside the union of a chosen set of windows — e.g. the windows whose
  greedy continuation reproduces the suffix (deterministic recovery, App. F.4), or those above a shared
  threshold τ_global (§5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from calib.stats._checks import check_finite_array
from calib.stats.census import _union_length, _windows, character_margins
from calib.stats.census_threshold import CensusThreshold, _threshold_of
from calib.stats.result import Result

__all__ = ["CoverageCurve", "coverage_by_margin", "window_coverage"]


@dataclass(frozen=True)
class CoverageCurve(Result):
    """A document's census coverage as a function of the margin Δ above its threshold.

    Attributes
    ----------
    log10_threshold : int
        The threshold's exponent e (τ = 10^e); Δ is measured from it.
    document_length : int
        Characters in the document (the denominator of every coverage).
    deltas : tuple of float
        The margins Δ asked for, in the order given.
    covered_characters : tuple of int
        Per Δ: characters inside at least one window scoring strictly above 10^(e + Δ).
    coverage : tuple of float
        Per Δ: ``covered_characters / document_length``.
    method : str
        How the curve was computed.
    """

    log10_threshold: int
    document_length: int
    deltas: tuple[float, ...]
    covered_characters: tuple[int, ...]
    coverage: tuple[float, ...]
    method: str = "coverage of windows with log10(score / threshold) > delta"


def coverage_by_margin(
    starts: ArrayLike,
    ends: ArrayLike,
    scores: ArrayLike,
    control_scores: ArrayLike | CensusThreshold,
    deltas: ArrayLike,
    *,
    log10: bool = False,
    document_length: int | None = None,
) -> CoverageCurve:
    """Census coverage at each margin Δ: the share of characters covered by windows scoring > 10^Δ·τ.

    Parameters
    ----------
    starts, ends, scores, control_scores, log10, document_length
        As for :func:`calib.stats.census` (``control_scores`` may be a :class:`CensusThreshold`, e.g. a
        shared τ_global).
    deltas : array_like of float
        The margins Δ (orders of magnitude above τ; finite, any order; Δ = 0 gives the census coverage).

    Returns
    -------
    CoverageCurve

    Raises
    ------
    ValueError
        As for :func:`calib.stats.census`; naming ``deltas`` when it is empty or not finite.

    Notes
    -----
    One segment-tree pass paints the per-character margins (:func:`calib.stats.character_margins`),
    one sort orders them, and each Δ is a binary search: O(L log L + D log L) for L characters.

    References
    ----------
    A. F. Cooper et al., "Extractable Memorization From First Principles", arXiv:2607.12649, §5 (at Δ = 5,
    55.6 % of The Da Vinci Code still clears its threshold against 68.5 % at Δ = 0), App. E.2.
    """
    wanted = check_finite_array("deltas", deltas, allow_empty=False)
    thr = _threshold_of(control_scores, log10)
    margins = character_margins(starts, ends, scores, thr, log10=log10, document_length=document_length)
    ordered = np.sort(margins[~np.isnan(margins)])
    # characters whose margin is strictly greater than Δ: those after the last one <= Δ
    counts = ordered.size - np.searchsorted(ordered, wanted, side="right")
    length = int(margins.size)
    return CoverageCurve(
        log10_threshold=thr.log10_threshold,
        document_length=length,
        deltas=tuple(float(d) for d in wanted),
        covered_characters=tuple(int(c) for c in counts),
        coverage=tuple(int(c) / length for c in counts),
    )


def window_coverage(starts: ArrayLike, ends: ArrayLike, *, document_length: int) -> int:
    """Characters inside the union of the half-open windows ``[start, end)`` (any order, overlapping or not).

    Parameters
    ----------
    starts, ends : array_like of int
        Character offsets of the chosen windows, as for :func:`calib.stats.census`.
    document_length : int
        Characters in the document; every window must end within it.

    Returns
    -------
    int
        The number of covered characters (divide by ``document_length`` for the coverage).

    Raises
    ------
    ValueError
        As for :func:`calib.stats.census`: offsets negative or not integers, empty windows, windows past
        ``document_length``, arrays of different lengths.
    """
    s, e, _, _ = _windows(starts, ends, np.zeros(np.asarray(starts).shape), True, document_length)
    return _union_length(s, e)
