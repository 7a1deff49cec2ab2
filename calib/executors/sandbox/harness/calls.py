"""Calling x: building self and arguments, draining what x returns, and what coverage counts.

Helpers of :mod:`.runner` (inside the sandbox; stdlib only): stand-in modes per input, instances of the context class
(placeholders: :mod:`.placeholders`), the statements coverage counts (as coverage.py does), generators, coroutines and
context managers run to the end on the frozen clock, arguments re-keyed for a candidate that renamed its parameters."""

from __future__ import annotations

import sys
import types

from . import canon, env, hints, mutators, scaffold, standins
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
