"""Type names in annotations and ``isinstance`` specs (runs inside the sandbox; stdlib only): what kind
of value each names (:data:`TYPE_NAMES`), and which names are classes of x's file (:func:`class_names`)."""

from __future__ import annotations

import ast

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

TYPE_NAMES = {
    "int": "int", "float": "float", "str": "str", "bool": "bool", "bytes": "bytes", "bytearray": "bytes",
    "list": "list", "List": "list", "Sequence": "list", "MutableSequence": "list", "Iterable": "list",
    "Iterator": "list", "Collection": "list", "dict": "dict", "Dict": "dict", "Mapping": "dict",
    "MutableMapping": "dict", "OrderedDict": "dict", "defaultdict": "dict", "set": "set", "Set": "set",
    "frozenset": "set", "FrozenSet": "set", "AbstractSet": "set", "tuple": "tuple", "Tuple": "tuple", "None": "none",
    "NoneType": "none", "Path": "path", "PathLike": "path", "PurePath": "path", "Callable": "callable",
    "complex": "float", "Decimal": "float", "Number": "float", "Real": "float", "Integral": "int", "Text": "str",
    "AnyStr": "str", "bytes_or_str": "str", "slice": "slice", "date": "date", "datetime": "datetime", "time": "time",
    "timedelta": "timedelta",
    "basestring": "str", "unicode": "str", "long": "int"}  # Python 2's builtins (``isinstance(n, (int, long))``)
#: Python 2 compatibility names read as an attribute (``isinstance(value, six.string_types)``, ``compat.text_type``):
#: a withheld ``six``'s. Imported by name (``from six import string_types``), they are the module's aliases
#: (:func:`.globalrefs.type_aliases`), resolved for x's own parameters only.
COMPAT_ATTRS = {"string_types": "str", "text_type": "str", "str_type": "str", "binary_type": "bytes",
                "integer_types": "int"}

#: Methods only values of one kind have (``p.lower()``: a text), by that kind (:func:`.hints._attribute_use`).
STR_METHODS = frozenset({
    "lower", "upper", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "replace",
    "format", "encode", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "title", "capitalize",
    "casefold", "partition", "rpartition", "zfill", "center", "ljust", "rjust", "expandtabs", "isidentifier",
    "isnumeric", "isdecimal", "swapcase", "removeprefix", "removesuffix", "format_map"})
LIST_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "sort", "reverse", "clear"})
DICT_METHODS = frozenset({"items", "keys", "values", "get", "setdefault", "update", "popitem"})
SET_METHODS = frozenset({"add", "discard", "union", "intersection", "difference", "issubset", "issuperset"})
BYTES_METHODS, SEQ_METHODS = frozenset({"decode", "hex"}), frozenset({"index", "count", "copy"})
#: Methods of an open file (``fileobj.read(8)``, ``out.write(text)``): such a parameter's pool holds in-memory files
#: (``BytesIO(...)``, ``StringIO(...)``: :class:`.values.Stream`) besides objects with the method.
STREAM_METHODS = frozenset({"read", "readline", "readlines", "readinto", "seek", "tell", "write", "writelines",
                            "truncate", "getvalue", "fileno", "flush"})
METHOD_KINDS = ((STR_METHODS, "str"), (LIST_METHODS, "list"), (DICT_METHODS, "dict"), (SET_METHODS, "set"),
                (BYTES_METHODS, "bytes"), (SEQ_METHODS, "list"))

#: Methods and attributes only ``datetime``'s values have, by the kind of value they suggest (``day.weekday()``,
#: ``moment.hour``, ``delta.total_seconds()``): such a parameter's pool holds those values (:func:`clock_values`)
#: besides objects with the attribute.
CLOCK_METHODS = (
    (frozenset({"weekday", "isoweekday", "isoformat", "strftime", "toordinal", "isocalendar", "timetuple", "ctime"}),
     "date"),
    (frozenset({"hour", "minute", "microsecond", "timestamp", "astimezone", "utctimetuple", "timetz"}), "datetime"),
    (frozenset({"total_seconds"}), "timedelta"))
#: six's functions over a mapping's items (``six.iteritems(kparams)``): their argument is a mapping, as
#: ``kparams.items()`` says (six has its Python 3 meaning in the sandbox: :mod:`.compat`).
SIX_VIEWS = frozenset({"iteritems", "iterkeys", "itervalues", "iterlists", "viewitems", "viewkeys", "viewvalues"})
#: The kinds a method or attribute x uses suggests besides an object with it (:func:`.hints._attribute_use`).
USE_KINDS = (*CLOCK_METHODS, (STREAM_METHODS, "stream"))


