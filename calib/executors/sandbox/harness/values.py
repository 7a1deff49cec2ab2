"""Input values as text: a small, safe subset of Python expressions (runs inside the sandbox too).

Input states travel between processes (chosen on x, replayed for every candidate) and are printed by
``calib compare``; so each argument value is kept as the source of an expression a person can read
and that :func:`decode` evaluates without ``eval``: literals (numbers, strings, bytes, ``None``,
booleans, lists, tuples, dicts, sets), ``float('nan')``/``float('inf')``, ``set()``, ``Path('…')``,
``frozenset({…})``, ``complex(re, im)``, ``date(2024, 1, 15)``, ``datetime(…)``, ``time(…)`` and
``timedelta(days=…)`` (integer arguments; naive values, built with the frozen clock's classes), ``Obj(attr=…)``
(an object with those attributes, for parameters the body uses as ``p.attr``), ``New('Cls', …)`` (an instance of
a class of the function's module, built in the sandbox), ``Node('With', 'with a:\\n    pass')`` (a syntax-tree
node, :mod:`.astnodes`), ``Code('def f(a, b=1): ...')`` (the function, class or value that source gives, built
per run, :mod:`.funcs`), ``Global('EOF')`` (the object a module-level name of the function's
file holds in the input's build: a sentinel, a class, an imported stand-in), ``Arg('node')`` (in ``self``'s
attributes: the object x gets as its argument ``node``) and ``StandIn('name')`` (a
recording stand-in; ``StandIn('name', [v1, v2])``: its calls return v1, then v2, then what the
input's stand-in mode says), ``BytesIO(b'...')`` and ``StringIO('...')`` (an open file holding that, for a
parameter x reads or writes as one: ``fileobj.read(8)``). Decoding builds fresh objects each time, so a
function that mutates its arguments cannot change the stored input. Anything else (names, attributes,
operators, other calls) is a :class:`ValueError`.
"""

from __future__ import annotations

import ast
import io
import math
import sys
import types

from .astnodes import Node
from .funcs import Code
from .standins import CalibStandIn, is_standin, standin_name, standin_script

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any


class Obj(types.SimpleNamespace):
    """An argument object with the attributes the function reads (``p.name``, ``p.size``)."""


Obj.__module__ = "builtins"  # canonical name "Obj", identical for truth and candidates


class New:
    """An instance of a class of the function's own module: ``New('Counter', {'a': 1})``.

    Decoding keeps this placeholder (it needs the module's namespace); the harness builds the instance
    per input with ``cls(*args)``, else an instance with ``attrs`` set (see runner.make_instance).
    """

    def __init__(self, cls: str, *args: Any, **attrs: Any) -> None:
        self.cls, self.args, self.attrs = cls, args, attrs

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, New) and (self.cls, self.args, self.attrs) == (other.cls, other.args, other.attrs)

    __hash__ = None  # type: ignore[assignment]


class _Named:
    """A placeholder naming what the harness looks up per run (:class:`Global`, :class:`Arg`)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: Any) -> bool:
        return type(other) is type(self) and self.name == other.name

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Global(_Named):
    """The object the module-level name ``name`` of x's file holds: ``Global('EOF')`` for ``data is EOF``,
    ``Global('_MISSING')`` for ``default is _MISSING`` (an ``object()`` no literal can write).

    Decoding keeps this placeholder; the harness looks the name up in the input's build of the module
    (:func:`.calls.materialize`), so x and every candidate get their own build's object.
    """


class Arg(_Named):
    """The object x gets as its argument ``name``, held by an attribute of ``self`` (or an item of one):
    ``Obj(head_node=Arg('node'))`` for ``if node is self.head_node:``, an identity no literal can write.

    Decoding keeps this placeholder; the harness sets the attribute to the argument once both are built
    (:func:`.placeholders.alias`), so x and every candidate get their own input's object.
    """


class Stream:
    """An open file x reads or writes (``fileobj.read(8)``, ``out.write(line)``), written ``BytesIO(b'...')`` or
    ``StringIO('...')``: what it holds. Decoding keeps this placeholder; the harness gives x a fresh
    ``io.BytesIO``/``io.StringIO`` holding it per run (:meth:`open`, :func:`.placeholders.materialize`), so
    what x reads, writes and where it leaves the file are that input's alone (its output state shows them)."""

    def __init__(self, content: str | bytes) -> None:
        self.content = content

    def open(self) -> io.BytesIO | io.StringIO:
        return io.BytesIO(self.content) if isinstance(self.content, bytes) else io.StringIO(self.content)

    def __eq__(self, other: Any) -> bool:
        return type(other) is Stream and type(other.content) is type(self.content) and other.content == self.content

    def __hash__(self) -> int:
        return hash(("Stream", self.content))

    def __repr__(self) -> str:
        return f"{'BytesIO' if isinstance(self.content, bytes) else 'StringIO'}({self.content!r})"


