"""Cut documents into rows of the functions table (:data:`~calib.data.schema.FUNCTIONS_SCHEMA`).

:func:`extract_document` is the entry point: it decodes, screens and dispatches one document; Python
goes through :func:`extract_python` (``ast``, :mod:`calib.data.candidates`), C, C++, Java, Rust and Go through
:mod:`calib.data.treesitter`. :class:`Deduplicator` drops exact duplicates across documents.

Which Python functions count: module-level functions and methods (qualname ``Class.method``, nested
classes ``Outer.Inner.method``), also under a module- or class-level ``if``/``try`` (platform variants).
Functions nested inside functions are not rows of their own: they stay part of their parent's body,
which is what a model asked to complete the parent has to produce.

The columns, for every language, satisfy ``context + signature + body == document[:end of function]``
for Python (the body starts right after the colon), and ``context`` ends where the function's first line
starts (decorators, Rust attributes and C++ ``template <...>`` heads belong to the signature):

- ``signature``: from the start of the function's first line (indentation kept, decorators included)
  to the colon ending the ``def`` header (Python) or to the body's opening brace (excluded), with no
  trailing whitespace;
- ``docstring``: Python: the docstring literal as written (it is also the start of ``body``);
  brace languages: the comment block right before the function (it lies in ``context``);
- ``body``: the rest of the function, through the end of its last line (Python) or its closing brace;
- ``body_lines``: non-blank body lines outside the docstring (brace languages: inside the braces);
- ``start_line``: the 1-based line where ``signature`` starts.

Text handling: CRLF and lone CR become LF, tabs are kept; bytes are decoded as UTF-8 (a BOM is
dropped). Drop reasons (:data:`~calib.data.schema.DROP_REASONS`) count documents for ``not_utf8``,
``empty_document``, ``fim_sentinel`` and, in Python, ``syntax_error`` (the document is skipped whole);
they count functions for ``too_short``, ``too_long``, ``duplicate`` and, in brace languages,
``syntax_error`` (a function whose syntax tree holds an error; the rest of the document is kept).
Two caps bound the work and the memory one document can take (a 50 MB single-line file would
otherwise parse into gigabytes of syntax tree): a document over ``max_document_bytes`` UTF-8 bytes is
dropped whole as ``too_large`` before it is decoded or parsed, and one with a line over
``max_line_chars`` characters (minified or generated code, data blobs) as ``long_line``. The defaults,
1,000,000 bytes and 1,000 characters, are the filters of the Codex and The Stack corpora; ``None``
turns a cap off.
``context`` keeps at most ``max_context_chars`` characters (cut at a line start): prompts use a few
hundred tokens of it, and a full prefix per function would make memory quadratic in the file size.
"""

from __future__ import annotations

import ast
import hashlib
import re
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from calib._exceptions import InvalidParameterError
from calib.data.candidates import Candidate, python_candidates, python_definitions
from calib.data.schema import FUNCTIONS_SCHEMA, function_id

__all__ = [
    "DEFAULT_MAX_DOCUMENT_BYTES",
    "DEFAULT_MAX_LINE_CHARS",
    "FIM_SENTINEL",
    "LANGUAGES",
    "Deduplicator",
    "ExtractionResult",
    "extract_document",
    "extract_python",
    "python_definitions",
]

#: The languages :func:`extract_document` accepts.
LANGUAGES = ("python", "c", "cpp", "java", "rust", "go")

#: Fill-in-the-middle sentinels of StarCoder (``<fim_prefix>``), Qwen/OpenAI (``<|fim_prefix|>``),
#: dashed variants (``<fim-prefix>``) and DeepSeek (``<｜fim▁begin｜>``). Code Llama's ``<PRE>`` is left
#: out: it is also an HTML tag, common in ordinary code.
FIM_SENTINEL = re.compile(
    r"<\|?fim[_-](?:prefix|middle|suffix|pad)\|?>|<｜fim▁(?:begin|hole|end)｜>",
    re.IGNORECASE,
)

DEFAULT_MAX_CONTEXT_CHARS = 8_000
#: Documents over this many UTF-8 bytes are dropped whole (``too_large``), before decoding or parsing.
DEFAULT_MAX_DOCUMENT_BYTES = 1_000_000
#: Documents with a line over this many characters are dropped whole (``long_line``).
DEFAULT_MAX_LINE_CHARS = 1_000


@dataclass(frozen=True)
class ExtractionResult:
    """What one document (or a batch) yielded: kept rows of FUNCTIONS_SCHEMA and dropped counts by reason."""

    functions: list[dict[str, Any]] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)


