"""Calling x: building self and arguments, draining what x returns, and what coverage counts.

Helpers of :mod:`.runner` (inside the sandbox; stdlib only): stand-in modes per input, instances of the context class
(placeholders: :mod:`.placeholders`), the statements coverage counts (as coverage.py does), generators, coroutines and
context managers run to the end on the frozen clock, arguments re-keyed for a candidate that renamed its parameters."""

from __future__ import annotations

import sys
import types

from . import canon, env, hints, mutators, scaffold, standins
from .ambient import MAX_PROBE_ARGS
from .classattrs import class_reads, fill, instance_default  # noqa: F401 - class_reads: also read as calls.class_reads
from .standins import CalibStandIn
from .values import Obj

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

#: An argument given as ``StandIn('<default>')`` is left out of the call: its default applies (a
#: default no value can write, ``acc=EMPTY``); later positional arguments then go by keyword.
DEFAULT_NAME = "<default>"

_STANDIN_RETURNS = {"none": None, "zero": 0, "empty_str": "", "empty_list": [], "true": True, "false": False}


def standin_default(mode: str | None) -> Any:
    """What calls to stand-ins return in this input state: a stand-in (default), a fixed value, or raise."""
    if mode in (None, "standin", "items"):
        return standins._STANDIN_DEFAULT
    if mode in ("raise", "raise_in_try", "raise_other_in_try", "echo"):  # markers the stand-ins' calls act on
        return getattr(standins, mode.upper())
    if standins.is_mixed(mode):
        return standins.Mixed.parse(mode)  # type: ignore[arg-type]
    if standins.is_nth(mode):
        return standins.Nth(int(mode[3:]))  # type: ignore[index]
    value = _STANDIN_RETURNS.get(mode)
    return list(value) if isinstance(value, list) else value


def make_instance(cls: type, attrs: Obj | None, reads: list[str] = (),  # type: ignore[assignment]
                  instance: Any = None, skip: frozenset[str] = frozenset()) -> Any:
    """An instance of the context class (``cls()``, else ``cls.__new__``), else a stand-in ``self``.

    Attributes the method reads (``reads``; ``self.__x`` is ``_Cls__x``) that the instance lacks (set by
    code after x, or by a constructor that did not run) start as stand-ins (:func:`.classattrs.fill`), as do
    those the class's other methods read (``self._check()`` reading ``self.closed``), not ``skip``; then the
    input's calls of the class's mutators (:mod:`.mutators`) are made, and its attributes set."""
    attrs = vars(attrs).copy() if attrs is not None else {}
    calls = attrs.pop(mutators.CALLS, None)
    if instance is None:
        try:
            instance = cls()
        except Exception:  # noqa: BLE001
            try:
                instance = cls.__new__(cls)
            except Exception:  # noqa: BLE001
                instance = CalibStandIn("self")
    for name in [n for n in [*reads, *class_reads(type(instance))] if n not in skip]:
        try:
            if _lacks(instance, key := (mutators.mangle(cls, name) if name[:2] == "__" else name)):
                fill(instance, key, CalibStandIn("self." + name))
        except Exception:  # noqa: BLE001
            pass
    mutators.apply(instance, calls)
    return set_attributes(instance, cls, attrs)


LOOKUP_OPS = 200  # stand-in operations a lookup of an attribute of self may make before it is a loop (_lacks)


def _lacks(instance: Any, key: str) -> bool:
    """Whether ``instance`` lacks ``key``, also when looking it up loops (a ``__getattr__`` reading another
    missing attribute: pint's ``BaseRegistry`` calls ``self.Unit(item)``), whose stand-in operations are dropped."""
    log, budget = standins.LOG, standins.LOG.budget
    ops, fresh, kept, over = log.ops, log.fresh, len(log.entries), len(log.overflow)
    log.budget = min(budget, ops + LOOKUP_OPS)  # a loop ends soon (the lookup is made for every input)
    try:
        return not hasattr(instance, key)
    except (RecursionError, standins.StandInLoop):
        log.ops, log.fresh = ops, fresh
        del log.entries[kept:], log.overflow[over:]
        return True
    finally:
        log.budget = budget


