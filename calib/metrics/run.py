"""Score a table of (reference, candidate) pairs with many metrics: batched, in parallel, cached.

:func:`compute_similarities` is what the study runner and ``calib similarity`` call. It

- looks every (metric, pair) up in the cache first (a :class:`~calib.servers.cache.RequestCache` in the
  run directory, keyed by the metric's fingerprint and the pair's language and texts), so a re-run
  recomputes nothing and a killed run keeps every chunk it finished;
- runs the CPU-bound metrics (``textual`` and ``structural`` kinds) over chunks of pairs in a process
  pool (``workers`` processes, spawned fresh; all CPU metrics of a chunk run in the same task, so
  ``codebleu``, ``codebleu_syntax`` and ``codebleu_dataflow`` share one CodeBLEU computation);
- runs metrics with ``ascore_batch`` (judges, server embeddings) chunk by chunk with their own request
  concurrency, and metrics with ``score_batch`` (the offline embedding model) in this process;
- returns one row per (pair, metric) in the ``similarities`` schema, in input order.

A pair whose language calib does not handle, or that a metric cannot score, gets a null value and the
reason; nothing stops the run.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import polars as pl

from calib._exceptions import InvalidParameterError
from calib.metrics.base import (
    SIMILARITIES_SCHEMA,
    Metric,
    MetricUnavailable,
    Pair,
    Score,
    normalize_language,
    score_pairs,
)
from calib.servers.cache import RequestCache, cache_key

__all__ = ["PAIRS_COLUMNS", "acompute_similarities", "compute_similarities"]

#: The columns :func:`compute_similarities` reads.
PAIRS_COLUMNS = ("sample_id", "role", "reference", "candidate", "language")

Progress = Callable[[str, int, int], None]
_ROUTE = "metric"


def _key(metric: Metric, pair: Pair) -> str:
    return cache_key(metric.fingerprint(), _ROUTE,
                     {"language": pair.language, "reference": pair.reference, "candidate": pair.candidate})


def _local(metric: Metric) -> bool:
    return metric.kind in ("textual", "structural") and not hasattr(metric, "ascore_batch")


#: ``pool(fn, calls)``: ``fn(*call)`` for each call, in order, wherever the caller runs them.
ChunkPool = Callable[[Callable[..., Any], list[tuple[Any, ...]]], Iterable[Any]]


def _score_chunk(metrics: Sequence[Metric], pairs: Sequence[Pair]) -> list[list[Score]]:
    """One pool task: every local metric on every pair of the chunk (metric-major)."""
    out = []
    for metric in metrics:
        batch = getattr(metric, "score_batch", None)
        out.append(batch(pairs) if batch is not None else score_pairs(metric, pairs))
    return out


def _chunks(items: list[int], size: int) -> list[list[int]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def compute_similarities(pairs: pl.DataFrame, metrics: Sequence[Metric], **options: Any) -> pl.DataFrame:
    """:func:`acompute_similarities` from synchronous code (runs its own event loop)."""
    return asyncio.run(acompute_similarities(pairs, metrics, **options))


async def acompute_similarities(pairs: pl.DataFrame, metrics: Sequence[Metric], *,
                                cache: RequestCache | str | Path | None = None, workers: int | None = None,
                                chunk_size: int = 64, progress: Progress | None = None,
                                pool: ChunkPool | None = None) -> pl.DataFrame:
    """Every metric on every pair: the ``similarities`` table (:data:`~calib.metrics.base.SIMILARITIES_SCHEMA`).

    Servers behind remote metrics are used in the running event loop; the caller closes them.

    Parameters
    ----------
    pairs
        One row per comparison with :data:`PAIRS_COLUMNS` (``sample_id``, ``role``, ``reference``,
        ``candidate``, ``language``). A null candidate (no generation) scores null with a reason.
    metrics
        The metrics (:func:`~calib.metrics.base.create_metric`), in the order rows are written.
    cache
        A request cache or the path of its SQLite file (the run directory's ``cache.sqlite``); ``None``
        computes everything and stores nothing.
    workers
        Processes for the CPU-bound metrics; ``None`` = the machine's CPU count; ``1`` = this process.
    chunk_size
        Pairs per pool task and per remote batch; results are cached chunk by chunk.
    progress
        Called as ``progress(metric_group, done, total)`` after every chunk.
    pool
        Where the CPU-bound metrics' chunks run instead of a local process pool: ``pool(fn, calls)`` yields
        ``fn(*call)`` for each call in order (the Ray runner's :meth:`~calib.scale.runner.RayRunner.starmap`).
        The same function scores the same chunks, so the table does not depend on it.
    """
    missing = [c for c in PAIRS_COLUMNS if c not in pairs.columns]
    if missing:
        raise InvalidParameterError(f"pairs table lacks column(s) {missing}: expected {list(PAIRS_COLUMNS)}")
    if chunk_size < 1:
        raise InvalidParameterError(f"chunk_size must be >= 1, got {chunk_size}")
    names = [m.name for m in metrics]
    if len(set(names)) != len(names):
        raise InvalidParameterError(f"metrics listed twice: {sorted({n for n in names if names.count(n) > 1})}")
    own_cache = isinstance(cache, (str, Path))
    store = RequestCache(cache) if own_cache else cache
    try:
        return await _compute(pairs, list(metrics), store, workers, chunk_size, progress, pool)
    finally:
        if own_cache and store is not None:
            store.close()


async def _compute(pairs: pl.DataFrame, metrics: list[Metric], store: RequestCache | None, workers: int | None,
             chunk_size: int, progress: Progress | None, pool: ChunkPool | None = None) -> pl.DataFrame:
    rows = pairs.select(PAIRS_COLUMNS).to_dicts()
    items: list[Pair | None] = []
    invalid: dict[int, str] = {}
    for i, row in enumerate(rows):
        try:
            language = normalize_language(row["language"] or "")
        except InvalidParameterError as exc:
            invalid[i] = str(exc)
            items.append(None)
            continue
        if row["candidate"] is None or row["reference"] is None:
            invalid[i] = "no candidate code (the generation is missing)" if row["candidate"] is None \
                else "no reference code"
            items.append(None)
            continue
        items.append(Pair(row["reference"], row["candidate"], language))
    valid = [i for i, item in enumerate(items) if item is not None]

    results: dict[str, dict[int, Score]] = {m.name: {} for m in metrics}
    keys: dict[str, dict[int, str]] = {m.name: {} for m in metrics}
    todo: dict[str, list[int]] = {}
    for metric in metrics:
        pending = []
        for i in valid:
            key = _key(metric, items[i])
            keys[metric.name][i] = key
            hit = store.get(key) if store is not None else None
            if hit is not None:
                results[metric.name][i] = Score.from_dict(hit)
            else:
                pending.append(i)
        todo[metric.name] = pending

    def record(metric: Metric, indices: Sequence[int], scores: Sequence[Score]) -> None:
        for i, score in zip(indices, scores):
            results[metric.name][i] = score
        if store is not None:
            store.put_many([(keys[metric.name][i], f"{_ROUTE}/{metric.name}", s.to_dict())
                            for i, s in zip(indices, scores) if not s.transient])

    local = [m for m in metrics if _local(m)]
    _run_local(local, items, todo, record, workers, chunk_size, progress, pool)
    for metric in metrics:
        if metric in local:
            continue
        pending = todo[metric.name]
        for n, chunk in enumerate(_chunks(pending, chunk_size), start=1):
            batch = [items[i] for i in chunk]
            try:
                if hasattr(metric, "ascore_batch"):
                    scores = await metric.ascore_batch(batch)
                else:
                    scores = getattr(metric, "score_batch", lambda b, m=metric: score_pairs(m, b))(batch)
            except MetricUnavailable as exc:  # nothing in the batch can be scored (no server, ...)
                scores = [Score(None, exc.reason, exc.raw, transient=exc.transient)] * len(batch)
            record(metric, chunk, scores)
            if progress is not None:
                progress(metric.name, min(n * chunk_size, len(pending)), len(pending))

    out: dict[str, list[Any]] = {name: [] for name in SIMILARITIES_SCHEMA}
    for i, row in enumerate(rows):
        for metric in metrics:
            score = Score(None, invalid[i]) if i in invalid else results[metric.name][i]
            out["sample_id"].append(row["sample_id"])
            out["role"].append(row["role"])
            out["metric"].append(metric.name)
            out["value"].append(None if score.value is None else float(score.value))
            out["reason"].append(score.reason)
            out["detail"].append(_detail(score))
    return pl.DataFrame(out, schema=SIMILARITIES_SCHEMA)


def _detail(score: Score) -> str | None:
    detail = dict(score.detail or {})
    if score.raw is not None:
        detail.setdefault("raw", score.raw)
    return json.dumps(detail, sort_keys=True, ensure_ascii=False) if detail else None


def _run_local(local: list[Metric], items: list[Pair | None], todo: dict[str, list[int]], record,
               workers: int | None, chunk_size: int, progress: Progress | None, pool: ChunkPool | None = None) -> None:
    """The CPU-bound metrics, all of them per chunk, in ``pool``, else a spawned process pool (or here for one
    worker)."""
    if not local:
        return
    union = sorted({i for m in local for i in todo[m.name]})
    if not union:
        return
    pending = {m.name: set(todo[m.name]) for m in local}
    chunks = _chunks(union, chunk_size)
    workers = (os.cpu_count() or 1) if workers is None else workers
    if workers < 1:
        raise InvalidParameterError(f"workers must be >= 1, got {workers}")
    done = 0

    def collect(chunk: list[int], scores: list[list[Score]]) -> None:
        nonlocal done
        for metric, metric_scores in zip(local, scores):
            keep = [(i, s) for i, s in zip(chunk, metric_scores) if i in pending[metric.name]]
            if keep:
                record(metric, [i for i, _ in keep], [s for _, s in keep])
        done += len(chunk)
        if progress is not None:
            progress("+".join(m.name for m in local), done, len(union))

    if pool is not None:
        for chunk, scores in zip(chunks, pool(_score_chunk, [(local, [items[i] for i in chunk]) for chunk in chunks])):
            collect(chunk, scores)
        return
    if workers == 1 or len(chunks) == 1:
        for chunk in chunks:
            collect(chunk, _score_chunk(local, [items[i] for i in chunk]))
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(chunks)), mp_context=context) as pool:
        futures = {pool.submit(_score_chunk, local, [items[i] for i in chunk]): chunk for chunk in chunks}
        for future in as_completed(futures):
            collect(futures[future], future.result())
