"""What the code of x's file says about the attributes of its classes' instances (inside the sandbox;
stdlib only): the attributes their methods read on ``self`` (:func:`class_reads`), and which class-level
values are defaults of instance state rather than the class's own constants (:func:`instance_default`), and
where a missing one goes (:func:`fill`).
Helpers of :mod:`.calls` (building ``self``) and :mod:`.batch` (what of ``self`` is input)."""

from __future__ import annotations

import types

from . import scaffold

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

#: The types of a class-level value that can be an instance's default state (``contentparams = None``).
_PLAIN = (type(None), bool, int, float, str, bytes, tuple, list, dict, set, frozenset)
_STORED: dict[tuple[int, str], bool] = {}


def fill(instance: Any, name: str, value: Any) -> None:
    """``instance.name = value``; where ``__slots__`` leave no room for ``name`` (sqlglot's ``Parser``), it can only
    be a class attribute (a method defined after x in the file): set on the class, which each build makes anew."""
    try:
        setattr(instance, name, value)
    except AttributeError:
        cls = type(instance)
        if hasattr(instance, "__dict__") or hasattr(cls, name):  # (a stand-in ``self`` has every attribute)
            raise
        setattr(cls, name, value)


def instance_default(cls: type, name: str) -> bool:
    """Whether the class-level ``name`` of ``cls`` is a default of its instances' state: ``None``
    (``contentparams = None``: set later, by the class or a mixin of another file), or a plain value
    (``_cache = {}``) that the file's code also sets on objects (``self._cache = ...``): then
    ``self.name`` is input, like any other attribute x reads. So is a ``__slots__`` member: the input's value
    of ``self.tracks`` on gpxpy's slotted ``GPX`` was dropped as the class's own, and x saw ``[]`` on every input.
    So is a property with a setter, set through it (the class's own code): textfsm's ``Row.header = [...]`` sets
    the row's keys and pads its values, where the input's value was dropped before."""
    value = getattr(cls, name, None)
    if type(value) is types.MemberDescriptorType:
        return True
    if type(value) is property:  # set through its setter, the class's own code (textfsm's ``Row.header``)
        return value.fset is not None
    if value is None or type(value) not in _PLAIN:
        return value is None and hasattr(cls, name)
    placed = scaffold.LAST[0]
    if placed is None:
        return False
    key = (id(placed), name)
    if key not in _STORED:  # ``obj.name = ``, ``+=`` …: the text, not a walk of the tree (6 ms in 1,700 lines)
        import re  # noqa: PLC0415 - loaded already (json needs it)

        _STORED[key] = re.search(r"\.\s*" + re.escape(name) + r"\s*(?:[-+*/|&^%@]|//|<<|>>|\*\*)?=(?!=)",
                                 placed.source) is not None
    return _STORED[key]


_CLASS_READS: dict[tuple[int, tuple[str, ...]], list[str]] = {}


def class_reads(cls: type) -> list[str]:
    """``self.attr`` read by the methods of ``cls`` and of its bases defined in the file (by name)."""
    placed = scaffold.LAST[0]
    names = tuple(c.__name__ for c in getattr(cls, "__mro__", ()) if c is not object)
    if placed is None or not names:
        return []
    key = (id(placed), names)
    if key not in _CLASS_READS:
        import ast  # noqa: PLC0415

        found: dict[str, None] = {}
        classes: list[Any] = []
        todo: list[Any] = list(placed.tree.body)
        while todo:  # class statements, also nested in classes and blocks (not inside functions)
            stmt = todo.pop()
            classes += [stmt] if isinstance(stmt, ast.ClassDef) else []
            if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                for block in ("body", "orelse", "finalbody", "handlers"):
                    todo.extend(c for c in getattr(stmt, block, ()) if isinstance(c, ast.stmt | ast.excepthandler))
        for node in classes:
            for method in node.body if node.name in names else ():
                if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) or not method.args.args:
                    continue
                me = method.args.args[0].arg
                for sub in ast.walk(method):
                    if (isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load)
                            and isinstance(sub.value, ast.Name) and sub.value.id == me
                            and not (sub.attr.startswith("__") and sub.attr.endswith("__"))):
                        found.setdefault(sub.attr)
        _CLASS_READS[key] = list(found)
    return _CLASS_READS[key]
