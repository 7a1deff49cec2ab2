"""Near-duplicates of audited functions in a training corpus, and their counts per function.

The functional-memorization paper (§5.3, App. G) relates memorization of a function x to how often x
appears in the training corpus in near-duplicate form: **textual** near-duplicates (MinHash LSH over
5-token shingles, Jaccard ≥ 0.4, verified exactly: :mod:`calib.dedup.minhash`) and **semantic**
near-duplicates (embedding cosine ≥ 0.9, excluding the textual ones: :mod:`calib.dedup.semantic`).
:func:`find_duplicates` returns every pair; :func:`duplicate_counts` counts them per function.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import polars as pl

from calib._exceptions import InvalidParameterError

__all__ = ["COUNTS_SCHEMA", "DUPLICATES_SCHEMA", "DedupConfig", "afind_duplicates", "duplicate_counts",
           "find_duplicates"]

#: One row per (audited function, corpus document) near-duplicate pair.
DUPLICATES_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String(),  # the audited function
    "corpus_id": pl.String(),  # the corpus document (function) it has a near-duplicate in
    "kind": pl.String(),  # textual (shingle Jaccard >= jaccard) | semantic (cosine >= cosine, not textual)
    "similarity": pl.Float64(),  # the exact Jaccard (textual) or cosine (semantic)
    "copies": pl.Int64(),  # how many times that document occurs in the corpus
}

#: One row per audited function: its near-duplicate counts.
COUNTS_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String(),
    "textual_dups": pl.Int64(),  # textual near-duplicates (copies counted when count_copies)
    "semantic_dups": pl.Int64(),  # semantic-only near-duplicates
}


@dataclass(frozen=True)
class DedupConfig:
    """How near-duplicates are found (the paper's settings by default).

    Attributes
    ----------
    jaccard
        Textual threshold on the exact Jaccard of 5-token shingle sets (0.4).
    num_perm, shingle_tokens, seed
        MinHash permutations (128), shingle size in code tokens (5), MinHash seed.
    cosine
        Semantic threshold on embedding cosine (0.9).
    semantic
        Whether to search semantic near-duplicates at all (they need an embedding model).
    storage
        ``None`` (in memory) or ``"redis://HOST:PORT/DB"``: the LSH index in Redis.
    index
        Semantic search: ``"auto"``, ``"exact"`` (blockwise numpy) or ``"faiss"``.
    """

    jaccard: float = 0.4
    num_perm: int = 128
    shingle_tokens: int = 5
    seed: int = 1
    cosine: float = 0.9
    semantic: bool = True
    storage: str | None = None
    index: str = "auto"

    def __post_init__(self) -> None:
        if not 0.0 < self.jaccard <= 1.0:
            raise InvalidParameterError(f"jaccard must be in (0, 1], got {self.jaccard!r}")
        if not -1.0 <= self.cosine <= 1.0:
            raise InvalidParameterError(f"cosine must be in [-1, 1], got {self.cosine!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def afind_duplicates(corpus_ids: Sequence[str], corpus_texts: Sequence[str], sample_ids: Sequence[str],
                           sample_texts: Sequence[str], *, config: DedupConfig = DedupConfig(), server: Any = None,
                           copies: Mapping[str, int] | None = None) -> pl.DataFrame:
    """Every near-duplicate pair of the samples in the corpus (:data:`DUPLICATES_SCHEMA`).

    A corpus document with the sample's own id is the sample itself and is never its duplicate.
    Semantic pairs leave out the pairs that are already textual. ``server``: an embeddings server
    (None: the offline model). ``copies``: how often each corpus document occurs (default 1).
    """
    from calib.dedup.minhash import textual_duplicates
    from calib.dedup.semantic import embed_texts, semantic_pairs

    if len(corpus_ids) != len(corpus_texts) or len(sample_ids) != len(sample_texts):
        raise InvalidParameterError("ids and texts must have the same length on each side")
    textual = await asyncio.to_thread(
        textual_duplicates, list(corpus_ids), list(corpus_texts), list(sample_ids), list(sample_texts),
        threshold=config.jaccard, num_perm=config.num_perm, shingle_size=config.shingle_tokens, seed=config.seed,
        storage=config.storage, exclude_self=True)
    frames = [textual.select(pl.col("query_id").alias("sample_id"), "corpus_id", pl.lit("textual").alias("kind"),
                             pl.col("jaccard").alias("similarity"))]
    if config.semantic and corpus_ids and sample_ids:
        distinct = list(dict.fromkeys([*sample_texts, *corpus_texts]))
        embedded = await embed_texts(distinct, server=server)
        row = {text: i for i, text in enumerate(distinct)}
        vectors = embedded.vectors
        exclude = set(zip(textual["query_id"].to_list(), textual["corpus_id"].to_list()))
        semantic = await asyncio.to_thread(
            semantic_pairs, vectors[[row[t] for t in sample_texts]], vectors[[row[t] for t in corpus_texts]],
            threshold=config.cosine, query_ids=list(sample_ids), corpus_ids=list(corpus_ids), exclude=exclude,
            exclude_self=True, index=config.index)
        frames.append(semantic.select(pl.col("query_id").alias("sample_id"), "corpus_id",
                                      pl.lit("semantic").alias("kind"), pl.col("cosine").alias("similarity")))
    pairs = pl.concat(frames, how="vertical_relaxed")
    counts = copies or {}
    pairs = pairs.with_columns(pl.col("corpus_id").map_elements(lambda c: int(counts.get(c, 1)),
                                                                return_dtype=pl.Int64).alias("copies"))
    return pairs.select(list(DUPLICATES_SCHEMA)).cast(DUPLICATES_SCHEMA).sort(["sample_id", "kind", "corpus_id"])


def find_duplicates(corpus_ids: Sequence[str], corpus_texts: Sequence[str], sample_ids: Sequence[str],
                    sample_texts: Sequence[str], *, config: DedupConfig = DedupConfig(), server: Any = None,
                    copies: Mapping[str, int] | None = None) -> pl.DataFrame:
    """Synchronous :func:`afind_duplicates` (runs its own event loop; not from inside one)."""
    return asyncio.run(afind_duplicates(corpus_ids, corpus_texts, sample_ids, sample_texts, config=config,
                                        server=server, copies=copies))


def duplicate_counts(pairs: pl.DataFrame, sample_ids: Sequence[str], *, count_copies: bool = False) -> pl.DataFrame:
    """Textual and semantic-only near-duplicate counts per sample (:data:`COUNTS_SCHEMA`), zeros included.

    ``count_copies`` counts a corpus document as often as it occurs (its ``copies``), else once.
    """
    weight = pl.col("copies") if count_copies else pl.lit(1, dtype=pl.Int64)
    per = pairs.group_by("sample_id").agg(
        (weight * (pl.col("kind") == "textual").cast(pl.Int64)).sum().alias("textual_dups"),
        (weight * (pl.col("kind") == "semantic").cast(pl.Int64)).sum().alias("semantic_dups"))
    base = pl.DataFrame({"sample_id": list(sample_ids)}, schema={"sample_id": pl.String()})
    out = base.join(per, on="sample_id", how="left").with_columns(
        pl.col("textual_dups").fill_null(0), pl.col("semantic_dups").fill_null(0))
    return out.select(list(COUNTS_SCHEMA)).cast(COUNTS_SCHEMA)
