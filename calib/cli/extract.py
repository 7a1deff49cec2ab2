"""``calib extract``: cut source files into the functions table, so a corpus can be inspected first.

Files are read and cut one at a time and kept rows go to the Parquet file in batches, so memory holds
one file's text and one batch of rows, never the corpus. A file over ``--max-file-bytes`` is never read
past the cap, and one with a line over ``--max-line-chars`` is never parsed: both are dropped whole and
listed with their reason, as is a file that cannot be read; one bad file never stops the run.
"""

from __future__ import annotations

import glob
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import polars as pl

from calib._exceptions import InputError
from calib.data.extract import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    DEFAULT_MAX_LINE_CHARS,
    LANGUAGES,
    Deduplicator,
    ExtractionResult,
    extract_document,
)
from calib.data.schema import FUNCTIONS_SCHEMA

__all__ = ["EXTENSIONS", "extract", "source_files"]

#: File extensions per language (a directory is searched recursively for these).
EXTENSIONS: dict[str, tuple[str, ...]] = {
    "python": (".py",),
    "c": (".c", ".h"),
    "cpp": (".cc", ".cpp", ".hpp", ".cxx"),
    "java": (".java",),
    "rust": (".rs",),
    "go": (".go",),
}
_LANGUAGE_OF = {ext: language for language, exts in EXTENSIONS.items() for ext in exts}
_BATCH_ROWS = 5_000
#: Drop reasons that drop a whole file (listed by name in the output; so does a Python syntax_error); the
#: summary lists at most _LISTED of them.
_FILE_REASONS = frozenset({"too_large", "long_line", "unreadable", "not_utf8", "empty_document", "fim_sentinel"})
_LISTED = 10


def source_files(paths: tuple[str, ...], language: str | None) -> Iterator[tuple[Path, str, str]]:
    """(file, its path inside the corpus, language) for each file the PATH arguments name, lazily.

    A directory yields its files with a known extension (of ``language`` when given), sorted; a glob its
    matches; a file itself. A missing path, an empty glob or an unknown extension raise InputError.
    """
    wanted = EXTENSIONS[language] if language else tuple(_LANGUAGE_OF)
    for arg in paths:
        path = Path(arg)
        if path.is_dir():
            for file in sorted(p for p in path.rglob("*") if p.suffix in wanted and p.is_file()):
                yield file, file.relative_to(path).as_posix(), language or _LANGUAGE_OF[file.suffix]
        elif path.is_file():
            yield path, path.name, _language_of(path, language)
        elif path.exists():
            raise InputError("is not a regular file (a FIFO, socket or device); give source files, directories "
                             "or globs", path=arg)
        elif glob.has_magic(arg):
            matches = sorted(glob.glob(arg, recursive=True))
            if not matches:
                raise InputError(f"no file matches the glob {arg!r}; check the pattern (quote it in the shell)")
            for match in matches:
                file = Path(match)
                if file.is_file() and (language is not None or file.suffix in _LANGUAGE_OF):
                    yield file, file.as_posix(), _language_of(file, language)
        else:
            raise InputError("no such file or directory; give source files, directories or globs", path=arg)


def read_capped(file: Path, max_bytes: int | None) -> bytes | str:
    """The file's bytes, or the drop reason: ``too_large`` (never read past ``max_bytes``), ``unreadable``."""
    try:
        with file.open("rb") as handle:
            data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    except OSError:
        return "unreadable"
    return "too_large" if max_bytes is not None and len(data) > max_bytes else data


def _language_of(path: Path, language: str | None) -> str:
    if language is not None:
        return language
    if path.suffix not in _LANGUAGE_OF:
        raise InputError(
            f"cannot tell the language from the extension {path.suffix or '(none)'!r}; "
            f"pass --language ({', '.join(LANGUAGES)})", path=str(path),
        )
    return _LANGUAGE_OF[path.suffix]


