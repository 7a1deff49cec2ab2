"""Comparison feedback for the input search (runs inside the sandbox; stdlib only).

While x is explored (never while it is measured; replays run the code as written), its two-operand
comparisons are rewritten to ``__calib_cmp__(left, right, "Eq")``, which evaluates them as Python would
and notes the primitive operands: values computed at run time, which no literal reveals, join the pools
(input-to-state correspondence, as in Redqueen, Aschermann et al., NDSS 2019). The operand *pairs* are
kept too, of ``s.startswith(p)``, ``d.get(k)`` (``__calib_cmp__.method(s, "startswith", p)``) and chained
comparisons (``__calib_cmp__.see``): when one side is found in an input value, the search rewrites it to
the other side (:func:`.synth.replacements`). The module's functions x calls (:func:`helpers`) are
rewritten too (their first :data:`CALLS` comparisons per run recorded), so a check in ``parse(text)``
guides the search as one in x does.

Beyond comparisons (issue 24): a failed ``pattern.match/search/fullmatch(s)`` or ``re.match(p, s)`` (and a
``finditer``/``findall`` that found nothing) keeps
``("regex", s, (pattern, flags))`` (:mod:`.regexes`); ``len``, ``ord`` and ``int`` become
``__calib_cmp__.size/code/number``, so a comparison on their result (``len(doi) != 9``, ``ord(ch) < 0x80``,
``len(ip.split(".")) == 4``) keeps the text it came from (``len``, ``len_order``, ``ord``, ``parts``), and
a text ``int()`` refused is kept (``number``); ``s.isdigit()`` and the other ``str.is*`` checks keep
``("charclass", s, "isdigit")`` (``"!isdigit"`` when it held), ``s.encode("ascii")`` ``"!isascii"``;
``isinstance(v, bytes)`` becomes ``__calib_cmp__.isa``, which keeps a text, bytes or number that is not of the
builtin type asked for with that type's name (``("isa", ":status", "bytes")``: the search writes it as one).
An input's ``None`` or empty container compared with a number or text (``match["turns"] == 1`` on ``[]``)
keeps ``("whole", "list", 1)``, a number or text looked for in an empty one (``mark in used`` on ``set()``)
``("member", "set", mark)``, and ``len()`` of a number ``("as_text", 2, "str")`` (:func:`size`).
"""

from __future__ import annotations

import ast
import importlib as _importlib
import operator
import re as _re
import struct as _struct

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

NAME = "__calib_cmp__"
LIMIT = 2000
OBSERVED: list[Any] = []
PAIR_LIMIT = 400
CALLS = 120  # comparisons in helpers recorded per run: later ones (a loop over a text) are only evaluated
_SPENT = [0]  # comparisons in helpers recorded this run
#: (kind, one side, other side) per comparison: ``eq`` (==, !=, an ``in`` container's members),
#: ``order`` (<, <=, >, >=), ``prefix``/``suffix`` (startswith/endswith), ``contains`` (``sub in text``)
PAIRS: list[tuple[str, Any, Any]] = []
_METHODS = {"startswith": "prefix", "endswith": "suffix", "get": "eq", "pop": "eq", "match": "regex",
            "search": "regex", "fullmatch": "regex", "finditer": "regex", "findall": "regex", "split": "parts",
            "rsplit": "parts", "encode": "encode", "unpack": "struct", "unpack_from": "struct",
            "import_module": "module", "find": "find", "rfind": "find", "index": "find", "rindex": "find",
            "count": "find"}
_ASCII = frozenset({"ascii", "us-ascii", "ASCII", "US-ASCII"})  # ``s.encode("ascii")`` is recorded
_CHECKS = frozenset({"isdigit", "isdecimal", "isnumeric", "isalpha", "isalnum", "isspace", "isupper", "islower",
                     "isascii", "isidentifier"})  # ``s.isdigit()``: the text kept, as ``charclass``
_BUILTINS = {"len": "size", "ord": "code", "int": "number"}  # builtins whose argument is kept (see below)
_LOOKUPS = {"getattr": "lookup", "hasattr": "has", "import_module": "imports"}  # lookups by name (see below)
#: What a failed ``import_module(name)`` on a text is paired with: modules every sandbox can import.
MODULES = ("os", "json", "string")
_NAMESPACE, _MRO = type.__dict__["__dict__"], type.__dict__["__mro__"]  # a class's, read without its metaclass
_NAMESPACES = (type(_NAMESPACE), type(type(_re).__dict__["__dict__"]))  # how instances and modules hold theirs
_SIZES: dict[int, Any] = {}  # length -> the text len() gave it for, this run
_CODES: dict[int, str] = {}  # code point -> the character ord() gave it for, this run
_SPLITS: dict[int, tuple[Any, Any, Any]] = {}  # id of a list s.split(sep) gave -> (the list, s, sep), this run
_PARTS: dict[int, tuple[Any, Any]] = {}  # length -> (s, sep) of a split list len() was taken of, this run
_CUTS: dict[int, tuple[Any, Any, int]] = {}  # id of a slice ``s[i:j]`` -> (the slice, s, i), this run

_OPS = {"Eq": operator.eq, "NotEq": operator.ne, "Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt,
        "GtE": operator.ge, "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b, "Is": operator.is_,
        "IsNot": operator.is_not}
