"""Small, behaviour-keeping edits of a Python function: the copies of a planted near-duplicate family.

An edit renames a local name, changes a constant's spelling, adds a comment or swaps two independent
simple assignments; :func:`family_copies` draws ``size`` distinct edited copies of a base function (each
one that still parses), for :func:`calib.organism.planted.plant`.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Sequence

from calib.organism.nearcopy import TOKEN_PATTERN

__all__ = ["family_copies"]

_COMMENTS = ("# keep this in sync with the caller", "# fast path", "# edge case first", "# see the note above",
             "# could be simpler", "# order matters here", "# defensive", "# handled below")
_SUFFIXES = ("_v", "_tmp", "_val", "2", "_local", "_x")
_IMPURE = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr, ast.Lambda)


def _function_node(source: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    node = ast.parse(source).body[0]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    return node


def _replace(source: str, spans: Sequence[tuple[int, int, int]], text: str) -> str:
    """Replace the (line, byte start, byte end) spans of ``source`` by ``text``."""
    lines = [line.encode() for line in source.split("\n")]
    for row, start, end in sorted(spans, reverse=True):
        lines[row - 1] = lines[row - 1][:start] + text.encode() + lines[row - 1][end:]
    return "\n".join(line.decode() for line in lines)


def _name_ids(fn: ast.AST) -> list[str]:
    return sorted(n.id for n in ast.walk(fn) if isinstance(n, ast.Name))


def _edit_rename(source: str, rng: random.Random) -> str | None:
    fn = _function_node(source)
    bound_elsewhere = {a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)}
    for node in ast.walk(fn):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            bound_elsewhere.update(node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound_elsewhere.add(node.name)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            bound_elsewhere.add(node.name)
        elif isinstance(node, ast.alias):
            bound_elsewhere.update({node.name.split(".")[0], node.asname or ""})
    stores = sorted({n.id for stmt in fn.body for n in ast.walk(stmt)
                     if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} - bound_elsewhere)
    if not stores:
        return None
    old = rng.choice(stores)
    existing = set(TOKEN_PATTERN.findall(source))
    fresh = [old + s for s in _SUFFIXES if old + s not in existing]
    if not fresh:
        return None
    new = rng.choice(fresh)
    spans = [(n.lineno, n.col_offset, n.end_col_offset)
             for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == old]
    edited = _replace(source, spans, new)
    try:
        renamed = _function_node(edited)
    except SyntaxError:
        return None
    expected = sorted(new if i == old else i for i in _name_ids(fn))
    return edited if _name_ids(renamed) == expected else None


def _edit_constant(source: str, rng: random.Random) -> str | None:
    fn = _function_node(source)
    in_fstring = {id(n) for j in ast.walk(fn) if isinstance(j, ast.JoinedStr) for n in ast.walk(j)}
    numbers = [n for stmt in fn.body for n in ast.walk(stmt)
               if isinstance(n, ast.Constant) and type(n.value) in (int, float) and id(n) not in in_fstring
               and n.lineno == n.end_lineno]
    if not numbers:
        return None
    node = rng.choice(numbers)
    value = node.value + rng.choice((1, 2, 3)) if isinstance(node.value, int) else round(node.value * 1.5 + 0.25, 4)
    edited = _replace(source, [(node.lineno, node.col_offset, node.end_col_offset)], repr(value))
    return _if_parses(edited)


def _starts_line(lines: Sequence[bytes], node: ast.stmt) -> bool:
    return not lines[node.lineno - 1][: node.col_offset].strip()


def _edit_comment(source: str, rng: random.Random) -> str | None:
    fn = _function_node(source)
    lines = [line.encode() for line in source.split("\n")]
    statements = [s for stmt in fn.body for s in ast.walk(stmt) if isinstance(s, ast.stmt) and _starts_line(lines, s)
                  and s.lineno > fn.lineno]
    if not statements:
        return None
    target = rng.choice(statements)
    text = source.split("\n")
    indent = text[target.lineno - 1][: len(text[target.lineno - 1]) - len(text[target.lineno - 1].lstrip())]
    text.insert(target.lineno - 1, indent + rng.choice(_COMMENTS))
    edited = "\n".join(text)
    return _if_parses(edited)


def _simple_assign(node: ast.stmt, lines: Sequence[bytes]) -> tuple[set[str], set[str]] | None:
    """(written, read) names of a one-line, call-free assignment to plain names that fills its line."""
    if not isinstance(node, ast.Assign) or node.lineno != node.end_lineno or not _starts_line(lines, node):
        return None
    tail = lines[node.lineno - 1][node.end_col_offset:].strip()
    if tail and not tail.startswith(b"#"):
        return None
    if not all(isinstance(t, ast.Name) for t in node.targets):
        return None
    if any(isinstance(n, _IMPURE) for n in ast.walk(node.value)):
        return None
    reads = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
    return {t.id for t in node.targets if isinstance(t, ast.Name)}, reads


def _edit_reorder(source: str, rng: random.Random) -> str | None:
    fn = _function_node(source)
    lines = [line.encode() for line in source.split("\n")]
    pairs = []
    for block_owner in ast.walk(fn):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(block_owner, field, None)
            if not isinstance(block, list):
                continue
            for a, b in zip(block, block[1:]):
                fa, fb = _simple_assign(a, lines), _simple_assign(b, lines)
                if fa and fb and b.lineno == a.lineno + 1 and not (fa[0] & fb[1] or fb[0] & fa[1] or fa[0] & fb[0]):
                    pairs.append(a.lineno)
    if not pairs:
        return None
    row = rng.choice(pairs)
    text = source.split("\n")
    text[row - 1], text[row] = text[row], text[row - 1]
    edited = "\n".join(text)
    return _if_parses(edited)


def _if_parses(edited: str) -> str | None:
    """``edited`` when it still parses as one function, else None (the edit is skipped)."""
    try:
        _function_node(edited)
    except SyntaxError:
        return None
    return edited


_EDITS = {"rename": _edit_rename, "constant": _edit_constant, "comment": _edit_comment, "reorder": _edit_reorder}


def family_copies(base: str, size: int, rng: random.Random) -> list[str] | None:
    """``size`` distinct copies of ``base``, each with one or two small edits, or None if impossible."""
    copies: list[str] = []
    for _ in range(20 * size):
        if len(copies) == size:
            break
        kinds = list(_EDITS)
        rng.shuffle(kinds)
        text, done = base, 0
        for kind in kinds:
            edited = _EDITS[kind](text, rng)
            if edited is not None:
                text, done = edited, done + 1
                if done == 2 or rng.random() < 0.5:
                    break
        if done and text != base and text not in copies:
            copies.append(text)
    return copies if len(copies) == size else None
