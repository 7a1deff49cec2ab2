"""Sampling helpers every study kind shares: the audited functions of ``[data]`` and a seeded row limit.

:func:`corpus_samples` reads a functions table or extracts functions from a corpus (``[data]``),
:func:`organism_samples` takes the organism's audited functions, :func:`limit_rows` keeps a seeded draw of
at most ``limit`` rows in table order; each returns rows of the ``samples`` schema
(:data:`calib.study.tables.SAMPLES_SCHEMA`).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import polars as pl

from calib._exceptions import CalibError
from calib.study.runner import StageContext
from calib.study.tables import SAMPLES_SCHEMA

__all__ = ["corpus_documents", "corpus_samples", "limit_rows", "organism_samples", "sample_id"]


def sample_id(*parts: str) -> str:
    """A sample's id: SHA-256 (16 hex digits) of ``parts`` joined by the unit separator."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]



def limit_rows(frame: pl.DataFrame, limit: int, seed: int) -> pl.DataFrame:
    """At most ``limit`` rows (0: all), a seeded draw kept in table order."""
    if not limit or frame.height <= limit:
        return frame
    keep = np.sort(np.random.default_rng(seed).permutation(frame.height)[:limit])
    return frame[keep.tolist()]


def organism_samples(ctx: StageContext) -> pl.DataFrame:
    """The organism's audited functions of ``data.kinds`` as ``samples`` rows (the organism is built on first use)."""
    truth = pl.read_parquet(ctx.resources.organism(progress=ctx.phase_progress("organism")).truth)
    truth = truth.filter(pl.col("kind").is_in(list(ctx.spec.data.kinds)))
    rows = []
    for r in truth.iter_rows(named=True):
        signature, audited = r["signature"], r["audited"]
        body = audited[len(signature):] if audited.startswith(signature) else audited
        rows.append({"sample_id": r["item_id"], "language": "python", "membership": r["membership"],
                     "kind": r["kind"], "source": r["source"], "context": "", "signature": signature, "body": body,
                     "function": audited, "prompt": r["prompt"], "prompt_context_tokens": 0})
    return pl.DataFrame(rows, schema=SAMPLES_SCHEMA)


def corpus_documents(data: Any) -> Any:
    """The documents of a ``[data]`` section's corpus: its ``paths``, or its ``[data.hub]`` repository."""
    from calib.data.sources import CorpusSpec, iter_documents

    corpus = CorpusSpec(paths=data.paths, format=data.format, content_column=data.content_column,
                        metadata_columns=data.metadata_columns, extensions=data.extensions,
                        max_document_bytes=data.max_file_bytes)
    if data.hub is None:
        return iter_documents(corpus)
    from calib.data.hub import HubCorpus, iter_hub_documents

    hub = HubCorpus(data.hub.repo_id, data.hub.revision, files=data.hub.files,
                    allow_patterns=data.hub.allow_patterns, repo_type=data.hub.repo_type)
    return iter_hub_documents(hub, corpus)


def corpus_samples(ctx: StageContext) -> pl.DataFrame:
    """The functions of ``[data]`` (a functions table, or extracted from a corpus) as ``samples`` rows, unique by id."""
    data = ctx.spec.data
    if data.source == "functions":
        functions = pl.concat([pl.read_parquet(p) for p in data.paths], how="diagonal_relaxed")
        missing = [c for c in ("signature", "body") if c not in functions.columns]
        if missing:
            raise CalibError(f"data.paths: the functions table lacks {missing} (write it with calib extract)")
        functions = functions.filter(pl.col("language").fill_null(data.language) == data.language) \
            if "language" in functions.columns else functions
    else:
        from calib.data.extract import Deduplicator, extract_document
        from calib.study.corpus_caps import count_dropped

        documents = corpus_documents(data)
        dedup = Deduplicator()
        rows: list[dict[str, Any]] = []
        dropped: dict[str, int] = {}
        for doc in documents:
            if doc.text is None:
                count_dropped(dropped, {doc.metadata.get("error", "unreadable"): 1}, doc.source, ctx.event)
                continue
            result = extract_document(doc.text, language=data.language, source=doc.source, path=doc.path,
                                      min_lines=data.min_lines, max_lines=data.max_lines, metadata=doc.metadata,
                                      deduplicator=dedup, max_document_bytes=data.max_file_bytes,
                                      max_line_chars=data.max_line_chars)
            rows.extend(result.functions)
            count_dropped(dropped, result.dropped, doc.source, ctx.event)
        ctx.resources.counts["dropped"] = dropped
        from calib.data.schema import FUNCTIONS_SCHEMA

        functions = pl.DataFrame(rows, schema=FUNCTIONS_SCHEMA)
    out = []
    for r in functions.iter_rows(named=True):
        signature, body = r["signature"], r["body"]
        sep = "" if body.startswith("\n") else "\n"
        sid = r.get("function_id") or sample_id(data.language, r.get("source") or "", signature, body)
        out.append({"sample_id": sid, "language": data.language, "membership": r.get("membership") or "member",
                    "kind": r.get("kind"), "source": r.get("source") or r.get("path") or "",
                    "context": r.get("context") or "", "signature": signature, "body": body,
                    "function": signature + sep + body, "prompt": None, "prompt_context_tokens": None})
    return pl.DataFrame(out, schema=SAMPLES_SCHEMA).unique("sample_id", keep="first", maintain_order=True)
