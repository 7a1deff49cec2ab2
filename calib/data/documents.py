"""A corpus's documents and how each file format yields them: :class:`Document`, :class:`CorpusSpec`, the readers.

Plain files are one document each; JSONL lines, CSV records and Parquet rows one document each, read a
chunk at a time, gzip (``.gz``) or zstd (``.zst``) compressed or not. :mod:`calib.data.sources` (whose
module docstring states the drop reasons and the memory bound) finds the files and dispatches them here,
and re-exports every public name.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from calib._exceptions import InputError, InvalidParameterError
from calib.data.extract import DEFAULT_MAX_DOCUMENT_BYTES

__all__ = ["FORMATS", "METADATA_KEYS", "CorpusSpec", "Document", "Format"]

Format = Literal["files", "jsonl", "parquet", "csv"]

#: The corpus formats :func:`~calib.data.sources.iter_documents` reads.
FORMATS: tuple[str, ...] = ("files", "jsonl", "parquet", "csv")

#: Metadata a table may carry, by default read from columns of the same names when present.
METADATA_KEYS: tuple[str, ...] = ("path", "repo", "license", "language", "date")

_COMPRESSION = {".gz": "gzip", ".zst": "zstd"}
_READ_BUFFER = 1 << 20


@dataclass(frozen=True)
class Document:
    """One document of a corpus.

    Parameters
    ----------
    text
        The code, or ``None`` when the document is dropped (``metadata["error"]`` says why).
    source
        Where it came from: a file path, ``"table.jsonl#row=17"`` or ``"hf:repo@rev/file#row=17"``.
    path
        Its path inside the corpus: the ``path`` metadata column when the table has one, else the file's
        path relative to the directory it was found in, else ``source``.
    metadata
        String metadata (``repo``, ``license``, ``language``, ``date`` …) and ``error`` for dropped ones.
    """

    text: str | None
    source: str
    path: str
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CorpusSpec:
    """Where a corpus is and how to read it.

    Parameters
    ----------
    paths
        Files, directories (walked recursively) and glob patterns (``**`` recurses).
    format
        ``"files"`` (each file one document), ``"jsonl"``, ``"parquet"``, ``"csv"``, or ``None`` to infer
        each file's format from its suffix (``.jsonl``/``.ndjson``, ``.parquet``/``.pq``, ``.csv``, each
        optionally followed by ``.gz`` or ``.zst``; anything else is read as a plain file).
    content_column
        The table column holding the code.
    metadata_columns
        ``{metadata key: column name}``. ``None`` reads the columns named like :data:`METADATA_KEYS`
        when a table has them; an explicit mapping requires every named column to exist.
    extensions
        Keep only files whose name ends with one of these (``".py"``, ``".jsonl.gz"``); empty keeps all.
        Files named explicitly in ``paths`` are always read.
    chunk_rows
        Rows per Parquet record batch.
    max_document_bytes
        A document over this many bytes is dropped (``too_large``) without reading the rest of it;
        ``None`` reads documents of any size.
    """

    paths: tuple[str, ...] = ()
    format: Format | None = None
    content_column: str = "content"
    metadata_columns: Mapping[str, str] | None = None
    extensions: tuple[str, ...] = ()
    chunk_rows: int = 10_000
    max_document_bytes: int | None = DEFAULT_MAX_DOCUMENT_BYTES

    def __post_init__(self) -> None:
        if isinstance(self.paths, (str, os.PathLike)):
            object.__setattr__(self, "paths", (os.fspath(self.paths),))
        else:
            object.__setattr__(self, "paths", tuple(os.fspath(p) for p in self.paths))
        if isinstance(self.extensions, str):
            object.__setattr__(self, "extensions", (self.extensions,))
        object.__setattr__(
            self, "extensions", tuple(e.lower() if e.startswith(".") else f".{e.lower()}" for e in self.extensions)
        )
        if self.format is not None and self.format not in FORMATS:
            raise InvalidParameterError(
                f"format must be one of {', '.join(FORMATS)} or None (infer from the suffix); got {self.format!r}"
            )
        if not isinstance(self.chunk_rows, int) or self.chunk_rows < 1:
            raise InvalidParameterError(f"chunk_rows must be a positive integer; got {self.chunk_rows!r}")
        cap = self.max_document_bytes
        if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
            raise InvalidParameterError(f"max_document_bytes must be None or a positive integer; got {cap!r}")
        if not self.content_column:
            raise InvalidParameterError("content_column must name a column; got an empty string")


def _strip_compression(name: str) -> tuple[str, str | None]:
    for suffix, codec in _COMPRESSION.items():
        if name.endswith(suffix):
            return name[: -len(suffix)], codec
    return name, None


def _open_binary(file: Path) -> IO[bytes]:
    """A buffered binary stream of the file's decompressed bytes."""
    _, codec = _strip_compression(file.name.lower())
    try:
        if codec == "gzip":
            return gzip.open(file, "rb")
        if codec == "zstd":
            return io.BufferedReader(pa.CompressedInputStream(pa.OSFile(str(file)), "zstd"), _READ_BUFFER)
        return open(file, "rb", buffering=_READ_BUFFER)
    except OSError as exc:
        raise InputError(
            f"cannot open the file ({exc.strerror or exc}); check its permissions", path=str(file)
        ) from exc


