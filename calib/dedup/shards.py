"""The pieces of the band-table pipeline both of its engines run: corpus shards, band keys, verification.

:mod:`calib.dedup.bands` (its module docstring describes the method and the layout) builds and searches a band
table with Polars in this process, :mod:`calib.dedup.bands_ray` on a Ray cluster; both call the functions here
on the same units of work, so they give the same table and the same pairs:

- a **shard** is a Parquet or JSONL file with an id and a text column (or a functions table written by
  ``calib extract``: ``function_id``, and the text ``signature`` + ``body`` as ``calib dedup`` joins them): a
  local file, or a file of a Hugging Face Hub dataset at a pinned commit (``hf://datasets/OWNER/NAME@COMMIT/...``,
  :mod:`calib.dedup.hub_shards`) read from the HF cache, and fetched again there by a node that lacks it;
- a **slice** is a run of at most ``batch_rows`` consecutive rows of one shard; a function's ``row`` in the band
  table is its shard's first row plus its position in the shard, so a slice is read back by position;
- :func:`band_table` turns a slice's texts into its band rows, :func:`verify_slice` checks the candidate pairs
  whose corpus side lies in a slice by exact Jaccard.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
from numba import njit

from calib._exceptions import InputError, InvalidParameterError
from calib.dedup.hub_shards import is_hub, local_path
from calib.dedup.hub_shards import resolve as resolve_hub
from calib.dedup.minhash import lsh_params
from calib.dedup.shingles import _GOLDEN, _MASK64, _POLY, MinHasher, _fmix64_array, _shingle_hashes

__all__ = ["BAND_SCHEMA", "FUNCTIONS_TEXT", "IDS_SCHEMA", "PARQUET_OPTIONS", "Settings", "Shard", "band_keys",
           "band_table", "plan_shards", "read_slice", "shard_files", "shard_path", "slices", "verify_slice"]

#: The band table: one row per (corpus function with shingles, band).
BAND_SCHEMA = {"band": pl.UInt16, "key": pl.UInt64, "row": pl.UInt32}
#: The ids table: one row per corpus function.
IDS_SCHEMA = {"row": pl.UInt32, "id": pl.String}
#: How every band file is written (pyarrow's writer, by both engines): zstd; ``band``, sorted, in a dictionary;
#: ``key``, sorted within a band, as deltas (DELTA_BINARY_PACKED); ``row`` plain.
PARQUET_OPTIONS: dict[str, Any] = {"compression": "zstd", "use_dictionary": ["band"],
                                   "column_encoding": {"key": "DELTA_BINARY_PACKED"}}
#: ``text_column`` of a functions table from ``calib extract``: the text is its signature and body joined.
FUNCTIONS_TEXT = "signature+body"
_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl"}
_MAX_ROWS = (1 << 32) - 1
_TEXT_CHUNK = 1 << 17  # characters of text shingled at once (as MinHasher does)


@dataclass(frozen=True)
class Settings:
    """The near-duplicate settings of a band table (those of :class:`~calib.dedup.minhash.TextualIndex`)."""

    threshold: float = 0.4
    num_perm: int = 128
    seed: int = 1
    shingle_size: int = 5

    def __post_init__(self) -> None:
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0.0 < t <= 1.0:
            raise InvalidParameterError(f"threshold must be a number in (0, 1], got {t!r}")
        MinHasher(self.num_perm, self.seed, self.shingle_size)  # checks them, with its messages

    @property
    def bands(self) -> tuple[int, int]:
        """``(b, r)``: :func:`~calib.dedup.minhash.lsh_params` at the threshold, as the in-memory index."""
        return lsh_params(self.threshold, self.num_perm)

    def hasher(self) -> MinHasher:
        return MinHasher(self.num_perm, self.seed, self.shingle_size)

    def to_dict(self) -> dict[str, Any]:
        b, r = self.bands
        return asdict(self) | {"bands": b, "rows": r, "scheme": "affine32", "key": "packed" if r <= 2 else "hash64"}


@dataclass(frozen=True)
class Shard:
    """One corpus file: its columns, its rows and their place in the table, and what it was when read.

    ``hub``: for a file of a Hub dataset, ``hf://datasets/OWNER/NAME@COMMIT/FILE``, its origin (``path`` is then
    its place in the HF cache of the node that built the table); ``None`` for a local file.
    """

    path: str
    format: str  # parquet | jsonl
    id_column: str
    text_column: str  # a column, or FUNCTIONS_TEXT
    rows: int
    first_row: int
    bytes: int
    mtime_ns: int
    hub: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def changed(self) -> str | None:
        """Why the file is no longer the one the table was built from, or None.

        A local file: gone, or another size or modification time. A Hub file: its commit pins its bytes, so a
        file gone from the HF cache is not a change (it is fetched again when read: :func:`read_slice`) and a
        cached one is checked by size only (fetching the same bytes again gives a new modification time).
        """
        try:
            stat = Path(self.path).stat()
        except OSError:
            return None if self.hub else "it is gone"
        if self.hub:
            if stat.st_size != self.bytes:
                return f"the cached copy of {self.hub} has {stat.st_size} bytes, not {self.bytes}; remove it from " \
                       "the HF cache to fetch it again"
            return None
        if (stat.st_size, stat.st_mtime_ns) != (self.bytes, self.mtime_ns):
            return f"it changed since the band table was built ({stat.st_size} bytes, was {self.bytes})"
        return None


def shard_files(paths: Sequence[str | Path]) -> list[Path]:
    """The shard files ``paths`` name: files, folders (their Parquet and JSONL files, sorted), globs, or files of
    Hub datasets (``hf://datasets/OWNER/NAME@COMMIT/PATTERN``: their paths in the HF cache)."""
    return [path for path, _ in _shard_sources(paths)]


def _shard_sources(paths: Sequence[str | Path]) -> list[tuple[Path, str | None]]:
    """Each shard file with its Hub origin (``hf://datasets/OWNER/NAME@COMMIT/FILE``) or None for a local one."""
    out: list[tuple[Path, str | None]] = []
    for arg in map(str, paths):
        if is_hub(arg):
            out += [(Path(os.path.abspath(local)), hub) for hub, local in resolve_hub(arg)]
            continue
        path = Path(arg)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in _FORMATS and p.is_file())
            if not found:
                raise InputError("the folder holds no .parquet or .jsonl shard", path=arg)
            out += [(p, None) for p in found]
        elif path.is_file():
            out.append((path, None))
        elif any(c in arg for c in "*?["):
            found = sorted(Path(p) for p in glob.glob(arg, recursive=True) if Path(p).is_file())
            if not found:
                raise InputError("the glob matches no file; check the pattern", path=arg)
            out += [(p, None) for p in found]
        else:
            raise InputError("no such file or directory", path=arg)
    return out


