"""Type names in annotations and ``isinstance`` specs (runs inside the sandbox; stdlib only): what kind
of value each names (:data:`TYPE_NAMES`), and which names are classes of x's file (:func:`class_names`)."""

from __future__ import annotations

import ast

TYPE_NAMES = {
    "int": "int", "float": "float", "str": "str", "bool": "bool", "bytes": "bytes", "bytearray": "bytes",
    "list": "list", "List": "list", "Sequence": "list", "MutableSequence": "list", "Iterable": "list",
    "Iterator": "list", "Collection": "list", "dict": "dict", "Dict": "dict", "Mapping": "dict",
    "MutableMapping": "dict", "OrderedDict": "dict", "defaultdict": "dict", "set": "set", "Set": "set",
    "frozenset": "set", "FrozenSet": "set", "AbstractSet": "set", "tuple": "tuple", "Tuple": "tuple", "None": "none",
    "NoneType": "none", "Path": "path", "PathLike": "path", "PurePath": "path", "Callable": "callable",
    "complex": "float", "Decimal": "float", "Number": "float", "Real": "float", "Integral": "int", "Text": "str",
    "AnyStr": "str", "bytes_or_str": "str", "slice": "slice"}

#: Classes of the standard library built on a builtin one: ``isinstance`` with them asks for an instance
#: (as a file's class), beside the builtin kind :data:`TYPE_NAMES` gives them.
SUBCLASSES = frozenset({"defaultdict", "OrderedDict", "deque"})


def annotation_types(node: ast.expr | None) -> tuple[list[str], list[str]]:
    """(types, element types) named by an annotation."""
    if node is None:
        return [], []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return annotation_types(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return [], []
    if isinstance(node, ast.Constant) and node.value is None:
        return ["none"], []
    if isinstance(node, ast.Name | ast.Attribute):
        name = node.id if isinstance(node, ast.Name) else node.attr
        return ([TYPE_NAMES[name]] if name in TYPE_NAMES else []), []
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


def class_names(node: ast.expr) -> list[str]:
    """Names in an annotation or isinstance() spec that are not builtin or typing names (module classes)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return []
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in TYPE_NAMES
            and n.id.lstrip("_")[:1].isupper()  # ``_ComplementSet`` too
            and n.id not in ("Optional", "Union", "Any", "Type", "ClassVar", "Literal")]
