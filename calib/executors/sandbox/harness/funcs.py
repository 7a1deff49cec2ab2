"""Functions as input values, for code that inspects a function it is given (runs inside the sandbox; stdlib only).

A command framework reads a handler's signature and docstring (``inspect.signature(operation)``,
``inspect.getdoc(operation)``), a decorator reads ``func.__name__``, a linter reads ``inspect.getsource(fn)``.
Such a parameter rarely gets far with a stand-in or a lambda: the body turns on the parameters' names and
defaults and on the docstring's ``:param`` lines. The input value ``Func('def fetch(url, timeout=10): ...')`` is the
function (or, for a ``class`` source, the bound method of an instance of its class, or for a ``lambda`` source,
that lambda) that source defines, built afresh for each run (:func:`build`) with its source in :mod:`linecache`
so that ``inspect.getsource`` finds it. :data:`SOURCES`: signatures of each kind of parameter and the three
common docstring styles (reStructuredText fields, Google and NumPy sections).
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
    '        return left\n',
    "def bare(a, b):\n    return a\n",
    "lambda value, default=None: value\n",
)

#: What marks a parameter as a function x inspects: ``inspect``'s functions given it first (``inspect.signature(p)``,
#: or imported bare) and the attributes only functions and methods have (not ``__name__`` or ``__doc__``: classes
#: have them too).
INSPECTORS = frozenset({
    "signature", "getdoc", "getfullargspec", "getargspec", "getsource", "getsourcelines", "ismethod", "isfunction",
    "iscoroutinefunction", "isgeneratorfunction", "isbuiltin", "isroutine", "unwrap", "getcallargs", "getmodule"})
FUNCTION_ATTRS = frozenset({"__code__", "__func__", "__wrapped__", "__defaults__", "__kwdefaults__", "__self__"})


class Func:
    """``Func(source)``: the function ``source`` defines (:func:`build`)."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Func) and self.source == other.source

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Func({self.source!r})"


def build(func: Func) -> Any:
    """The function ``func``'s source defines, made afresh (x may set its attributes); None for a source that
    defines none."""
    import linecache  # noqa: PLC0415 - only where an input holds a function
    import zlib  # noqa: PLC0415

    filename = f"<input function {zlib.crc32(func.source.encode()):08x}>"  # the same in every process
    linecache.cache[filename] = (len(func.source), None, func.source.splitlines(True), filename)
    tree = ast.parse(func.source)
    namespace: dict[str, Any] = {"__name__": "calib_input"}
    if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Lambda):
        return eval(compile(ast.Expression(tree.body[0].value), filename, "eval"), namespace)  # noqa: S307
    exec(compile(tree, filename, "exec"), namespace)  # noqa: S102 - the harness's own sources, in the sandbox
    first = tree.body[0] if tree.body else None
    made = namespace.get(getattr(first, "name", ""))
    if isinstance(first, ast.ClassDef):  # the bound method of an instance (``inspect.ismethod``: ``p.__func__``)
        method = next((s.name for s in first.body if isinstance(s, ast.FunctionDef)), None)
        return getattr(made(), method) if method else made
    return made


def hint(info: Any) -> None:
    """A parameter x inspects as a function (:data:`INSPECTORS`, :data:`FUNCTION_ATTRS`) takes functions first; one it
    parses as Python source (:func:`_parses`), source texts (:func:`sources`)."""
    func = info.node
    names = {p.name: p for p in info.params if p.kind in ("positional", "keyword")}
    if func is None or not names:
        return
    inspected: list[str] = []
    parsed: list[str] = []  # parameters x parses as Python source
    for n in ast.walk(func):
        if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id in names:
            called = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            if called in INSPECTORS:
                inspected.append(n.args[0].id)
        elif isinstance(n, ast.Attribute) and n.attr in FUNCTION_ATTRS and isinstance(n.value, ast.Name) \
                and n.value.id in names:
            inspected.append(n.value.id)
        if isinstance(n, ast.Call) and n.args and _parses(n.func):  # ``ast.parse(function_source.lstrip())``
            parsed.extend(m.id for m in ast.walk(n.args[0]) if isinstance(m, ast.Name) and m.id in names)
    for kind, found in (("function", inspected), ("source", parsed)):
        for name in dict.fromkeys(found):
            if kind not in names[name].types:
                names[name].types.insert(0, kind)


def _parses(func: ast.expr) -> bool:
    """``ast.parse(...)``, ``compile(...)``, ``tokenize.generate_tokens(...)``: a call that reads Python source."""
    if isinstance(func, ast.Attribute):
        return func.attr == "generate_tokens" or func.attr == "parse" and getattr(func.value, "id", "") == "ast"
    return isinstance(func, ast.Name) and func.id in ("compile", "generate_tokens")


def examples() -> list[Func]:
    return [Func(s) for s in SOURCES]


def sources() -> list[str]:
    """Python source texts (for ``ast.parse(text)``): the functions of :data:`SOURCES`, then statements of other
    kinds."""
    from .astnodes import SNIPPETS  # noqa: PLC0415

    return [*SOURCES[:4], *SNIPPETS[:3], "import os.path as osp, sys", "def broken(:\n"]
