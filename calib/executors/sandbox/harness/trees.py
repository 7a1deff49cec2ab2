"""Lookups in a module's tree that every batch makes (runs inside the sandbox; stdlib only)."""

from __future__ import annotations

import ast

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

_BLOCKS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})


def last_class(tree: Any, name: str) -> Any:
    """The last class statement named ``name`` in :func:`ast.walk`'s (breadth-first) order, visiting the
    statements and the blocks that hold them only (a class is never inside an expression): ten times
    faster than walking every node, and every batch of a method asks it (:func:`.hints.constructor`)."""
    found, todo = None, [tree]
    for node in todo:  # breadth first: each node's blocks in its own field order, as ast.walk
        if type(node) is ast.ClassDef and node.name == name:
            found = node
        todo += [c for f in node._fields if f in _BLOCKS for c in getattr(node, f)]
    return found