def _scan(path: str, format: str) -> pl.LazyFrame:
    return pl.scan_parquet(path) if format == "parquet" else pl.scan_ndjson(path)


def plan_shards(paths: Sequence[str | Path], id_column: str = "id", text_column: str = "text") -> list[Shard]:
    """Check each shard's columns and count its rows; a table without the columns is a one-line error."""
    shards: list[Shard] = []
    first = 0
    for file, hub in _shard_sources(paths):
        # a file of the HF cache is a link to its blob, which has no suffix: it keeps its snapshot path
        name = str(file) if hub else str(file.resolve())
        format = _FORMATS.get(file.suffix.lower())
        if format is None:
            raise InputError(f"a shard must be .parquet or .jsonl, not {file.suffix or 'without a suffix'}", path=name)
        try:
            schema = _scan(name, format).collect_schema()
            rows = int(_scan(name, format).select(pl.len()).collect().item())
        except Exception as exc:  # polars raises several types for a damaged file
            why = " ".join(str(exc).split())[:200]
            raise InputError(f"cannot read the {format} shard ({type(exc).__name__}: {why}); check the file",
                             path=name) from None
        ids, text = id_column, text_column
        if (ids, text) == ("id", "text") and not {"id", "text"} & set(schema) and \
                {"function_id", "signature", "body"} <= set(schema):
            ids, text = "function_id", FUNCTIONS_TEXT  # a functions table written by calib extract
        for column, option in ((ids, "--id-column"), (text, "--text-column")):
            if column not in schema and column != FUNCTIONS_TEXT:
                raise InputError(f"the shard has no column {column!r} (it has {', '.join(schema) or 'none'}); "
                                 f"name its column with {option}", path=name)
        if text != FUNCTIONS_TEXT and schema[text] not in (pl.String, pl.Null):
            raise InputError(f"column {text!r} is {schema[text]}, not text; name the text column with --text-column",
                             path=name)
        stat = file.stat()
        shards.append(Shard(name, format, ids, text, rows, first, stat.st_size, stat.st_mtime_ns, hub))
        first += rows
    if first > _MAX_ROWS:
        raise InputError(f"{first} corpus functions: a band table holds at most {_MAX_ROWS}; build several tables")
    return shards


