"""Validation at the public boundary of calib.stats.

Each check raises ``ValueError`` naming the parameter, the bad value and what is allowed. calib.stats
imports nothing else of calib, so the command line translates these errors at its seam.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "check_binary",
    "check_confidence",
    "check_count",
    "check_finite_array",
    "check_probability",
]


def check_probability(
    name: str, value: Any, *, allow_zero: bool = False, allow_one: bool = False
) -> float:
    """Return ``value`` as a float in (0, 1), with either end admitted on request."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    x = float(value)
    low_ok = x >= 0.0 if allow_zero else x > 0.0
    high_ok = x <= 1.0 if allow_one else x < 1.0
    if not (math.isfinite(x) and low_ok and high_ok):
        interval = ("[" if allow_zero else "(") + "0, 1" + ("]" if allow_one else ")")
        raise ValueError(f"{name} must lie in {interval}, got {value!r}")
    return x


def check_confidence(value: Any, name: str = "confidence") -> float:
    """Return a confidence level, a float strictly between 0 and 1 (e.g. 0.95)."""
    return check_probability(name, value)


def check_count(name: str, value: Any, *, minimum: int = 0) -> int:
    """Return ``value`` as an int >= ``minimum`` (integral floats such as 5.0 are accepted)."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if isinstance(value, numbers.Integral):
        n = int(value)
    elif isinstance(value, numbers.Real) and float(value).is_integer():
        n = int(value)
    else:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if n < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {n}")
    return n


def check_finite_array(name: str, values: ArrayLike, *, allow_empty: bool = False) -> NDArray[np.float64]:
    """Return ``values`` as a 1-D float64 array of finite numbers.

    The error names the first offending position, e.g. ``controls[17] is nan``.
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a sequence of numbers: {exc}") from exc
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0 and not allow_empty:
        raise ValueError(f"{name} is empty; at least one score is needed")
    finite = np.isfinite(arr)
    if not finite.all():
        i = int(np.argmin(finite))
        raise ValueError(f"{name}[{i}] is {arr[i]!r}; scores must be finite numbers")
    return arr


def check_binary(name: str, values: ArrayLike) -> NDArray[np.bool_]:
    """Return ``values`` as a 1-D bool array; only bools and the numbers 0 and 1 are admitted.

    The error names the first offending position, e.g. ``labels[3] is 2``.
    """
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty; at least one 0/1 value is needed")
    if arr.dtype == np.bool_:
        return arr.copy()
    if arr.dtype.kind in "iuf":
        ok = (arr == 0) | (arr == 1)
        if not ok.all():
            i = int(np.argmin(ok))
            raise ValueError(f"{name}[{i}] is {arr[i].item()!r}; {name} must be 0/1 or bool")
        return arr == 1
    # Object or string arrays: check element by element so the message names the bad one.
    out = np.empty(arr.size, dtype=np.bool_)
    for i, v in enumerate(arr.tolist()):
        if isinstance(v, bool) or (isinstance(v, numbers.Real) and v in (0, 1)):
            out[i] = bool(v)
        else:
            raise ValueError(f"{name}[{i}] is {v!r}; {name} must be 0/1 or bool")
    return out
