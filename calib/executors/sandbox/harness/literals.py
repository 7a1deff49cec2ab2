"""Literals mined from a function's source and its module (runs inside the sandbox; stdlib only): the texts
and numbers it compares with, and its module's constants, which seed the value pools (:mod:`.hints`)."""

from __future__ import annotations

import ast

from . import regexes
from .shapes import shaped

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any


def literal(node: ast.expr | None) -> tuple[bool, Any]:
    try:
        return (False, None) if node is None else (True, ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def mine(value: Any, hints: Any) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int) and abs(value) < 10**12:
        for v in (value, value - 1, value + 1):
            if v not in hints.ints and len(hints.ints) < 40:
                hints.ints.append(v)
    elif isinstance(value, float):
        for v in (value, value + 0.5, value - 0.5):
            if v not in hints.floats and len(hints.floats) < 20:
                hints.floats.append(v)
    elif isinstance(value, str) and len(value) <= 200 and value not in hints.strings and len(hints.strings) < 40:
        hints.strings.append(value)
        if "." in value[-6:] and " " not in value and "/" not in value[:1] and 1 < len(value) < 80:
            hints.files.append(value)


def mine_module(tree: ast.Module, hints: Any, limit: int = 30) -> None:
    """Literals of the module's constants (``LIMIT = 100``), after x's own: x often branches on them
    through a helper. Before them, strings the regular expressions x uses match and non-ASCII text
    (:func:`.regexes.samples`); first, texts in the shape x's parameters' names say (:func:`shaped`)."""
    count = 0
    hints.tree = tree
    hints.strings[:0] = [t for t in shaped(hints) if t not in hints.strings]
    if hints.node is not None:  # strings the patterns x uses match (and a near miss): .regexes, issue 24
        at = min(len(hints.strings), 8)
        hints.strings[at:at] = [s for s in regexes.samples(hints.node, tree) if s not in hints.strings]
    for stmt in tree.body:
        if count >= limit:
            return
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            ok, value = literal(stmt.value)
            if not ok:
                continue
            items = list(value.items()) if isinstance(value, dict) else value if isinstance(
                value, list | tuple | set | frozenset) else [value]
            for item in list(items)[:8]:
                for part in item if isinstance(item, tuple) else (item,):
                    mine(part, hints)
                    count += 1
