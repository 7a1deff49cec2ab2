"""Canonical form of values in an output state (runs inside the sandbox; stdlib only).

DESIGN.md, "Execution semantics": two executions match iff their canonical output states are identical;
the canonical form drops what differs for reasons unrelated to behaviour (object addresses, the
harness's own file names and line numbers in messages, set and dict ordering) and nothing else.

So: dicts become lists of ``[key, value]`` pairs sorted by the canonical key, sets sorted lists, tuples
stay distinct from lists, floats keep their ``repr`` (``0.1 + 0.2`` is not ``0.3``; ``-0.0`` is not
``0.0``), objects become their class name and attribute state, stand-ins their name, and in any text
produced by ``repr`` the ``0x…`` addresses are blanked. Depth, length and string size are capped and
the caps are marked, so a huge value cannot exhaust the harness.
"""

from __future__ import annotations

import datetime
import json
import re
import types

from .standins import is_standin, standin_name

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 8
MAX_ITEMS = 500
MAX_STR = 20_000

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
#: File names the harness gives the code it runs; blanked in messages so truth and candidate compare equal.
HARNESS_FILE = re.compile(r"<calib[^>]*>|/calib_harness/[^\s'\"]*")


def scrub(text: str) -> str:
    """Blank object addresses and harness file names in a message."""
    text = _ADDRESS.sub("0x?", text)
    return HARNESS_FILE.sub("<code>", text)


def _text(value: str) -> Any:
    if len(value) > MAX_STR:
        return {"str": value[:MAX_STR], "truncated": len(value)}
    return value


def _qualname(obj: Any) -> str:
    module = getattr(obj, "__module__", None) or ""
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__
    if module in ("builtins", "__main__") or module.startswith("calib_scaffold"):
        return str(name)
    return f"{module}.{name}"


# built once: json.dumps with these options builds a new encoder on every call
_KEY = json.JSONEncoder(sort_keys=True, default=str).encode
_DUMPS = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
_BYTES = (bytes, bytearray, memoryview)
_TIMES = (datetime.date, datetime.time, datetime.timedelta)
_SEQUENCES = (list, tuple)
_MAPPINGS = (dict, types.MappingProxyType)
_SETS = (set, frozenset)
_CALLABLES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType)
_SCALARS = (int, float, str)


def _key(item: Any) -> str:
    return _KEY(item)


MAX_NODES = 200_000
_budget = [MAX_NODES]


def canonical(value: Any, depth: int = 0, _seen: frozenset[int] = frozenset()) -> Any:
    """Return a JSON-serialisable canonical form of ``value``.

    At most ``MAX_NODES`` values are visited per top-level call: a shared sub-list repeated 500 × 500
    times must not cost gigabytes; the cut is marked (``size_limit``) and is the same for equal values.
    (Exact built-in types are tested first, by identity: the same result as the ``isinstance`` chain
    below them, which subclasses still go through.)
    """
    if depth == 0:
        _budget[0] = MAX_NODES
    _budget[0] -= 1
    if _budget[0] < 0:
        return {"size_limit": type(value).__name__}
    kind = type(value)
    if value is None or kind is bool:
        return value
    if kind is int:
        return value if -(2**53) < value < 2**53 else {"int": str(value)}
    if kind is float:
        return {"float": repr(value)}
    if kind is str:
        return value if len(value) <= MAX_STR else {"str": value[:MAX_STR], "truncated": len(value)}
    if depth >= MAX_DEPTH:
        return {"depth_limit": kind.__name__}
    if id(value) in _seen:
        return {"cycle": kind.__name__}
    seen = _seen | {id(value)}
    if kind is list or kind is tuple:
        return _sequence(value, kind, depth, seen)
    if kind is dict:
        return _mapping(value, kind, depth, seen)
    if is_standin(value):
        return {"standin": standin_name(value)}
    if isinstance(value, _BYTES):
        raw = bytes(value)
        return {kind.__name__: raw[:MAX_STR].hex(), **({"truncated": len(raw)} if len(raw) > MAX_STR else {})}
    if isinstance(value, _TIMES):
        # by value: the harness's frozen clock makes datetime a subclass whose repr differs
        name = next(t.__name__ for t in (datetime.datetime, datetime.date, datetime.time, datetime.timedelta)
                    if isinstance(value, t))
        return {name: str(value)}
    if isinstance(value, complex):
        return {"complex": repr(value)}
    if isinstance(value, _SEQUENCES):
        return _sequence(value, kind, depth, seen)
    if isinstance(value, _MAPPINGS):
        return _mapping(value, kind, depth, seen)
    if isinstance(value, _SETS):
        items = sorted((canonical(item, depth + 1, seen) for item in value), key=_key)
        out: dict[str, Any] = {"frozenset" if isinstance(value, frozenset) else "set": items[:MAX_ITEMS]}
        if kind not in (set, frozenset):
            out["type"] = _qualname(kind)
        if len(items) > MAX_ITEMS:
            out["truncated"] = len(items)
        return out
    if isinstance(value, BaseException):
        return {"exception": _qualname(kind), "args": canonical(value.args, depth + 1, seen)}
    if isinstance(value, type):
        return {"class": _qualname(value)}
    if isinstance(value, _CALLABLES):
        return {"function": _qualname(value)}
    if isinstance(value, types.ModuleType):
        return {"module": value.__name__}
    if isinstance(value, _SCALARS):  # subclasses: enums (IntEnum), str subclasses
        return {"type": _qualname(kind), "value": canonical(_builtin(value), depth + 1, seen)}
    if kind.__module__ == "pathlib" and hasattr(value, "__fspath__"):
        # by its text: a Path caches derived fields (``_str``, ``_parts``...) as it is used, so its
        # attribute state differs between two equal paths
        return {"path": str(value)}
    return _object(value, depth, seen)


