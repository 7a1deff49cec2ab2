"""Syntax-tree nodes as input values, for code that walks Python's ``ast`` (runs inside the sandbox; stdlib only).

An AST visitor's method (``visit_With(self, node)`` of an ``ast.NodeVisitor``, pyflakes' ``LAMBDA(self, node)``)
or a function that checks ``isinstance(node, ast.Lambda)`` takes nodes of one class. An object with the
attributes its body reads rarely gets far: the node's fields are other nodes, lists of them and names. The
input value ``Node('With', 'with open(p) as fh, lock:\\n    pass')`` is the first ``With`` node of that source's
tree (breadth first; ``Node('expr', ...)``: its first expression), parsed afresh for each run (:func:`build`);
:func:`examples` gives a class's sources from :data:`SNIPPETS`, short statements that between them hold each
node class of the language.
"""

from __future__ import annotations

import ast

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

#: Statements holding between them every node class of Python 3.11's grammar, the common ones several times.
SNIPPETS = (
    "x = 1",
    "a, b = b, a + 1",
    "total += price * 2",
    "count: int = 0",
    "del items[0], obj.attr",
    "import os.path as osp, sys",
    "from .utils import helper as h, other",
    "def f(a, /, b: int = 1, *args, c=2, d, **kwargs) -> str:\n    return a",
    "@decorator(1)\ndef g(self):\n    global counter\n    nonlocal total\n    pass",
    "async def fetch(url):\n    async with session.get(url) as r:\n        return await r.text()",
    "async def drain(q):\n    async for item in q:\n        yield item",
    "class Point(Base, metaclass=Meta):\n    x: int = 0\n    def norm(self):\n        return super().norm()",
    "for i, v in enumerate(values):\n    if v:\n        continue\n    break\nelse:\n    pass",
    "while not done and tries < 3:\n    tries -= 1",
    "if a < b <= c != d:\n    pass\nelif x is None or y is not z:\n    pass\n"
    "else:\n    raise ValueError('bad') from None",
    "with open(p) as fh, lock:\n    pass",
    "try:\n    run()\nexcept (TypeError, ValueError) as e:\n    log(e)\nelse:\n    ok()\nfinally:\n    close()",
    "assert value in allowed, 'not allowed'",
    "f = lambda q, *r, k=1: q + len(r)",
    "result = {k: v for k, v in pairs if k not in seen}",
    "squares = [n * n for n in range(10) if n % 2]",
    "unique = {w.lower() for w in words} | {'a', 'b'}",
    "lazy = (c for c in text if c.isalpha())",
    "label = 'big' if size > 100 else 'small'",
    "msg = f'{name!r:>{width}} has {count:d} items'",
    "part = data[1:-1:2]",
    "flags = -x, ~mask, +y, not ok",
    "merged = {**base, 'key': [1, 2.5, b'raw', None, True, ...]}",
    "first, *rest = (1, 2, 3)",
    "m = a @ b // c % d ** e << 1 >> 2 & 3 | 4 ^ 5",
    "def gen():\n    x = yield 1\n    yield from other()",
    "print(*args, sep='', **opts)",
    "(n := len(items))",
    "match command:\n    case [1, *rest]:\n        pass\n    case {'k': v, **kw}:\n        pass\n"
    "    case Point(x=0) | None:\n        pass\n    case str() as s if s:\n        pass\n    case _:\n        pass",
    "try:\n    pass\nexcept* OSError:\n    pass",
    "with lock:\n    count = values[i]",
    "with make() as (a, b), other() as c:\n    yield a",
    "key = lambda: 0",
    "try:\n    import json\nexcept:\n    json = None",
    "@property\ndef name(self):\n    return self._name",
    "def run(*, key=None):\n    'Run it.'",
    "class Empty:\n    pass",
    "return obj.method(arg)[0]",
)


class Node:
    """``Node('With', source)``: the first node of class ``With`` in ``source``'s tree (:func:`build`)."""

    def __init__(self, cls: str, source: str) -> None:
        self.cls, self.source = cls, source

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Node) and (self.cls, self.source) == (other.cls, other.source)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Node({self.cls!r}, {self.source!r})"


def build(node: Node) -> Any:
    """The node ``node`` names, of a tree parsed afresh (the function may change it); a stand-in-free
    ``ast.Module`` of the source when no node of that class is in it."""
    tree = ast.parse(node.source)
    return next((n for n in ast.walk(tree) if isinstance(n, _class(node.cls))), tree)


def _class(name: str) -> type:
    """The ``ast`` class ``name`` (``expr`` and ``stmt`` too), else a class no node is of."""
    found = getattr(ast, "Constant" if name in _OLD else name, None)
    return found if isinstance(found, type) and issubclass(found, ast.AST) else _Nothing


class _Nothing:
    pass


_FOUND: dict[str, list[str]] = {}


def examples(cls: str, limit: int = 4) -> list[Node]:
    """Up to ``limit`` nodes of class ``cls`` (a name in ``ast``), from the snippets that hold one, shortest first."""
    if cls not in _FOUND:
        _FOUND[cls] = sorted((s for s in SNIPPETS if any(isinstance(n, _class(cls)) for n in ast.walk(_parsed(s)))),
                             key=len)
    return [Node(cls, s) for s in _FOUND[cls][:limit]]


def _parsed(source: str) -> ast.AST:
    try:
        return ast.parse(source)
    except SyntaxError:  # ``except*`` before Python 3.11
        return ast.Module(body=[], type_ignores=[])


def hint(info: Any) -> None:
    """A visitor method's node parameter (the first after ``self``) takes that class's nodes first, in a module
    that imports ``ast``: ``visit_With(self, node)`` → ``ast:With`` (:func:`node_class`)."""
    func = info.node
    if func is None or not info.params or not _imports_ast(info.tree):
        return
    cls = node_class(func.name)
    if cls is not None and info.params[0].kind in ("positional", "keyword"):
        types = info.params[0].types
        if "ast:" + cls not in types:
            types.insert(0, "ast:" + cls)


def _imports_ast(tree: Any) -> bool:
    body = list(getattr(tree, "body", []))
    for stmt in list(body):  # one level into ``try:``/``if`` blocks (``try: import ast``)
        body += getattr(stmt, "body", []) if isinstance(stmt, ast.Try | ast.If) else []
    return any(isinstance(s, ast.Import) and any(a.name in ("ast", "_ast") for a in s.names)
               or isinstance(s, ast.ImportFrom) and s.module in ("ast", "_ast") for s in body)


def node_class(name: str) -> str | None:
    """The ``ast`` node class a visitor method's name is for: ``visit_With`` → ``With``, pyflakes' ``LAMBDA`` →
    ``Lambda``, ``visit_FunctionDef`` → ``FunctionDef``; else None."""
    wanted = name[6:] if name.startswith("visit_") else name
    if not wanted or not wanted[0].isalpha():
        return None
    if wanted in _OLD:  # ``visit_Num`` of code older than Python 3.8: ``ast.parse`` makes a Constant
        return "Constant"
    found = getattr(ast, wanted, None)
    if isinstance(found, type) and issubclass(found, ast.AST) and found is not ast.AST:
        return wanted
    if wanted.isupper():
        return _UPPER.get(wanted)
    return None


_OLD = frozenset({"Num", "Str", "Bytes", "NameConstant", "Ellipsis"})
_UPPER = {n.upper(): n for n in dir(ast) if isinstance(getattr(ast, n), type) and issubclass(getattr(ast, n), ast.AST)}
