"""The placeholders of an input value made into objects of the input's build of x's module (inside the
sandbox; stdlib only): ``New('Cls', ...)``, an instance of the module's class ``Cls``, and
``Global('EOF')``, the object the module-level name ``EOF`` holds (:mod:`.values`, :mod:`.globalrefs`), and
``Arg('node')`` in ``self``'s attributes, the object x gets as its argument ``node`` (:func:`alias`).

Each run decodes its input afresh and builds the module afresh (or restores its one build), so the
objects are this build's: a sentinel ``_MISSING = object()`` given as an argument is the very object
x compares with, in x's runs and in each candidate's.
"""

from __future__ import annotations

import builtins

from . import funcs, mutators, standins
from .astnodes import Node, build
from .calls import make_instance, set_attributes
from .standins import CalibStandIn
from .values import Arg, Global, New, Obj, Stream, decode

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any


def materialize(value: Any, ns: dict[str, Any], depth: int = 0) -> Any:
    """``value`` with its placeholders replaced: ``New(...)`` in it (and in its lists, tuples and dicts)
    by instances, ``Global(...)`` anywhere (also in an ``Obj``'s attributes and in what a scripted
    stand-in's calls return) by the module's object."""
    if isinstance(value, New):
        cls = ns.get(value.cls)
        if standins.is_standin(cls):  # a class from a withheld module: an instance stand-in of it
            return CalibStandIn(standins.standin_name(cls) + "()")
        if not isinstance(cls, type):
            return CalibStandIn(value.cls)
        args = [materialize(a, ns, depth + 1) for a in value.args]
        attrs = {k: v if k == mutators.CALLS else materialize(v, ns, depth + 1) for k, v in value.attrs.items()}
        try:
            made = cls(*args)
        except Exception:  # noqa: BLE001 - the constructor wants something else: build it bare
            if not args:
                return make_instance(cls, Obj(**attrs))
            try:
                return cls.__new__(cls)
            except Exception:  # noqa: BLE001 - ``__new__`` wants them too (a namedtuple's): a stand-in of it
                return CalibStandIn(value.cls + "()")
        made = mutators.apply(made, attrs.get(mutators.CALLS))  # its mutators' calls (:mod:`.mutators`)
        return set_attributes(made, cls, attrs)  # then its attributes, as for ``self``
    if isinstance(value, Global):
        return lookup(value, ns)
    if isinstance(value, Stream):
        return value.open()
    if isinstance(value, Node):
        return build(value)
    if isinstance(value, funcs.Code):
        return funcs.build(value)
    if depth < 3 and isinstance(value, list | tuple):
        return type(value)(materialize(v, ns, depth + 1) for v in value)
    if depth < 3 and isinstance(value, dict):
        return {k: materialize(v, ns, depth + 1) for k, v in value.items()}
    if isinstance(value, Obj) or standins.is_standin(value):
        return globals_in(value, ns, depth)
    return value


def lookup(ref: Global, ns: dict[str, Any]) -> Any:
    """The object ``ref`` names in the build ``ns`` (a dotted name: an attribute of one, ``Global('OS.LINUX')``),
    else the builtin class of that name (``Global('int')`` for a parameter used as a class), else a stand-in
    of that name."""
    if ref.name in ns:
        return ns[ref.name]
    head, _, rest = ref.name.partition(".")
    if rest and head in ns:  # ``Global('OperatingSystem.LINUX')``: an attribute of a module-level name
        found = ns[head]
        try:
            for part in rest.split("."):
                found = getattr(found, part)
        except Exception:  # noqa: BLE001 - not there in this build
            return CalibStandIn(ref.name)
        return found
    found = getattr(builtins, ref.name, None)
    return found if isinstance(found, type) else CalibStandIn(ref.name)


def globals_in(value: Any, ns: dict[str, Any], depth: int = 0) -> Any:
    """``value`` with each ``Global(...)`` in it looked up (and each ``BytesIO(...)`` opened), in place where it
    is an ``Obj`` or a scripted stand-in (both are made afresh per run), nothing else changed."""
    if isinstance(value, Global):
        return lookup(value, ns)
    if isinstance(value, Stream):
        return value.open()
    if depth >= 4:
        return value
    if isinstance(value, list | tuple) and any(_holds(v) for v in value):
        return type(value)(globals_in(v, ns, depth + 1) for v in value)
    if isinstance(value, dict) and any(_holds(v) for v in value.values()):
        return {k: globals_in(v, ns, depth + 1) for k, v in value.items()}
    if isinstance(value, Obj):
        for name, item in vars(value).items():
            if _holds(item):
                setattr(value, name, globals_in(item, ns, depth + 1))
    elif standins.is_standin(value) and (script := standins.standin_script(value)):
        script[:] = [globals_in(v, ns, depth + 1) for v in script]
    return value


def _holds(value: Any) -> bool:
    """Whether ``value`` may hold a ``Global`` (containers, ``Obj`` and stand-ins are looked into)."""
    return isinstance(value, Global | Stream | list | tuple | dict | Obj) or standins.is_standin(value)


def alias(instance: Any, spec: Any, positional: list[str], args: list[Any], kwargs: dict[str, Any]) -> None:
    """Set each attribute of ``instance`` (``self``) that the input's ``self`` spec writes ``Arg('node')`` to the
    argument x gets as ``node``, also as an item of a list, tuple or set written there (``node in self.children``):
    ``node is self.head_node`` can hold. ``positional``: the names of x's positional parameters, in order."""
    try:
        value = decode(spec) if isinstance(spec, str) else None
    except ValueError:
        return
    attrs = value.attrs if isinstance(value, New) else vars(value) if isinstance(value, Obj) else {}
    given = dict(zip(positional, args))
    given.update(kwargs)

    def resolved(held: Any) -> Any:
        if isinstance(held, Arg):
            return given.get(held.name, held)
        if isinstance(held, list | tuple | set) and any(isinstance(item, Arg) for item in held):
            return type(held)(given.get(item.name, item) if isinstance(item, Arg) else item for item in held)
        return None

    for name, held in attrs.items():
        new = resolved(held)
        if new is not None and new is not held:
            try:
                setattr(instance, name, new)
            except Exception:  # noqa: BLE001 - the class refuses it: self keeps what it was built with
                pass