def set_attributes(instance: Any, cls: type, attrs: dict[str, Any]) -> Any:
    """``instance`` with the input's attributes set (``self`` and ``New(...)`` built by their constructor)."""
    for name, value in attrs.items():
        try:
            name = mutators.mangle(cls, name) if name[:2] == "__" else name
            # methods, properties and class-level constants belong to the context, not to the input
            # (a class-level default the file's code sets per instance is the instance's state)
            if name == mutators.CALLS or hasattr(type(instance), name) and name not in getattr(
                    instance, "__dict__", {}) and not instance_default(type(instance), name):
                continue
            setattr(instance, name, value)
        except Exception:  # noqa: BLE001
            pass
    return instance


def statement_lines(placed: scaffold.Placed) -> tuple[frozenset[int], dict[int, int]]:
    """x's executable statements (by first line) and the map from each reportable line to its statement.

    Coverage counts statements, as coverage.py's line coverage does: a statement spread over several
    lines (a long ``raise ValueError(...)``) is one line, reached when any of its lines runs. A compound
    statement (``if``, ``for``, ``try`` ...) owns its header lines only; a statement with no code
    (``global``) is not executable.
    """
    import ast  # noqa: PLC0415

    node = placed.node
    code = scaffold.compile_statement(node, placed.flags)
    canon.pin(code, scaffold.FILENAME)  # x as written, before the search rewrites its comparisons
    reportable: set[int] = set()
    stack = [c for c in code.co_consts if isinstance(c, types.CodeType)]
    while stack:
        item = stack.pop()
        reportable.update(line for _, _, line in item.co_lines() if line is not None)
        stack.extend(c for c in item.co_consts if isinstance(c, types.CodeType))
    body = node.body[1:] if len(node.body) > 1 and is_docstring(node.body[0]) else node.body
    owner: dict[int, int] = {}
    statements: set[int] = set()
    todo: list[Any] = list(body)
    while todo:
        stmt = todo.pop()
        blocks = [b for b in (getattr(stmt, f, None) for f in ("body", "orelse", "finalbody")) if isinstance(b, list)]
        blocks += [h.body for h in getattr(stmt, "handlers", [])] + [c.body for c in getattr(stmt, "cases", [])]
        children = [c for block in blocks for c in block if isinstance(c, ast.stmt)]
        end = (min(c.lineno for c in children) - 1) if children else (stmt.end_lineno or stmt.lineno)
        header = range(stmt.lineno, max(stmt.lineno, end) + 1)
        if any(line in reportable for line in header):
            statements.add(stmt.lineno)
            for line in header:
                owner.setdefault(line, stmt.lineno)
        todo.extend(children)
    return frozenset(statements), owner


def is_docstring(stmt: Any) -> bool:
    return type(stmt).__name__ == "Expr" and isinstance(getattr(stmt.value, "value", None), str)  # a Constant


#: How many items a generator or iterator is run for; how many of those a returned tuple, list or
#: dict holds are run too (``split`` returns two generators).
MAX_DRAINED = 1000
MAX_NESTED = 16


def _iterator(value: Any) -> bool:
    """A generator, or an iterator of the language's own (``map``, ``filter``, ``zip``, a list's, an
    ``itertools`` one): its state is opaque (its ``repr`` is the same whatever it would yield)."""
    if isinstance(value, types.GeneratorType):
        return True
    kind = type(value)
    return kind.__module__ in ("builtins", "itertools") and hasattr(kind, "__next__")


def _items(value: Any) -> Any:
    items = []
    for item in value:
        items.append(item)
        if len(items) >= MAX_DRAINED:
            break
    if isinstance(value, types.GeneratorType):
        return canon.Ran({"generator": items})
    return canon.Ran({"iterator": type(value).__name__, "items": items})