def _decode(data: bytes) -> str | None:
    try:
        # utf-8-sig: a byte-order mark is not code, and ast rejects it inside a str
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def _iter_plain(file: Path, label: str, path: str, cap: int | None) -> Iterator[Document]:
    try:
        with file.open("rb") as handle:
            data = handle.read() if cap is None else handle.read(cap + 1)
    except OSError:
        yield Document(None, label, path, {"error": "unreadable"})
        return
    if cap is not None and len(data) > cap:
        yield Document(None, label, path, {"error": "too_large"})
        return
    text = _decode(data)
    if text is None:
        yield Document(None, label, path, {"error": "not_utf8"})
    else:
        yield Document(text, label, path, {})


def _row_document(content: Any, meta: dict[str, str], source: str, cap: int | None = None) -> Document:
    path = meta.get("path") or source
    if cap is not None and isinstance(content, str | bytes) and len(content) > cap:
        return Document(None, source, path, {**meta, "error": "too_large"})
    if isinstance(content, bytes):
        content = _decode(content)
        if content is None:
            return Document(None, source, path, {**meta, "error": "not_utf8"})
    if content is None or (isinstance(content, str) and not content.strip()):
        return Document(None, source, path, {**meta, "error": "empty_document"})
    if not isinstance(content, str):
        return Document(None, source, path, {**meta, "error": f"bad_row: content is {type(content).__name__}"})
    return Document(content, source, path, meta)


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _meta(values: Mapping[str, Any], columns: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for key, column in columns.items():
        value = values.get(column)
        if value is not None and value != "":
            out[key] = value if isinstance(value, str) else str(value)
    return out


def _metadata_columns(spec: CorpusSpec, available: Iterable[str], label: str) -> dict[str, str]:
    """The metadata columns to read; a missing one is an error only when the spec named it."""
    available = list(available)
    if spec.metadata_columns is None:
        return {key: key for key in METADATA_KEYS if key in available and key != spec.content_column}
    missing = [column for column in spec.metadata_columns.values() if column not in available]
    if missing:
        raise InputError(
            f"metadata column(s) {', '.join(map(repr, missing))} not in the table, whose columns are "
            f"{', '.join(map(repr, available))}; fix metadata_columns",
            path=label,
        )
    return dict(spec.metadata_columns)


def _check_content_column(spec: CorpusSpec, available: Iterable[str], label: str) -> None:
    available = list(available)
    if spec.content_column not in available:
        raise InputError(
            f"no content column {spec.content_column!r}; the columns are {', '.join(map(repr, available))}; "
            "set content_column to the one holding the code",
            path=label,
        )


def _one_line(message: str, limit: int = 200) -> str:
    line = " ".join(str(message).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _capped_lines(stream: IO[bytes], cap: int | None) -> Iterator[bytes | None]:
    """Each line of ``stream``; None for a line over ``cap`` bytes, whose rest is skipped unread."""
    if cap is None:
        yield from stream
        return
    while True:
        line = stream.readline(cap + 2)  # the line, its newline and one byte to tell it is over the cap
        if not line:
            return
        if len(line.rstrip(b"\r\n")) <= cap:
            yield line
            continue
        while not line.endswith(b"\n"):
            line = stream.readline(_READ_BUFFER)
            if not line:
                break
        yield None


def _iter_jsonl(file: Path, label: str, spec: CorpusSpec) -> Iterator[Document]:
    columns: dict[str, str] | None = None
    with _open_binary(file) as stream:
        # One line at a time, each read up to the cap: memory is bounded by the cap, whatever the file.
        for number, line in enumerate(_capped_lines(stream, spec.max_document_bytes), start=1):
            source = f"{label}#row={number}"
            if line is None:
                yield Document(None, source, source, {"error": "too_large"})
                continue
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
                yield Document(None, source, source, {"error": f"bad_row: {_one_line(exc)}"})
                continue
            if not isinstance(row, dict):
                yield Document(
                    None, source, source, {"error": f"bad_row: expected a JSON object, got {type(row).__name__}"}
                )
                continue
            if columns is None:
                _check_content_column(spec, row.keys(), label)
                columns = _metadata_columns(spec, row.keys(), label)
            yield _row_document(row.get(spec.content_column), _meta(row, columns), source, spec.max_document_bytes)


def _iter_csv(file: Path, label: str, spec: CorpusSpec) -> Iterator[Document]:
    # Code files are often longer than the csv module's default 128 KiB field limit; raising the
    # (process-wide) limit never makes another reader fail, so only ever raise it.
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))
    with _open_binary(file) as binary:
        # surrogateescape keeps undecodable bytes as lone surrogates, so one bad row is dropped as
        # not_utf8 instead of failing the whole file.
        text = io.TextIOWrapper(binary, encoding="utf-8-sig", errors="surrogateescape", newline="")
        reader = csv.reader(text)
        try:
            header = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(f"cannot read the CSV header ({exc}); check the file is CSV", path=label) from exc
        _check_content_column(spec, header, label)
        columns = _metadata_columns(spec, header, label)
        content_index = header.index(spec.content_column)
        last_line = reader.line_num
        while True:
            start = last_line + 1
            try:
                record = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                source = f"{label}#row={start}"
                yield Document(None, source, source, {"error": f"bad_row: {_one_line(exc)}"})
                return  # the csv parser cannot resynchronise after a malformed record
            last_line = reader.line_num
            if not record:
                continue
            source = f"{label}#row={start}"
            values = dict(zip(header, record))
            content = record[content_index] if content_index < len(record) else None
            if content is not None and _has_surrogates(content):
                content = content.encode("utf-8", "surrogateescape")  # _row_document records it as not_utf8
            yield _row_document(content, _meta(values, columns), source, spec.max_document_bytes)


