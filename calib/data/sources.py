"""Corpora on disk: files, directories, globs and JSONL / Parquet / CSV tables, read in bounded memory.

A corpus is an iterator of :class:`Document`. Files are one document each; table rows are one document
each and are read a chunk at a time (Parquet record batches, one line of JSONL or one CSV record at a
time), so resident memory is bounded by the chunk and the longest document, never by the corpus.
Tables may be gzip (``.gz``) or zstd (``.zst``) compressed; both are decoded by pyarrow's codecs, so no
extra package is needed.

A document that cannot be used is not an exception: it is yielded with ``text=None`` and
``metadata["error"]`` set to the drop reason (``not_utf8``, ``empty_document``, ``too_large``,
``unreadable``, ``bad_row: ...``), so the extractor can count it in the report. A plain file or a JSONL
line over ``max_document_bytes`` is never read past the cap (``too_large``), so one huge file or line
cannot exhaust memory; table cells over it are dropped the same way once read.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from pathlib import Path

from calib._exceptions import InputError, InvalidParameterError
from calib.data.documents import (
    FORMATS,
    METADATA_KEYS,
    CorpusSpec,
    Document,
    _iter_csv,
    _iter_jsonl,
    _iter_parquet,
    _iter_plain,
    _strip_compression,
)

__all__ = ["FORMATS", "METADATA_KEYS", "CorpusSpec", "Document", "infer_format", "iter_documents", "iter_file"]


_TABLE_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


def iter_documents(spec: CorpusSpec) -> Iterator[Document]:
    """Yield every document of the corpus ``spec`` describes, lazily, in path order.

    Raises :class:`~calib.InputError` for a path that does not exist, a glob that matches nothing, a
    table without the content column (the message lists its columns) and a file whose format cannot be
    inferred.
    """
    if not spec.paths:
        raise InvalidParameterError("paths must name at least one file, directory or glob; got none")
    return _iter_documents(spec)


def _iter_documents(spec: CorpusSpec) -> Iterator[Document]:
    for file, relpath in _expand(spec):
        yield from iter_file(file, spec, path=relpath)


def iter_file(
    file: str | os.PathLike[str], spec: CorpusSpec, *, name: str | None = None, path: str | None = None
) -> Iterator[Document]:
    """Yield the documents of one file read as ``spec`` says (``spec.paths`` is not used).

    ``name`` replaces the file path in :attr:`Document.source` (the Hub reader names its files
    ``hf:repo@rev/file``); ``path`` is the document path of a plain file (default: ``name`` or the file).
    """
    file = Path(file)
    label = name if name is not None else str(file)
    fmt = spec.format or infer_format(file)
    if fmt == "files":
        return _iter_plain(file, label, path if path is not None else label, spec.max_document_bytes)
    if fmt == "jsonl":
        return _iter_jsonl(file, label, spec)
    if fmt == "csv":
        return _iter_csv(file, label, spec)
    return _iter_parquet(file, label, spec)


def infer_format(file: str | os.PathLike[str]) -> str:
    """The format of ``file`` from its suffixes: a table format, or ``"files"`` for anything else."""
    name = Path(file).name.lower()
    stem, compressed = _strip_compression(name)
    for suffix, fmt in _TABLE_SUFFIXES.items():
        if stem.endswith(suffix):
            return fmt
    if compressed:
        raise InputError(
            "cannot tell the table format of this compressed file; name it like data.jsonl.gz, data.csv.zst or "
            "data.parquet.gz, set format to one of jsonl, csv, parquet, or leave it out with extensions",
            path=str(file),
        )
    return "files"


# --------------------------------------------------------------------------------------------- paths


def _expand(spec: CorpusSpec) -> Iterator[tuple[Path, str]]:
    """Each file of the corpus once, with its path relative to the directory it was found in."""
    seen: set[str] = set()
    # A file reached twice (``dir/**/*`` matches a folder and the files in it) is read once.
    for file, relpath in _expand_all(spec):
        key = os.path.realpath(file)
        if key not in seen:
            seen.add(key)
            yield file, relpath


def _expand_all(spec: CorpusSpec) -> Iterator[tuple[Path, str]]:
    for raw in spec.paths:
        if glob.has_magic(raw):
            matches = sorted(glob.glob(raw, recursive=True))
            if not matches:
                raise InputError("no file matches this glob pattern; check the pattern and the working directory")
            for match in matches:
                if os.path.isdir(match):
                    yield from _walk(Path(match), spec.extensions)
                elif _wanted(match, spec.extensions):
                    yield Path(match), match
        elif os.path.isdir(raw):
            yield from _walk(Path(raw), spec.extensions)
        elif os.path.isfile(raw):
            yield Path(raw), raw
        else:
            raise InputError(
                f"no such file or directory (relative paths start at {os.getcwd()}); check the path", path=raw
            )


def _walk(root: Path, extensions: tuple[str, ...]) -> Iterator[tuple[Path, str]]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()  # os.walk follows this list: sorting it makes the corpus order reproducible
        for filename in sorted(filenames):
            if _wanted(filename, extensions):
                file = Path(dirpath) / filename
                yield file, file.relative_to(root).as_posix()


def _wanted(name: str, extensions: tuple[str, ...]) -> bool:
    return not extensions or name.lower().endswith(extensions)