def drain(value: Any) -> Any:
    """Generators and coroutines run to completion here: their items are the function's output; a
    ``@contextmanager`` function's context is entered and left (its body is x's code). The language's
    own iterators are run too, and so are those a returned tuple, list or dict holds (in order)."""
    contextlib = sys.modules.get("contextlib")
    if contextlib is not None and isinstance(value, contextlib._GeneratorContextManager):
        with value as entered:
            return canon.Ran({"context": entered})
    if contextlib is not None and isinstance(value, contextlib._AsyncGeneratorContextManager):
        async def _enter() -> Any:
            async with value as entered:
                return canon.Ran({"context": entered})
        return _run_frozen(_enter())
    if _iterator(value):
        return _items(value)
    if isinstance(value, types.CoroutineType | types.AsyncGeneratorType):

        async def _collect() -> Any:
            if isinstance(value, types.AsyncGeneratorType):
                return canon.Ran({"async_generator": [item async for item in value]})
            return await value

        return _run_frozen(_collect())
    kind = type(value)
    if (kind is tuple or kind is list) and 0 < len(value) <= MAX_NESTED * 4:
        nested = [i for i, item in enumerate(value) if _iterator(item)][:MAX_NESTED]
        if nested:
            items = list(value)
            for i in nested:
                items[i] = _items(items[i])
            return kind(items)
    if kind is dict and 0 < len(value) <= MAX_NESTED * 4:
        pairs = list(value.items())
        nested = [i for i, (_, item) in enumerate(pairs) if _iterator(item)][:MAX_NESTED]
        if nested:
            for i in nested:
                pairs[i] = (pairs[i][0], _items(pairs[i][1]))
            return dict(pairs)
    return value


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
        return None
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


def sentinel_defaults(node: Any) -> frozenset[str]:
    """Parameters whose default is no literal (a sentinel ``EMPTY``, ``keys.hashkey``): no value an input
    can write is that default, so leaving the argument out is a value of its own."""
    args = getattr(node, "args", None)
    positional = [*args.posonlyargs, *args.args] if args is not None else []
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults)) if args else []
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None] if args else []
    literal = ("Constant", "UnaryOp", "Tuple", "List", "Dict", "Set")
    return frozenset(a.arg for a, d in pairs if type(d).__name__ not in literal)


def literal_aliases(tree: Any) -> dict[str, list[Any]]:
    """Names the module binds to ``Literal[...]`` (in ``Union``/``Optional`` too) and their values."""
    import ast  # noqa: PLC0415

    out: dict[str, list[Any]] = {}
    for stmt in getattr(tree, "body", None) or []:
        target = getattr(stmt, "target", None) or (getattr(stmt, "targets", None) or [None])[0]
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and isinstance(target, ast.Name) and \
                isinstance(stmt.value, ast.Subscript):
            values = [i.value for n in ast.walk(stmt.value) if isinstance(n, ast.Subscript)
                      and getattr(n.value, "id", getattr(n.value, "attr", "")) == "Literal"
                      for i in (n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice])
                      if isinstance(i, ast.Constant)]
            if values:
                out[target.id] = values[:24]
    return out


def by_position(params: list[hints.Param], given: dict[str, Any]) -> dict[str, Any]:
    """Input values keyed by x's parameter names, re-keyed for a variant that renamed its parameters:
    positional parameters take the values in x's order; the rest keep their names."""
    values = list(given.items())
    positional = [p.name for p in params if p.kind == "positional"]
    out: dict[str, Any] = {}
    for name, (_, value) in zip(positional, values):
        out[name] = value
    for old_name, value in values[len(positional):]:
        out.setdefault(old_name, value)
    return out


def _frozen_loop_class() -> type:
    import asyncio  # noqa: PLC0415

    class FrozenClockLoop(asyncio.SelectorEventLoop):  # type: ignore[misc,valid-type]
        """An event loop on the harness's frozen clock: when nothing is ready it jumps to the next timer,
        so ``await asyncio.sleep(t)`` finishes at once and deterministically (like ``time.sleep``)."""

        def time(self) -> float:
            return env._clock["mono"]

        def _run_once(self) -> None:
            scheduled = getattr(self, "_scheduled", None)
            if not getattr(self, "_ready", True) and scheduled:
                env._clock["mono"] = max(env._clock["mono"], scheduled[0]._when)
            super()._run_once()

    return FrozenClockLoop


def _run_frozen(coro: Any) -> Any:
    import asyncio  # noqa: PLC0415

    loop = _frozen_loop_class()()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro)
    finally:
        asyncio.set_event_loop(None)
        loop.close()
