"""The functions table: one row per function extracted from a corpus (docs/architecture.md core tables).

Every stage of ``calib/data`` reads or writes rows of this schema; it is declared once, here. Ids are
stable content hashes, so the same function from the same file always gets the same id.
"""

from __future__ import annotations

import hashlib

import polars as pl

__all__ = ["DROP_REASONS", "FUNCTIONS_SCHEMA", "function_id"]

#: One row per kept function.
FUNCTIONS_SCHEMA: dict[str, pl.DataType] = {
    "function_id": pl.String(),  # sha256(language, path, qualname, source)[:16]
    "language": pl.String(),  # python | c | cpp | java | rust | go
    "source": pl.String(),  # where the document came from: a file path, "table.jsonl#row=17", "hf:repo@rev/file"
    "path": pl.String(),  # the document's path inside its corpus (metadata column or file name)
    "repo": pl.String(),  # optional metadata
    "license": pl.String(),  # optional metadata
    "date": pl.String(),  # optional metadata (ISO date)
    "qualname": pl.String(),  # Class.method / function name
    "context": pl.String(),  # the document's code before the function (full; prompts cut it by tokens)
    "signature": pl.String(),  # the signature line(s), without docstring, no trailing newline
    "docstring": pl.String(),  # the docstring or leading comment block (may be empty)
    "body": pl.String(),  # the body after the signature (docstring included, as the ground truth)
    "body_lines": pl.Int64(),  # non-blank body lines without the docstring
    "start_line": pl.Int64(),  # 1-based line of the signature in the document
}

#: Why a function or a document was dropped (counts go to the report).
DROP_REASONS = (
    "syntax_error",  # the document does not parse (it is skipped whole)
    "not_utf8",  # undecodable bytes (decoded with replacement; the document is skipped)
    "fim_sentinel",  # the document contains fill-in-the-middle sentinels
    "too_short",  # body shorter than min_lines
    "too_long",  # body longer than max_lines
    "duplicate",  # exact duplicate of a function kept earlier
    "empty_document",  # a row without code
    "too_large",  # the document is over the byte cap (max_document_bytes); it is skipped unread
    "long_line",  # a line is over the character cap (max_line_chars): minified or generated code
    "unreadable",  # calib extract: the file could not be read (permissions, I/O error)
    "judge_rejected",  # the optional LLM-judge filter said no
)


def function_id(language: str, path: str, qualname: str, source: str) -> str:
    """Stable id: the first 16 hex digits of sha256 over language, path, qualname and source."""
    blob = "\x1f".join((language, path, qualname, source)).encode("utf-8", "surrogatepass")
    return hashlib.sha256(blob).hexdigest()[:16]
