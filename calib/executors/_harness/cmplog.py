"""Comparison feedback for the input search (runs inside the sandbox; stdlib only).

While x is explored (never while it is measured), its two-operand comparisons are rewritten to
``__calib_cmp__(left, right, "Eq")``, which evaluates the comparison exactly as Python would and notes
the primitive operands it saw. The search adds them to its pools: a branch such as
``if key == self.name:`` or ``if size > len(buf):`` compares with values computed at run time, which no
literal in the source reveals (the idea of input-to-state correspondence in fuzzers such as
Redqueen, Aschermann et al., NDSS 2019). Replays run the code as written.
"""

from __future__ import annotations

import ast
import operator
from typing import Any

NAME = "__calib_cmp__"
LIMIT = 2000
OBSERVED: list[Any] = []

_OPS = {
    "Eq": operator.eq, "NotEq": operator.ne, "Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt,
    "GtE": operator.ge, "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b,
}
_PRIMITIVE = (int, float, str, bytes)


def _note(value: Any) -> None:
    if type(value) in _PRIMITIVE and len(OBSERVED) < LIMIT:
        if not isinstance(value, str | bytes) or len(value) <= 80:
            OBSERVED.append(value)


def compare(left: Any, right: Any, op: str) -> Any:
    """``left <op> right``, noting primitive operands (and a few members of a container for ``in``)."""
    _note(left)
    _note(right)
    if op in ("In", "NotIn") and type(right) in (list, tuple, set, frozenset, dict):
        for item in list(right)[:8]:
            _note(item)
    return _OPS[op](left, right)


def take() -> list[Any]:
    """The operands noted since the last call."""
    seen = list(dict.fromkeys((type(v), v) for v in OBSERVED))
    OBSERVED.clear()
    return [v for _, v in seen]


class _Instrument(ast.NodeTransformer):
    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        op = type(node.ops[0]).__name__
        if len(node.ops) != 1 or op not in _OPS:
            return node
        call = ast.Call(func=ast.Name(id=NAME, ctx=ast.Load()),
                        args=[node.left, node.comparators[0], ast.Constant(op)], keywords=[])
        return ast.copy_location(call, node)


def instrument(node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    """Rewrite the comparisons in x's body in place (locations kept: coverage sees the same lines)."""
    transformer = _Instrument()
    node.body = [transformer.visit(stmt) for stmt in node.body]
    ast.fix_missing_locations(node)