def slices(shards: Sequence[Shard], batch_rows: int) -> list[dict[str, Any]]:
    """The units of work: runs of at most ``batch_rows`` rows of one shard, with the shard's description."""
    out = []
    for shard in shards:
        for offset in range(0, shard.rows, batch_rows):
            out.append(shard.to_dict() | {"offset": offset, "length": min(batch_rows, shard.rows - offset)})
    return out


def shard_path(task: dict[str, Any]) -> str:
    """The file to read for a shard or slice (``path``, ``hub``, ``bytes``): its path, or, where this node does not
    have it, a Hub shard's file resolved again from its origin in this node's HF cache (fetched unless
    ``HF_HUB_OFFLINE=1``), checked to have the shard's size."""
    path, hub = task["path"], task.get("hub")
    if not hub or os.path.exists(path):
        return path
    local = local_path(hub)
    size = local.stat().st_size
    if size != task["bytes"]:
        raise InputError(f"{size} bytes in the HF cache, {task['bytes']} when the band table was built; remove the "
                         "file from the HF cache to fetch it again", path=hub)
    return str(local)


def read_slice(task: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The ids and texts of a slice (``path, format, id_column, text_column, offset, length``), in shard order.

    A Hub shard (``hub`` set) whose ``path`` this node does not have is read from this node's HF cache
    (:func:`shard_path`)."""
    frame = _scan(shard_path(task), task["format"])
    if task["text_column"] == FUNCTIONS_TEXT:
        body = pl.col("body")
        text = pl.when(body.str.starts_with("\n")).then(pl.col("signature") + body) \
            .otherwise(pl.col("signature") + "\n" + body)
    else:
        text = pl.col(task["text_column"])
    table = frame.select(pl.col(task["id_column"]).cast(pl.String).alias("id"), text.alias("text")) \
        .slice(task["offset"], task["length"]).collect()
    for column in ("id", "text"):
        missing = table[column].is_null()
        if missing.any():
            at = task["offset"] + int(missing.arg_true()[0])
            name = task["id_column"] if column == "id" else task["text_column"]
            raise InputError(f"row {at} has no {name} (null); give every row one", path=task["path"])
    if table.height != task["length"]:
        raise InputError(f"{table.height} rows at {task['offset']}, not {task['length']}: the shard changed while "
                         "it was read; build the band table again", path=task["path"])
    return table["id"].to_list(), table["text"].to_list()


def band_keys(values: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """The ``(n, bands)`` uint64 keys of ``n`` signatures: band i covers values ``[i*rows, (i+1)*rows)``.

    Up to two rows per band the key is the band's values themselves (``v0 << 32 | v1``): equal keys are equal
    buckets of datasketch's ``MinHashLSH``, no more. From three rows on it is a 64-bit hash of them (Horner's
    rule with the FNV-1a prime, then the MurmurHash3 finalizer, as :func:`~calib.dedup.shingles.shingle_hash`):
    equal buckets still give equal keys; two different buckets share one with probability 2^-64.
    """
    v = np.ascontiguousarray(values[:, :bands * rows], dtype=np.uint64).reshape(len(values), bands, rows)
    if rows == 1:
        return v[:, :, 0].copy()
    if rows == 2:
        return (v[:, :, 0] << np.uint64(32)) | v[:, :, 1]
    acc = v[:, :, 0].copy()
    for j in range(1, rows):
        acc *= np.uint64(_POLY)
        acc += v[:, :, j]
    return _fmix64_array(acc ^ np.uint64((rows * _GOLDEN) & _MASK64))


def _has_tokens(texts: Sequence[str]) -> np.ndarray:
    # code_tokens finds a token exactly where a character is not whitespace (str.isspace, as re's \s)
    return np.fromiter((bool(t) and not t.isspace() for t in texts), dtype=bool, count=len(texts))


def band_table(texts: Sequence[str], first_row: int, settings: Settings) -> pa.Table:
    """The band rows (:data:`BAND_SCHEMA`) of ``texts``, rows ``first_row...``, sorted by band then key.

    A text without tokens has no shingles and no band row: the in-memory index does not insert it either.
    """
    bands, rows = settings.bands
    live = np.flatnonzero(_has_tokens(texts))
    values = settings.hasher().hashvalues([texts[i] for i in live])
    keys = band_keys(values, bands, rows).T.ravel()  # band-major
    band = np.repeat(np.arange(bands, dtype=np.uint16), live.size)
    row = np.tile((live + first_row).astype(np.uint32), bands)
    order = np.lexsort((keys, band))
    return pa.table({"band": band[order], "key": keys[order], "row": row[order]})


def corpus_shingles(texts: Sequence[str], size: int) -> tuple[np.ndarray, np.ndarray]:
    """The texts' distinct sorted shingles (:func:`~calib.dedup.shingles.shingles` of each), as one flat array and
    its offsets (text i's are ``flat[offsets[i]:offsets[i + 1]]``), shingled a chunk of text at a time."""
    parts: list[np.ndarray] = []
    first = 0
    while first < len(texts):
        last, chars = first, 0
        while last < len(texts) and (last == first or chars < _TEXT_CHUNK):
            chars += len(texts[last])
            last += 1
        parts += _shingle_hashes(texts[first:last], size)
        first = last
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([p.size for p in parts], out=offsets[1:])
    flat = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    return _distinct(flat, offsets)


@njit(cache=True)
def _distinct(flat: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Each segment sorted, its repeats dropped (``np.unique`` of each)."""
    out = np.empty_like(flat)
    kept = np.zeros_like(offsets)
    k = 0
    for s in range(offsets.size - 1):
        segment = np.sort(flat[offsets[s]:offsets[s + 1]])
        for t in range(segment.size):
            if t == 0 or segment[t] != segment[t - 1]:
                out[k] = segment[t]
                k += 1
        kept[s + 1] = k
    return out[:k], kept


@njit(cache=True)
def _common(a: np.ndarray, a_offsets: np.ndarray, b: np.ndarray, b_offsets: np.ndarray, pair_a: np.ndarray,
            pair_b: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """|A ∩ B| of each pair of sorted distinct segments, by one merge each."""
    out = np.zeros(pair_a.size, dtype=np.int64)
    for p in range(pair_a.size):
        i, i_end = a_offsets[pair_a[p]], a_offsets[pair_a[p] + 1]
        j, j_end = b_offsets[pair_b[p]], b_offsets[pair_b[p] + 1]
        n = 0
        while i < i_end and j < j_end:
            if a[i] == b[j]:
                n += 1
                i += 1
                j += 1
            elif a[i] < b[j]:
                i += 1
            else:
                j += 1
        out[p] = n
    return out


def verify_slice(task: dict[str, Any], query_flat: np.ndarray, query_offsets: np.ndarray, threshold: float,
                 shingle_size: int, exclude: np.ndarray | None = None) -> pa.Table:
    """The candidate pairs of one slice with their exact Jaccard, those reaching ``threshold``.

    ``task`` is a slice (:func:`slices`) with ``q`` (query positions) and ``local`` (positions in the slice) of
    its candidate pairs; the queries' distinct sorted shingles are ``query_flat[query_offsets[q]:query_offsets[q +
    1]]``. The Jaccard is |A ∩ B| / |A ∪ B| with |A ∩ B| counted by a merge of the two sorted sets (compiled with
    numba): the value :func:`~calib.dedup.shingles.jaccard` gives. ``exclude``: per query, the corpus id left out
    (its own), before any text is shingled. Returns ``q`` (uint32), ``corpus_id`` and ``jaccard``.
    """
    ids, texts = read_slice(task)
    q = np.asarray(task["q"], dtype=np.int64)
    local = np.asarray(task["local"], dtype=np.int64)
    if exclude is not None and q.size:
        other = np.asarray(ids, dtype=object)[local] != exclude[q]
        q, local = q[other], local[other]
    needed, where = np.unique(local, return_inverse=True)
    flat, offsets = corpus_shingles([texts[i] for i in needed], shingle_size)
    common = _common(query_flat, query_offsets, flat, offsets, q, where.astype(np.int64))
    union = (query_offsets[q + 1] - query_offsets[q]) + (offsets[where + 1] - offsets[where]) - common
    values = np.divide(common, union, out=np.zeros(q.size), where=union > 0)
    keep = values >= threshold
    return pa.table({"q": pa.array(q[keep], pa.uint32()),
                     "corpus_id": pa.array([ids[i] for i in local[keep].tolist()], pa.string()),
                     "jaccard": pa.array(values[keep], pa.float64())})
