"""Functions cut out of a document before filtering: the :class:`Candidate` record and the Python cutter.

:func:`python_candidates` cuts Python functions with ``ast`` (and one ``tokenize`` pass for the header
colons); :func:`calib.data.treesitter.function_candidates` cuts C, C++, Java, Rust and Go functions into the
same record. :mod:`calib.data.extract` filters candidates into rows; its module docstring defines each field.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Candidate", "python_candidates", "python_definitions"]


@dataclass(frozen=True)
class Candidate:
    """A function cut out of a document before filtering (shared by the ast and tree-sitter paths)."""

    qualname: str
    start: int  # character offset of the first line's start
    signature: str
    docstring: str
    body: str
    body_lines: int
    start_line: int
    has_error: bool = False



def python_definitions(
    body: list[ast.stmt], prefix: str = ""
) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """Top-level functions and methods (of nested classes too) with their qualnames, including those under a
    module- or class-level ``if``/``try`` (platform variants); functions nested in functions are not separate."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node, prefix + node.name
        elif isinstance(node, ast.ClassDef):
            yield from python_definitions(node.body, f"{prefix}{node.name}.")
        elif isinstance(node, ast.If):
            yield from python_definitions(node.body + node.orelse, prefix)
        elif isinstance(node, (ast.Try, ast.TryStar)):
            handlers = [stmt for handler in node.handlers for stmt in handler.body]
            yield from python_definitions(node.body + handlers + node.orelse + node.finalbody, prefix)


def _header_ends(text: str) -> dict[int, tuple[int, int]]:
    """For each line holding a ``def`` keyword: the (row, col) just past the colon ending its header.

    One tokenize pass over the document (per-function passes are quadratic on large files). A header
    ends at the first ``:`` at the bracket depth where its ``def`` stood.
    """
    ends: dict[int, tuple[int, int]] = {}
    depth = 0
    pending: tuple[int, int] | None = None  # (def row, depth at def)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NAME and tok.string == "def" and pending is None:
                pending = (tok.start[0], depth)
            elif tok.type == tokenize.OP:
                if tok.string in "([{":
                    depth += 1
                elif tok.string in ")]}":
                    depth -= 1
                elif tok.string == ":" and pending is not None and depth == pending[1]:
                    ends.setdefault(pending[0], tok.end)
                    pending = None
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return ends


class _Lines:
    """Character offsets of line starts, and ast's UTF-8 byte columns turned into character columns."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.split("\n")
        self.starts = [0]
        for line in self.lines[:-1]:
            self.starts.append(self.starts[-1] + len(line) + 1)

    def offset(self, row: int, byte_col: int) -> int:
        line = self.lines[row - 1]
        col = byte_col if line.isascii() else len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))
        return self.starts[row - 1] + col

    def line_end(self, row: int) -> int:
        return self.starts[row - 1] + len(self.lines[row - 1])


def python_candidates(text: str, tree: ast.Module) -> list[Candidate]:
    """The functions and methods of :func:`python_definitions` in ``tree``, parsed from ``text``, cut as candidates."""
    lines = _Lines(text)
    ends = _header_ends(text)
    found = []
    for node, qualname in python_definitions(tree.body, ""):
        first_row = min([node.lineno] + [d.lineno for d in node.decorator_list])
        header_end = ends.get(node.lineno)
        if header_end is None:
            continue  # defensive: the tokenizer and ast disagree
        start = lines.starts[first_row - 1]
        # tokenize columns count characters (ast's count UTF-8 bytes).
        sig_end = lines.starts[header_end[0] - 1] + header_end[1]
        end = lines.line_end(node.end_lineno)
        signature = text[start:sig_end].rstrip()
        body = text[start + len(signature) : end]
        doc_rows = (0, -1)
        docstring = ""
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            doc_rows = (first.lineno, first.end_lineno)
            docstring = text[lines.offset(first.lineno, first.col_offset) : lines.offset(first.end_lineno,
                                                                                        first.end_col_offset)]
        body_lines = 0
        for row, line in enumerate(body.split("\n"), start=header_end[0]):
            if line.strip() and not doc_rows[0] <= row <= doc_rows[1]:
                body_lines += 1
        found.append(Candidate(qualname, start, signature, docstring, body, body_lines, first_row))
    return found
