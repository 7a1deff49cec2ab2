"""What x returns or hands over that is x's own, called after x (inside the sandbox; stdlib only).

A closure x returns (a decorator factory's decorator) is called, as are the methods of an instance of a class x
defines and returns (``return UserFunction()``) and x's own functions it handed to a stand-in: what those calls
do is x's behaviour, and their lines are x's. Each call's outcome enters the output state under ``probes``."""

from __future__ import annotations

import sys
import types

from . import canon, hints, scaffold, standins
from .ambient import MAX_PROBE_ARGS
from .calls import drain
from .standins import CalibStandIn

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

#: Parameter names a returned closure is given the probe function for (a decorator's ``func``).
_CALLABLE_NAMES = frozenset({"func", "function", "fn", "f", "fun", "method", "meth", "wrapped", "callback", "cb",
                             "handler", "hook", "predicate", "decorated", "target", "view", "coro", "callable_"})
#: A plain value for every other parameter of a probe call.
PROBE_VALUE = 2
MAX_PROBE_DEPTH = 3
MAX_PASSED = 8  # x's own functions handed to stand-ins that are called after x (each twice)


def probe_target(*args: Any, **kwargs: Any) -> Any:
    """What a returned decorator is applied to: a plain function that answers with its arguments."""
    return ["probe", list(args), sorted(kwargs.items())]


def _fresh_target() -> Any:
    """A new probe function each time (a decorator may set attributes on the function it wraps), in a
    namespace of its own (not the harness's module: ``__module__`` is ``probe``)."""
    namespace = {"__builtins__": __builtins__, "__name__": "probe"}
    return types.FunctionType(probe_target.__code__, namespace, "probe_target")


def _own(value: Any, lines: tuple[int, int, int]) -> bool:
    """A function defined inside x's own body (a closure x made), not x itself."""
    if not isinstance(value, types.FunctionType):
        return False
    code = value.__code__
    first, def_line, last = lines
    return code.co_filename == scaffold.FILENAME and def_line < code.co_firstlineno <= last


def _probe_args(fn: Any) -> tuple[list[Any], dict[str, Any], list[str]]:
    """Arguments for a probe call: each required parameter gets the probe function (named like a
    function: ``func``) or :data:`PROBE_VALUE`; a function with only ``*args`` gets one value. Also
    how each argument shows in the call's label."""
    code = fn.__code__
    required = code.co_argcount - len(fn.__defaults__ or ())
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]

    def value(name: str) -> Any:
        return _fresh_target() if name in _CALLABLE_NAMES or "decor" in code.co_name else PROBE_VALUE

    args = [value(name) for name in names[:required]]
    kwargs = {name: value(name) for name in names[code.co_argcount:] if name not in (fn.__kwdefaults__ or {})}
    if not args and not kwargs and code.co_flags & 0x04:  # CO_VARARGS: wrapper(*args, **kwargs)
        args = [PROBE_VALUE]
    shown = [*("probe" if callable(a) else repr(a) for a in args),
             *(f"{k}=" + ("probe" if callable(v) else repr(v)) for k, v in kwargs.items())]
    return args, kwargs, shown


def closure_params(node: Any) -> list[Any]:
    """The required positional parameters of the closure x returns (a nested ``def`` it returns by name),
    with what the closure's body says about them: the search varies what the first probe call passes
    them (input state key ``probe``; ``_compile_sequence(schema, seq_type)`` returns ``validate(path,
    data)``, whose lines no fixed argument reaches). None of them for a closure that takes a function (a
    decorator: the probe function stays, :func:`_probe_args`) or more than :data:`MAX_PROBE_ARGS`."""
    import ast  # noqa: PLC0415

    nested = {n.name: n for n in ast.walk(node) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
              and n is not node}
    target = next((nested[n.value.id] for n in ast.walk(node) if isinstance(n, ast.Return)
                   and isinstance(n.value, ast.Name) and n.value.id in nested), None)
    if target is None or "decor" in target.name:
        return []
    positional = [*target.args.posonlyargs, *target.args.args]
    required = positional[:len(positional) - len(target.args.defaults)]
    if not required or len(required) > MAX_PROBE_ARGS or any(a.arg in _CALLABLE_NAMES for a in required):
        return []
    return hints.analyse(target, skip_first=False).params[:len(required)]


def probe(value: Any, lines: tuple[int, int, int], given: list[Any] | None = None,
          texts: list[str] | None = None) -> list[Any] | None:
    """When x returns a closure of its own (a decorator factory returns its decorator), what calling it
    does is x's behaviour: it is called (twice, with the same arguments: a cache, a counter answers
    differently the second time), a closure it returns in turn likewise, and the functions of x's own
    set as its attributes (``wrapper.cache_clear``) that need no arguments once each. Each call's
    result (canonical, generators run) or exception type enters the output state under ``probes``.
    ``lines``: x's first line (decorators), ``def`` line and last line. ``given``: the input state's
    arguments of the first call (key ``probe``, written as ``texts``), in place of its first ones."""
    if not _own(value, lines):
        return methods(value, lines)
    out: list[Any] = []
    todo = [(value, "r", 0)]
    while todo:
        fn, path, depth = todo.pop(0)
        args, kwargs, shown = _probe_args(fn)
        if depth == 0 and given:  # the input state's values (and their texts) in place of the first ones
            keep = len(given[:len(args)])
            args[:keep], shown[:keep] = given[:keep], (texts or [])[:keep]
        label = path + "(" + ", ".join(shown) + ")"
        calls = [(fn, label, args, kwargs), (fn, label, args, kwargs)]
        calls += [(attr, f"{path}.{name}()", [], {}) for name, attr in sorted(vars(fn).items())
                  if _own(attr, lines) and attr.__code__.co_argcount == len(attr.__defaults__ or ())]
        for i, (target, label, a, k) in enumerate(calls):
            outcome, result = _outcome(target, a, k)
            out.append([label, outcome])
            if i == 0 and depth + 1 < MAX_PROBE_DEPTH and _own(result, lines):
                todo.append((result, label, depth + 1))
    return out