def clock_values(kind: str, years: list[int], rng: Any = None) -> list[Any]:
    """Values of a ``datetime`` kind (``date``, ``datetime``, ``time``, ``timedelta``), most plausible first, made
    with the module's classes of the moment (the frozen clock's, in a batch): a weekday, a year's last day (a
    Sunday), a leap day, a Saturday, midnight; ``years`` (the body's literals that look like years) give one
    each. A date is also a datetime and the reverse, late in the pool. ``rng``: one value drawn at random (a year
    from 1970 to 2040), for the search's fresh values."""
    import datetime  # noqa: PLC0415 - imported only for code that uses dates

    if rng is not None:
        when = datetime.datetime(rng.randint(1970, 2040), rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23),
                                 rng.choice((0, 15, 30, 59)))
        return [{"date": when.date(), "datetime": when, "time": when.time()}.get(kind) or datetime.timedelta(
            days=rng.randint(-30, 30), seconds=rng.choice((0, 1, 3600, 86399)))]

    days = [(2024, 1, 15), (2023, 12, 31), (2024, 2, 29), (2000, 1, 1), (2024, 5, 1), (2024, 7, 6), (1999, 12, 31)]
    days[2:2] = [(y, 3, 1) for y in years[:3] if 1 <= y <= 9999]
    times = [(12, 30), (0, 0), (23, 59, 59), (9, 5, 30, 250000), (6,)]
    if kind == "date":
        return [datetime.date(*d) for d in days] + [datetime.datetime(2024, 1, 15, 12, 30)]
    if kind == "datetime":
        made = [datetime.datetime(*d, *t) for d, t in zip(days, times + times)]
        return made + [datetime.datetime(1970, 1, 1), datetime.date(2024, 1, 15)]
    if kind == "time":
        return [datetime.time(*t) for t in times]
    return [datetime.timedelta(days=1), datetime.timedelta(0), datetime.timedelta(seconds=90),
            datetime.timedelta(days=-1), datetime.timedelta(hours=2), datetime.timedelta(days=7, microseconds=500)]

#: Classes of the standard library built on a builtin one: ``isinstance`` with them asks for an instance
#: (as a file's class), beside the builtin kind :data:`TYPE_NAMES` gives them.
SUBCLASSES = frozenset({"defaultdict", "OrderedDict", "deque"})


def _unquoted(node: ast.expr | None) -> ast.expr | None:
    """A string annotation (``'List[Item]'``) as the expression it holds (None if it does not parse)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    return node


def annotation_types(node: ast.expr | None) -> tuple[list[str], list[str]]:
    """(types, element types) named by an annotation."""
    if node is None:
        return [], []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # unquoted again while it is a string
        return annotation_types(_unquoted(node))
    if isinstance(node, ast.Constant) and node.value is None:
        return ["none"], []
    if isinstance(node, ast.Name | ast.Attribute):
        name = node.id if isinstance(node, ast.Name) else node.attr
        kind = TYPE_NAMES.get(name) or (COMPAT_ATTRS.get(name) if isinstance(node, ast.Attribute) else None)
        return ([kind] if kind else []), []
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = annotation_types(node.left), annotation_types(node.right)
        return left[0] + right[0], left[1] + right[1]
    if isinstance(node, ast.Subscript):
        outer = node.value.id if isinstance(node.value, ast.Name) else getattr(node.value, "attr", "")
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if outer in ("Optional", "Union"):
            found = [annotation_types(arg) for arg in args]
            return (["none"] if outer == "Optional" else []) + [t for f in found for t in f[0]], [
                e for f in found for e in f[1]]
        base, _ = annotation_types(node.value)
        if not args:  # ``Tuple[()]``: the empty tuple's type (it took the batch down before any input)
            return base, []
        element = annotation_types(args[-1] if base == ["dict"] else args[0])[0]
        return base, element
    return [], []


def tuple_rows(node: ast.expr) -> list[tuple[list[str], list[str], list[str]]] | None:
    """A container of fixed-width tuples (``Iterable[Tuple[int, int, Optional[InstrLocation]]]``, also as a string
    annotation): each position's (types, element types, classes); None for another annotation or ``Tuple[int, ...]``."""
    node = _unquoted(node)
    row = node.slice if isinstance(node, ast.Subscript) else None
    if not isinstance(row, ast.Subscript) or annotation_types(row.value)[0] != ["tuple"]:
        return None
    parts = row.slice.elts if isinstance(row.slice, ast.Tuple) else [row.slice]
    if not 1 < len(parts) <= 6 or any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in parts):
        return None  # ``Tuple[int, ...]``: any width
    return [(*annotation_types(part), class_names(part)) for part in parts]


def class_names(node: ast.expr) -> list[str]:
    """Names in an annotation or isinstance() spec that are not builtin or typing names (module classes)."""
    node = _unquoted(node)
    if node is None:
        return []
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in TYPE_NAMES
            and n.id.lstrip("_")[:1].isupper()  # ``_ComplementSet`` too
            and n.id not in ("Optional", "Union", "Any", "Type", "ClassVar", "Literal")]