def _validate(min_lines: int, max_lines: int, max_context_chars: int | None, **caps: int | None) -> None:
    if min_lines < 0 or max_lines < min_lines:
        raise InvalidParameterError(
            f"min_lines={min_lines}, max_lines={max_lines}: need 0 <= min_lines <= max_lines"
        )
    if max_context_chars is not None and max_context_chars < 0:
        raise InvalidParameterError(f"max_context_chars={max_context_chars}: need None or >= 0")
    for name, value in caps.items():
        if value is not None and value < 1:
            raise InvalidParameterError(f"{name}={value}: need None (no cap) or >= 1")


def oversized(document: str | bytes, max_document_bytes: int | None, max_line_chars: int | None) -> str | None:
    """``too_large`` or ``long_line`` when ``document`` breaks a cap (module docstring), else None.

    Bytes are measured as given; a str by its UTF-8 length. Lines are split on LF, CR and CRLF alike.
    """
    if max_document_bytes is not None:
        size = len(document)
        if isinstance(document, str) and size <= max_document_bytes and not document.isascii():
            size = len(document.encode("utf-8", "surrogatepass"))
        if size > max_document_bytes:
            return "too_large"
    if max_line_chars is not None and len(document) > max_line_chars:
        newline, cr = ("\n", "\r") if isinstance(document, str) else (b"\n", b"\r")
        lines = document.replace(cr, newline).split(newline)  # type: ignore[arg-type]
        # bytes over-count multi-byte characters: recount in characters only a line that seems too long
        for line in lines:
            if len(line) > max_line_chars and (isinstance(line, str)
                                               or len(line.decode("utf-8", "replace")) > max_line_chars):
                return "long_line"
    return None


