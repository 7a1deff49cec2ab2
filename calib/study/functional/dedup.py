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

__all__ = ["EXCERPT_CHARS", "band_table_for", "dedup_stage"]

#: How much of a duplicate's text the duplicates table keeps (its first characters).
EXCERPT_CHARS = 2000


# --- dedup --------------------------------------------------------------------------------------
def _dedup_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    d = spec.dedup
    settings = {"dedup": d.model_dump(mode="json", exclude={"redis_url"}),
                "organism": spec.organism and spec.organism.model_dump(mode="json", exclude={"cache_dir"}),
                "language": spec.data.language,
                "embedding": spec.servers[d.embedding_server] if d.embedding_server else None}
    if d.source == "bands":  # a table built again (same folder, other corpus or settings) is another corpus
        settings["band_table"] = _manifest_key(d.paths[0])
    return settings


def _manifest_key(folder: str) -> Any:
    from calib._exceptions import InputError
    from calib.dedup.bands import BandTable

    try:
        manifest = BandTable(folder).manifest
    except InputError:
        return None  # the stage says why, in one line
    return {key: manifest.get(key) for key in ("settings", "shards", "functions", "batch_rows")}


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
    if d.source == "bands":
        return await _band_table_dedup(ctx, samples)
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


async def _band_table_dedup(ctx: StageContext, samples: pl.DataFrame) -> pl.DataFrame:
    """``source = "bands"``: the samples searched in the band table of ``paths`` (``calib dedup bands``), with Polars
    on the driver, or with Ray tasks on the cluster of ``[runner] kind = "ray"`` (the table and its shards must be
    readable at the same path on every node); the same pairs as the in-memory index on the same corpus."""
    d = ctx.spec.dedup
    table = await asyncio.to_thread(band_table_for, d)
    address = None
    if ctx.runner is not None:
        address = await asyncio.to_thread(ctx.runner.ready, False)
    ctx.event("dedup_corpus", documents=table.functions, band_table=str(table.path),
              engine="polars" if address is None else "ray", seed=table.settings.seed)
    found = await asyncio.to_thread(table.search, samples["sample_id"].to_list(), samples["function"].to_list(),
                                    exclude_self=True, ray_address=address)
    pairs = found.select(pl.col("query_id").alias("sample_id"), "corpus_id", pl.lit("textual").alias("kind"),
                         pl.col("jaccard").alias("similarity"), pl.lit(1).alias("copies")) \
        .sort(["sample_id", "kind", "corpus_id"])
    ctx.resources.counts["dedup_corpus"] = table.functions
    ids, texts, sources = await asyncio.to_thread(_band_documents, table, pairs["corpus_id"].unique().to_list())
    return _with_documents(pairs, ids, texts, sources)


def band_table_for(d: Any) -> Any:
    """The band table of ``[dedup] source = "bands"`` (a :class:`~calib.dedup.bands.BandTable`), its shards
    unchanged; a one-line error when a ``[dedup]`` key disagrees with the settings it was built with."""
    from calib._exceptions import InputError
    from calib.dedup.bands import BandTable

    table = BandTable(d.paths[0])
    table.check_shards()
    built = table.settings
    for key, option, value, want in (("jaccard", "--jaccard", d.jaccard, built.threshold),
                                     ("num_perm", "--num-perm", d.num_perm, built.num_perm),
                                     ("shingle_tokens", "--shingle-tokens", d.shingle_tokens, built.shingle_size)):
        if value != want:
            raise InputError(f"dedup.{key} = {value} but the band table was built with {option} {want}; set "
                             f"dedup.{key} = {want}, or build the table again with {option} {value}",
                             path=str(table.path))
    return table


def _band_documents(table: Any, corpus_ids: list[str]) -> tuple[list[str], list[str], list[str | None]]:
    """(ids, texts, sources) of the band table's corpus functions ``corpus_ids``, read back from their shards, each
    slice that holds one read once (as the search's verification reads them); a source is the shard (its Hub name
    when it came from the Hub) and the function's row in it."""
    import numpy as np

    from calib.dedup.shards import read_slice

    if not corpus_ids:
        return [], [], []
    rows = pl.scan_parquet(table.path / "ids" / "*.parquet").filter(pl.col("id").is_in(corpus_ids)) \
        .group_by("id").agg(pl.col("row").min()).sort("row").collect()
    firsts = np.array([s.first_row for s in table.shards], dtype=np.int64)
    batch = int(table.manifest["batch_rows"])
    read: dict[tuple[int, int], list[str]] = {}
    ids, texts, sources = [], [], []
    for corpus_id, row in rows.iter_rows():
        number = int(np.searchsorted(firsts, row, side="right")) - 1
        shard = table.shards[number]
        within = int(row) - shard.first_row
        offset = within - within % batch
        if (number, offset) not in read:
            task = shard.to_dict() | {"offset": offset, "length": min(batch, shard.rows - offset)}
            read[(number, offset)] = read_slice(task)[1]
        ids.append(corpus_id)
        texts.append(read[(number, offset)][within - offset])
        sources.append(f"{shard.hub or shard.path}#row={within}")
    return ids, texts, sources


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
