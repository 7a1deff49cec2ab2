"""Line coverage of x by probes compiled into x, not by a trace function (runs inside the sandbox; stdlib only).

A trace function (``sys.settrace``) is called for every Python frame the code enters, x's or not: every
stand-in operation, every helper of the context, every method of a library x calls. On code that turns
on stand-ins that cost about 2.5 times the run itself (a ``while event is not None: event =
walker.nxt()`` loop over a stand-in: 15 ms untraced, 40 ms traced, per input, and such functions
spend the whole search budget). Instead, x's definition is compiled with a probe before each of its
statements (``_calib_line(12)``, the statement's first line; nested functions and classes included),
and the probe is a set's ``add`` (a C call, no frame): only x's own statements pay, a few tens of
nanoseconds each. The tree the search analyses (and rewrites, :mod:`.cmplog`) is never changed: the
probes go into a copy when a statement holding x is compiled (:meth:`.scaffold.Module._code`), so
digests of x's code, hints and mined literals are those of x as written.

What is reached is what the trace function reported, statement by statement: a statement is reached
when execution gets to it, as its first line event said before.
"""

from __future__ import annotations

import ast
import copy

from .calls import is_docstring
from .trees import clone

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

#: The module global x's probes call.
NAME = "_calib_line"
#: The module global x's ``try`` statements with handlers call on entering (1) and leaving (-1) their body:
#: :data:`.standins.RAISE_IN_TRY`.
TRY = "_calib_try"


class Probes:
    """Compiles x's definition with probes; :meth:`rewrite` is :attr:`.scaffold.Module.rewrite`."""

    def __init__(self, tree: ast.Module, node: Any) -> None:
        self.node = node
        self.path: set[int] = set()  # ids of the nodes holding x (x included) and of their bodies
        self._find(tree, node)

    def _find(self, where: Any, node: Any) -> bool:
        if where is node:
            self.path.update((id(node), id(node.body)))
            return True
        for field in ("body", "orelse", "finalbody", "handlers"):
            for child in getattr(where, field, None) or ():
                if isinstance(child, ast.AST) and self._find(child, node):
                    self.path.update((id(where), id(getattr(where, "body", None))))
                    return True
        return False

    def _held(self, node: Any) -> bool:
        # (x's body as it is now: the search's comparison recorder gives x a new body list after this was made,
        # and a copy of x without its decorators holds that one)
        body = getattr(node, "body", None)
        return id(node) in self.path or id(body) in self.path or body is self.node.body

    def rewrite(self, stmt: ast.stmt) -> ast.stmt:
        """``stmt`` itself, or, when it holds x (or is a copy of a node that does, sharing its body: a
        definition retried without its decorators), a copy with probes in x: the nodes around x are
        copied shallowly, x deeply."""
        return self._copy(stmt) if self._held(stmt) else stmt

    def _copy(self, node: Any) -> Any:
        if node is self.node or getattr(node, "body", None) is self.node.body:
            new = clone(node)
            instrument(new)
            mark_tries(new)
            return new
        new = copy.copy(node)
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                setattr(new, field, [self._copy(c) if self._held(c) else c for c in block])
        return new


def _probe(stmt: ast.stmt) -> ast.stmt:
    at = {"lineno": stmt.lineno, "col_offset": stmt.col_offset, "end_lineno": stmt.lineno,
          "end_col_offset": stmt.col_offset}
    call = ast.Call(ast.Name(NAME, ast.Load(), **at), [ast.Constant(stmt.lineno, **at)], [], **at)
    return ast.Expr(call, **at)


def instrument(node: Any) -> None:
    """Put a probe before every statement of ``node`` (x's definition, a copy) and of what it nests."""
    todo: list[Any] = [node]
    while todo:
        item = todo.pop()
        blocks = [getattr(item, f, None) for f in ("body", "orelse", "finalbody")]
        blocks += [h.body for h in getattr(item, "handlers", [])] + [c.body for c in getattr(item, "cases", [])]
        for block in blocks:
            if not isinstance(block, list) or not block or not isinstance(block[0], ast.stmt):
                continue
            todo.extend(block)
            keep = 1 if is_docstring(block[0]) and isinstance(
                item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else 0
            block[keep:] = [part for s in block[keep:] for part in (_probe(s), s)]



def mark_tries(node: Any) -> None:
    """Wrap the body of each ``try`` with handlers in x (a copy) as ``_calib_try(1)`` then ``try: body
    finally: _calib_try(-1)``: the count of such bodies running is known, whatever way they are left."""
    for item in [n for n in ast.walk(node) if isinstance(n, ast.Try | ast.TryStar) and n.handlers]:
        at = {"lineno": item.lineno, "col_offset": item.col_offset, "end_lineno": item.lineno,
              "end_col_offset": item.col_offset}

        def step(n: int, at: dict[str, int] = at) -> ast.stmt:
            name = ast.Name(TRY, ast.Load(), **at)
            return ast.Expr(ast.Call(name, [ast.Constant(n, **at)], [], **at), **at)

        item.body = [step(1), ast.Try(body=item.body, handlers=[], orelse=[], finalbody=[step(-1)], **at)]
