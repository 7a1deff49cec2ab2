"""What one use of a parameter in x's body says about it (runs inside the sandbox; stdlib only): a call with it or
on it (``len(p)``, ``p.split(";")``, ``isinstance(p, T)``), a comparison (``p == 3``, ``type(p) is str``, ``"k" in p``),
an attribute (``p.lower``). Read by :func:`.hints.describe`, which finds the uses and what each describes (a
:class:`.hints.Param`, through its ``_Subjects``: typed ``Any`` here, since hints imports this module)."""

from __future__ import annotations

import ast

from .literals import literal as _literal
from .literals import mine as _mine
from .typenames import METHOD_KINDS, SIX_VIEWS, SUBCLASSES, TYPE_NAMES, USE_KINDS, annotation_types, class_names

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

_PATH_CLASSES = frozenset({"Path", "PurePath", "PosixPath", "PurePosixPath", "PathLike"})
_TYPES = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (bytes, "bytes"), (list, "list"),
          (dict, "dict"), (tuple, "tuple"), (set, "set"), (frozenset, "set"))


def type_of(value: Any) -> str:
    """The kind of a literal value, as hints name kinds (``"int"``, ``"str"``, ...; ``"any"`` for others)."""
    return next((name for t, name in _TYPES if isinstance(value, t)), "any")


def whole(node: ast.AST) -> ast.AST:
    """The sequence a slice of it is taken from (``terminals[:max_size]``), else ``node``."""
    return node.value if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) else node


def attribute_use(p: Any, attr: str) -> None:
    """``p.attr``: of the kinds whose values have it (``p.lower``: a text), else an object with that attribute."""
    for methods, kind in USE_KINDS:
        if attr in methods:
            add(p.types, kind)
    for methods, kind in METHOD_KINDS:
        if attr in methods:
            add(p.types, kind)
            return
    add(p.types, "object")
    if attr not in p.attrs:
        p.attrs.append(attr)


def called(node: ast.AST) -> str:
    """The name a call expression calls (``timedelta`` of ``timedelta(days=1)`` or ``dt.timedelta(...)``), else ''."""
    func = node.func if isinstance(node, ast.Call) else None
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


_SPLITS = frozenset({"split", "rsplit", "partition", "rpartition"})


def call_use(node: ast.Call, subject: Any) -> None:
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in ("get", "pop", "setdefault") and node.args:
        ok, key = _literal(node.args[0])
        if ok and isinstance(key, str) and (p := subject(func.value)) is not None and key not in p.keys:
            p.keys.append(key)  # ``options.get("verbose")``: a mapping with that key
    if isinstance(func, ast.Attribute) and func.attr in _SPLITS and node.args:
        ok, sep = _literal(node.args[0])
        if ok and isinstance(sep, str) and 0 < len(sep) <= 4 and (p := subject(func.value)) is not None:
            add(p.seps, sep)  # ``key, value = line.split(":", 1)``: texts holding it
    if (p := subject(func)) is not None:
        add(p.types, "callable")
        return
    if isinstance(func, ast.Attribute) and (p := subject(func.value)) is not None:
        add(p.called, func.attr)
    if called(node) in SIX_VIEWS and node.args and (p := subject(node.args[0])) is not None:
        attribute_use(p, "items")  # ``six.iteritems(kparams)``: a mapping, as ``kparams.items()`` says
    if not isinstance(func, ast.Name) or not node.args:
        return
    p = subject(node.args[0])
    if p is None:
        return
    if func.id in ("len", "sorted", "enumerate", "reversed", "sum", "max", "min", "zip", "any", "all", "iter"):
        add(p.types, "list")
    elif func.id in ("range", "chr", "hex", "bin", "oct"):
        add(p.types, "int")
    elif func.id in ("open",):
        add(p.types, "path")
    elif func.id in ("hasattr", "getattr") and len(node.args) >= 2:
        ok, attr = _literal(node.args[1])
        if ok and isinstance(attr, str) and attr.isidentifier():  # ``hasattr(data, "read")``
            attribute_use(p, attr)
            if not attr.startswith("__"):  # objects with it and without it (pools); not a protocol's
                add(p.optional, attr)
    elif func.id == "issubclass" and len(node.args) == 2:  # ``issubclass(cls, TranslitLanguagePack)``: that
        spec = node.args[1]  # class itself first (and the file's subclasses of it, :mod:`.pools`)
        add_all(p.bases, [c for item in (spec.elts if isinstance(spec, ast.Tuple) else [spec])
                           for c in class_names(item)])
    elif func.id == "isinstance" and len(node.args) == 2:
        spec = node.args[1]
        for item in spec.elts if isinstance(spec, ast.Tuple) else [spec]:
            add_all(p.types, annotation_types(item)[0])
            add_all(p.classes, class_names(item))
            # ``isinstance(coll, defaultdict)``: a dict does not pass, an instance of that class does
            if isinstance(item, ast.Name) and item.id in SUBCLASSES:
                add(p.classes, item.id)
            elif isinstance(item, ast.Attribute) and getattr(item.value, "id", "") in ("ast", "_ast"):
                add(p.types, "ast:" + item.attr)  # ``isinstance(node, ast.Lambda)``: syntax-tree nodes
            if "path" in p.types and getattr(item, "attr", getattr(item, "id", "")) in _PATH_CLASSES:
                add(p.types, "pathobj")  # ``isinstance(obj, pathlib.PurePath)``: a path object, not a text


