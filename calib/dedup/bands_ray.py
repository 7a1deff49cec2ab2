"""The Ray engine of the band table (:mod:`calib.dedup.bands`): the same slices, run as tasks on a cluster.

- Build: the slices (:func:`calib.dedup.shards.slices`) become a dataset (``ray.data.from_items``); each task
  reads its slice by position, computes its band rows (:func:`~calib.dedup.shards.band_table`) in
  ``map_batches`` and the result is written with ``write_parquet`` and the band table's Parquet options. A
  slice is a position in a shard, not a file: Ray Data's file readers do not say at which row of its file a
  record stands, and a function's ``row`` must be its position to be read back.
- Candidates: one Ray task per band file; the queries' (band, key, q) rows go to the object store once
  (``ray.put``) and each task keeps the file's rows whose (band, key) a query has (a Polars filter on the keys,
  then a hash join), as distinct (q, row) pairs.
- Verification: the slices that hold a candidate become Ray tasks again; each reads its slice, shingles the
  candidates' texts and compares them with the queries' shingles (in the object store once) by exact Jaccard
  (:func:`~calib.dedup.shards.verify_slice`).

The search runs as plain Ray tasks, not Ray Data jobs: a search is a few tasks per band file and slice, and a
Ray Data job's planning and start-up (a second or more each) cost more than its tasks on a small search
(``benchmarks/dedup.py``). The build, a map over every slice of the corpus and a Parquet write, is Ray Data's.

Ray is imported only here, inside the functions, through :mod:`calib.scale` (calib works without it). An error
in a task that calib raised on purpose (a null text, a changed shard) comes back as its own one-line error.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from calib._exceptions import CalibError, InputError, InvalidParameterError
from calib.dedup.shards import PARQUET_OPTIONS, Settings, band_table, read_slice, verify_slice
from calib.scale import connect, disconnect, import_ray

__all__ = ["build_bands", "candidate_rows", "verify"]


def _run(address: str, job: Callable[[Any], Any]) -> Any:
    """``job(ray)`` connected to the cluster at ``address``, quietly, with calib's own errors unwrapped."""
    ray = import_ray()
    connected = connect(address)
    try:
        context = ray.data.DataContext.get_current()  # imports ray.data, which sets up its loggers
        logging.getLogger("ray.data").setLevel(logging.CRITICAL)  # its plans, progress and task tracebacks
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        return job(ray)
    except Exception as exc:
        error = _calib_error(exc)
        if error is None:
            raise
        raise error from None
    finally:
        disconnect(connected)


def _calib_error(exc: BaseException) -> CalibError | None:
    """The error calib raised in a task, from the wrappers Ray puts around it.

    Ray Data re-raises a task's error as ``RayTaskError(UserCodeException)`` whose chain does not always carry the
    original exception object, only its traceback text: the last ``calib._exceptions.NAME: message`` line of it.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if type(e) in _ERRORS.values():
            return e
        todo += [getattr(e, "cause", None), e.__cause__, e.__context__]
    found = _ERROR_LINE.findall(str(exc))
    if found:
        name, message = found[-1]
        return _ERRORS[name](message.strip())
    return None


_ERRORS: dict[str, type[CalibError]] = {c.__name__: c for c in (CalibError, InputError, InvalidParameterError)}
_ERROR_LINE = re.compile(r"^calib\._exceptions\.(CalibError|InputError|InvalidParameterError): (.+)$", re.M)


def _tasks(ray: Any, tasks: Sequence[dict[str, Any]]) -> Any:
    return ray.data.from_items(list(tasks), override_num_blocks=len(tasks))


def _one(batch: pa.Table) -> dict[str, Any]:
    (task,) = batch.to_pylist()
    return task


def _band_batch(batch: pa.Table, settings: Settings) -> pa.Table:
    task = _one(batch)
    return band_table(read_slice(task)[1], task["first_row"] + task["offset"], settings)


def build_bands(address: str, tasks: Sequence[dict[str, Any]], settings: Settings, folder: Path) -> None:
    """Write the band files of ``tasks`` (slices) into ``folder``, one Ray task per slice."""
    def job(ray: Any) -> None:
        if tasks:
            _tasks(ray, tasks).map_batches(_band_batch, fn_kwargs={"settings": settings}, batch_size=1,
                                           batch_format="pyarrow").write_parquet(str(folder), **PARQUET_OPTIONS)

    _run(address, job)
    if not any(folder.glob("*.parquet")):  # no function with a token: an empty table all the same
        import pyarrow.parquet as pq

        empty = pa.table({"band": pa.array([], pa.uint16()), "key": pa.array([], pa.uint64()),
                          "row": pa.array([], pa.uint32())})
        pq.write_table(empty, folder / "part-000000.parquet", **PARQUET_OPTIONS)


def _match_file(path: str, keys: dict[str, np.ndarray]) -> pa.Table:
    """The distinct (q, row) pairs of one band file whose (band, key) is one of the queries' ``keys``."""
    wanted = pl.DataFrame(keys)
    found = pl.scan_parquet(path).filter(pl.col("key").is_in(wanted["key"].unique().implode())) \
        .join(wanted.lazy(), on=["band", "key"]).select("q", "row").unique().collect()
    return found.to_arrow()


def candidate_rows(address: str, folder: Path, keys: pl.DataFrame) -> pl.DataFrame:
    """The distinct (q, row) pairs of the band files in ``folder`` whose (band, key) is one of ``keys``', one Ray
    task per band file; the queries' keys go to the object store once."""
    arrays = {c: keys[c].to_numpy() for c in ("band", "key", "q")}

    def job(ray: Any) -> list[pa.Table]:
        if not keys.height:
            return []
        files = sorted(str(p) for p in folder.glob("*.parquet"))
        shared, task = ray.put(arrays), ray.remote(_match_file).options(max_retries=3, retry_exceptions=False)
        return ray.get([task.remote(file, shared) for file in files])

    parts = _run(address, job)
    empty = pl.DataFrame(schema={"q": pl.UInt32, "row": pl.UInt32})
    tables = [pl.from_arrow(t) for t in parts if t.num_rows]
    return pl.concat([empty, *[t.cast({"q": pl.UInt32, "row": pl.UInt32}) for t in tables]]).unique()


def verify(address: str, tasks: Sequence[dict[str, Any]], flat: np.ndarray, offsets: np.ndarray, threshold: float,
           size: int, exclude: np.ndarray | None) -> list[pa.Table]:
    """:func:`~calib.dedup.shards.verify_slice` of every task, one Ray task per slice; the queries' shingles
    (``flat``, ``offsets``) and ids to leave out (``exclude``) go to the object store once."""
    def job(ray: Any) -> list[pa.Table]:
        refs = [ray.put(flat), ray.put(offsets), ray.put(exclude)]
        task = ray.remote(verify_slice).options(max_retries=3, retry_exceptions=False)
        return ray.get([task.remote(one, refs[0], refs[1], threshold, size, refs[2]) for one in tasks])

    return _run(address, job)
