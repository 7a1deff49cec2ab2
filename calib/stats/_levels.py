"""Target levels of the conformal test: parsing α and K = floor(α(N+1)) with docs/architecture.md's tolerance."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np

from calib.stats._checks import check_count

__all__ = ["K_TOLERANCE", "conformal_k", "min_controls", "parse_alpha"]

#: Relative tolerance under which α(N+1) counts as the integer it rounds to (docs/architecture.md).
K_TOLERANCE = 1e-9

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_FRACTION = re.compile(rf"^\s*{_NUMBER}\s*/\s*\(?\s*{_NUMBER}\s*(?:\+\s*([0-9]+)\s*)?\)?\s*$")


def parse_alpha(alpha: float | str) -> float:
    """Return a target level α in (0, 1) from a number, a decimal string, or ``"k/(N+1)"``.

    ``"6/5001"``, ``"6/(5000+1)"`` and ``0.0011997600479904018`` all mean the same grid point.

    Raises
    ------
    ValueError
        If α is not a number or a fraction, or lies outside the open interval (0, 1).
    """
    value: float
    if isinstance(alpha, str):
        text = alpha.strip()
        match = _FRACTION.match(text)
        try:
            if match:
                num = Fraction(match.group(1))
                den = Fraction(match.group(2)) + (int(match.group(3)) if match.group(3) else 0)
                if den == 0:
                    raise ValueError
                value = float(num / den)
            else:
                value = float(text)
        except (ValueError, ZeroDivisionError):
            raise ValueError(
                f"alpha must be a decimal such as 0.001 or a fraction such as 6/5001, got {alpha!r}"
            ) from None
    elif isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating, np.integer)):
        raise ValueError(f"alpha must be a number in (0, 1), got {alpha!r}")
    else:
        value = float(alpha)
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise ValueError(f"alpha must lie in the open interval (0, 1), got {alpha!r}")
    return value


def conformal_k(alpha: float | str, n_controls: int) -> int:
    """K = floor(α (N + 1)), where α(N+1) within a relative 1e-9 of an integer counts as that integer.

    Examples
    --------
    >>> conformal_k(0.001, 5000)  # extraction paper App. C.1
    5
    >>> conformal_k(0.0011997600479904018, 5000)  # 6/5001 written as a rounded decimal
    6
    """
    a = parse_alpha(alpha)
    n = check_count("n_controls", n_controls, minimum=1)
    x = a * (n + 1)
    nearest = round(x)
    if nearest >= 1 and abs(x - nearest) <= K_TOLERANCE * nearest:
        return min(int(nearest), n)
    return min(math.floor(x), n)



def min_controls(alpha: float | str, k: int = 1) -> int:
    """The smallest number of controls N with conformal_k(alpha, N) ≥ ``k``.

    For k = 1 this is the fewest controls that certify ``alpha`` at all, ceil(1/α) − 1 up to the
    1e-9 tolerance (e.g. 999 for α = 0.001).
    """
    a = parse_alpha(alpha)
    k = check_count("k", k, minimum=1)
    n = max(k, math.ceil(k / a) - 2)
    while n > k and conformal_k(a, n - 1) >= k:
        n -= 1
    while conformal_k(a, n) < k:
        n += 1
    return n