class _ParquetOut:
    """Rows written in batches to a temporary file beside ``out``, renamed onto it at the end."""

    def __init__(self, out: Path) -> None:
        import pyarrow.parquet as pq

        if not out.parent.is_dir():
            raise InputError("the folder for --out does not exist (or is a file); create it first", path=str(out))
        try:
            handle, self.tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
        except OSError as exc:
            raise InputError(f"cannot write --out there ({exc.strerror or exc}); choose a folder you can write to",
                             path=str(out)) from exc
        os.close(handle)
        self.out = out
        self.schema = pl.DataFrame(schema=FUNCTIONS_SCHEMA).to_arrow().schema
        self.writer = pq.ParquetWriter(self.tmp, self.schema)
        self.rows: list[dict[str, Any]] = []

    def add(self, rows: list[dict[str, Any]]) -> None:
        self.rows.extend(rows)
        if len(self.rows) >= _BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.writer.write_table(pl.DataFrame(self.rows, schema=FUNCTIONS_SCHEMA).to_arrow().cast(self.schema))
            self.rows = []

    def commit(self) -> None:
        self.flush()
        self.writer.close()
        os.replace(self.tmp, self.out)

    def abort(self) -> None:
        self.writer.close()
        Path(self.tmp).unlink(missing_ok=True)


@click.command("extract")
@click.argument("paths", nargs=-1, required=True)
@click.option("--language", type=click.Choice(LANGUAGES), default=None,
              help="Language of every file (default: from each file's extension).")
@click.option("--min-lines", type=click.IntRange(min=0), default=10, show_default=True,
              help="Keep functions with at least this many non-blank body lines (docstring not counted).")
@click.option("--max-lines", type=click.IntRange(min=0), default=50, show_default=True,
              help="Keep functions with at most this many non-blank body lines.")
@click.option("--max-file-bytes", type=click.IntRange(min=1), default=DEFAULT_MAX_DOCUMENT_BYTES,
              show_default=True, help="Drop a file over this many bytes unread (too_large).")
@click.option("--max-line-chars", type=click.IntRange(min=1), default=DEFAULT_MAX_LINE_CHARS,
              show_default=True, help="Drop a file with a line over this many characters (long_line).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the functions table here (Parquet; written to a temporary file, then renamed).")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
def extract(paths: tuple[str, ...], language: str | None, min_lines: int, max_lines: int, max_file_bytes: int,
            max_line_chars: int, out: Path | None, as_json: bool) -> None:
    """Extract functions from PATHS (files, directories, globs) into the functions table.

    Prints kept, dropped {reason: count}, dropped_files {file: reason} (files dropped whole), files,
    seconds and out. Extensions: .py, .c/.h, .cc/.cpp/.hpp/.cxx, .java, .rs, .go.
    """
    if max_lines < min_lines:
        raise click.BadParameter(f"--max-lines {max_lines} is below --min-lines {min_lines}; raise it",
                                 param_hint="--max-lines")
    started = time.perf_counter()
    writer = _ParquetOut(out) if out is not None else None
    kept, files = 0, 0
    dropped: Counter[str] = Counter()
    dropped_files: dict[str, str] = {}
    dedup = Deduplicator()
    try:
        for file, rel, lang in source_files(paths, language):
            data = read_capped(file, max_file_bytes)
            if isinstance(data, str):
                result = ExtractionResult([], Counter({data: 1}))
            else:
                result = extract_document(data, language=lang, source=str(file), path=rel, min_lines=min_lines,
                                          max_lines=max_lines, deduplicator=dedup, max_document_bytes=max_file_bytes,
                                          max_line_chars=max_line_chars)
            del data
            whole = set(_FILE_REASONS.intersection(result.dropped))
            if lang == "python" and "syntax_error" in result.dropped:
                whole.add("syntax_error")  # Python skips a document that does not parse whole
            if whole:
                dropped_files[str(file)] = min(whole)
            files += 1
            kept += len(result.functions)
            dropped.update(result.dropped)
            if writer is not None:
                writer.add(result.functions)
        if writer is not None:
            writer.commit()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    record = {"kept": kept, "dropped": dict(sorted(dropped.items())), "dropped_files": dropped_files,
              "files": files, "seconds": round(time.perf_counter() - started, 3),
              "out": str(out) if out is not None else None}
    if as_json:
        click.echo(json.dumps(record))
    else:
        reasons = ", ".join(f"{reason} {count}" for reason, count in record["dropped"].items()) or "none"
        where = f"; wrote {record['out']}" if out is not None else ""
        click.echo(f"kept {kept} functions from {files} files in {record['seconds']:.2f} s "
                   f"(dropped: {reasons}){where}")
        for name, reason in list(dropped_files.items())[:_LISTED]:
            click.echo(f"  dropped {name}: {reason}")
        if len(dropped_files) > _LISTED:
            click.echo(f"  ... and {len(dropped_files) - _LISTED} more files dropped whole (--json lists all)")
