"""Canonical form of values in an output state (runs inside the sandbox; stdlib only).

docs/architecture.md, "Execution semantics": two executions match iff their canonical output states are identical; the
canonical form drops what differs for reasons unrelated to behaviour (object addresses, descriptor numbers of files
and sockets, the harness's own file names and line numbers in messages, set and dict ordering, a logger's memo of the
levels it was asked about) and nothing else.

So: dicts become lists of ``[key, value]`` pairs sorted by the canonical key, sets sorted lists, tuples stay distinct
from lists, floats keep their ``repr`` (``0.1 + 0.2`` is not ``0.3``; ``-0.0`` is not ``0.0``), objects become their
class name and attribute state, stand-ins their name, and in any text produced by ``repr`` the ``0x…`` addresses are
blanked (``name=3`` of a file's, ``fd=3`` of a socket's too: which numbers are free depends on the process's
history); in other texts, the addresses a default ``repr`` ends with (``<Node object at 0x…>``).
Functions compare by their code, defaults and captured values (never by name alone), integers of any size by value.

Sizes are bounded so that a huge value cannot exhaust the harness, and no bound may make two different values equal:
what is cut from a long string, bytes, integer or container is kept as a SHA-256 digest beside the part shown; a bound
that cannot be kept that way (nesting depth, the number of values visited) is recorded in :data:`CAPS`, and the
harness then reports the input ``unobservable`` (invalid for x, a non-match for a candidate), not an output state.
"""

from __future__ import annotations

import datetime
import io
import json
import re
import sys
import types

from .digests import digest, sha256  # noqa: F401 - sha256: also read as canon.sha256
from .standins import is_standin, standin_name

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH, MAX_ITEMS, MAX_STR = 32, 500, 20_000
#: Integers up to this many bits are written in decimal (about 4,800 digits), larger ones in hex.
MAX_DECIMAL_BITS = 16_000
#: Bounds hit since last cleared (``depth_limit``, ``size_limit``): the input is then reported ``unobservable``.
CAPS: list[str] = []

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
#: An address as a default ``repr`` ends (``<Node object at 0x7f10e87291d0>``), within any text: never a value's.
_REPR_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]{4,}>")
#: File names the harness gives the code it runs; blanked in messages so truth and candidate compare equal.
HARNESS_FILE = re.compile(r"<calib[^>]*>|/calib_harness/[^\s'\"]*")
_FD, _FD_OWNERS = re.compile(r"\b(name|fd)=-?\d+\b"), frozenset({"_io", "io", "socket", "_socket", "ssl"})
_MEMORY_FILES = (io.BytesIO, io.StringIO)


def scrub(text: str) -> str:
    """Blank object addresses and harness file names in a message."""
    return HARNESS_FILE.sub("<code>", _ADDRESS.sub("0x?", text))


def _text(value: str) -> Any:
    """A string, or past ``MAX_STR`` its first part, its length and the digest of the whole."""
    if len(value) > MAX_STR:  # (lone surrogates are valid str content)
        return {"str": value[:MAX_STR], "truncated": len(value),
                "sha256": digest(value.encode("utf-8", "surrogatepass"))}
    return value


def _int(value: int) -> Any:
    """An integer beyond 2**53 by value, whatever ``sys.set_int_max_str_digits`` says (``str()`` of a
    long integer raises ``ValueError`` past that limit): decimal up to ``MAX_DECIMAL_BITS``, then hex."""
    if value.bit_length() <= MAX_DECIMAL_BITS:
        get = getattr(sys, "get_int_max_str_digits", None)
        limit = get() if get is not None else 0
        if limit:
            sys.set_int_max_str_digits(0)
        try:
            return {"int": str(value)}
        finally:
            if limit:
                sys.set_int_max_str_digits(limit)
    text = hex(value)  # linear time, no digit limit
    if len(text) > MAX_STR:
        return {"int_hex": text[:MAX_STR], "truncated": len(text), "sha256": digest(text.encode("ascii"))}
    return {"int_hex": text}


def _cap(kind: str, name: str) -> dict[str, str]:
    if kind not in CAPS:
        CAPS.append(kind)
    return {kind: name}