def normalise_newlines(text: str) -> str:
    """CRLF and lone CR to LF (tabs and everything else unchanged)."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _context(text: str, start: int, max_chars: int | None) -> str:
    if max_chars is None or start <= max_chars:
        return text[:start]
    cut = start - max_chars
    newline = text.find("\n", cut - 1, start)
    return text[newline + 1 : start] if newline >= 0 else ""


def _rows(candidates: Iterable[Candidate], text: str, *, language: str, source: str, path: str,
          min_lines: int, max_lines: int, metadata: Mapping[str, Any] | None,
          max_context_chars: int | None, dropped: Counter[str]) -> list[dict[str, Any]]:
    meta = metadata or {}
    rows = []
    for cand in candidates:
        if cand.has_error:
            dropped["syntax_error"] += 1
        elif cand.body_lines < min_lines:
            dropped["too_short"] += 1
        elif cand.body_lines > max_lines:
            dropped["too_long"] += 1
        else:
            row = {
                "function_id": function_id(language, path, cand.qualname, cand.signature + cand.body),
                "language": language,
                "source": source,
                "path": path,
                "repo": _optional(meta.get("repo")),
                "license": _optional(meta.get("license")),
                "date": _optional(meta.get("date")),
                "qualname": cand.qualname,
                "context": _context(text, cand.start, max_context_chars),
                "signature": cand.signature,
                "docstring": cand.docstring,
                "body": cand.body,
                "body_lines": cand.body_lines,
                "start_line": cand.start_line,
            }
            assert row.keys() == FUNCTIONS_SCHEMA.keys()
            rows.append(row)
    return rows


def _optional(value: Any) -> str | None:
    return None if value is None else str(value)


def extract_python(text: str, *, source: str, path: str, min_lines: int = 10, max_lines: int = 50,
                   metadata: Mapping[str, Any] | None = None,
                   max_context_chars: int | None = DEFAULT_MAX_CONTEXT_CHARS) -> ExtractionResult:
    """The functions and methods of one Python document, filtered by body length.

    Parameters
    ----------
    text
        The document (CRLF is normalised to LF here).
    source, path
        Where the document came from and its path inside the corpus (columns of the same names).
    min_lines, max_lines
        Keep functions whose ``body_lines`` lie in ``[min_lines, max_lines]``.
    metadata
        Optional ``repo``, ``license`` and ``date`` values for every row.
    max_context_chars
        Keep at most this many characters of ``context`` (``None``: all of it).

    A document that does not parse is skipped whole (``syntax_error``); one holding a fill-in-the-middle
    sentinel is dropped (``fim_sentinel``). The module docstring defines each column.
    """
    _validate(min_lines, max_lines, max_context_chars)
    dropped: Counter[str] = Counter()
    text = normalise_newlines(text)
    if _screen(text, dropped):
        return ExtractionResult([], dropped)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        dropped["syntax_error"] += 1
        return ExtractionResult([], dropped)
    rows = _rows(python_candidates(text, tree), text, language="python", source=source, path=path,
                 min_lines=min_lines, max_lines=max_lines, metadata=metadata,
                 max_context_chars=max_context_chars, dropped=dropped)
    return ExtractionResult(rows, dropped)


def _screen(text: str, dropped: Counter[str]) -> bool:
    """Count and report a document-level drop (empty, FIM sentinels)."""
    if not text.strip():
        dropped["empty_document"] += 1
        return True
    if FIM_SENTINEL.search(text):
        dropped["fim_sentinel"] += 1
        return True
    return False


# --- any language ---------------------------------------------------------------------------------


def extract_document(document: str | bytes, *, language: str, source: str, path: str, min_lines: int = 10,
                     max_lines: int = 50, metadata: Mapping[str, Any] | None = None,
                     max_context_chars: int | None = DEFAULT_MAX_CONTEXT_CHARS,
                     deduplicator: Deduplicator | None = None,
                     max_document_bytes: int | None = DEFAULT_MAX_DOCUMENT_BYTES,
                     max_line_chars: int | None = DEFAULT_MAX_LINE_CHARS) -> ExtractionResult:
    """Decode, screen and cut one document in ``language`` (one of :data:`LANGUAGES`).

    A document over ``max_document_bytes`` bytes (``too_large``) or with a line over ``max_line_chars``
    characters (``long_line``) is dropped whole before it is parsed; ``None`` turns a cap off. Bytes that
    are not UTF-8 drop the document (``not_utf8``). With a ``deduplicator``, functions it has seen before
    are dropped (``duplicate``). Other parameters as in :func:`extract_python`.
    """
    if language not in LANGUAGES:
        raise InvalidParameterError(f"language={language!r}: expected one of {', '.join(LANGUAGES)}")
    _validate(min_lines, max_lines, max_context_chars, max_document_bytes=max_document_bytes,
              max_line_chars=max_line_chars)
    reason = oversized(document, max_document_bytes, max_line_chars)
    if reason is not None:
        return ExtractionResult([], Counter({reason: 1}))
    if isinstance(document, bytes | bytearray):
        try:
            text = bytes(document).decode("utf-8-sig")
        except UnicodeDecodeError:
            return ExtractionResult([], Counter(not_utf8=1))
    else:
        text = document
    if language == "python":
        result = extract_python(text, source=source, path=path, min_lines=min_lines, max_lines=max_lines,
                                metadata=metadata, max_context_chars=max_context_chars)
    else:
        from calib.data.treesitter import function_candidates

        dropped: Counter[str] = Counter()
        text = normalise_newlines(text)
        if _screen(text, dropped):
            return ExtractionResult([], dropped)
        rows = _rows(function_candidates(language, text), text, language=language, source=source, path=path,
                     min_lines=min_lines, max_lines=max_lines, metadata=metadata,
                     max_context_chars=max_context_chars, dropped=dropped)
        result = ExtractionResult(rows, dropped)
    return deduplicator.filter(result) if deduplicator is not None else result


class Deduplicator:
    """Drops exact duplicates across documents: the same function text seen before in the same language.

    Function text is ``signature + body`` normalised: common indentation removed, trailing whitespace and
    blank lines dropped (so a method and an identical top-level copy match). Only a 16-byte digest per
    kept function is held, so memory grows with the number of distinct functions, not their size.
    """

    def __init__(self) -> None:
        self._seen: set[bytes] = set()

    def __len__(self) -> int:
        return len(self._seen)

    @staticmethod
    def key(row: Mapping[str, Any]) -> bytes:
        """The digest two rows share exactly when they are duplicates."""
        lines = [line.rstrip() for line in (row["signature"] + row["body"]).split("\n")]
        lines = [line for line in lines if line]
        indent = min((len(line) - len(line.lstrip(" \t")) for line in lines), default=0)
        blob = row["language"] + "\x1f" + "\n".join(line[indent:] for line in lines)
        return hashlib.blake2b(blob.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def seen(self, row: Mapping[str, Any]) -> bool:
        """Whether ``row`` duplicates an earlier one; records it when it does not."""
        key = self.key(row)
        if key in self._seen:
            return True
        self._seen.add(key)
        return False

    def filter(self, result: ExtractionResult) -> ExtractionResult:
        """``result`` without the rows seen before (counted as ``duplicate``)."""
        dropped = Counter(result.dropped)
        kept = []
        for row in result.functions:
            if self.seen(row):
                dropped["duplicate"] += 1
            else:
                kept.append(row)
        return ExtractionResult(kept, dropped)