def encode(value: Any) -> str:
    """The expression source of ``value`` (inverse of :func:`decode`)."""
    if value is None or isinstance(value, bool | int | str | bytes):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "float('-inf')"
        return repr(value)
    if isinstance(value, complex):
        return f"complex({encode(value.real)}, {encode(value.imag)})"
    if isinstance(value, slice):
        return f"slice({encode(value.start)}, {encode(value.stop)}, {encode(value.step)})"
    if isinstance(value, list):
        return "[" + ", ".join(encode(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(encode(v) for v in value)
        return "(" + inner + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{encode(k)}: {encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, set | frozenset):
        items = "{" + ", ".join(sorted(encode(v) for v in value)) + "}" if value else ""
        if isinstance(value, frozenset):
            return f"frozenset({items})"
        return items or "set()"
    pathlib = sys.modules.get("pathlib")  # imported only when some code uses paths (it costs 2 ms a batch)
    if pathlib is not None and isinstance(value, pathlib.PurePath):
        return f"Path({str(value)!r})"
    if is_standin(value):
        script = standin_script(value)
        if script is not None:
            return f"StandIn({standin_name(value)!r}, {encode(script)})"
        return f"StandIn({standin_name(value)!r})"
    if (clock := _clock_kind(value)) is not None:
        return clock
    if isinstance(value, New):
        parts = [repr(value.cls), *(encode(a) for a in value.args),
                 *(f"{k}={encode(v)}" for k, v in value.attrs.items())]
        return "New(" + ", ".join(parts) + ")"
    if isinstance(value, Global | Node | Arg | Stream | Code):
        return repr(value)
    if isinstance(value, Obj):
        return "Obj(" + ", ".join(f"{k}={encode(v)}" for k, v in vars(value).items()) + ")"
    raise TypeError(f"cannot encode a {type(value).__name__} as an input value")


#: The ``datetime`` classes an input value may build, with the integer arguments each takes (in order).
_CLOCK_ARGS = {"date": ("year", "month", "day"),
               "datetime": ("year", "month", "day", "hour", "minute", "second", "microsecond"),
               "time": ("hour", "minute", "second", "microsecond"),
               "timedelta": ("days", "seconds", "microseconds")}


def _clock_kind(value: Any) -> str | None:
    """``date(2024, 1, 15)`` for a naive ``datetime`` value (of the frozen clock's classes or the real ones,
    subclasses by their ``datetime`` base), else None; a value with a time zone has no such text."""
    kind = next((t.__name__ for t in type(value).__mro__ if t.__module__ == "datetime"
                 and t.__name__ in _CLOCK_ARGS), None)
    if kind is None or getattr(value, "tzinfo", None) is not None:
        return None
    parts = [getattr(value, field) for field in _CLOCK_ARGS[kind]]
    keep = 3 if kind in ("date", "datetime") else 0  # year, month and day always; zero times and fields left out
    while len(parts) > keep and parts[-1] == 0:
        parts.pop()
    if kind == "timedelta":
        return "timedelta(" + ", ".join(f"{f}={v}" for f, v in zip(_CLOCK_ARGS[kind], parts) if v) + ")"
    return f"{kind}(" + ", ".join(str(v) for v in parts) + ")"


#: Parsed input values by their text: the search decodes the same values again and again (each run
#: builds its arguments afresh from the tree; the tree itself is only read)
_PARSED: dict[str, ast.expr] = {}


def decode(source: str) -> Any:
    """Evaluate an expression written by :func:`encode` (or by a user in an ``--inputs`` file)."""
    node = _PARSED.get(source)
    if node is None:
        try:
            node = ast.parse(source, mode="eval").body
        except SyntaxError as exc:
            raise ValueError(f"input value {source!r} is not a Python expression: {exc.msg}") from None
        if len(source) <= 4096:
            if len(_PARSED) >= 4096:
                _PARSED.clear()
            _PARSED[source] = node
    try:
        return _build(node, source)
    except (TypeError, RecursionError) as exc:  # {[1]: 2}, set(1), a value nested too deeply
        raise ValueError(f"input value {source!r} cannot be built: {exc}") from None


def _build(node: ast.expr, source: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _build(node.operand, source)
        if isinstance(operand, int | float | complex) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):  # complex literals 1+2j
        left, right = _build(node.left, source), _build(node.right, source)
        if isinstance(left, int | float) and isinstance(right, complex):
            return left + right if isinstance(node.op, ast.Add) else left - right
    if isinstance(node, ast.List):
        return [_build(e, source) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_build(e, source) for e in node.elts)
    if isinstance(node, ast.Set):
        return {_build(e, source) for e in node.elts}
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_build(k, source): _build(v, source) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _call(node, source)
    raise ValueError(f"input value {source!r}: only literals, set(), frozenset(), float('nan'), complex(...), "
                     "slice(...), Path(...), date(...), datetime(...), time(...), timedelta(...), Node(...), Obj(...), "
                     "New(...), Global(...), Arg(...), BytesIO(...), StringIO(...) and StandIn(...) are allowed")


def _call(node: ast.Call, source: str) -> Any:
    name = node.func.id  # type: ignore[attr-defined]
    if any(isinstance(a, ast.Starred) for a in node.args) or any(kw.arg is None for kw in node.keywords):
        raise ValueError(f"input value {source!r}: write {name}(...) arguments out, without * or **")
    args = [_build(a, source) for a in node.args]
    kwargs = {kw.arg: _build(kw.value, source) for kw in node.keywords if kw.arg}
    if name == "float" and len(args) == 1 and args[0] in ("nan", "inf", "-inf") and not kwargs:
        return float(args[0])
    if name in ("set", "frozenset", "tuple", "list") and len(args) <= 1 and not kwargs:
        return {"set": set, "frozenset": frozenset, "tuple": tuple, "list": list}[name](*args)
    if (name == "complex" and len(args) == 2 and not kwargs
            and all(isinstance(a, int | float) and not isinstance(a, bool) for a in args)):
        return complex(*args)
    if name == "slice" and 1 <= len(args) <= 3 and not kwargs and all(a is None or type(a) is int for a in args):
        return slice(*args)
    if name in _CLOCK_ARGS and len(args) <= len(_CLOCK_ARGS[name]) and set(kwargs) <= set(_CLOCK_ARGS[name]) \
            and all(type(v) is int for v in (*args, *kwargs.values())):
        import datetime  # noqa: PLC0415 - the module's classes now: the frozen clock's datetime and date (.env)

        try:
            return getattr(datetime, name)(*args, **kwargs)
        except (ValueError, OverflowError) as exc:  # date(2024, 13, 1)
            raise ValueError(f"input value {source!r} cannot be built: {exc}") from None
    if name == "Path" and len(args) == 1 and isinstance(args[0], str) and not kwargs:
        import pathlib  # noqa: PLC0415

        return pathlib.Path(args[0])
    if name == "Obj" and not args:
        return Obj(**kwargs)
    if name == "New" and args and isinstance(args[0], str):
        return New(*args, **kwargs)
    if name == "Node" and len(args) == 2 and all(isinstance(a, str) for a in args) and not kwargs:
        return Node(*args)  # a syntax-tree node, built per run (.astnodes)
    if name == "Code" and len(args) == 1 and isinstance(args[0], str) and not kwargs:
        return Code(args[0])  # what that source gives, built per run (.funcs)
    if name == "Global" and len(args) == 1 and isinstance(args[0], str) and not kwargs \
            and all(part.isidentifier() for part in args[0].split(".")):  # ``Global('OperatingSystem.LINUX')``
        return Global(args[0])
    if name == "Arg" and len(args) == 1 and isinstance(args[0], str) and args[0].isidentifier() and not kwargs:
        return Arg(args[0])  # ``self.head_node is node``
    if name in ("BytesIO", "StringIO") and len(args) == 1 and type(args[0]) is (bytes if name == "BytesIO" else str) \
            and not kwargs:
        return Stream(args[0])  # an open file holding that, made per run
    if name == "StandIn" and len(args) == 1 and isinstance(args[0], str) and not kwargs:
        return CalibStandIn(args[0])
    if name == "StandIn" and len(args) == 2 and isinstance(args[0], str) and isinstance(args[1], list) and not kwargs:
        return CalibStandIn(args[0], args[1])  # its calls return these values in order
    raise ValueError(f"input value {source!r}: {name}(...) is not an allowed constructor")
