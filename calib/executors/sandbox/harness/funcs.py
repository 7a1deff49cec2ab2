"""Functions, classes and type hints as input values, for code that inspects what it is given (runs inside the
sandbox; stdlib only).

A command framework reads a handler's signature and docstring (``inspect.signature(operation)``,
``inspect.getdoc(operation)``), a linter reads ``inspect.getsource(fn)``, a loader of typed data reads a dataclass's
fields, an enum's members or a type hint's ``__origin__`` and ``__args__``. Such a parameter rarely gets far with a
stand-in, a lambda or an object with those attributes: the body turns on the parameters' names and defaults, the
docstring's ``:param`` lines, the fields' types. The input value ``Code('def fetch(url, timeout=10): ...')`` is what
that source gives, built afresh for each run (:func:`build`) with its source in :mod:`linecache` so that
``inspect.getsource`` finds it. :data:`SOURCES`: functions with signatures of each kind of parameter and the three
common docstring styles (reStructuredText fields, Google and NumPy sections); :data:`TYPES`: a dataclass, an enum,
a ``TypedDict`` (one of whose fields is a ``Literal``), a ``NamedTuple``, plain classes (for a class decorator) and the
common type hints.
"""

from __future__ import annotations

import ast

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

SOURCES = (
    'def compute(first, second=2, *rest, scale=1.0, verbose=False, **options):\n'
    '    """Compute a value.\n\n'
    '    :param first: the first operand,\n        on two lines\n    :type first: int\n'
    '    :param second: the second operand\n    :param scale: a factor\n    :return: the result\n    :rtype: float\n'
    '    """\n    return first\n',
    'def fetch(url, timeout=10):\n'
    '    """Fetch a page.\n\n    Args:\n        url (str): where from.\n        timeout (int): seconds to wait.\n\n'
    '    Returns:\n        str: the page.\n\n    Raises:\n        ValueError: on a bad url.\n    """\n    return url\n',
    'class Table:\n'
    '    def merge(self, left, right, *, how="inner"):\n'
    '        """Merge two tables.\n\n        Parameters\n        ----------\n'
    '        left : list\n            The first.\n'
    '        right : list\n            The second.\n\n        Returns\n        -------\n        list\n        """\n'
    '        return left\n\n\nTable().merge\n',
    "def bare(a, b):\n    return a\n",
    "lambda value, default=None: value\n",
)
TYPES = (
    "from dataclasses import dataclass, field\n\n\n@dataclass\nclass Point:\n    x: int\n    y: float = 0.0\n"
    "    label: str = field(default='', metadata={'name': 'Label'})\n",
    "from enum import Enum\n\n\nclass Color(Enum):\n    RED = 1\n    GREEN = 'green'\n",
    "from typing import Literal, TypedDict\n\n\nclass Movie(TypedDict, total=False):\n    title: str\n    year: int\n"
    "    kind: Literal['film', 'series']\n",
    "from typing import NamedTuple\n\n\nclass Pair(NamedTuple):\n    left: int\n    right: str = ''\n",
    "class Flags:\n    READ = 1\n    WRITE = 2\n    EXECUTE = 4\n\n    def describe(self):\n        return 'flags'\n",
    "class Base:\n    pass\n\n\nclass Child(Base):\n    LIMIT = 3\n",
    "from typing import List\nList[int]\n",
    "from typing import Dict\nDict[str, int]\n",
    "from typing import Optional\nOptional[str]\n",
    "from typing import Union\nUnion[int, str]\n",
    "from typing import Tuple\nTuple[int, str]\n",
    "from typing import Literal\nLiteral['a', 1]\n",
    "int\n",
)

#: What marks a parameter as a function x inspects: ``inspect``'s functions given it first (``inspect.signature(p)``,
#: or imported bare) and the attributes only functions and methods have (not ``__name__`` or ``__doc__``: classes
#: have them too).
INSPECTORS = frozenset({
    "signature", "getdoc", "getfullargspec", "getargspec", "getsource", "getsourcelines", "ismethod", "isfunction",
    "iscoroutinefunction", "isgeneratorfunction", "isbuiltin", "isroutine", "unwrap", "getcallargs", "getmodule"})
FUNCTION_ATTRS = frozenset({"__code__", "__func__", "__wrapped__", "__defaults__", "__kwdefaults__", "__self__"})
#: What marks a parameter as a type x loads data into: the attributes of dataclasses, enums, ``TypedDict``\ s, named
#: tuples and type hints (a class's ``__annotations__`` too: its fields' types), and the functions that read them
#: (``typing.get_origin(tp)``, ``dataclasses.fields(cls)``).
TYPE_ATTRS = frozenset({"__dataclass_fields__", "__annotations__", "__members__", "__origin__", "__args__", "__total__",
                        "__required_keys__", "__optional_keys__", "_fields", "_field_defaults", "__supertype__",
                        "__bases__", "__mro__", "__subclasses__"})
