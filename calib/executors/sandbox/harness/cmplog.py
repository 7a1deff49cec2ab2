"""Comparison feedback for the input search (runs inside the sandbox; stdlib only).

While x is explored (never while it is measured), its two-operand comparisons are rewritten to
``__calib_cmp__(left, right, "Eq")``, which evaluates the comparison exactly as Python would and notes
the primitive operands it saw. The search adds them to its pools: a branch such as
``if key == self.name:`` or ``if size > len(buf):`` compares with values computed at run time, which no
literal in the source reveals (the idea of input-to-state correspondence in fuzzers such as
Redqueen, Aschermann et al., NDSS 2019). Replays run the code as written.

The recorder also keeps the operand *pairs*, of ``s.startswith(p)``/``s.endswith(p)`` and
``d.get(k)``/``d.pop(k)`` too (rewritten to ``__calib_cmp__.method(s, "startswith", p)``), and the operands
of chained comparisons (``"0" <= ch <= "9"``, each wrapped in ``__calib_cmp__.see``): when one side of
a comparison is found in an input value, the search rewrites that input to the other side
(:func:`.synth.replacements`), so ``if value[0] in "([":`` or ``if scheme == "data":`` is taken next.
"""

from __future__ import annotations

import ast
import operator

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

NAME = "__calib_cmp__"
LIMIT = 2000
OBSERVED: list[Any] = []
PAIR_LIMIT = 400
#: (kind, one side, other side) per comparison: ``eq`` (==, !=, an ``in`` container's members),
#: ``order`` (<, <=, >, >=), ``prefix``/``suffix`` (startswith/endswith), ``contains`` (``sub in text``)
PAIRS: list[tuple[str, Any, Any]] = []
_METHODS = {"startswith": "prefix", "endswith": "suffix", "get": "eq", "pop": "eq"}

_OPS = {
    "Eq": operator.eq, "NotEq": operator.ne, "Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt,
    "GtE": operator.ge, "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b,
}
_PRIMITIVE = (int, float, str, bytes)


def _note(value: Any) -> None:
    if type(value) in _PRIMITIVE and len(OBSERVED) < LIMIT:
        if not isinstance(value, str | bytes) or len(value) <= 80:
            OBSERVED.append(value)


def _pair(kind: str, a: Any, b: Any) -> None:
    # never raises: the recorder must not change what x does
    if len(PAIRS) >= PAIR_LIMIT or type(a) not in _PRIMITIVE or type(b) not in _PRIMITIVE:
        return
    if (type(a) in (str, bytes) and len(a) > 80) or (type(b) in (str, bytes) and len(b) > 80):
        return
    if type(a) is not type(b) or a != b:
        PAIRS.append((kind, a, b))


def compare(left: Any, right: Any, op: str) -> Any:
    """``left <op> right``, noting primitive operands (and a few members of a container for ``in``)."""
    _note(left)
    _note(right)
    if op in ("In", "NotIn") and type(right) in (list, tuple, set, frozenset, dict):
        for item in list(right)[:8]:
            _note(item)
            _pair("eq", left, item)
    elif op in ("In", "NotIn") and type(right) in (str, bytes) and type(left) is type(right):
        _pair("contains", left, right)
    elif op in ("Eq", "NotEq"):
        _pair("eq", left, right)
    elif op in ("Lt", "LtE", "Gt", "GtE") and type(left) in (int, float) and type(right) in (int, float):
        _pair("order", left, right)
    elif op in ("Lt", "LtE", "Gt", "GtE"):  # text and bytes: the other side itself is on the boundary
        _pair("eq", left, right)
    return _OPS[op](left, right)


def method(obj: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """``obj.name(*args, **kwargs)``, noting ``text.startswith(prefix)``/``endswith`` operands and the
    key a mapping was asked for (``options.get("mode")``) against the keys it has."""
    if type(obj) is dict and args and name in ("get", "pop"):
        _note(args[0])
        if type(args[0]) in _PRIMITIVE and args[0] not in obj:
            for key in list(obj)[:8]:
                _pair("eq", args[0], key)
    elif type(obj) in (str, bytes) and args and name in ("startswith", "endswith"):
        wanted = args[0] if isinstance(args[0], tuple) else (args[0],)
        for item in wanted[:4]:
            if type(item) is type(obj):
                _note(item)
                _pair(_METHODS[name], obj, item)
    return getattr(obj, name)(*args, **kwargs)


_CHAIN: list[Any] = [None]


def see(value: Any, position: int, op: str) -> Any:
    """An operand of a chained comparison (``a < b < c``), evaluated: noted, and paired with the one
    before it (Python evaluates the chain left to right and stops early, so the pairs are the ones made)."""
    _note(value)
    if position:
        kind = "order" if op in ("Lt", "LtE", "Gt", "GtE") and type(value) in (int, float) else "eq"
        _pair(kind, _CHAIN[0], value)
    _CHAIN[0] = value
    return value


compare.method = method  # type: ignore[attr-defined] # reached as ``__calib_cmp__.method``
compare.see = see  # type: ignore[attr-defined]


def take_pairs() -> list[tuple[str, Any, Any]]:
    """The operand pairs noted since the last call, each once."""
    seen = list(dict.fromkeys((kind, type(a), a, type(b), b) for kind, a, b in PAIRS))
    PAIRS.clear()
    return [(kind, a, b) for kind, _, a, _, b in seen]


def take() -> list[Any]:
    """The operands noted since the last call."""
    seen = list(dict.fromkeys((type(v), v) for v in OBSERVED))
    OBSERVED.clear()
    return [v for _, v in seen]


class _Instrument(ast.NodeTransformer):
    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        op = type(node.ops[0]).__name__
        if len(node.ops) > 1:  # ``"0" <= ch <= "9"``: operands noted as evaluated, the chain left as it is
            see = ast.Attribute(value=ast.Name(id=NAME, ctx=ast.Load()), attr="see", ctx=ast.Load())
            operands = [node.left, *node.comparators]
            ops = ["", *(type(o).__name__ for o in node.ops)]
            wrapped = [ast.copy_location(ast.Call(func=see, args=[e, ast.Constant(i), ast.Constant(o)], keywords=[]), e)
                       for i, (e, o) in enumerate(zip(operands, ops))]
            node.left, node.comparators = wrapped[0], wrapped[1:]
            return node
        if op not in _OPS:
            return node
        call = ast.Call(func=ast.Name(id=NAME, ctx=ast.Load()),
                        args=[node.left, node.comparators[0], ast.Constant(op)], keywords=[])
        return ast.copy_location(call, node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr not in _METHODS or not node.args or any(
                isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return node
        recorder = ast.Attribute(value=ast.Name(id=NAME, ctx=ast.Load()), attr="method", ctx=ast.Load())
        call = ast.Call(func=recorder, args=[func.value, ast.Constant(func.attr), *node.args], keywords=node.keywords)
        return ast.copy_location(call, node)


def instrument(node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    """Rewrite the comparisons in x's body in place (locations kept: coverage sees the same lines)."""
    transformer = _Instrument()
    node.body = [transformer.visit(stmt) for stmt in node.body]
    ast.fix_missing_locations(node)
