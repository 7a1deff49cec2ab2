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

Beyond comparisons (issue 24): a ``pattern.match/search/fullmatch(s)`` (a compiled pattern, or
``re.match(p, s)``) that found nothing keeps ``("regex", s, (pattern, flags))``, and the search writes a
string the pattern matches in place of ``s`` (:mod:`.regexes`); ``len(e)``, ``ord(c)`` and ``int(s)`` in
x are rewritten to ``__calib_cmp__.size/code/number`` so that a comparison on their result (``len(doi)
!= 9``, ``ord(ch) < 0x80``) also keeps the text it came from (``len``, ``len_order``, ``ord``), and a
text ``int()`` refused is kept (``number``); ``s.isdigit()`` and the other ``str.is*`` checks keep
``("charclass", s, "isdigit")`` (``"!isdigit"`` when it held).
"""

from __future__ import annotations

import ast
import operator
import re as _re

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
_METHODS = {"startswith": "prefix", "endswith": "suffix", "get": "eq", "pop": "eq", "match": "regex",
            "search": "regex", "fullmatch": "regex"}
_CHECKS = frozenset({"isdigit", "isdecimal", "isnumeric", "isalpha", "isalnum", "isspace", "isupper", "islower",
                     "isascii", "isidentifier"})  # ``s.isdigit()``: the text kept, as ``charclass``
_BUILTINS = {"len": "size", "ord": "code", "int": "number"}  # builtins whose argument is kept (see below)
_SIZES: dict[int, Any] = {}  # length -> the text len() gave it for, this run
_CODES: dict[int, str] = {}  # code point -> the character ord() gave it for, this run

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
        if kind in ("eq", "order") and type(a) is int and type(b) is int:  # a length or a code point of a text
            for this, other in ((a, b), (b, a)):
                if this in _CODES:
                    PAIRS.append(("ord", _CODES[this], other))
                if this in _SIZES:
                    PAIRS.append(("len" if kind == "eq" else "len_order", _SIZES[this], other))


def _keep(kind: str, a: Any, b: Any) -> None:
    if len(PAIRS) < PAIR_LIMIT and type(a) in (str, bytes) and len(a) <= 200:
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
    key a mapping was asked for (``options.get("mode")``) against the keys it has; the text a regular
    expression did not match and the text a ``str.is*`` check was made on."""
    if _METHODS.get(name) == "regex":
        return _regex(obj, name, args, kwargs)
    if name in _CHECKS and type(obj) is str and not args and not kwargs:
        held = getattr(obj, name)()
        if obj:
            _keep("charclass", obj, "!" + name if held else name)
        return held
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


def _regex(obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``pattern.match(s)`` or ``re.match(pattern, s)``: when nothing matched, ``s`` and the pattern."""
    found = getattr(obj, name)(*args, **kwargs)
    if found is not None:
        return found
    if type(obj) is _re.Pattern and args:
        pattern, flags, text = obj.pattern, obj.flags, args[0]
    elif obj is _re and len(args) >= 2:
        pattern, text = args[0], args[1]
        flags = args[2] if len(args) > 2 else kwargs.get("flags", 0)
        if type(pattern) is _re.Pattern:
            pattern, flags = pattern.pattern, pattern.flags
    else:
        return found
    if type(pattern) is type(text) and isinstance(flags, int):
        _keep("regex", text, (pattern, int(flags)))
    return found


def size(value: Any) -> int:
    """``len(value)``, keeping ``value`` (a non-empty text) under its length. (Sequences are left out:
    their lengths vary in the pools already, and a length of 0 or 1 is compared everywhere.)"""
    n = len(value)
    if type(value) in (str, bytes) and 0 < n <= 200 and (n in _SIZES or len(_SIZES) < 32):
        _SIZES[n] = value
    return n


def code(char: Any) -> int:
    """``ord(char)``, keeping ``char`` under its code point."""
    n = ord(char)
    if len(_CODES) < 64 and type(char) is str:
        _CODES[n] = char
    return n


def number(text: Any) -> Any:
    """``int(text)``, keeping a text it refused."""
    try:
        return int(text)
    except ValueError:
        if type(text) is str:
            _keep("number", text, "")
        raise


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
compare.size = size  # type: ignore[attr-defined]
compare.code = code  # type: ignore[attr-defined]
compare.number = number  # type: ignore[attr-defined]


def take_pairs() -> list[tuple[str, Any, Any]]:
    """The operand pairs noted since the last call, each once."""
    seen = list(dict.fromkeys((kind, type(a), a, type(b), b) for kind, a, b in PAIRS))
    PAIRS.clear()
    _SIZES.clear()
    _CODES.clear()
    return [(kind, a, b) for kind, _, a, _, b in seen]


def take() -> list[Any]:
    """The operands noted since the last call."""
    seen = list(dict.fromkeys((type(v), v) for v in OBSERVED))
    OBSERVED.clear()
    return [v for _, v in seen]


class _Instrument(ast.NodeTransformer):
    def __init__(self, bound: set[str]) -> None:
        self.bound = bound  # names x binds itself: a parameter called ``len`` is not the builtin

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
        if (isinstance(func, ast.Name) and func.id in _BUILTINS and func.id not in self.bound
                and len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred)):
            recorder = ast.Attribute(value=ast.Name(id=NAME, ctx=ast.Load()), attr=_BUILTINS[func.id], ctx=ast.Load())
            return ast.copy_location(ast.Call(func=recorder, args=node.args, keywords=[]), node)
        if not isinstance(func, ast.Attribute) or (func.attr not in _METHODS or not node.args) and not (
                func.attr in _CHECKS and not node.args and not node.keywords) or any(
                isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return node
        recorder = ast.Attribute(value=ast.Name(id=NAME, ctx=ast.Load()), attr="method", ctx=ast.Load())
        call = ast.Call(func=recorder, args=[func.value, ast.Constant(func.attr), *node.args], keywords=node.keywords)
        return ast.copy_location(call, node)


def instrument(node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    """Rewrite the comparisons in x's body in place (locations kept: coverage sees the same lines)."""
    bound = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
    bound |= {n.id for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Name) and not isinstance(
        n.ctx, ast.Load)}
    transformer = _Instrument(bound)
    node.body = [transformer.visit(stmt) for stmt in node.body]
    ast.fix_missing_locations(node)