_SINGLETONS = (None, True, False)
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
        cut = _CUTS.get(id(a)) if kind == "eq" and _CUTS else None
        if cut is not None and cut[0] is a and type(b) in (str, bytes):  # ``buf[512:516] == b"\xA0F..."``
            PAIRS.append(("at", cut[1], (cut[2], b)))  # the text, where, and what x wants there
        if kind in ("eq", "order") and type(a) is int and type(b) is int:  # a length or a code point of a text
            for this, other in ((a, b), (b, a)):
                if this in _CODES:
                    PAIRS.append(("ord", _CODES[this], other))
                if this in _SIZES:
                    PAIRS.append(("len" if kind == "eq" else "len_order", _SIZES[this], other))
                if this in _PARTS:  # ``len(ip.split(".")) == 4``: the text, its separator and the count wanted
                    text, sep = _PARTS[this]
                    PAIRS.append(("parts" if kind == "eq" else "parts_order", text, (sep, other)))


_EMPTY = {list: "list", tuple: "tuple", dict: "dict", set: "set"}  # empty containers a ``whole`` pair names


def _whole(kind: str, a: Any, b: Any) -> None:
    """``match["turns"] == 1`` on an input's ``[]`` (``None`` or another empty container) against a number or
    text: keep ``("whole", "list", 1)`` (``whole_order`` for ``<``, which raises there), and the search puts
    the number in the container's place (:func:`.redqueen._rewrite`). Never raises."""
    for this, other in ((a, b), (b, a)):
        if type(other) not in _PRIMITIVE or (type(other) in (str, bytes) and len(other) > 80) \
                or len(PAIRS) >= PAIR_LIMIT:
            continue
        if this is None and other is not None:
            PAIRS.append((kind, None, other))
        elif type(this) in _EMPTY and not this:
            PAIRS.append((kind, _EMPTY[type(this)], other))


def _keep(kind: str, a: Any, b: Any) -> None:
    if len(PAIRS) < PAIR_LIMIT and type(a) in (str, bytes) and len(a) <= 200:
        PAIRS.append((kind, a, b))


def _plain(value: Any) -> Any:
    """An int or text enum member (``socket.AF_INET6``, ``IntEnum``, ``StrEnum``) as the plain value it
    compares as, through the base type's own slot (no method of x's runs); a short ``bytearray`` as bytes
    (``buf[:8] == bytearray([0x89, 0x50, ...])``: filetype's magic numbers); else ``value`` itself."""
    if type(value) is bytearray and len(value) <= 80:
        return bytes(value)
    if type(value) in _PRIMITIVE or not isinstance(value, int | str) or isinstance(value, bool):
        return value
    return int.__index__(value) if isinstance(value, int) else str.__str__(value)


def compare(left: Any, right: Any, op: str) -> Any:
    """``left <op> right``, noting primitive operands (and a few members of a container for ``in``)."""
    a, b = _plain(left), _plain(right)
    _note(a)
    _note(b)
    if op in ("In", "NotIn") and type(right) in (list, tuple, set, frozenset, dict):
        for item in list(right)[:8]:
            _note(item := _plain(item))
            _pair("eq", a, item)
        if not right and type(right) in _EMPTY and type(a) in _PRIMITIVE and len(PAIRS) < PAIR_LIMIT \
                and (type(a) not in (str, bytes) or len(a) <= 80):  # ``mark in blobs["used"]`` on the input's set()
            PAIRS.append(("member", _EMPTY[type(right)], a))
    elif op in ("In", "NotIn") and type(b) in (str, bytes) and type(a) is type(b):
        _pair("contains", a, b)
    elif op in ("Eq", "NotEq"):
        _pair("eq", a, b)
        if type(a) not in _PRIMITIVE or type(b) not in _PRIMITIVE:
            _whole("whole", a, b)
    elif op in ("Lt", "LtE", "Gt", "GtE") and type(a) in (int, float) and type(b) in (int, float):
        _pair("order", a, b)
    elif op in ("Lt", "LtE", "Gt", "GtE") and (type(a) in (int, float) or type(b) in (int, float)):
        _whole("whole_order", a, b)  # ``None > 3`` raises: a number there
    elif op in ("Lt", "LtE", "Gt", "GtE"):  # text and bytes: the other side itself is on the boundary
        _pair("eq", a, b)
    elif op in ("Is", "IsNot"):  # ``node[1] is None``, ``flag is True`` on a number or text of the input: the
        # singleton there (``("is", -4, None)``); ``expr[0] is not NOT`` on two ints, as ``==`` (small ints are one)
        if type(b) is int and type(a) is int:
            _pair("eq", a, b)
        else:
            if any(a is s for s in _SINGLETONS):
                a, b = b, a
            if type(a) in _PRIMITIVE and any(b is s for s in _SINGLETONS) and len(PAIRS) < PAIR_LIMIT \
                    and (type(a) not in (str, bytes) or len(a) <= 80):
                PAIRS.append(("is", a, b))
    return _OPS[op](left, right)


_CONVERTIBLE = {str: "str", bytes: "bytes", int: "int", float: "float"}  # what ``isa`` keeps, by name


def isa(value: Any, kinds: Any) -> bool:
    """``isinstance(value, kinds)``, keeping a text, bytes or number that is not of the builtin type (or one
    of the builtin types) asked for, with that type's name: ``for n, v in headers: if isinstance(n, bytes):``
    on ``":status"`` gives ``("isa", ":status", "bytes")``, and the search writes ``b":status"`` there."""
    held = isinstance(value, kinds)
    if not held and type(value) in _CONVERTIBLE and len(PAIRS) < PAIR_LIMIT \
            and (type(value) not in (str, bytes) or len(value) <= 200):
        for kind in (kinds if type(kinds) is tuple else (kinds,))[:4]:
            if kind in _CONVERTIBLE:
                PAIRS.append(("isa", value, _CONVERTIBLE[kind]))
    return held


