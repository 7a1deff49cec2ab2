"""Text helpers shared by the native languages' signature parsers."""

from __future__ import annotations

import re

__all__ = ["split_top", "strip_comments"]


def strip_comments(source: str) -> str:
    """``source`` without ``//`` and ``/* */`` comments (string literals are not special-cased)."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)


def split_top(text: str, sep: str = ",") -> list[str]:
    """``text`` split at ``sep`` outside ``<>``, ``()`` and ``[]``."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == sep and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return [p.strip() for p in out]
