"""The census threshold: the largest control-window score rounded up to the next power of ten (App. E.1).

Scores are handled as log10 values (probabilities are converted, log10 scores snapped to an exact power
of ten when within a few ulps of one); :mod:`calib.stats.census` (whose module docstring states the
census's rules) compares every window with this threshold and re-exports both public names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from calib.stats._checks import check_finite_array
from calib.stats.result import Result

__all__ = ["CensusThreshold", "census_threshold"]


# _POWERS[k + 324] is the double nearest to 10**k (0.0 for k = -324), the value a decimal literal
# such as 1e-21 denotes; an "exact power of ten" is a probability equal to one of these.
_MIN_EXPONENT = -324
_POWERS = np.array([float(f"1e{k}") for k in range(_MIN_EXPONENT, 1)])

# log10 scores within this many units in the last place of an integer are taken to be that integer,
# so that log10(1e-21) computed in floating point still names an exact power of ten.
_SNAP_ULPS = 4.0


def _power_of_ten(exponent: int) -> float:
    """10**exponent as the nearest double; 0.0 where it underflows (exponent < -323)."""
    return float(f"1e{exponent}")


def _log10_of_probabilities(name: str, p: NDArray[np.float64]) -> NDArray[np.float64]:
    """log10 of probabilities in (0, 1], exact where it matters: compared with any integer k, the
    result is <, = or > k exactly when ``p`` is <, = or > the double nearest to 10**k."""
    bad = (p <= 0.0) | (p > 1.0)
    if bad.any():
        i = int(np.argmax(bad))
        hint = " (pass log10 scores with log10=True when probabilities underflow)" if p[i] == 0 else ""
        raise ValueError(f"{name}[{i}] is {float(p[i])!r}; probabilities must lie in (0, 1]{hint}")
    out = np.log10(p)
    # Only the integer nearest to a log10 value can be misordered by rounding; fix the order there.
    r = np.rint(out)
    power = _POWERS[(np.clip(r, _MIN_EXPONENT, 0) - _MIN_EXPONENT).astype(np.intp)]
    out = np.where(p == power, r, out)
    out = np.where((p < power) & (out >= r), np.nextafter(r, -np.inf), out)
    out = np.where((p > power) & (out <= r), np.nextafter(r, np.inf), out)
    return out


def _snap_log10(name: str, scores: NDArray[np.float64]) -> NDArray[np.float64]:
    """Check log10 scores (<= 0) and snap those within a few ulps of an integer onto it."""
    bad = scores > 0.0
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name}[{i}] is {float(scores[i])!r}; log10 scores of probabilities must be <= 0")
    r = np.rint(scores)
    tol = _SNAP_ULPS * np.spacing(np.maximum(np.abs(r), 1.0))
    return np.where(np.abs(scores - r) <= tol, r, scores)


def _to_log10(name: str, scores: ArrayLike, log10: bool, *, allow_empty: bool) -> NDArray[np.float64]:
    arr = check_finite_array(name, scores, allow_empty=allow_empty)
    if not isinstance(log10, bool):
        raise ValueError(f"log10 must be True or False, got {log10!r}")
    return _snap_log10(name, arr) if log10 else _log10_of_probabilities(name, arr)


@dataclass(frozen=True)
class CensusThreshold(Result):
    """The census threshold set by a matched control document.

    Attributes
    ----------
    threshold : float
        10**``log10_threshold``; 0.0 when that underflows a double (exponent below -323), in which
        case use ``log10_threshold``.
    log10_threshold : int
        The threshold's exponent: the smallest integer e with 10**e >= the largest control score.
    max_control_score_log10 : float
        log10 of the largest control-window score.
    n_control_windows : int
        How many control windows were scored (after decontamination, which is the caller's job).
    method : str
        How the threshold was set.
    """

    threshold: float
    log10_threshold: int
    max_control_score_log10: float
    n_control_windows: int
    method: str = "max control-window score rounded up to a power of ten"

    def above(self, scores: ArrayLike, *, log10: bool = False) -> NDArray[np.bool_]:
        """Which of ``scores`` lie strictly above the threshold (probabilities, or log10 scores)."""
        values = _to_log10("scores", scores, log10, allow_empty=True)
        return values > self.log10_threshold


def census_threshold(control_scores: ArrayLike, *, log10: bool = False) -> CensusThreshold:
    """The census threshold: the largest control-window score rounded up to the next power of ten.

    A score that already is a power of ten (as a double: the value of the literal ``1e-21``) keeps
    its exponent; the next double above it moves up one power (extraction paper App. E.1).

    Parameters
    ----------
    control_scores : array_like
        Scores of every window of the decontaminated matched control document: probabilities in
        (0, 1], or log10 probabilities (<= 0) with ``log10=True``.
    log10 : bool, default False
        Whether the scores are log10 probabilities. log10 scores within 4 ulps of an integer count as
        that integer.

    Returns
    -------
    CensusThreshold

    Raises
    ------
    ValueError
        Naming ``control_scores`` when it is empty, not finite, or outside the allowed range.

    References
    ----------
    A. F. Cooper et al., "Extractable Memorization From First Principles", arXiv:2607.12649, §5 and
    App. E.1 (thresholds from 10^-27 to 10^-21 for Llama 3.1 70B on books).
    """
    values = _to_log10("control_scores", control_scores, log10, allow_empty=False)
    top = float(values.max())
    exponent = int(math.ceil(top))
    return CensusThreshold(
        threshold=_power_of_ten(exponent),
        log10_threshold=exponent,
        max_control_score_log10=top,
        n_control_windows=int(values.size),
    )


def _threshold_of(control_scores: ArrayLike | CensusThreshold, log10: bool) -> CensusThreshold:
    if isinstance(control_scores, CensusThreshold):
        return control_scores
    return census_threshold(control_scores, log10=log10)