def _retype(value: Any, kind: type) -> None:
    """Note ``value`` (a text, bytes or number) as one x read as the builtin type ``kind`` and failed on
    (``("as", value, "bytes")``, rewritten as :func:`isa`'s pairs are); a slice of a text (``buf[:2]``,
    :func:`cut`) as that whole text."""
    held = _CUTS.get(id(value)) if _CUTS else None
    if held is not None and held[0] is value:
        value = held[1]
    if len(PAIRS) < PAIR_LIMIT and (type(value) not in (str, bytes) or len(value) <= 200):
        PAIRS.append(("as", value, _CONVERTIBLE[kind]))


def item(obj: Any, key: Any) -> Any:
    """``TABLE[key]`` of a module constant: a key the dict lacks is noted against the keys it has (as
    ``TABLE.get(key)``), so ``_COMPONENT_VALIDATORS[component]`` gets an input with ``"scheme"``."""
    if type(obj) is dict and type(key) in _PRIMITIVE and key not in obj:
        _note(key)
        _missing(key, list(obj)[:400])
    return obj[key]


def method(obj: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """``obj.name(*args, **kwargs)``, noting ``text.startswith(prefix)``/``endswith`` operands and the
    key a mapping was asked for (``options.get("mode")``) against the keys it has; the text a regular
    expression did not match and the text a ``str.is*`` check was made on."""
    kind = _METHODS.get(name)
    if kind == "regex":
        return _regex(obj, name, args, kwargs)
    if kind == "parts":
        return _split(obj, name, args, kwargs)
    if kind == "encode":
        return _encode(obj, args, kwargs)
    if kind == "struct":
        return _unpack(obj, name, args, kwargs)
    if kind == "module":
        return imports(getattr(obj, name), *args, **kwargs)
    if kind == "find":
        return _find(obj, name, args, kwargs)
    if name in _CHECKS and type(obj) is str and not args and not kwargs:
        held = getattr(obj, name)()
        if obj:
            _keep("charclass", obj, "!" + name if held else name)
        return held
    if type(obj) is dict and args and name in ("get", "pop"):
        _note(args[0])
        if type(args[0]) in _PRIMITIVE and args[0] not in obj:
            _missing(args[0], list(obj)[:400])
    elif type(obj) in (str, bytes) and args and name in ("startswith", "endswith"):
        wanted = args[0] if isinstance(args[0], tuple) else (args[0],)
        for item in wanted[:4]:
            if type(item) is type(obj):
                _note(item)
                _pair(_METHODS[name], obj, item)
            elif type(item) in (str, bytes):  # ``"3".endswith(b"\n")``: the text written as bytes (below)
                _retype(obj, type(item))
    if type(obj) in _CONVERTIBLE and type(obj) not in (str, bytes) and (kind in ("prefix", "suffix") and args
                                                                       or name in _CHECKS):
        # a text's method called on a number drawn from the input (``next(lines).endswith(b"\n")`` on ``[3]``,
        # ``n.isdigit()``): as ``isinstance``, the number is written as the type the method is of
        affix = args[0][0] if args and type(args[0]) is tuple and args[0] else args[0] if args else ""
        _retype(obj, type(affix) if type(affix) in (str, bytes) else str)
    return getattr(obj, name)(*args, **kwargs)


def _unpack(obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``struct.unpack(fmt, data)`` (``unpack_from``, a ``Struct``'s): when ``data`` is shorter than the format
    reads, ``("len", data, size)``, so ``readInt16(buf)`` on one byte gets an input of two; when it is a text,
    ``("as", data, "bytes")``."""
    try:
        return getattr(obj, name)(*args, **kwargs)
    except (_struct.error, TypeError):
        try:
            if obj is _struct and len(args) >= 2 and type(args[0]) in (str, bytes):
                size, rest = _struct.calcsize(args[0]), args[1:]
            elif type(obj) is _struct.Struct and args:
                size, rest = obj.size, args
            else:
                raise
            data = rest[0]
            offset = rest[1] if len(rest) > 1 else kwargs.get("offset", 0)
            if name == "unpack_from" and type(offset) is int and offset >= 0:
                size += offset
            held = _CUTS.get(id(data)) if _CUTS else None
            if held is not None and held[0] is data and len(data) < size:  # ``buf[4:8]`` of a short ``buf``
                data, size = held[1], held[2] + size
            if type(data) in (bytes, bytearray) and len(data) < size <= 4096:
                _keep("len_order" if name == "unpack_from" or held is not None else "len", bytes(data), size)
            elif type(data) is str:  # a text where bytes are read: written as bytes (then resized)
                _retype(data, bytes)
        except BaseException:  # noqa: BLE001 - noting never changes what x does
            pass
        raise


def lookup(obj: Any, name: Any, *default: Any) -> Any:
    """``getattr(obj, name[, default])``, keeping a text ``name`` that ``obj`` lacks against names it has
    (:func:`_names`): ``getattr(self, "visit_" + kind)`` gets ``kind`` written as a ``visit_*`` method's suffix."""
    try:
        return getattr(obj, name)
    except AttributeError:
        _names(obj, name)
        if default:
            return default[0]
        raise


def has(obj: Any, name: Any) -> bool:
    """``hasattr(obj, name)``, keeping a text ``name`` that ``obj`` lacks as :func:`lookup` does."""
    held = hasattr(obj, name)
    if not held:
        _names(obj, name)
    return held


def imports(func: Any, *args: Any, **kwargs: Any) -> Any:
    """``import_module(name)``: a text that names no module is paired with :data:`MODULES`, so a loader of
    ``"package.module:attribute"`` paths gets one that imports (then :func:`lookup` finds the attribute)."""
    try:
        return func(*args, **kwargs)
    except ImportError:
        if func is _importlib.import_module and args and type(args[0]) is str and 0 < len(args[0]) <= 80:
            for module in MODULES:
                _pair("key", args[0], module)
        raise


def _names(obj: Any, name: Any) -> None:
    """Pairs of ``name`` with the attribute names of ``obj`` (its own ``__dict__`` and its class's, read without
    running any of its code) that share the longest prefix with it, and of the rest of ``name`` after that prefix
    with theirs; with no common prefix, the first public names."""
    if type(name) is not str or not 0 < len(name) <= 80 or len(PAIRS) >= PAIR_LIMIT:
        return
    try:
        known = [k for k in dict.fromkeys(_attribute_names(obj)[:400]) if not k.startswith("__")]
    except BaseException:  # noqa: BLE001 - noting never changes what x does
        return
    _missing(name, known, sorted(k for k in known if not k.startswith("_"))[:4])


def _missing(key: Any, known: list[Any], fallback: list[Any] | None = None) -> None:
    """Pairs of a ``key`` looked up and not found with the ``known`` keys (or names) that share the longest prefix
    with it, at least two characters, and of what follows that prefix in each (``"P-" + style`` against
    ``"P-Heading"``: ``style`` gets ``"Heading"``); else with ``fallback`` (by default the first eight keys)."""
    shared = 0
    if type(key) in (str, bytes) and key:
        def common(k: Any) -> int:
            if type(k) is not type(key):
                return 0
            n = 0
            while n < len(k) and n < len(key) and k[n] == key[n]:
                n += 1
            return n

        shared = max(map(common, known), default=0)
    if shared >= 2:
        for k in sorted(k for k in known if common(k) == shared)[:4]:
            _pair("key", key[shared:], k[shared:])
            _pair("key", key, k)
    else:  # (a mapping's first keys: the comparisons of an ``==``, as before names were paired)
        for k in known[:8] if fallback is None else fallback:
            _pair("eq" if fallback is None else "key", key, k)


def _attribute_names(obj: Any) -> list[str]:
    """The names in ``obj``'s own ``__dict__`` (an instance's, a module's) and in its classes' (a class: its own
    and its bases'), read through the builtin descriptors only: no property, ``__getattr__`` or metaclass of the
    code's runs."""
    owner = type(obj)
    names: list[str] = []
    if issubclass(owner, type):
        classes = _MRO.__get__(obj)[:-1]
    else:
        classes = _MRO.__get__(owner)[:-1]
        for klass in _MRO.__get__(owner):
            held = _NAMESPACE.__get__(klass).get("__dict__")
            if held is not None:  # the instance's namespace, where its class keeps the usual descriptor for it
                own = held.__get__(obj, owner) if type(held) in _NAMESPACES else None
                if type(own) is dict:
                    names.extend(k for k in own if type(k) is str)
                break
    for klass in classes:
        names.extend(k for k in _NAMESPACE.__get__(klass) if type(k) is str)
    return names


def _regex(obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``pattern.match(s)`` or ``re.match(pattern, s)``: when nothing matched, ``s`` and the pattern."""
    found = getattr(obj, name)(*args, **kwargs)
    every = name in ("finditer", "findall")  # ``for m in KEYWORD_REGEX.finditer(line)``: kept when none matched
    if found is not None and not every:
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
        if every:
            try:
                if _re.search(pattern, text, flags) is not None:
                    return found
            except (TypeError, ValueError, _re.error):
                return found
        _keep("regex", text, (pattern, int(flags)))
    return found


def _find(obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``text.find(key)`` (``rfind``, ``index``, ``rindex``, ``count``) that did not find ``key`` in the text: kept as
    ``key in text`` is (``("contains", key, text)``), so the search puts ``key`` in the text."""
    kept = type(obj) in (str, bytes) and args and type(args[0]) is type(obj)
    try:
        found = getattr(obj, name)(*args, **kwargs)
    except ValueError:  # ``index`` did not find it (raised on, as x would see it)
        if kept:
            _note(args[0])
            _pair("contains", args[0], obj)
        raise
    if kept and found == (0 if name == "count" else -1):
        _note(args[0])
        _pair("contains", args[0], obj)
    return found


_REGEX_FUNCTIONS = ("match", "search", "fullmatch", "finditer", "findall")
_BOUND = type(_re.compile("").match)  # a builtin's bound method (a compiled pattern's ``search``)


def bare(func: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """``match(pattern, s)`` by a bare name (``from re import match``): as ``re.match`` (:func:`_regex`) when the
    name is bound to ``re``'s own function, else the call as written."""
    if func is getattr(_re, name, None):
        return _regex(_re, name, args, kwargs)
    if type(func) is _BOUND and type(func.__self__) is _re.Pattern and func.__name__ in _REGEX_FUNCTIONS:
        return _regex(func.__self__, func.__name__, args, kwargs)  # ``_search = re.compile(p).search``
    return func(*args, **kwargs)


def _split(obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``s.split(sep)``: the list remembered with ``s`` and ``sep``, for a ``len()`` of it (:func:`size`)."""
    parts = getattr(obj, name)(*args, **kwargs)
    if type(obj) in (str, bytes) and type(parts) is list and len(_SPLITS) < 16 and len(obj) <= 200:
        sep = args[0] if args else kwargs.get("sep")
        if sep is None or type(sep) is type(obj) and sep:
            _SPLITS[id(parts)] = (parts, obj, sep)
    return parts


def _encode(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``s.encode("ascii")``: an ASCII text that passed is kept as ``!isascii`` (a non-ASCII one takes the
    ``except UnicodeEncodeError`` branch), one that failed as ``isascii``."""
    try:
        out = obj.encode(*args, **kwargs)
    except UnicodeEncodeError:
        _keep("charclass", obj, "isascii")
        raise
    if type(obj) is str and obj.isascii():
        _keep("charclass", obj, "!isascii")
    return out


def size(value: Any) -> int:
    """``len(value)``, keeping ``value`` (a non-empty text) under its length, and the text and separator of a
    list ``s.split(sep)`` gave (other sequences' lengths vary in the pools already)."""
    try:
        n = len(value)
    except TypeError:  # ``len(match["base_token"])`` of the input's 2: its text ("2") is tried
        if type(value) in (int, float) and len(PAIRS) < PAIR_LIMIT:  # (not ``as``: no rewrite at first sight)
            PAIRS.append(("as_text", value, "str"))
        raise
    if type(value) is list and _SPLITS:
        split = _SPLITS.get(id(value))
        if split is not None and split[0] is value and (n in _PARTS or len(_PARTS) < 16):
            _PARTS[n] = (split[1], split[2])
        return n
    if type(value) in (str, bytes) and 0 < n <= 200 and (n in _SIZES or len(_SIZES) < 32):
        _SIZES[n] = value
    return n


def cut(value: Any, start: Any, stop: Any) -> Any:
    """``value[start:stop]``, keeping a text's slice with the text and where it starts (``buf[0:8] == MAGIC``
    then puts ``MAGIC`` there: :func:`.redqueen._rewrite`, kind ``at``)."""
    part = value[start:stop]  # the bounds as written (None too): a stand-in or x's own class sees the same slice
    start = 0 if start is None else start
    if type(value) in (str, bytes) and type(start) is int and 0 <= start <= 4096 and len(_CUTS) < 64 \
            and (part or len(value) <= start or type(stop) is int and stop < 0):
        # an empty slice of a text too short to reach it (``number[3:5]`` of ``"R"``, ``fmt[1:-1]`` of ``"()"``) is
        # kept too: the empty text is one object, so the comparison that follows pairs it with the last such cut
        _CUTS[id(part)] = (part, value, start)
    return part


def at(value: Any, index: int) -> Any:
    """``value[index]`` for an index written as a number, keeping a text's character with the text and its position
    (``fmt[0][0] != "("``, ``s[-1] == ")"``: the comparison that follows puts the wanted character there, kind
    ``at``; a replacement of the first such character, as ``eq`` gives, misses ``s[-1]``)."""
    part = value[index]
    if type(value) is str and len(_CUTS) < 64:
        _CUTS[id(part)] = (part, value, index)  # a negative index as written: from the end (:func:`.shapes.put`)
    return part


def code(char: Any) -> int:
    """``ord(char)``, keeping ``char`` under its code point."""
    n = ord(char)
    if len(_CODES) < 64 and type(char) is str:
        _CODES[n] = char
    return n


def number(text: Any) -> Any:
    """``int(text)``, keeping a text it refused; an empty slice of an input too short to reach it (``int(tz[1:-2])``
    of ``b"+"``) keeps digits wanted where the slice starts (``at``: ``b"+1234"``)."""
    try:
        return int(text)
    except ValueError:
        if type(text) is str:
            _keep("number", text, "")
        held = _CUTS.get(id(text)) if not text and type(text) in (str, bytes) and _CUTS else None
        if held is not None and held[0] is text and len(PAIRS) < PAIR_LIMIT:
            if len(held[1]) > held[2]:  # ``int(fmt[1:-1])`` of ``"()"``: digits between, the end kept (``"(1)"``)
                PAIRS.append(("insert", held[1], (held[2], b"1" if type(text) is bytes else "1")))
            else:
                PAIRS.append(("at", held[1], (held[2], b"1234" if type(text) is bytes else "1234")))
        raise


_CHAIN: list[Any] = [None]


def inner(left: Any, right: Any, op: str) -> Any:
    """:func:`compare` in a helper x calls: past :data:`CALLS` in one run, only evaluated."""
    if _SPENT[0] >= CALLS:
        return _OPS[op](left, right)
    _SPENT[0] += 1
    return compare(left, right, op)


def see(value: Any, position: int, op: str) -> Any:
    """An operand of a chained comparison (``a < b < c``), evaluated: noted, and paired with the one
    before it (Python evaluates the chain left to right and stops early, so the pairs are the ones made).
    Not noted once the helpers' comparisons spent this run's :data:`CALLS`."""
    if _SPENT[0] >= CALLS:
        return value
    _note(value)
    if position:
        kind = "order" if op in ("Lt", "LtE", "Gt", "GtE") and type(value) in (int, float) \
            and type(_CHAIN[0]) in (int, float) else "eq"  # (``"a" < n < 5`` compared a text with a number)
        _pair(kind, _CHAIN[0], value)
    _CHAIN[0] = value
    return value


# reached as ``__calib_cmp__.method`` ...
for _recorder in (method, item, see, size, code, cut, at, number, inner, isa, lookup, has, imports, bare):
    setattr(compare, _recorder.__name__, _recorder)


def _recorded(node: ast.AST, recorder: str) -> bool:
    """Whether ``node`` calls the recorder ``recorder`` (``fmt[0]`` rewritten as ``__calib_cmp__.at(fmt, 0)``)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == recorder \
        and isinstance(node.func.value, ast.Name) and node.func.value.id == NAME


def _index(node: ast.AST) -> Any:
    """The number an index is written as (``0``, ``-1``), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _index(node.operand)
        return None if inner is None else -inner
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


class Plain(ast.NodeTransformer):
    """Undoes :mod:`.cmplog`'s rewriting (x's body is instrumented by the time the search starts)."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func, args = node.func, node.args
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == NAME:
            if func.attr == "method" and len(args) >= 2 and isinstance(args[1], ast.Constant):
                return ast.Call(func=ast.Attribute(value=args[0], attr=args[1].value, ctx=ast.Load()), args=args[2:],
                                keywords=node.keywords)
            if func.attr == "see" and args:
                return args[0]
            if func.attr == "bare" and len(args) >= 2:  # ``match(pattern, s)``
                return ast.Call(func=args[0], args=args[2:], keywords=node.keywords)
            if func.attr in _BUILTIN_RECORDERS and len(args) == 1:  # len(e), ord(e), int(e)
                return ast.Call(func=ast.Name(id=_BUILTIN_RECORDERS[func.attr], ctx=ast.Load()), args=args,
                                keywords=node.keywords)
        if isinstance(func, ast.Name) and func.id == NAME and len(args) == 3 \
                and isinstance(args[2], ast.Constant) and args[2].value in _COMPARE_OPS:
            return ast.Compare(left=args[0], ops=[_COMPARE_OPS[args[2].value]()], comparators=[args[1]])
        return node


_BUILTIN_RECORDERS = {"size": "len", "code": "ord", "number": "int"}  # cmplog's recorders of builtin calls
_COMPARE_OPS = {"Eq": ast.Eq, "NotEq": ast.NotEq, "Lt": ast.Lt, "LtE": ast.LtE, "Gt": ast.Gt, "GtE": ast.GtE,
                "In": ast.In, "NotIn": ast.NotIn, "Is": ast.Is, "IsNot": ast.IsNot}


def take_pairs() -> list[tuple[str, Any, Any]]:
    """The operand pairs noted since the last call, each once."""
    seen = list(dict.fromkeys((kind, type(a), a, type(b), b) for kind, a, b in PAIRS))
    PAIRS.clear()
    _SPENT[0] = 0
    _SIZES.clear()
    _CODES.clear()
    _SPLITS.clear()
    _PARTS.clear()
    _CUTS.clear()
    return [(kind, a, b) for kind, _, a, _, b in seen]


def take() -> list[Any]:
    """The operands noted since the last call."""
    seen = list(dict.fromkeys((type(v), v) for v in OBSERVED))
    OBSERVED.clear()
    return [v for _, v in seen]


class _Instrument(ast.NodeTransformer):
    def __init__(self, bound: set[str], helper: bool, params: frozenset[str] = frozenset(),
                 patterns: frozenset[str] = frozenset()) -> None:
        self.bound = bound  # names x binds itself: a parameter called ``len`` is not the builtin
        self.compare = "inner" if helper else None
        self.params = params  # x's parameters (see visit_Compare)
        self.patterns = patterns  # module names bound to a pattern's method (``_search = re.compile(p).search``)

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
        if op in ("Is", "IsNot") and (self.compare or not any(
                isinstance(o, ast.Subscript | ast.Attribute | ast.Call)
                or isinstance(o, ast.Name) and o.id in self.bound and o.id not in self.params
                for o in (node.left, node.comparators[0]))):
            # ``node[1] is None``, ``self.mode is True``, ``expr[0] is not NOT``, ``entry is None`` after ``entry =
            # ctx['mappings'][key]``: values the pools do not hold; not a parameter (``fgcolor is None``: the hints
            # put the singleton in its pool already, and rewriting each run's value flooded the search with inputs
            # that only take the early branch: configshell's ``render_text`` 0.88 -> 0.71, avro's
            # ``RecordSchema.__init__`` 0.83 -> 0.50), nor in helpers (their recorded comparisons, :data:`CALLS`,
            # would go to ``is None`` checks in loops)
            return node
        func: ast.expr = ast.Name(id=NAME, ctx=ast.Load())
        if self.compare:
            func = ast.Attribute(value=func, attr=self.compare, ctx=ast.Load())
        call = ast.Call(func=func, args=[node.left, node.comparators[0], ast.Constant(op)], keywords=[])
        return ast.copy_location(call, node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        table = node.value  # ``TABLE[key]`` read, TABLE a module constant (by its name) or a literal mapping
        # (``{"P-256": ec.SECP256R1}[jwk["crv"]]``), or an attribute of self or cls (``self.envtypes[tok.content[0]]``;
        # not a module's, ``os.environ["HOME"]``, which the search reads as an input where it stands): :func:`item`
        if isinstance(node.ctx, ast.Load) and not isinstance(node.slice, ast.Slice) and (
                isinstance(table, ast.Name) and table.id not in self.bound and table.id.lstrip("_").isupper()
                or isinstance(table, ast.Attribute) and isinstance(table.value, ast.Name)
                and table.value.id in ("self", "cls")
                or isinstance(table, ast.Dict) and all(isinstance(k, ast.Constant) for k in table.keys)):
            recorder = ast.Attribute(value=ast.Name(id=NAME, ctx=ast.Load()), attr="item", ctx=ast.Load())
            return ast.copy_location(ast.Call(func=recorder, args=[table, node.slice], keywords=[]), node)
        part = node.slice
        if isinstance(node.ctx, ast.Load) and type(_index(part)) is int:  # ``s[0]``, ``fmt[0][-1]`` (:func:`at`)
            recorder = ast.Attribute(value=ast.Name(id=NAME, ctx=ast.Load()), attr="at", ctx=ast.Load())
            return ast.copy_location(ast.Call(func=recorder, args=[table, part], keywords=[]), node)
        # ``buf[0:8]``, ``data[i:i + 4]``: a slice with no step of a name, kept (:func:`cut`)
        if isinstance(node.ctx, ast.Load) and isinstance(part, ast.Slice) and part.step is None \
                and (isinstance(table, ast.Name) or _recorded(table, "at")) \
                and (part.lower is None or isinstance(part.lower, ast.Constant)) \
                and (part.lower or part.upper) is not None:  # (not ``items[:]``, a copy)
            recorder = ast.Attribute(value=ast.Name(id=NAME, ctx=ast.Load()), attr="cut", ctx=ast.Load())
            bounds = [part.lower or ast.Constant(None), part.upper or ast.Constant(None)]
            return ast.copy_location(ast.Call(func=recorder, args=[table, *bounds], keywords=[]), node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if (isinstance(func, ast.Name) and func.id in _BUILTINS and func.id not in self.bound
                and len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred)):
            recorder = ast.Attribute(value=ast.Name(id=NAME, ctx=ast.Load()), attr=_BUILTINS[func.id], ctx=ast.Load())
            return ast.copy_location(ast.Call(func=recorder, args=node.args, keywords=[]), node)
        if (isinstance(func, ast.Name) and func.id == "isinstance" and func.id not in self.bound and len(node.args) == 2
                and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args)):
            recorder = ast.Attribute(value=ast.Name(id=NAME, ctx=ast.Load()), attr="isa", ctx=ast.Load())
            return ast.copy_location(ast.Call(func=recorder, args=node.args, keywords=[]), node)
        if (isinstance(func, ast.Name) and func.id in _LOOKUPS and func.id not in self.bound and not node.keywords
                and (len(node.args) in (2, 3) if func.id != "import_module" else len(node.args) == 1)
                and not any(isinstance(a, ast.Starred) for a in node.args)):
            # ``getattr(obj, name)``, ``hasattr``, ``import_module(name)`` (the name the file imported: checked there)
            recorder = ast.Attribute(value=ast.Name(id=NAME, ctx=ast.Load()), attr=_LOOKUPS[func.id], ctx=ast.Load())
            args = [func, *node.args] if func.id == "import_module" else node.args
            return ast.copy_location(ast.Call(func=recorder, args=args, keywords=[]), node)
        if (isinstance(func, ast.Name) and func.id not in self.bound
                and len(node.args) >= (1 if func.id in self.patterns else 2 if func.id in _REGEX_FUNCTIONS else 99)
                and not any(isinstance(a, ast.Starred) for a in node.args)
                and not any(k.arg is None for k in node.keywords)):  # ``match('y(?:es)?', answer, I)``: :func:`bare`
            recorder = ast.Attribute(value=ast.Name(id=NAME, ctx=ast.Load()), attr="bare", ctx=ast.Load())
            call = ast.Call(func=recorder, args=[func, ast.Constant(func.id), *node.args], keywords=node.keywords)
            return ast.copy_location(call, node)
        if not isinstance(func, ast.Attribute) or any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords):
            return node
        if func.attr == "encode":  # only ``s.encode("ascii")``: other encodings are left alone
            wanted = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "encoding"), None)
            if not (isinstance(wanted, ast.Constant) and wanted.value in _ASCII):
                return node
        elif func.attr not in ("split", "rsplit") and (func.attr not in _METHODS or not node.args) and not (
                func.attr in _CHECKS and not node.args and not node.keywords):
            return node
        recorder = ast.Attribute(value=ast.Name(id=NAME, ctx=ast.Load()), attr="method", ctx=ast.Load())
        call = ast.Call(func=recorder, args=[func.value, ast.Constant(func.attr), *node.args], keywords=node.keywords)
        return ast.copy_location(call, node)


def instrument(node: ast.FunctionDef | ast.AsyncFunctionDef, tree: ast.Module | None = None) -> list[Any]:
    """Rewrite the comparisons in x's body in place (locations kept: coverage sees the same lines), and in
    the module's functions x calls (:func:`helpers`; ``tree``: x's module, by default the one x was placed in).
    Returns the definitions rewritten."""
    from . import scaffold  # noqa: PLC0415 - loaded already (the module was built from it)

    if tree is None:
        placed = scaffold.LAST[0]
        tree = placed.tree if placed is not None and placed.node is node else None
    found = helpers(node, tree) if tree is not None else []
    flags = 0 if tree is None else scaffold.future_flags(tree)  # as the module's statements compile
    for helper, owner in found:  # their code as written, for outputs that hold them (canon.PINNED)
        _pin(helper, owner, flags)
    # module names that may hold a pattern's method: ``re.compile(p).search``, ``_re_search(p)`` (kconfiglib's helper
    # returning one); :func:`bare` checks at run time
    patterns = frozenset(t.id for s in (tree.body if tree is not None else []) if isinstance(s, ast.Assign)
                         and (isinstance(s.value, ast.Attribute) and s.value.attr in _REGEX_FUNCTIONS
                              and isinstance(s.value.value, ast.Call) or isinstance(s.value, ast.Call))
                         for t in s.targets if isinstance(t, ast.Name))
    _rewrite(node, False, patterns)
    for helper, _ in found:
        _rewrite(helper, True, patterns)
    return [node, *(helper for helper, _ in found)]


def _rewrite(node: ast.FunctionDef | ast.AsyncFunctionDef, helper: bool,
             patterns: frozenset[str] = frozenset()) -> None:
    params = frozenset(a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg))
    bound = set(params) | {n.id for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Name)
                           and not isinstance(n.ctx, ast.Load)}
    transformer = _Instrument(bound, helper, params, patterns)
    node.body = [transformer.visit(stmt) for stmt in node.body]
    ast.fix_missing_locations(node)


#: Names :func:`.inputs.scan` reads in helpers (environment, files, stdin ...): such a helper is left as written
_SCANNED = frozenset({"os", "sys", "open", "io", "fileinput", "Path", "pathlib", "shutil", "glob", "json", "csv",
                      "configparser", "ConfigParser", "DictReader", "environ", "getenv", "stdin", "argv", "input"})
HELPER_LIMIT = 6  # helpers instrumented at most
HELPER_LINES = 120  # longer helpers are left as written


def helpers(node: ast.AST, tree: ast.Module, limit: int = HELPER_LIMIT) -> list[tuple[Any, Any]]:
    """(definition, its class or None) of the module's functions x calls, two calls deep: functions by
    name, methods of x's class (and of its bases in the module) through ``self.``/``cls.``, a module
    class's methods through ``Class.method(...)`` and its ``__init__`` through ``Class(...)``."""
    funcs: dict[str, Any] = {}  # the module's functions and classes by name (also in ``if``/``try`` blocks)
    classes: dict[str, Any] = {}
    todo: list[Any] = list(tree.body)
    while todo:
        stmt = todo.pop(0)
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            funcs[stmt.name] = stmt
        elif isinstance(stmt, ast.ClassDef):
            classes[stmt.name] = stmt
        elif isinstance(stmt, ast.If | ast.Try):
            todo += [*stmt.body, *stmt.orelse, *getattr(stmt, "finalbody", []),
                     *(c for h in getattr(stmt, "handlers", []) for c in h.body)]
    memo: dict[str, dict[str, Any]] = {}

    def methods(cls: Any, depth: int = 0) -> dict[str, Any]:
        if cls.name not in memo:
            out: dict[str, Any] = {}
            for base in reversed(cls.bases):
                if isinstance(base, ast.Name) and base.id in classes and base.id != cls.name and depth < 4:
                    out.update(methods(classes[base.id], depth + 1))
            out.update({m.name: (m, cls) for m in cls.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)})
            memo[cls.name] = out
        return memo[cls.name]

    owner = next((c for c in classes.values() if any(m is node for m in c.body)), None)
    found: list[tuple[Any, Any]] = []
    level: list[tuple[Any, Any]] = [(node, owner)]
    for _ in range(2):
        nxt = []
        for body, cls in level:
            for call in ast.walk(body):
                if not isinstance(call, ast.Call):
                    continue
                f, hit = call.func, None
                if isinstance(f, ast.Name):
                    made = classes.get(f.id) or (cls if f.id == "cls" else None)  # ``Class(...)``, ``cls(...)``
                    hit = (funcs[f.id], None) if f.id in funcs else methods(made).get("__init__") if made else None
                elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                    if f.value.id in ("self", "cls") and cls is not None:
                        hit = methods(cls).get(f.attr)
                    elif f.value.id in classes:
                        hit = methods(classes[f.value.id]).get(f.attr)
                if hit is None or hit[0] is node or any(hit[0] is h for h, _ in found) or not _fits(hit[0]):
                    continue
                found.append(hit)
                nxt.append(hit)
                if len(found) >= limit:
                    return found
        level = nxt
    return found


def _fits(node: Any) -> bool:
    """A helper small enough to instrument, which reads nothing :func:`.inputs.scan` looks for."""
    if (node.end_lineno or node.lineno) - node.lineno > HELPER_LINES:
        return False
    return not any(isinstance(n, ast.Name) and n.id in _SCANNED or isinstance(n, ast.Attribute) and n.attr in _SCANNED
                   for n in ast.walk(node))


def _pin(node: Any, owner: Any, flags: int = 0) -> None:
    """Digests of a helper's code as written (``canon.PINNED``, as for x): a function of it in x's output
    is then the same value here as in the replay."""
    from . import canon, scaffold  # noqa: PLC0415

    extra = {"type_params": []} if "type_params" in ast.ClassDef._fields else {}
    stmt = node if owner is None else ast.copy_location(
        ast.ClassDef(name=owner.name, bases=[], keywords=[], body=[node], decorator_list=[], **extra), owner)
    try:  # a method inside a class of its name: the same code as in the module
        code = scaffold.compile_statement(ast.fix_missing_locations(stmt), flags)
    except (SyntaxError, ValueError, TypeError):
        return
    todo = [code]
    while todo:
        item = todo.pop()
        todo.extend(c for c in item.co_consts if type(c) is type(code))
        if item.co_flags & 1:  # CO_OPTIMIZED: a function's code (not the module's or a class body's)
            key = canon._pin_key(item)
            canon.PINNED[key] = None if key in canon.PINNED else canon._code(item, 1, frozenset())
