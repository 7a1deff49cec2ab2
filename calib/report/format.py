"""How the report writes numbers (percentages, intervals, similarities, counts), cell text and figure names."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["DASH", "SUFFIX_CHARS", "count", "figure_name", "fixed", "number", "pct", "pct_range", "plain_text", "power",
           "rate_cell", "rate_text", "setting_pct", "sim"]

#: What a cell shows where there is no value.
DASH = "–"


def pct(value: float | None) -> str:
    """A share as a percentage: one decimal, two significant digits below 0.1 %."""
    if value is None:
        return DASH
    percent = 100.0 * value
    if 0.0 < abs(percent) < 0.1:
        return f"{percent:.2g}%"
    return f"{percent:.1f}%"


def setting_pct(value: float | None) -> str:
    """A setting given as a share, as the shortest exact percentage (0.95 -> ``95%``, 0.975 -> ``97.5%``)."""
    return DASH if value is None else f"{100 * value:.10g}%"


def sim(value: float | None) -> str:
    """A similarity or correlation with three decimals (``–`` for none or NaN)."""
    return DASH if value is None or value != value else f"{value:.3f}"


def number(value: Any) -> str:
    """A count or setting as written (``–`` for none)."""
    if value is None:
        return DASH
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def rate_text(interval: dict[str, Any] | None, *, of: str = "samples") -> str:
    """``12.5% of samples (5/40; 95% CI 4.2%–26.8%)``, or a dash-explained line when undefined."""
    if interval is None:
        return f"undefined (no {of})"
    conf = setting_pct(interval["confidence"])
    return (f"{pct(interval['estimate'])} of {of} ({interval['k']}/{interval['n']}; {conf} CI "
            f"{pct(interval['low'])}–{pct(interval['high'])})")


def rate_cell(interval: dict[str, Any] | None) -> str:
    """A table cell: ``12.5% [4.2–26.8%] 5/40``."""
    if interval is None:
        return DASH
    return f"{pct(interval['estimate'])} [{pct(interval['low'])[:-1]}–{pct(interval['high'])}] " \
           f"{interval['k']}/{interval['n']}"


def power(log10_value: float | None, *, digits: int = 2) -> str:
    """A probability given by its log10 as a power of ten: ``10^-5.23``; ``0`` for −inf, ``1`` for 0."""
    if log10_value is None or log10_value != log10_value:
        return DASH
    if log10_value == float("-inf"):
        return "0"
    if log10_value == 0:
        return "1"
    if float(log10_value).is_integer():
        return f"10^{int(log10_value)}"
    return f"10^{log10_value:.{digits}f}"


def fixed(value: float | None, digits: int = 2) -> str:
    """A real number with ``digits`` decimals (``–`` for none or NaN), e.g. a margin in orders of magnitude."""
    return DASH if value is None or value != value else f"{value:.{digits}f}"


def pct_range(low: float | None, high: float | None) -> str:
    """An interval of shares as percentages: ``[0.032%, 0.2%]`` (``–`` when either end is missing)."""
    if low is None or high is None:
        return DASH
    return f"[{pct(low)}, {pct(high)}]"


def count(value: float | None) -> str:
    """A count that may be huge (a query budget): ``100000`` below a million, else ``3e21``."""
    if value is None:
        return DASH
    if float(value).is_integer() and abs(value) < 1e6:
        return str(int(value))
    mantissa, exponent = f"{value:.3g}".split("e") if "e" in f"{value:.3g}" else (f"{value:.3g}", "0")
    return f"{mantissa}e{int(exponent)}"


#: Characters of a suffix shown in a review table (summary.json keeps the whole text).
SUFFIX_CHARS = 240


def figure_name(*parts: str) -> str:
    """A figure's file name from its parts: lower case, runs of other characters as one hyphen."""
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")


def plain_text(text: str | None, limit: int = SUFFIX_CHARS) -> str:
    """Generated or document text for a table cell: newlines as ⏎, no inline marks, at most ``limit`` characters."""
    if text is None:
        return DASH
    out = text.replace("\r\n", "\n").replace("\n", "⏎").replace("`", "'").replace("**", "* *")
    return out if len(out) <= limit else out[:limit] + "…"
