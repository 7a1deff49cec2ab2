"""Textual near-duplicates out of core: the LSH band keys of a corpus as a Parquet **band table**.

:class:`~calib.dedup.minhash.TextualIndex` keeps datasketch's LSH hash tables and every corpus function's
shingles in memory (about 19 KB per function at 64 bands: docs/dedup.md). The band table holds the same LSH
buckets on disk at about 0.5 KB per function and is searched by a join, so the corpus can be as large as the
disk; the answers are the in-memory index's, pair for pair (``tests/dedup/test_bands.py``):

1. **Signatures.** Each shard (a Parquet or JSONL file with an id and a text column) is read a slice of
   ``batch_rows`` rows at a time; :class:`~calib.dedup.shingles.MinHasher` with the index's ``num_perm``,
   ``seed`` and ``shingle_size`` gives each text its datasketch-identical MinHash signature.
2. **Band keys.** The signature is cut into the index's bands, ``(b, r) = lsh_params(threshold, num_perm)``
   (64 bands of 2 values at 0.4), band i holding values ``[i*r, (i+1)*r)`` as datasketch's ``hashranges``.
   Its key (:func:`~calib.dedup.shards.band_keys`) is the band's values packed into 64 bits when r <= 2, so
   that two functions share a key exactly when they share datasketch's bucket, or a 64-bit hash of them when
   r >= 3 (a bucket no pair shares with probability 1 - 2^-64 may then be shared, adding a candidate the index
   would not propose; verification still decides). A function without tokens gets no band row (the index does
   not insert it).
3. **Candidates.** The queries' (band, key) pairs joined with the table's give, per query, the corpus rows that
   share a band with it: exactly ``MinHashLSH.query``'s keys (Leskovec, Rajaraman & Ullman, *Mining of Massive
   Datasets*, §3.4: the "banding technique" as a join).
4. **Verification.** Each candidate's text is read back from its shard by row (its slice, read by position),
   shingled, and kept when its exact Jaccard with the query reaches the threshold; a corpus function with the
   query's own id is left out (``exclude_self``), as :func:`~calib.dedup.minhash.textual_duplicates` does.

Two engines run these steps on the same slices with the same functions (:mod:`calib.dedup.shards`), so they
write the same table and find the same pairs: **Polars** in this process (the join with the streaming engine,
``collect(engine="streaming")``: the band files stream through a filter on the queries' keys; memory bounded
by the queries and one slice) and **Ray** on a cluster (:mod:`calib.dedup.bands_ray`, ``ray_address=``: the build
with Ray Data, the search as Ray tasks).

The table is a folder:

- ``manifest.json``: the settings (``threshold``, ``num_perm``, ``seed``, ``shingle_size``, ``bands``,
  ``rows``, ``key`` = ``packed`` or ``hash64``), the shards (path, format, columns, rows, first row, size and
  modification time: a shard changed since is refused; ``hub``, the ``hf://datasets/...@COMMIT/FILE`` origin of
  a Hub shard, else null), ``functions``, ``band_rows`` and ``bytes``;
- ``bands/*.parquet``: ``band`` (UInt16), ``key`` (UInt64), ``row`` (UInt32), one file per slice, sorted by band
  then key (zstd; ``band`` in a dictionary, ``key`` as deltas);
- ``ids/*.parquet``: ``row`` (UInt32) and ``id`` (String), one file per shard. A function's row is its shard's
  first row plus its position in the shard.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from calib._exceptions import InputError, InvalidParameterError
from calib.dedup.minhash import TEXTUAL_DUPLICATES_SCHEMA
from calib.dedup.shards import (
    BAND_SCHEMA,
    IDS_SCHEMA,
    PARQUET_OPTIONS,
    Settings,
    Shard,
    band_keys,
    band_table,
    plan_shards,
    read_slice,
    slices,
    verify_slice,
)

__all__ = ["BAND_SCHEMA", "DEFAULT_BATCH_ROWS", "IDS_SCHEMA", "MANIFEST", "BandTable", "build_band_table"]

MANIFEST = "manifest.json"
FORMAT = "calib-band-table"
VERSION = 1
#: Rows of a shard read, hashed and written at once (a slice): about 0.3 GB of memory at 128 permutations.
DEFAULT_BATCH_ROWS = 50_000


def _check_batch_rows(batch_rows: int) -> None:
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise InvalidParameterError(f"batch_rows must be an integer >= 1, got {batch_rows!r}")


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.parquet"))


def build_band_table(shards: Sequence[str | Path], out: str | Path, *, id_column: str = "id", text_column: str = "text",
                     threshold: float = 0.4, num_perm: int = 128, shingle_size: int = 5, seed: int = 1,
                     batch_rows: int = DEFAULT_BATCH_ROWS, ray_address: str | None = None) -> BandTable:
    """Write the band table of the corpus ``shards`` (files, folders or globs) to the new folder ``out``.

    Parameters
    ----------
    shards
        Parquet (``.parquet``) or JSONL (``.jsonl``, ``.ndjson``) files with ``id_column`` and ``text_column``,
        folders of them or globs, or files of a Hub dataset at a pinned commit
        (``hf://datasets/OWNER/NAME@COMMIT/PATTERN``: :mod:`calib.dedup.hub_shards`); a functions table written
        by ``calib extract`` is read as (``function_id``, signature and body) when it has neither default column.
    out
        A folder that does not exist or is empty.
    threshold, num_perm, shingle_size, seed
        As for :class:`~calib.dedup.minhash.TextualIndex`: the table answers as that index would.
    batch_rows
        Rows per slice (a unit of work: one band file).
    ray_address
        ``None``: Polars in this process. ``HOST:PORT`` (or ``"auto"``): Ray Data on that cluster, every slice a
        task (the folder must be one every node can write, as for any Ray Data write).
    """
    settings = Settings(threshold, num_perm, seed, shingle_size)
    _check_batch_rows(batch_rows)
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError("the folder exists and is not empty; give a new --out folder or remove this one",
                         path=str(out))
    started = time.perf_counter()
    planned = plan_shards(shards, id_column, text_column)
    tasks = slices(planned, batch_rows)
    created = not out.exists()
    try:
        (out / "bands").mkdir(parents=True, exist_ok=True)
        (out / "ids").mkdir(exist_ok=True)
        _write_ids(planned, out / "ids")
        if ray_address is None:
            for number, task in enumerate(tasks):
                table = band_table(read_slice(task)[1], task["first_row"] + task["offset"], settings)
                pq.write_table(table, out / "bands" / f"part-{number:06d}.parquet", **PARQUET_OPTIONS)
        else:
            from calib.dedup.bands_ray import build_bands

            build_bands(ray_address, tasks, settings, out / "bands")
    except BaseException:  # no half-built table is left behind, so that the same --out can be given again
        shutil.rmtree(out / "bands", ignore_errors=True)
        shutil.rmtree(out / "ids", ignore_errors=True)
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise
    band_rows = sum(pq.ParquetFile(p).metadata.num_rows for p in (out / "bands").glob("*.parquet"))
    manifest = {"format": FORMAT, "version": VERSION, "settings": settings.to_dict(),
                "shards": [s.to_dict() for s in planned], "functions": sum(s.rows for s in planned),
                "band_rows": band_rows, "batch_rows": batch_rows,
                "bytes": {"bands": _folder_bytes(out / "bands"), "ids": _folder_bytes(out / "ids")},
                "engine": "polars" if ray_address is None else "ray",
                "seconds": round(time.perf_counter() - started, 3)}
    partial = out / (MANIFEST + ".partial")
    partial.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    os.replace(partial, out / MANIFEST)  # the table exists once its manifest does
    return BandTable(out)


def _write_ids(shards: Sequence[Shard], folder: Path) -> None:
    """The ids table, one file per shard (streaming), then the check that every id is there and unique."""
    for number, shard in enumerate(shards):
        frame = pl.scan_parquet(shard.path) if shard.format == "parquet" else pl.scan_ndjson(shard.path)
        frame.select(pl.col(shard.id_column).cast(pl.String).alias("id")) \
            .with_row_index("row", offset=shard.first_row).cast(IDS_SCHEMA) \
            .sink_parquet(folder / f"ids-{number:06d}.parquet", compression="zstd", engine="streaming")
    ids = pl.scan_parquet(folder / "*.parquet")
    missing = ids.filter(pl.col("id").is_null()).select("row").head(1).collect(engine="streaming")
    repeated = ids.group_by("id").agg(pl.len(), pl.col("row").min()).filter(pl.col("len") > 1) \
        .sort("row").head(1).collect(engine="streaming")
    for found, what in ((missing, "has no id (null)"), (repeated, "")):
        if found.height:
            row = int(found["row"][0])
            shard = next(s for s in shards if s.first_row <= row < s.first_row + s.rows)
            if what:
                raise InputError(f"row {row - shard.first_row} {what}; give every row an id", path=shard.path)
            raise InputError(f"id {found['id'][0]!r} occurs {found['len'][0]} times in the corpus (first at row "
                             f"{row - shard.first_row}); ids must be unique", path=shard.path)


def _gather(query_ids: list[str], q: pl.Series) -> pl.Series:
    """The ``query_id`` of each query position in ``q``."""
    names = np.asarray(query_ids, dtype=object)[q.to_numpy().astype(np.int64)] if len(q) else []
    return pl.Series("query_id", names, dtype=pl.String)


class BandTable:
    """A band table written by :func:`build_band_table`, ready to search.

    Raises
    ------
    InputError
        When the folder holds no band table, one of another format version, or a shard has changed.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        file = self.path / MANIFEST
        try:
            manifest = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"no {MANIFEST}: not a band table; build one with calib dedup bands",
                             path=str(self.path)) from None
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON ({exc.msg}); build the band table again", path=str(file)) from None
        if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
            raise InputError(f"format {manifest.get('format')!r} version {manifest.get('version')!r}, not {FORMAT!r} "
                             f"version {VERSION}; build the band table again with this calib", path=str(file))
        self.manifest: dict[str, Any] = manifest
        kept = {k: manifest["settings"][k] for k in ("threshold", "num_perm", "seed", "shingle_size")}
        self.settings = Settings(**kept)
        self.shards = [Shard(**s) for s in manifest["shards"]]

    @property
    def functions(self) -> int:
        """Corpus functions (rows of the ids table)."""
        return int(self.manifest["functions"])

    @property
    def bytes(self) -> dict[str, int]:
        """Bytes on disk: ``bands``, ``ids`` and ``total`` (the manifest included)."""
        sizes = {"bands": _folder_bytes(self.path / "bands"), "ids": _folder_bytes(self.path / "ids")}
        return sizes | {"total": sizes["bands"] + sizes["ids"] + (self.path / MANIFEST).stat().st_size}

    def bytes_per_function(self) -> float:
        """The whole table's bytes on disk per corpus function."""
        return self.bytes["total"] / max(self.functions, 1)

    def check_shards(self) -> None:
        """A one-line error when a shard is no longer the file the table was built from (:meth:`Shard.changed`)."""
        for shard in self.shards:
            why = shard.changed()
            if why is not None:
                raise InputError(f"shard of the band table {self.path}: {why}; build the band table again",
                                 path=shard.path)

    def _queries(self, query_ids: Sequence[str], query_texts: Sequence[str]) -> tuple[pl.DataFrame, list[np.ndarray]]:
        """The queries' (band, key, q) rows and their shingles."""
        query_ids, query_texts = list(query_ids), list(query_texts)
        if len(query_ids) != len(query_texts):
            raise InvalidParameterError(f"query_ids and query_texts must have the same length, got {len(query_ids)} "
                                        f"and {len(query_texts)}")
        values, kept = self.settings.hasher()._sketch(query_texts, keep_shingles=True)
        live = np.flatnonzero([s.size > 0 for s in kept])
        bands, rows = self.settings.bands
        keys = band_keys(values[live], bands, rows)
        frame = pl.DataFrame({"band": np.repeat(np.arange(bands, dtype=np.uint16)[None, :], live.size, 0).ravel(),
                              "key": keys.ravel(), "q": np.repeat(live.astype(np.uint32), bands)})
        return frame, kept

    def _candidates(self, keys: pl.DataFrame, ray_address: str | None) -> pl.DataFrame:
        """The distinct (q, row) pairs that share a band key, sorted."""
        if ray_address is not None:
            from calib.dedup.bands_ray import candidate_rows

            found = candidate_rows(ray_address, self.path / "bands", keys)
        else:
            # the band files stream through a filter on the queries' keys (a hash set), so that only the few rows
            # that pass are joined: memory is bounded by the queries, never by the table
            wanted = keys["key"].unique().implode()
            found = pl.scan_parquet(self.path / "bands" / "*.parquet").filter(pl.col("key").is_in(wanted)) \
                .join(keys.lazy(), on=["band", "key"]).select("q", "row").unique().collect(engine="streaming")
        return found.sort("q", "row")

    def candidates(self, query_ids: Sequence[str], query_texts: Sequence[str], *, exclude_self: bool = True,
                   ray_address: str | None = None) -> pl.DataFrame:
        """The unverified LSH candidates: ``query`` (the query's position), ``query_id``, ``corpus_id`` (sorted).

        The same corpus keys as :meth:`TextualIndex.candidates <calib.dedup.minhash.TextualIndex.candidates>`
        with ``exclude=query_ids`` (or none when not ``exclude_self``).
        """
        self.check_shards()
        keys, _ = self._queries(query_ids, query_texts)
        found = self._candidates(keys, ray_address)
        ids = pl.scan_parquet(self.path / "ids" / "*.parquet").join(found.lazy(), on="row") \
            .collect(engine="streaming")
        out = ids.select(pl.col("q").alias("query"), _gather(list(query_ids), ids["q"]),
                         pl.col("id").alias("corpus_id"))
        if exclude_self:
            out = out.filter(pl.col("query_id") != pl.col("corpus_id"))
        return out.sort("query", "corpus_id")

    def search(self, query_ids: Sequence[str], query_texts: Sequence[str], *, exclude_self: bool = True,
               ray_address: str | None = None) -> pl.DataFrame:
        """Every (query, corpus) pair whose exact shingle Jaccard reaches the table's threshold.

        The same rows as :func:`~calib.dedup.minhash.textual_duplicates` on the same corpus and settings
        (:data:`~calib.dedup.minhash.TEXTUAL_DUPLICATES_SCHEMA`: ``query_id``, ``corpus_id``, ``jaccard``; queries
        in input order, each query's pairs by Jaccard descending then ``corpus_id``); ``exclude_self`` drops the
        pairs whose corpus id is the query's. ``ray_address``: find and verify the candidates as Ray tasks there.
        """
        self.check_shards()
        query_ids = list(query_ids)
        keys, kept = self._queries(query_ids, query_texts)
        found = self._candidates(keys, ray_address)
        tasks = self._verify_tasks(found)
        sizes = np.fromiter((s.size for s in kept), dtype=np.int64, count=len(kept))
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        flat = np.concatenate(kept) if kept else np.empty(0, dtype=np.uint64)
        threshold, size = self.settings.threshold, self.settings.shingle_size
        exclude = np.asarray(query_ids, dtype=object) if exclude_self else None
        if ray_address is not None and tasks:
            from calib.dedup.bands_ray import verify

            parts = verify(ray_address, tasks, flat, offsets, threshold, size, exclude)
        else:
            parts = [verify_slice(task, flat, offsets, threshold, size, exclude) for task in tasks]
        empty = pa.table({"q": pa.array([], pa.uint32()), "corpus_id": pa.array([], pa.string()),
                          "jaccard": pa.array([], pa.float64())})
        pairs = pl.from_arrow(pa.concat_tables([empty, *parts]))
        pairs = pairs.with_columns(_gather(query_ids, pairs["q"]))
        pairs = pairs.sort(["q", "jaccard", "corpus_id"], descending=[False, True, False])
        return pairs.select(list(TEXTUAL_DUPLICATES_SCHEMA)).cast(TEXTUAL_DUPLICATES_SCHEMA)

    def _verify_tasks(self, found: pl.DataFrame) -> list[dict[str, Any]]:
        """The slices that hold a candidate, each with its pairs (``q``, ``local``: the position in the slice)."""
        if not found.height:
            return []
        batch = int(self.manifest["batch_rows"])
        firsts = np.array([s.first_row for s in self.shards], dtype=np.int64)
        rows = found["row"].to_numpy().astype(np.int64)
        shard = np.searchsorted(firsts, rows, side="right") - 1
        within = rows - firsts[shard]
        grouped = pl.DataFrame({"shard": shard, "slice": within // batch, "local": within % batch,
                                "q": found["q"]}).group_by("shard", "slice", maintain_order=True).agg("q", "local")
        described = [s.to_dict() for s in self.shards]
        tasks = []
        for s, number, q, local in grouped.sort("shard", "slice").iter_rows():
            offset = number * batch
            tasks.append(described[s] | {"offset": offset, "length": min(batch, self.shards[s].rows - offset),
                                         "q": q, "local": local})
        return tasks

    def __repr__(self) -> str:
        return f"BandTable({str(self.path)!r}, functions={self.functions}, settings={self.settings})"
