"""MBPP-style tests parsed: ``assert ENTRY(args, **kwargs) <op> expected`` into a :class:`ParsedTest`.

:func:`parse_test` takes one assert statement apart, or says in a :class:`NotApplicable` why it cannot
(arguments that are not literals, another shape of test); :mod:`calib.probes.isomorphism` rewrites the
parsed tests under a bijection and re-exports both names.
"""

from __future__ import annotations

import ast
import keyword
from dataclasses import dataclass
from typing import Any

from calib._exceptions import InvalidParameterError

__all__ = ["NotApplicable", "ParsedTest", "Unparseable", "check_entry_point", "parse_test"]


@dataclass(frozen=True)
class ParsedTest:
    """One MBPP-style test ``assert ENTRY(args, **kwargs) <op> expected``.

    Attributes
    ----------
    test : str
        The original assert statement.
    entry_point : str
        The function under test.
    args : tuple
        Positional argument values.
    kwargs : tuple of (str, value)
        Keyword arguments, in source order.
    expected : Any
        The value the call must equal (``True`` for ``assert ENTRY(...)``, ``False`` for
        ``assert not ENTRY(...)``).
    op : str
        ``"=="``; ``"is"`` for ``is True/False/None``; ``"truthy"`` / ``"falsy"`` for a bare call and its
        negation (rewritten in the same form, so truthiness is kept rather than tightened to ``== True``).
    """

    test: str
    entry_point: str
    args: tuple
    kwargs: tuple[tuple[str, Any], ...]
    expected: Any
    op: str


@dataclass(frozen=True)
class NotApplicable:
    """A test (or task) the isomorphism cannot rewrite, with one short reason."""

    reason: str


def check_entry_point(entry_point: str) -> None:
    """Raise :class:`InvalidParameterError` unless ``entry_point`` is a Python identifier (not a keyword)."""
    if not isinstance(entry_point, str) or not entry_point.isidentifier() or keyword.iskeyword(entry_point):
        raise InvalidParameterError(f"entry_point must be a Python identifier, got {entry_point!r}")


def _is_entry_call(node: ast.expr, entry_point: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry_point


def _literal(node: ast.expr, what: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise Unparseable(f"{what} is not a literal") from exc


class Unparseable(Exception):
    """A test part :func:`parse_test` cannot read (its message is the reason)."""


def _parse_call(call: ast.Call) -> tuple[tuple, tuple[tuple[str, Any], ...]]:
    args = []
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            raise Unparseable("starred argument")
        args.append(_literal(arg, f"argument {i}"))
    kwargs = []
    for kw in call.keywords:
        if kw.arg is None:
            raise Unparseable("**kwargs argument")
        kwargs.append((kw.arg, _literal(kw.value, f"keyword argument {kw.arg}")))
    return tuple(args), tuple(kwargs)


def parse_test(test: str, entry_point: str) -> ParsedTest | NotApplicable:
    """Recognise ``assert ENTRY(literals...) == literal`` (either side, any parentheses).

    Also ``assert ENTRY(...)`` (op ``"truthy"``), ``assert not ENTRY(...)`` (op ``"falsy"``) and
    ``assert ENTRY(...) is True/False/None``. A trailing assert message is ignored. Anything else
    (``set(ENTRY(...)) == ...``, ``math.isclose(...)``, non-literal arguments) is
    :class:`NotApplicable` with a short reason.

    Parameters
    ----------
    test : str
        One assert statement.
    entry_point : str
        Name of the function under test.
    """
    check_entry_point(entry_point)
    try:
        tree = ast.parse(test.strip())
    except SyntaxError as exc:
        return NotApplicable(f"syntax error: {exc.msg}")
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        return NotApplicable("not a single assert statement")
    node = tree.body[0].test
    try:
        if _is_entry_call(node, entry_point):
            return ParsedTest(test, entry_point, *_parse_call(node), True, "truthy")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and _is_entry_call(node.operand, entry_point):
            return ParsedTest(test, entry_point, *_parse_call(node.operand), False, "falsy")
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            return NotApplicable(f"not a single comparison of {entry_point}(...) with a literal")
        left, right, op = node.left, node.comparators[0], node.ops[0]
        if isinstance(op, ast.Is):
            if not _is_entry_call(left, entry_point):
                return NotApplicable(f"'is' comparison whose left side is not a direct call to {entry_point}(...)")
            expected = _literal(right, "expected value")
            if not (expected is None or isinstance(expected, bool)):
                return NotApplicable("'is' comparison with something other than True, False or None")
            return ParsedTest(test, entry_point, *_parse_call(left), expected, "is")
        if not isinstance(op, ast.Eq):
            return NotApplicable(f"comparison is not ==: {type(op).__name__}")
        if _is_entry_call(left, entry_point):
            call, other = left, right
        elif _is_entry_call(right, entry_point):
            call, other = right, left
        else:
            return NotApplicable(f"neither side is a direct call to {entry_point}(...)")
        args, kwargs = _parse_call(call)
        return ParsedTest(test, entry_point, args, kwargs, _literal(other, "expected value"), "==")
    except Unparseable as exc:
        return NotApplicable(str(exc))