def _iter_parquet(file: Path, label: str, spec: CorpusSpec) -> Iterator[Document]:
    _, codec = _strip_compression(file.name.lower())
    if codec is None:
        yield from _iter_parquet_file(file, label, spec)
        return
    # Parquet needs random access (its footer is at the end), so an externally compressed file is
    # decompressed to a temporary file on disk first, never into memory.
    with tempfile.TemporaryFile() as plain, _open_binary(file) as stream:
        shutil.copyfileobj(stream, plain, _READ_BUFFER)
        plain.seek(0)
        yield from _iter_parquet_file(plain, label, spec)


def _iter_parquet_file(source_file: Path | IO[bytes], label: str, spec: CorpusSpec) -> Iterator[Document]:
    try:
        parquet = pq.ParquetFile(source_file)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"not a readable Parquet file ({_one_line(exc)}); check the file", path=label) from exc
    names = parquet.schema_arrow.names
    _check_content_column(spec, names, label)
    columns = _metadata_columns(spec, names, label)
    wanted = list(dict.fromkeys([spec.content_column, *columns.values()]))
    row = 0
    for batch in parquet.iter_batches(batch_size=spec.chunk_rows, columns=wanted):
        data = batch.to_pydict()
        contents = data[spec.content_column]
        for index, content in enumerate(contents):
            row += 1
            values = {column: data[column][index] for column in columns.values()}
            yield _row_document(content, _meta(values, columns), f"{label}#row={row}", spec.max_document_bytes)