def _qualname(obj: Any) -> str:
    module = getattr(obj, "__module__", None) or ""
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__
    if module in ("builtins", "__main__") or module.startswith("calib_scaffold"):
        return str(name)
    return f"{module}.{name}"


# built once: json.dumps with these options builds a new encoder on every call
_KEY = json.JSONEncoder(sort_keys=True, default=str).encode
_BYTES = (bytes, bytearray, memoryview)
_TIMES = (datetime.date, datetime.time, datetime.timedelta)
_TIME_NAMES = frozenset(("datetime", "date", "time", "timedelta"))
_SEQUENCES, _SETS = (list, tuple), (set, frozenset)
_MAPPINGS = (dict, types.MappingProxyType)
_CALLABLES = (types.BuiltinFunctionType, types.MethodType, types.MethodWrapperType, types.WrapperDescriptorType,
              types.MethodDescriptorType, types.ClassMethodDescriptorType)
_SCALARS = (int, float, str)
_SIZED = (list, tuple, dict, set, frozenset, types.MappingProxyType)


MAX_NODES = 200_000
_budget = [MAX_NODES]
_identity = object.__hash__  # its address rotated (distinct among live objects), without id()'s audit event


def _c_encoder(sort_keys: bool, ascii: bool) -> Any:
    """A JSON encoder made of ``json``'s C functions, bound now: code under test that later replaces
    ``json.dumps`` or ``json.encoder``'s module functions changes neither output states nor events."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without _json
        return json.JSONEncoder(sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=ascii).encode
    strings = json.encoder.encode_basestring_ascii if ascii else json.encoder.encode_basestring
    iterencode = make(None, None, strings, None, ":", ",", sort_keys, False, True)
    return lambda value: "".join(iterencode(value, 0))


_DUMPS = _c_encoder(True, False)
#: The harness's events: insertion order (smaller, faster than sorting), ASCII (lone surrogates do not fit UTF-8).
encode_event = _c_encoder(False, True)


def canonical(value: Any, depth: int = 0, _seen: frozenset[int] | set[int] = frozenset()) -> Any:
    """Return a JSON-serialisable canonical form of ``value``.

    At most ``MAX_NODES`` values are visited per top-level call: a shared sub-list repeated 500 × 500
    times must not cost gigabytes; the cut is marked (``size_limit``) and recorded in :data:`CAPS`, as
    is nesting deeper than ``MAX_DEPTH`` (the harness then reports the input ``unobservable``).
    (Exact built-in types are tested first, by identity: the same result as the ``isinstance`` chain
    below them, which subclasses still go through. ``_seen``: identities of the containers on the path to ``value``.)
    """
    if depth == 0:
        _budget[0] = MAX_NODES
    _budget[0] -= 1
    if _budget[0] < 0:
        return _cap("size_limit", type(value).__name__)
    kind = type(value)
    if value is None or kind is bool:
        return value
    if kind is int:
        return value if -(2**53) < value < 2**53 else _int(value)
    if kind is float:
        return {"float": repr(value)}
    if kind is str:
        if " at 0x" in value:  # ``"visiting %s" % node``: a default repr's address, in a text x made of it
            value = _REPR_ADDRESS.sub(" at 0x?>", value)
        return value if len(value) <= MAX_STR else _text(value)
    if depth >= MAX_DEPTH:
        return _cap("depth_limit", kind.__name__)
    if (ident := _identity(value)) in _seen:
        return {"cycle": kind.__name__}
    (seen := _seen if type(_seen) is set else set(_seen)).add(ident)
    try:
        if isinstance(value, _SIZED) and len(value) > _budget[0]:  # more items than values left to visit
            return _cap("size_limit", kind.__name__)
        if kind is list or kind is tuple or kind is dict:
            return _mapping(value, kind, depth, seen) if kind is dict else _sequence(value, kind, depth, seen)
        if kind is Ran:  # its own tagged form, never equal to a dict the code returned
            return {tag: canonical(item, depth + 1, seen) for tag, item in value.form.items()}
        if is_standin(value):
            return {"standin": standin_name(value)}
        if isinstance(value, _BYTES):
            raw = bytes(value)
            if len(raw) > MAX_STR:
                return {kind.__name__: raw[:MAX_STR].hex(), "truncated": len(raw), "sha256": digest(raw)}
            return {kind.__name__: raw.hex()}
        if isinstance(value, _TIMES):
            # by value: the harness's frozen clock makes datetime a subclass whose repr differs; named by the
            # first datetime-module class of its type's MRO, not by the module's attributes (which the frozen
            # clock replaced: a plain ``date``, as ``datetime.date()`` returns, is no ``FrozenDate``)
            name = next(t.__name__ for t in kind.__mro__ if t.__module__ == "datetime" and t.__name__ in _TIME_NAMES)
            return {name: str(value)}
        if isinstance(value, complex):
            return {"complex": repr(value)}
        if isinstance(value, _SEQUENCES):
            return _sequence(value, kind, depth, seen)
        if isinstance(value, _MAPPINGS):
            return _mapping(value, kind, depth, seen)
        if isinstance(value, _SETS):
            items = sorted((canonical(item, depth + 1, seen) for item in value), key=_KEY)
            out: dict[str, Any] = {"frozenset" if isinstance(value, frozenset) else "set": items[:MAX_ITEMS]}
            if kind not in (set, frozenset):
                out["type"] = _qualname(kind)
            _tail(out, items)
            return out
        if isinstance(value, BaseException):  # its own attributes (``self.token = token``) are its state too
            out = {"exception": _qualname(kind), "args": canonical(value.args, depth + 1, seen)}
            return {**out, "state": _object(value, depth, seen)["state"]} if getattr(value, "__dict__", None) else out
        if isinstance(value, type):
            return _class(value, depth, seen)
        if isinstance(value, types.FunctionType):
            return _function(value, depth, seen)
        if isinstance(value, types.CodeType):
            return {"code": _code(value, depth, seen)}
        if isinstance(value, _CALLABLES):
            out = {"function": _qualname(value)}
            bound = getattr(value, "__self__", None)
            if bound is not None and not isinstance(bound, types.ModuleType):  # [].append, obj.method
                out["self"] = canonical(bound, depth + 1, seen)
                if isinstance(value, types.MethodType):
                    out["function"] = canonical(value.__func__, depth + 1, seen)
            return out
        if kind.__module__ == "functools" and kind.__name__ == "partial":
            return {"partial": canonical(value.func, depth + 1, seen), "args": canonical(value.args, depth + 1, seen),
                    "keywords": canonical(value.keywords, depth + 1, seen)}
        if isinstance(value, types.ModuleType):
            return {"module": value.__name__}
        if isinstance(value, _SCALARS):  # subclasses: enums (IntEnum), str subclasses
            return {"type": _qualname(kind), "value": canonical(_builtin(value), depth + 1, seen)}
        if kind.__module__ == "pathlib" and hasattr(value, "__fspath__"):
            # by its text: a Path caches derived fields (``_str``, ``_parts``) as used, so two equal ones differ
            return {"path": str(value)}
        return _object(value, depth, seen)
    finally:
        seen.discard(ident)


def _items(values: Any, depth: int, seen: set[int]) -> list[Any]:
    """``[canonical(item, depth, seen) for item in values]``, its first cases made here (one value of the budget)."""
    out = []
    for item in values:
        if ((kind := type(item)) is str and len(item) <= MAX_STR and " at 0x" not in item
                or kind is int and -(2**53) < item < 2**53
                or kind is bool or item is None or kind is float) and _budget[0] > 0:
            _budget[0] -= 1
            out.append({"float": repr(item)} if kind is float else item)
        else:
            out.append(canonical(item, depth, seen))
    return out


def _tail(out: dict[str, Any], items: list[Any]) -> None:
    """Past ``MAX_ITEMS`` canonical items: keep the first ones in ``out``, the count and a digest of the rest."""
    if len(items) > MAX_ITEMS:
        out["truncated"] = len(items)
        out["sha256"] = digest(_DUMPS(items[MAX_ITEMS:]).encode("utf-8", "surrogatepass"))


def _sequence(value: Any, kind: type, depth: int, seen: set[int]) -> dict[str, Any]:
    items = _items(value, depth + 1, seen)  # all of them: the tail is digested
    out: dict[str, Any] = {"tuple" if isinstance(value, tuple) else "list": items[:MAX_ITEMS]}
    if kind is not list and kind is not tuple:
        out["type"] = _qualname(kind)
        if hasattr(value, "_fields"):
            out["fields"] = list(value._fields)
        attrs = getattr(value, "__dict__", None)  # a subclass's attributes besides its items: its state too
        if type(attrs) is dict and attrs:
            out["state"] = [[k, canonical(attrs[k], depth + 1, seen)] for k in sorted(attrs, key=str)]
    _tail(out, items)
    return out


def _mapping(value: Any, kind: type, depth: int, seen: set[int]) -> dict[str, Any]:
    items = []  # sorted before the cap, so that two equal mappings built in different orders keep the same items
    # the keys read and made canonical as by the generator that did it before (a StopIteration: RuntimeError)
    for key, item in value.items() if kind is dict else ((k, v) for k, v in value.items()):
        if type(key) is str and len(key) <= MAX_STR and " at 0x" not in key and _budget[0] > 0:  # as canonical
            _budget[0] -= 1
            items.append([key, item])
        else:
            items.append([next(canonical(k, depth + 1, seen) for k in (key,)), item])
    if items:  # then the values, in that order
        text = _KEY.__func__.__globals__.get("encode_basestring_ascii") or _KEY  # what _KEY calls for a str
        keys = [text(k) if type(k) is str else _KEY(k) for k, _ in items]  # sorted by _KEY's texts, as a set
        items = [items[i] for i in sorted(range(len(items)), key=keys.__getitem__)]
        for pair in items:
            if ((of := type(item := pair[1])) is str and len(item) <= MAX_STR and " at 0x" not in item
                    or of is int and -(2**53) < item < 2**53 or of is bool or item is None or of is float) \
                    and _budget[0] > 0:  # as in _items
                _budget[0] -= 1
                pair[1] = {"float": repr(item)} if of is float else item
            else:
                pair[1] = canonical(item, depth + 1, seen)
    out: dict[str, Any] = {"dict": items[:MAX_ITEMS]}
    if kind is not dict:
        out["type"] = _qualname(kind)
        attrs = getattr(value, "__dict__", None)  # (as for a list's subclass)
        if type(attrs) is dict and attrs:
            out["state"] = [[k, canonical(attrs[k], depth + 1, seen)] for k in sorted(attrs, key=str)]
    _tail(out, items)
    return out


class Ran:
    """What the harness ran to completion for x: a generator's items (``{"generator": [...]}``), an iterator's, an
    async generator's, a context entered; canonical as that tagged object, unlike any value of the code's own."""

    __slots__ = ("form",)

    def __init__(self, form: dict[str, Any]) -> None:
        self.form = form


#: Digests of x's own code objects as written, by (first line, name, local names): the search runs x with its
#: comparisons rewritten (:mod:`.cmplog`), and a closure x returns must have the digest the replay sees. None: two
#: code objects share the key.
PINNED: dict[tuple[Any, ...], str | None] = {}


def _pin_key(code: types.CodeType) -> tuple[Any, ...]:
    return code.co_firstlineno, code.co_name, code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]


def pin(code: types.CodeType, filename: str) -> None:
    """Record the digests of ``code`` (x compiled as written) and of the code nested in it."""
    PINNED.clear()
    todo = [code]
    while todo:
        item = todo.pop()
        todo.extend(c for c in item.co_consts if isinstance(c, types.CodeType))
        if item.co_filename == filename and item.co_name != "<module>":
            key = _pin_key(item)
            PINNED[key] = None if key in PINNED else _code(item, 1, frozenset())


def _code(code: types.CodeType, depth: int, seen: set[int]) -> str:
    """A digest of what a code object does: its bytecode, constants (nested code in turn), names and
    signature; not its line numbers, file name or local variable names (a renamed local is the same code)."""
    pinned = PINNED.get(_pin_key(code)) if PINNED and code.co_filename.startswith("<calib") else None
    if pinned is not None:
        return pinned
    parts = [code.co_code.hex(), code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
             code.co_flags, list(code.co_names), list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]),
             len(code.co_freevars), _items(code.co_consts, depth + 1, seen)]
    return digest(_DUMPS(parts).encode("utf-8", "surrogatepass"))


def _function(value: types.FunctionType, depth: int, seen: set[int]) -> dict[str, Any]:
    """A Python function by name and behaviour: its code, defaults and the values it captured, so two
    lambdas, or two closures of one ``def`` over different values, are not equal by their name."""
    out: dict[str, Any] = {"function": _qualname(value), "code": _code(value.__code__, depth, seen)}
    if value.__defaults__:
        out["defaults"] = canonical(value.__defaults__, depth + 1, seen)
    if value.__kwdefaults__:
        out["kwdefaults"] = canonical(value.__kwdefaults__, depth + 1, seen)
    if value.__closure__:
        cells = []
        for cell in value.__closure__:
            try:
                cells.append(canonical(cell.cell_contents, depth + 1, seen))
            except ValueError:  # a cell not yet filled
                cells.append({"empty_cell": True})
        out["closure"] = cells
    return out


def _class(value: type, depth: int, seen: set[int]) -> dict[str, Any]:
    """A class by name; one made inside a function (``<locals>``) also by its body, code of the variant that made it
    (a module-level class is the same code for every variant)."""
    out: dict[str, Any] = {"class": _qualname(value)}
    if "<locals>" in (getattr(value, "__qualname__", "") or ""):
        body = {k: v for k, v in vars(value).items() if k not in ("__dict__", "__weakref__", "__module__",
                                                                  "__qualname__", "__doc__")}
        out["body"] = canonical(body, depth + 1, seen)
        out["bases"] = [_qualname(b) for b in value.__bases__]
    return out


def _builtin(value: Any) -> Any:
    for base in (bool, int, float, str):
        if isinstance(value, base):
            return base(value)
    return value


#: A logger's memo of ``isEnabledFor`` answers and the registry of every logger: the process's history fills them.
_LOGGER_MEMOS = frozenset({"_cache", "manager"})
#: A started thread's identifiers: the process's (the thread's handle and the kernel's task id, which counts the
#: threads and processes the batch made before), never the code's behaviour.
_THREAD_IDS = frozenset({"_ident", "_native_id"})


def _object(value: Any, depth: int, seen: set[int]) -> Any:
    by_repr = type(value).__module__ in _FD_OWNERS  # a file or socket: its ``repr`` (mode, name, closed or not)
    try:
        attrs = {} if by_repr else dict(vars(value))
    except TypeError:
        attrs = {}
    if (logging := sys.modules.get("logging")) is not None and isinstance(value, logging.Logger):
        attrs = {k: v for k, v in attrs.items() if k not in _LOGGER_MEMOS}
    if (threading := sys.modules.get("threading")) is not None and isinstance(value, threading.Thread):
        attrs = {k: v for k, v in attrs.items() if k not in _THREAD_IDS}
    mro, walk = type(value).__mro__, not by_repr and type(type(value)) is not type
    for c in () if walk or by_repr else mro:  # metaclass type: ``getattr(c, "__slots__", ())`` is () unless set
        walk = walk or type(c) is not type or "__slots__" in c.__dict__
    if walk:
        for slot_owner in mro:
            for slot in getattr(slot_owner, "__slots__", ()) or ():
                if isinstance(slot, str) and hasattr(value, slot) and slot not in ("__dict__", "__weakref__"):
                    attrs.setdefault(slot, getattr(value, slot))
    state = (dict(zip(attrs, _items(attrs.values(), depth + 1, seen))) if attrs and all(type(k) is str for k in attrs)
             else {name: canonical(item, depth + 1, seen) for name, item in attrs.items()})  # (str: its own hash)
    out: dict[str, Any] = {"object": _qualname(type(value))}
    if state:
        out["state"] = [[k, state[k]] for k in sorted(state)]
    else:
        try:
            text = repr(value)
        except Exception as exc:  # noqa: BLE001 - a broken __repr__ is part of the object's behaviour
            text = f"<repr raised {type(exc).__name__}>"
        if type(value).__module__ in _FD_OWNERS:  # ``<_io.BufferedRandom name=3>``
            text = _FD.sub(r"\1=<fd>", text)
        out["repr"] = _text(scrub(text))
        if type(value) in _MEMORY_FILES and not value.closed:  # an in-memory file: what it holds, where it is at
            out.update(value=canonical(value.getvalue(), depth + 1, seen), position=value.tell())
    return out


def dumps(value: Any) -> str:
    """The canonical JSON text of an already canonical structure (what matching compares)."""
    return _DUMPS(value)
