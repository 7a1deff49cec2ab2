"""Printing text that came from untrusted code (a sandbox run, a generation, a compiler's complaint).

Human-readable output of ``calib compare``, ``calib similarity`` and ``calib executors ablate`` passes
every such string through :func:`shown`: a control character could otherwise move the cursor, rewrite
the line (``\\r``), start a new line that looks like calib's own (``\\nx.py: sim_func 1.00``), recolour
the terminal (ANSI escapes) or reorder what is shown (BiDi overrides), and a lone surrogate would make
the print itself fail. JSON output goes through :func:`json_text`: ASCII only (every non-ASCII
character, a lone surrogate included, is a ``\\uXXXX`` escape) and never ``NaN`` (not JSON: null).
See docs/cli.md ("Untrusted text in the output").
"""

from __future__ import annotations

import json
import math
import unicodedata
from typing import Any

__all__ = ["json_text", "shown"]

# Cc: C0, DEL and C1 controls (ESC starts every ANSI sequence); Cf: format characters (the BiDi
# embeddings, overrides and isolates, zero-width characters, the BOM); Cs: lone surrogates; Zl/Zp:
# the Unicode line and paragraph separators.
_UNSAFE = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(text: Any) -> str:
    """``text`` (made a string) fit for a terminal line: every control, format, separator and lone
    surrogate code point written as a visible ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN`` escape."""
    text = str(text)
    if text.isprintable():  # the common case: nothing to escape (every unsafe category is non-printable)
        return text
    return "".join(_escape(ch) if unicodedata.category(ch) in _UNSAFE else ch for ch in text)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def json_text(record: Any) -> str:
    """``record`` as one line of strict JSON: ASCII only (lone surrogates escaped, never a crash), and
    NaN or infinite numbers written as null."""
    return json.dumps(_finite(record), ensure_ascii=True, allow_nan=False)