TYPE_READERS = frozenset({"get_origin", "get_args", "get_type_hints", "is_dataclass", "fields", "is_typeddict"})


class Code:
    """``Code(source)``: the object ``source`` gives (:func:`build`)."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Code) and self.source == other.source

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Code({self.source!r})"


_COMPILED: dict[str, tuple[Any, Any, Any]] = {}  # by source: its first statements, its last, the name it defines


def build(code: Code) -> Any:
    """What ``code``'s source gives, made afresh (x may set its attributes): the value of its last statement if that
    is an expression (``lambda value: value``, ``Table().merge``, ``Optional[int]``), else the function or class that
    statement defines (None for any other statement). Parsed and compiled once per source; run anew each time."""
    compiled = _COMPILED.get(code.source)
    if compiled is None:
        import linecache  # noqa: PLC0415 - only where an input holds code
        import zlib  # noqa: PLC0415

        filename = f"<input {zlib.crc32(code.source.encode()):08x}>"  # the same in every process
        linecache.cache[filename] = (len(code.source), None, code.source.splitlines(True), filename)
        tree = ast.parse(code.source)
        last = tree.body.pop() if tree.body else None
        head = compile(tree, filename, "exec", dont_inherit=True)
        if isinstance(last, ast.Expr):
            compiled = head, compile(ast.Expression(last.value), filename, "eval", dont_inherit=True), None
        elif last is None:
            compiled = head, None, None
        else:
            body = ast.Module(body=[last], type_ignores=[])
            compiled = head, compile(body, filename, "exec", dont_inherit=True), getattr(last, "name", "")
        _COMPILED[code.source] = compiled
    head, tail, name = compiled
    namespace: dict[str, Any] = {"__name__": "calib_input"}
    exec(head, namespace)  # noqa: S102 - in the sandbox, as all input code is
    if tail is None:
        return None
    if name is None:  # an expression: its value
        return eval(tail, namespace)  # noqa: S307
    exec(tail, namespace)  # noqa: S102
    return namespace.get(name)


def hint(info: Any) -> None:
    """A parameter x inspects as a function (:data:`INSPECTORS`, :data:`FUNCTION_ATTRS`) takes functions first; one it
    reads as a type (:data:`TYPE_ATTRS`, :data:`TYPE_READERS`), classes and type hints (:data:`TYPES`); one it parses
    as Python source (:func:`_parses`), source texts (:func:`sources`)."""
    func = info.node
    names = {p.name: p for p in info.params if p.kind in ("positional", "keyword")}
    if func is None or not names:
        return
    found: dict[str, list[str]] = {"function": [], "type": [], "source": []}
    for n in ast.walk(func):
        if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id in names:
            called = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            if called in INSPECTORS:
                found["function"].append(n.args[0].id)
            elif called in TYPE_READERS and (called != "fields" or getattr(n.func, "value", None) is not None
                                             and getattr(n.func.value, "id", "") == "dataclasses"):
                found["type"].append(n.args[0].id)  # (a bare ``fields(record)`` is as likely the file's own)
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in names:
            if n.attr in FUNCTION_ATTRS:
                found["function"].append(n.value.id)
            elif n.attr in TYPE_ATTRS:
                found["type"].append(n.value.id)
        if isinstance(n, ast.Call) and n.args and _parses(n.func):  # ``ast.parse(function_source.lstrip())``
            found["source"].extend(m.id for m in ast.walk(n.args[0]) if isinstance(m, ast.Name) and m.id in names)
    for kind, params in found.items():
        for name in dict.fromkeys(params):
            if kind not in names[name].types:
                names[name].types.insert(0, kind)


def _parses(func: ast.expr) -> bool:
    """``ast.parse(...)``, ``compile(...)``, ``tokenize.generate_tokens(...)``: a call that reads Python source."""
    if isinstance(func, ast.Attribute):
        return func.attr == "generate_tokens" or func.attr == "parse" and getattr(func.value, "id", "") == "ast"
    return isinstance(func, ast.Name) and func.id in ("compile", "generate_tokens")


def examples() -> list[Code]:
    return [Code(s) for s in SOURCES]


def types() -> list[Code]:
    return [Code(s) for s in TYPES]


def sources() -> list[str]:
    """Python source texts (for ``ast.parse(text)``): the functions of :data:`SOURCES`, then statements of other
    kinds."""
    from .astnodes import SNIPPETS  # noqa: PLC0415

    return [*SOURCES[:4], *SNIPPETS[:3], "import os.path as osp, sys", "def broken(:\n"]
