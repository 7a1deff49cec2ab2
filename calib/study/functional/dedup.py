"""The ``functional`` study's dedup stage: near-duplicates of the audited functions in the training corpus.

Each pair also keeps where its corpus document came from and the start of its text (``corpus_source``,
``corpus_text``: :data:`calib.study.tables.DUPLICATES_TABLE_SCHEMA`), so the report can show a memorized
sample's closest duplicates beside it (the functional-memorization paper, Figure 43).
"""

from __future__ import annotations

import asyncio
from typing import Any

import polars as pl

from calib.study.runner import RunOptions, Stage, StageContext
from calib.study.sampling import sample_id
from calib.study.spec import StudySpec
from calib.study.tables import DUPLICATES_TABLE_SCHEMA

__all__ = ["EXCERPT_CHARS", "dedup_stage"]

#: How much of a duplicate's text the duplicates table keeps (its first characters).
EXCERPT_CHARS = 2000


# --- dedup --------------------------------------------------------------------------------------
def _dedup_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    d = spec.dedup
    return {"dedup": d.model_dump(mode="json", exclude={"redis_url"}),
            "organism": spec.organism and spec.organism.model_dump(mode="json", exclude={"cache_dir"}),
            "language": spec.data.language,
            "embedding": spec.servers[d.embedding_server] if d.embedding_server else None}


def _dedup_corpus(ctx: StageContext) -> tuple[list[str], list[str], dict[str, int], list[str | None]]:
    """(ids, texts, copies, sources) of the training corpus ``[dedup]`` names."""
    d, language = ctx.spec.dedup, ctx.spec.data.language
    if d.source == "organism":
        from calib.organism.build import training_corpus

        corpus = training_corpus(ctx.resources.organism())
        return ([c[0] for c in corpus], [c[1] for c in corpus], {c[0]: c[2] for c in corpus},
                [f"organism:{c[0]}" for c in corpus])
    if d.source == "functions":
        functions = pl.concat([pl.read_parquet(p) for p in d.paths], how="diagonal_relaxed")
    else:
        from calib.data.extract import Deduplicator, extract_document
        from calib.data.schema import FUNCTIONS_SCHEMA
        from calib.data.sources import CorpusSpec, iter_documents
        from calib.study.corpus_caps import count_dropped

        corpus = CorpusSpec(paths=d.paths, format=d.format, content_column=d.content_column, extensions=d.extensions,
                            max_document_bytes=d.max_file_bytes)
        rows: list[dict[str, Any]] = []
        dedup = Deduplicator()
        dropped: dict[str, int] = {}
        for doc in iter_documents(corpus):
            if doc.text is None:
                count_dropped(dropped, {doc.metadata.get("error", "unreadable"): 1}, doc.source, ctx.event)
                continue
            result = extract_document(doc.text, language=language, source=doc.source, path=doc.path,
                                      min_lines=d.min_lines, max_lines=10**6, metadata=doc.metadata,
                                      deduplicator=dedup, max_document_bytes=d.max_file_bytes,
                                      max_line_chars=d.max_line_chars)
            rows.extend(result.functions)
            count_dropped(dropped, result.dropped, doc.source, ctx.event)
        ctx.resources.counts["dedup_dropped"] = dropped
        functions = pl.DataFrame(rows, schema=FUNCTIONS_SCHEMA)
    ids, texts, sources = [], [], []
    for r in functions.iter_rows(named=True):
        body = r["body"]
        text = r["signature"] + ("" if body.startswith("\n") else "\n") + body
        ids.append(r.get("function_id") or sample_id(language, r.get("source") or "", r["signature"], body))
        texts.append(text)
        sources.append(r.get("source") or r.get("path"))
    return ids, texts, {}, sources


async def _dedup(ctx: StageContext) -> pl.DataFrame:
    from calib.dedup import DedupConfig, afind_duplicates

    d = ctx.spec.dedup
    samples = ctx.table("samples")
    ids, texts, copies, sources = await asyncio.to_thread(_dedup_corpus, ctx)
    ctx.event("dedup_corpus", documents=len(ids))
    config = DedupConfig(jaccard=d.jaccard, num_perm=d.num_perm, shingle_tokens=d.shingle_tokens,
                         seed=ctx.spec.study.seed + 1, cosine=d.cosine, semantic=d.semantic, storage=d.redis_url,
                         index=d.index)
    server = ctx.resources.server(d.embedding_server) if d.embedding_server else None
    pairs = await afind_duplicates(ids, texts, samples["sample_id"].to_list(), samples["function"].to_list(),
                                   config=config, server=server, copies=copies)
    ctx.resources.counts["dedup_corpus"] = len(ids)
    return _with_documents(pairs, ids, texts, sources)


def _with_documents(pairs: pl.DataFrame, ids: list[str], texts: list[str], sources: list[str | None]) -> pl.DataFrame:
    """``pairs`` with each corpus document's source and the first :data:`EXCERPT_CHARS` characters of its text."""
    documents = pl.DataFrame({"corpus_id": ids, "corpus_source": sources,
                              "corpus_text": [t[:EXCERPT_CHARS] for t in texts]},
                             schema={key: pl.String() for key in ("corpus_id", "corpus_source", "corpus_text")})
    documents = documents.unique("corpus_id", keep="first", maintain_order=True)
    joined = pairs.join(documents, on="corpus_id", how="left", maintain_order="left")
    return joined.select(list(DUPLICATES_TABLE_SCHEMA)).cast(DUPLICATES_TABLE_SCHEMA)



#: The duplication stage of a functional study with a ``[dedup]`` table (after the samples are known).
#: 2: the corpus_source and corpus_text columns
dedup_stage = Stage("dedup", ("samples",), "duplicates", "2", _dedup_settings, _dedup)
