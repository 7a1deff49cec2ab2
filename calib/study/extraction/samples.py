"""The ``samples`` stage of extraction and census studies: members, controls and census documents."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import numpy as np
import polars as pl

from calib._exceptions import CalibError, InputError
from calib.study.extraction.common import stable_hash
from calib.study.runner import RunOptions, Stage, StageContext
from calib.study.sampling import corpus_documents, corpus_samples, limit_rows, organism_samples
from calib.study.spec import ORGANISM_MODEL_PREFIX, StudySpec
from calib.study.tables import (
    SAMPLES_SCHEMA,
)

__all__ = ["census_samples_stage", "extra_controls", "organism_document", "samples_settings", "samples_stage"]


# --- samples ------------------------------------------------------------------------------------
def samples_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    limit = options.limit if options.limit is not None else spec.data.limit
    return {"kind": spec.study.kind, "data": spec.data.model_dump(mode="json"),
            "organism": spec.organism and spec.organism.model_dump(mode="json"),
            "census": spec.census and spec.census.model_dump(mode="json"), "seed": spec.study.seed, "limit": limit}


def _sample_row(sid: str, text: str, membership: str, kind: str | None, source: str) -> dict[str, Any]:
    return {"sample_id": sid, "language": None, "membership": membership, "kind": kind, "source": source,
            "context": "", "signature": "", "body": text, "function": text, "prompt": None,
            "prompt_context_tokens": None}


@functools.lru_cache(maxsize=4)
def _stdlib_split(seed: int) -> Any:
    """The organism's split of this interpreter's standard library, once per process and seed (reading and
    parsing every file costs about 10 s; a process that runs or checks several studies asked it each time)."""
    from calib.organism.corpus import load_stdlib_functions, split_corpus

    return split_corpus(load_stdlib_functions(), seed=seed)


def extra_controls(ctx: StageContext, truth_sources: set[str]) -> list[dict[str, Any]]:
    """``[organism] extra_controls`` never-trained stdlib functions from the organism's control pool."""
    org = ctx.spec.organism
    split = _stdlib_split(org.seed)
    pool = [f for f in split.control_pool + split.member_pool
            if f"stdlib:{f.path}::{f.qualname}" not in truth_sources]
    # member-pool functions not planted were never trained on either (the target saw only planted items)
    rng = np.random.default_rng([org.seed, 7])
    chosen = sorted(rng.permutation(len(pool))[:org.extra_controls].tolist())
    rows = []
    for i in chosen:
        f = pool[i]
        source = f"stdlib:{f.path}::{f.qualname}"
        sid = stable_hash("extra-control", source, f.source)
        rows.append(_sample_row(sid, f.source, "control", "extra_control", source))
    return rows


async def _extraction_samples(ctx: StageContext) -> pl.DataFrame:
    spec, data = ctx.spec, ctx.spec.data
    limit = ctx.options.limit if ctx.options.limit is not None else data.limit
    if data.source == "organism":
        frame = organism_samples(ctx)
        if spec.organism.extra_controls:
            truth = pl.read_parquet(ctx.resources.organism().truth)
            extra = await asyncio.to_thread(extra_controls, ctx, set(truth["source"]))
            frame = pl.concat([frame, pl.DataFrame(extra, schema=SAMPLES_SCHEMA)])
    elif data.unit == "document":
        frame = await asyncio.to_thread(_document_samples, ctx)
    else:
        frame = await asyncio.to_thread(corpus_samples, ctx)
    functions = frame.height
    frame = limit_rows(frame, limit, spec.study.seed)
    ctx.resources.counts["functions"] = functions
    members = int((frame["membership"] == "member").sum())
    ctx.event("extracted", functions=functions, samples=frame.height, members=members,
              controls=frame.height - members)
    if members == 0 or members == frame.height:
        raise CalibError(f"data ({data.source}): an extraction study needs members and matched controls, found "
                         f"{members} members and {frame.height - members} controls; mark each row's membership "
                         "(metadata column 'membership': member | control)")
    return frame.cast(SAMPLES_SCHEMA)