#: Methods of a class x defines that are not called on what x returns (made or dropped by Python itself).
_NOT_CALLED = frozenset({"__init__", "__new__", "__del__", "__init_subclass__", "__class_getitem__", "__set_name__",
                         "__getattribute__", "__setattr__", "__delattr__"})
MAX_METHODS = 16
_NOT_X = frozenset({"builtins", CalibStandIn.__module__})  # modules whose classes x does not define


def _function(attr: Any) -> Any:
    """The function under a class attribute: a method, a class or static method's, a property's getter."""
    if isinstance(attr, classmethod | staticmethod):
        return attr.__func__
    return attr.fget if isinstance(attr, property) else attr


def _method_args(fn: Any, bound: bool) -> tuple[list[Any], dict[str, Any], list[str]]:
    """:func:`_probe_args` for a method called through an instance or its class: ``self`` (``cls``) is bound."""
    args, kwargs, shown = _probe_args(fn)
    if bound and fn.__code__.co_argcount:
        args, shown = args[1:], shown[1:]
        if not args and not kwargs and fn.__code__.co_flags & 0x04:  # __call__(self, *args, **kwargs)
            args, shown = [PROBE_VALUE], [repr(PROBE_VALUE)]
    return args, kwargs, shown


def methods(value: Any, lines: tuple[int, int, int]) -> list[Any] | None:
    """When x returns an instance of a class it defines (``return UserFunction()``) or the class itself (a class
    factory: it is called first, with :func:`_probe_args`' values for its own ``__init__``), or a class whose
    methods it set (mutagen's ``enum`` decorator: ``type(name, (int,), d)``, then ``setattr(new_type,
    "__repr__", repr_)``), the class's own methods (functions defined within x's lines) are x's behaviour: each
    (properties read, at most :data:`MAX_METHODS`) is called once on the instance, by name, with
    :func:`_probe_args`' values; entries as :func:`probe`'s. None for anything else."""
    cls = value if issubclass(type(value), type) else type(value)  # not isinstance: a stand-in's __class__
    if cls.__module__ in _NOT_X:  # the common case, cheaply: a builtin value, a stand-in
        return None
    own = [(name, attr) for name, attr in sorted(vars(cls).items()) if _own(_function(attr), lines)]
    if not own:
        return None
    out: list[Any] = []
    path = "r"
    if value is cls:
        init = vars(cls).get("__init__")
        args, kwargs, shown = _method_args(init, True) if _own(init, lines) else ([], {}, [])
        path = "r(" + ", ".join(shown) + ")"
        outcome, value = _outcome(cls, args, kwargs)
        out.append([path, outcome])
        if "return" not in outcome:
            return out
    for name, attr in [(n, a) for n, a in own if n not in _NOT_CALLED][:MAX_METHODS]:
        fn = _function(attr)
        if isinstance(attr, property):
            out.append([f"{path}.{name}", _outcome(getattr, [value, name], {})[0]])
            continue
        args, kwargs, shown = _method_args(fn, not isinstance(attr, staticmethod))
        out.append([f"{path}.{name}(" + ", ".join(shown) + ")",
                    _outcome(lambda *a, _n=name, **k: getattr(value, _n)(*a, **k), args, kwargs)[0]])
    return out


def _outcome(target: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """One probe call: ``{"return": canonical result}`` and the result, or ``{"exception": type}``."""
    try:
        result = drain(target(*args, **kwargs))
    except (Exception, SystemExit) as exc:  # noqa: BLE001
        return {"exception": canon._qualname(type(exc))}, None
    tracer = sys.gettrace()
    sys.settrace(None)  # observing is not x's code: untraced (and faster)
    try:
        return {"return": canon.canonical(result)}, result
    finally:
        sys.settrace(tracer)


def probe_passed(lines: tuple[int, int, int]) -> list[Any]:
    """x's own functions x handed to a stand-in (``_group(tlist, cls, match)``, ``@bus.on()`` on a nested
    ``def``) are called twice each after x, in order, a stand-in (``_group:2.arg0``: call, position) for
    each required parameter, as the dependency would with its objects; entries as :func:`probe`'s."""
    out: list[Any] = []
    done: list[Any] = []
    for where, fn in standins.LOG.passed:  # grows while it runs: a callback may hand over another
        if len(done) < MAX_PASSED and _own(fn, lines) and not any(fn is d for d in done):
            done.append(fn)
            code, kwdefaults = fn.__code__, fn.__kwdefaults__ or {}
            names = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
            n = code.co_argcount - len(fn.__defaults__ or ()) or (1 if code.co_flags & 0x04 else 0)  # *args
            args = [CalibStandIn(f"{where}.arg{j}") for j in range(n)]
            kwargs = {k: CalibStandIn(f"{where}.{k}") for k in names if k not in kwdefaults}
            shown = ", ".join([*(f"arg{j}" for j in range(n)), *(f"{k}={k}" for k in kwargs)])
            out += [[f"{where}({shown})", _outcome(fn, args, kwargs)[0]] for _ in range(2)]  # as :func:`probe`
    return out