def _sequence(value: Any, kind: type, depth: int, seen: frozenset[int]) -> dict[str, Any]:
    items = [canonical(item, depth + 1, seen) for item in value[:MAX_ITEMS]]
    out: dict[str, Any] = {"tuple" if isinstance(value, tuple) else "list": items}
    if kind is not list and kind is not tuple:
        out["type"] = _qualname(kind)
        if hasattr(value, "_fields"):
            out["fields"] = list(value._fields)
    if len(value) > MAX_ITEMS:
        out["truncated"] = len(value)
    return out


def _mapping(value: Any, kind: type, depth: int, seen: frozenset[int]) -> dict[str, Any]:
    # sorted before the cap, so that two equal mappings built in different orders keep the same items
    keyed = sorted(((canonical(k, depth + 1, seen), v) for k, v in value.items()), key=lambda kv: _key(kv[0]))
    out: dict[str, Any] = {"dict": [[k, canonical(v, depth + 1, seen)] for k, v in keyed[:MAX_ITEMS]]}
    if kind is not dict:
        out["type"] = _qualname(kind)
    if len(keyed) > MAX_ITEMS:
        out["truncated"] = len(keyed)
    return out


def _builtin(value: Any) -> Any:
    for base in (bool, int, float, str):
        if isinstance(value, base):
            return base(value)
    return value


def _object(value: Any, depth: int, seen: frozenset[int]) -> Any:
    state: dict[str, Any] = {}
    try:
        attrs = dict(vars(value))
    except TypeError:
        attrs = {}
    for slot_owner in type(value).__mro__:
        for slot in getattr(slot_owner, "__slots__", ()) or ():
            if isinstance(slot, str) and hasattr(value, slot) and slot not in ("__dict__", "__weakref__"):
                attrs.setdefault(slot, getattr(value, slot))
    for name, item in attrs.items():
        state[name] = canonical(item, depth + 1, seen)
    out: dict[str, Any] = {"object": _qualname(type(value))}
    if state:
        out["state"] = [[k, state[k]] for k in sorted(state)]
    else:
        try:
            text = repr(value)
        except Exception as exc:  # noqa: BLE001 - a broken __repr__ is part of the object's behaviour
            text = f"<repr raised {type(exc).__name__}>"
        out["repr"] = _text(scrub(text))
    return out


def dumps(value: Any) -> str:
    """The canonical JSON text of an already canonical structure (what matching compares)."""
    return _DUMPS(value)