def compare_use(node: ast.Compare, subject: Any, hints: Any) -> None:
    operands = [node.left, *node.comparators]  # a slice compared (``buf[0:8] == b"..."``) is of the whole's type
    found = [p for p in (subject(whole(o)) for o in operands) if p is not None]
    for o in operands:  # ``type(p) in (int, list)``, ``type(p) is str``: p is of those types
        if isinstance(o, ast.Call) and isinstance(o.func, ast.Name) and o.func.id == "type" and len(o.args) == 1:
            p = subject(o.args[0])
            for q in [q for q in found if q is not p]:  # ``type(value) != type_``: a class (typedload's _basicload)
                add(q.types, "class")
            for other in operands if p is not None else ():
                names = other.elts if isinstance(other, ast.Tuple | ast.List | ast.Set) else [other]
                add_all(p.types, [TYPE_NAMES[n.id] for n in names if isinstance(n, ast.Name) and n.id in TYPE_NAMES])
                add_all(p.classes, [c for n in names if isinstance(n, ast.Name) for c in class_names(n)])  # a file's
    if len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn):
        ok, key = _literal(node.left)
        p = subject(node.comparators[0])
        # ``"verbose" in options``: a mapping with that key (or a text containing it); ``all(k in jwk for k in
        # ["x", "y", "crv"])``: with each of those
        keys = [key] if ok else subject.looped.get(getattr(node.left, "id", None)) or []
        for key in keys if p is not None else ():
            if isinstance(key, str) and key not in p.keys:
                p.keys.append(key)
    for held, other in ((node.left, node.comparators[0]), (node.comparators[0], node.left)) if len(node.ops) == 1 \
            and isinstance(node.ops[0], ast.Eq | ast.NotEq) else ():
        # ``fmt[0][0] != "("``, ``s[-1] == ")"``: what is indexed and compared with one character is a text first
        # (dbf's ``add_character``: its ``format`` was a list of lists before, and no input reached past the check)
        if isinstance(held, ast.Subscript) and type(_literal(held.slice)[1]) is int \
                and (char := _literal(other))[0] and isinstance(char[1], str) and len(char[1]) == 1 \
                and (p := subject(held.value)) is not None:
            p.types[:] = ["str", *(t for t in p.types if t != "str")]
    for operand, op in zip(node.comparators, node.ops):
        ok, value = _literal(operand)
        if not ok:
            continue
        if isinstance(op, ast.In | ast.NotIn) and isinstance(value, list | tuple | set | frozenset | dict):
            for item in value:
                _mine(item, hints)
            for p in found:
                add_all(p.types, [type_of(v) for v in list(value)[:3]])
            continue
        _mine(value, hints)
        for p in found:
            if isinstance(op, ast.Eq | ast.NotEq) and isinstance(value, list | tuple | dict | set | frozenset) \
                    and 0 < len(value) <= 8 and value not in p.equals:
                p.equals.append(value)  # ``if segments == ['']:``: a literal container no pool would draw
            if isinstance(op, ast.Is | ast.IsNot | ast.Eq | ast.NotEq) and value is None:
                add(p.types, "none")
            elif value is not None:
                add(p.types, type_of(value))


def add(types: list[str], kind: str) -> None:
    types += [kind] if kind not in types else []


def add_all(types: list[str], kinds: list[str]) -> None:
    types += [kind for kind in dict.fromkeys(kinds) if kind not in types]
