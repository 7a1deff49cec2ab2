"""Parse a model's completion back into exactly one function (issue 5, "Prompts and parsing back").

The prompt ends with a function's signature (no trailing newline); the completion continues it.
:func:`parse_back` returns the function the completion completes, or why there is none; it never raises.

- Python: ``signature + completion`` is cut before the first non-blank line indented to the ``def``'s
  column or less (the model moved on to other code), then parsed with ``ast``. When that fails, trailing
  lines are dropped one at a time until the function parses.
- C, C++, Java, Rust, Go: tokens from tree-sitter, braces inside strings, characters and comments
  ignored; the function ends at the brace that closes the first ``{`` of the completion. The cut-out
  function must then parse without syntax errors.

Outcomes: ``ok`` (``function`` set); ``empty`` (the completion is blank); ``truncated`` (the text ends
inside the function: an unclosed brace, bracket or string, or a block opener with no block); for
Python, when dropping trailing lines recovers a function from a truncated text, ``function`` holds that
prefix; ``unparsable`` (anything else: garbage, more than one function, no body).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from dataclasses import dataclass
from typing import Literal

from tree_sitter import Node

from calib._exceptions import InvalidParameterError

__all__ = ["OUTCOMES", "ParseBack", "candidate_code", "parse_back"]

Outcome = Literal["ok", "unparsable", "empty", "truncated"]
OUTCOMES: tuple[Outcome, ...] = ("ok", "unparsable", "empty", "truncated")

_DEF = re.compile(r"^([ \t]*)(?:async[ \t]+)?def\b", re.MULTILINE)
_TRUNCATION = ("never closed", "unterminated", "unexpected eof", "expected an indented block", "was not closed")
_SKIP = ("comment", "string", "char", "rune", "text_block")
_WRAP = {"java": ("class _ {\n", "\n}")}


@dataclass(frozen=True)
class ParseBack:
    """A completion parsed back: the function (or ``None``) and the outcome."""

    function: str | None
    outcome: Outcome


def parse_back(language: str, signature: str, completion: str) -> ParseBack:
    """The single function ``signature + completion`` spells out, with an outcome (see module docstring).

    ``language`` is one of ``python``, ``c``, ``cpp``, ``java``, ``rust``, ``go``; an unknown one raises
    :class:`~calib.InvalidParameterError` (the only exception, raised before any parsing).
    """
    from calib.data.treesitter import BRACE_LANGUAGES

    if language != "python" and language not in BRACE_LANGUAGES:
        raise InvalidParameterError(
            f"language={language!r}: expected python or one of {', '.join(BRACE_LANGUAGES)}"
        )
    if not completion.strip():
        return ParseBack(None, "empty")
    signature = signature.replace("\r\n", "\n")
    completion = completion.replace("\r\n", "\n")
    try:
        if language == "python":
            return _python(signature, completion)
        return _braces(language, signature, completion)
    except Exception:  # noqa: BLE001 -- a completion is untrusted text; every failure is an outcome
        return ParseBack(None, "unparsable")


# --- Python ---------------------------------------------------------------------------------------


def _width(indent: str) -> int:
    return len(indent.expandtabs(8))


def _python(signature: str, completion: str) -> ParseBack:
    match = _DEF.search(signature)
    if match is None:
        return ParseBack(None, "unparsable")
    indent = match.group(1)
    def_width = _width(indent)
    first_body_row = signature.count("\n") + 1  # rows after the signature's last line
    text = signature + completion
    lines = text.split("\n")
    in_string = _string_rows(text)
    end = total = len(lines)
    for row in range(first_body_row, len(lines)):
        line = lines[row]
        if line.strip() and row not in in_string and _width(line[: len(line) - len(line.lstrip(" \t"))]) <= def_width:
            end = row
            break
    lines = lines[:end]
    error = _python_error(lines, indent)
    if error is None:
        return ParseBack(_join(lines), "ok")
    # Only a text that runs to its end can be cut short; one the cut ended is just wrong.
    truncated = end == total and any(marker in error.lower() for marker in _TRUNCATION)
    for stop in range(len(lines) - 1, first_body_row - 1, -1):
        if _python_error(lines[:stop], indent) is None:
            return ParseBack(_join(lines[:stop]), "truncated" if truncated else "ok")
    return ParseBack(None, "truncated" if truncated else "unparsable")


_STRING_TOKENS = {tokenize.STRING} | {getattr(tokenize, name) for name in ("FSTRING_MIDDLE", "FSTRING_END")
                                       if hasattr(tokenize, name)}


def _string_rows(text: str) -> set[int]:
    """0-based rows that continue a multi-line string (their indentation says nothing about the code)."""
    rows: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in _STRING_TOKENS and tok.end[0] > tok.start[0]:
                rows.update(range(tok.start[0], tok.end[0]))  # tokenize rows are 1-based: these are the later rows
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return rows


def _join(lines: list[str]) -> str:
    return "\n".join(lines).rstrip()


def _python_error(lines: list[str], indent: str) -> str | None:
    """None when the lines (dedented by the def's indentation) are exactly one function; else why not."""
    source = "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except SyntaxError as exc:
        return str(exc.msg)
    if len(tree.body) != 1 or not isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return "not exactly one function"
    return None


# --- brace languages ------------------------------------------------------------------------------


def _braces(language: str, signature: str, completion: str) -> ParseBack:
    from calib.data.treesitter import parser

    head = signature.rstrip()
    if head.endswith("{"):  # a signature given with its opening brace: the body starts there
        head = head[:-1].rstrip()
    text = head + signature[len(head):] + completion
    data = text.encode("utf-8", "surrogatepass")
    start = len(head.encode("utf-8", "surrogatepass"))
    tree = parser(language).parse(data)
    depth = 0
    opened = False
    for node in _tokens(tree.root_node):
        if node.start_byte < start or node.type not in ("{", "}"):
            continue
        if node.type == "{":
            depth += 1
            opened = True
        elif opened:
            depth -= 1
            if depth == 0:
                function = data[: node.end_byte].decode("utf-8", "replace")
                prefix, suffix = _WRAP.get(language, ("", ""))
                check = parser(language).parse((prefix + function + suffix).encode("utf-8", "surrogatepass"))
                if check.root_node.has_error:
                    return ParseBack(None, "unparsable")
                return ParseBack(function, "ok")
    return ParseBack(None, "truncated" if opened else "unparsable")


def _tokens(root: Node) -> list[Node]:
    """Leaves in document order, without the insides of strings, characters and comments."""
    out: list[Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if any(part in node.type for part in _SKIP) and node.is_named:
            continue
        if node.child_count == 0:
            if not node.is_missing:  # error recovery inserts zero-width "}" nodes at the end
                out.append(node)
        else:
            stack.extend(reversed(node.children))
    return out


def candidate_code(signature: str, function: str | None, text: str | None) -> str | None:
    """What a generation is compared as: its parsed-back function, else the signature plus the raw completion.

    A completion that does not parse back is still a candidate (the paper compares every generation):
    its text similarity is measured on what the model wrote, and executing it fails on every input, a
    non-match. Only a generation that never came back (a failed request) has no candidate.
    """
    if function is not None:
        return function
    return None if text is None else signature + text
