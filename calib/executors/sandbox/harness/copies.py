"""Locals that only copy a parameter (runs inside the sandbox; stdlib only): :func:`copies`, for :mod:`.hints`."""

from __future__ import annotations

import ast

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any


def copies(body_nodes: list[ast.AST], subject: Any, params: dict[str, Any], self_name: str | None) -> None:
    """A local that only ever takes a parameter's value (``result = data``; each name of ``(longtext, shorttext) =
    (text1, text2)`` and ``(shorttext, longtext) = (text1, text2)``) describes that parameter by its use. Not a local
    bound to anything else anywhere in x (``name = s`` in one branch, ``name = match.group(1)`` in another)."""
    copied: dict[str, list[Any]] = {}
    stores: dict[str, int] = {}
    for n in body_nodes:
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            stores[n.id] = stores.get(n.id, 0) + 1
        if not isinstance(n, ast.Assign) or len(n.targets) != 1:
            continue
        target, value = n.targets[0], n.value
        pairs = [(target, value)] if isinstance(target, ast.Name) else []
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts))
        for t, v in pairs:
            if isinstance(t, ast.Name) and isinstance(v, ast.Name) and t.id not in params and t.id != self_name \
                    and (p := subject(v)) is not None:
                copied.setdefault(t.id, []).append(p)
    for name, sources in copied.items():
        if len(sources) == stores.get(name):
            subject.aliases.setdefault(name, sources[0])
