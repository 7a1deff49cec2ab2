"""``self`` attributes x reaches through its class's own methods (runs inside the sandbox; stdlib only).

x's body names only what it reads itself: ``m = self.match(reMain)`` reads nothing of ``self`` but the
method, while ``match`` reads ``self.subject`` and ``self.pos``, and every branch of x after it turns on
them. The methods of x's class (and of its bases in the file) that x calls, and the properties it reads,
are described as x's own body is (:func:`.hints.analyse`): the ``self`` attributes they use become
parameters of the input's ``self`` with the hints their use gives, and their literals join x's.
Only what the file context shows before x is there: a method defined after x is a stand-in.
"""

from __future__ import annotations

import ast

from . import hints
from .mutators import file_classes

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

#: Methods and properties described per x, the first ones x reaches (by their first use in x).
MAX_CALLEES = 6


def add_callees(info: hints.Hints, placed: Any) -> None:
    """Extend ``info.self_params`` (and its literals) with what x's callees on ``self`` use."""
    node = placed.node
    if not placed.classes or placed.kind not in ("method", "property") or not node.args.args:
        return
    me = node.args.args[0].arg
    methods = _methods(placed)
    if not methods:
        return
    reached: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == me \
                and sub.attr in methods and sub.attr != node.name and sub.attr not in reached:
            reached.append(sub.attr)
    for name in reached[:MAX_CALLEES]:
        callee = methods[name]
        if callee.args.args:
            hints.describe(callee, {}, info, callee.args.args[0].arg)


def _methods(placed: Any) -> dict[str, Any]:
    """Plain methods and properties of x's class and of its bases defined in the file, by name (the class's
    own first); static and class methods are left out (their first parameter is not ``self``)."""
    out: dict[str, Any] = {}
    for cls in file_classes(placed.tree, placed.classes[-1]):
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name not in out \
                    and not any(_decorator(d) in ("staticmethod", "classmethod") for d in stmt.decorator_list):
                out[stmt.name] = stmt
    return out


def _decorator(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