def _document_samples(ctx: StageContext) -> pl.DataFrame:
    """``data.unit = "document"``: each corpus document is one sample; membership from its metadata."""
    from calib.study.corpus_caps import count_dropped

    rows, dropped = [], {}
    for doc in corpus_documents(ctx.spec.data):
        membership = doc.metadata.get("membership")
        why = None
        if doc.text is None:
            why = doc.metadata.get("error", "unreadable")
        elif membership not in ("member", "control"):
            why = "no membership"
            ctx.event("sample_error", source=doc.source, error=f"membership is {membership!r}, not member or "
                      "control (map a column to 'membership' in data.metadata_columns)")
        if why is not None:
            count_dropped(dropped, {why: 1}, doc.source, ctx.event)
            continue
        kind = doc.metadata.get("kind")
        rows.append(_sample_row(stable_hash("document", doc.source, doc.text), doc.text, membership,
                                None if kind is None else str(kind), doc.source))
    ctx.resources.counts["dropped"] = dropped
    return pl.DataFrame(rows, schema=SAMPLES_SCHEMA).unique("sample_id", keep="first", maintain_order=True)


async def _census_samples(ctx: StageContext) -> pl.DataFrame:
    """One sample per distinct document of ``[[census.pairs]]`` (candidate documents: member; controls: control)."""
    from pathlib import Path

    rows: dict[str, dict[str, Any]] = {}
    truth = None
    for pair in ctx.spec.census.pairs:
        for ref, membership in ((pair.document, "candidate"), *((c, "control") for c in pair.control)):
            side = "document" if membership == "candidate" else "control"
            if ref.startswith(ORGANISM_MODEL_PREFIX):
                if truth is None:
                    truth = pl.read_parquet(ctx.resources.organism(progress=ctx.phase_progress("organism")).truth)
                text, kind, source, truth_membership = organism_document(truth, ref)
                if truth_membership != membership and membership == "control" and truth_membership == "member":
                    raise InputError(f"census.pairs {pair.name!r}: control = {ref!r} is a member of the target's "
                                     "training data; a control must be a non-member")
            else:
                try:
                    text = Path(ref).read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    raise InputError(f"census.pairs {pair.name!r}: cannot read {side} {ref!r}: {exc}") from None
                kind, source = None, ref
            sid = stable_hash("census", source, text)
            row = rows.get(sid) or _sample_row(sid, text, membership, kind, source)
            if row["membership"] != membership:
                raise InputError(f"census.pairs {pair.name!r}: {ref!r} is both a candidate document and a control")
            rows[sid] = row
    return pl.DataFrame(list(rows.values()), schema=SAMPLES_SCHEMA)


def organism_document(truth: pl.DataFrame, ref: str) -> tuple[str, str, str, str]:
    """``organism:member:N`` / ``organism:control:N`` (the N-th verbatim item) or ``organism:ITEM_ID``."""
    key = ref[len(ORGANISM_MODEL_PREFIX):]
    parts = key.split(":")
    if len(parts) == 2 and parts[0] in ("member", "control") and parts[1].isdigit():
        rows = truth.filter((pl.col("kind") == "verbatim") & (pl.col("membership") == parts[0]))
        index = int(parts[1])
        if index >= rows.height:
            raise InputError(f"census.pairs: {ref!r}: the organism has {rows.height} verbatim {parts[0]}s "
                             f"(indices 0-{rows.height - 1})")
        row = rows.row(index, named=True)
    else:
        rows = truth.filter(pl.col("item_id") == key)
        if rows.height == 0:
            raise InputError(f"census.pairs: {ref!r} names no organism item; use organism:member:N, "
                             "organism:control:N or organism:<item_id> from truth.parquet")
        row = rows.row(0, named=True)
    return row["audited"], row["kind"], row["source"], row["membership"]


samples_stage = Stage("samples", (), "samples", "1", samples_settings, _extraction_samples, offline=True)
census_samples_stage = Stage("samples", (), "samples", "1", samples_settings, _census_samples, offline=True)
