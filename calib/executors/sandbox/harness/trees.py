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
    faster than walking every node, and every batch of a method asks it (:func:`.callees.constructor`)."""
    found, todo = None, [tree]
    for node in todo:  # breadth first: each node's blocks in its own field order, as ast.walk
        if type(node) is ast.ClassDef and node.name == name:
            found = node
        todo += [c for f in node._fields if f in _BLOCKS for c in getattr(node, f)]
    return found


def clone(node: Any) -> Any:
    """A deep copy of a syntax tree: its nodes and lists copied, every other value (names, constants,
    positions: all immutable) shared. What ``copy.deepcopy`` makes of a tree without its memo, whose
    ``id()`` calls each cost a call of the sandbox's audit hook: four to five times faster there."""
    if type(node) is list:
        return [clone(item) for item in node]
    if isinstance(node, ast.AST):
        new = node.__class__.__new__(node.__class__)
        new.__dict__.update({key: clone(value) for key, value in node.__dict__.items()})
        return new
    return node


def imports_before(tree: Any, target: Any) -> list[ast.stmt]:
    """The imports (and ``try`` statements of imports) before ``target`` in the block holding it, found
    through the blocks as :func:`last_class` goes."""
    todo = [tree]
    for node in todo:
        for block in (getattr(node, f) for f in node._fields if f in _BLOCKS):
            if any(s is target for s in block):
                return [s for s in block[:block.index(target)] if isinstance(s, ast.Import | ast.ImportFrom)
                        or type(s) is ast.Try and any(isinstance(b, ast.Import | ast.ImportFrom) for b in s.body)]
            todo += block
    return []
