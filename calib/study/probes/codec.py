"""The ``probes`` study's codec stage: CoDeC in-context log-likelihood deltas of each dataset (docs/probes.md)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import polars as pl

from calib._exceptions import InputError
from calib.study.probes.tables import CODEC_SCHEMA
from calib.study.requests import record_requests
from calib.study.runner import RunOptions, Stage, StageContext
from calib.study.spec import StudySpec

__all__ = ["codec_stage"]


# --- codec --------------------------------------------------------------------------------------
def _codec_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    p = spec.probes
    assert p is not None
    codec = p.codec.model_dump(mode="json") if p.codec else None
    return {"codec": codec, "seed": spec.study.seed, "servers": {n: spec.servers[n] for n in spec.models.probed()},
            "organism": spec.organism.model_dump(mode="json", exclude={"cache_dir"}) if spec.organism else None}


def _dataset_texts(ctx: StageContext, source: str, column: str, limit: int) -> list[tuple[str, str]]:
    """(sample_id, text) pairs of one codec dataset."""
    if source in ("organism:member", "organism:control"):
        truth = pl.read_parquet(ctx.resources.organism().truth)
        rows = truth.filter(pl.col("membership") == source.split(":")[1]).sort("item_id")
        pairs = [(r["item_id"], (r["training_variants"] or [r["audited"]])[0]) for r in rows.iter_rows(named=True)]
    elif source.startswith("organism:"):
        raise InputError(f"probes.codec.datasets: source {source!r}: use organism:member or organism:control")
    else:
        pairs = _file_texts(Path(source), column)
    pairs = [(sid, text) for sid, text in pairs if text and text.strip()]
    return pairs[:limit] if limit else pairs


def _file_texts(path: Path, column: str) -> list[tuple[str, str]]:
    """A folder of text files (one sample each), a JSONL / JSON list of objects, or a Parquet table."""
    if path.is_dir():
        return [(str(f.relative_to(path)), f.read_text(encoding="utf-8", errors="replace"))
                for f in sorted(path.rglob("*")) if f.is_file()]
    if path.suffix == ".parquet":
        frame = pl.read_parquet(path)
        if column not in frame.columns:
            raise InputError(f"no column {column!r} (text_column); columns: {', '.join(frame.columns)}",
                             path=str(path))
        return [(f"{path.name}#{i}", t) for i, t in enumerate(frame[column].to_list()) if isinstance(t, str)]
    text = path.read_text(encoding="utf-8")
    try:
        items = json.loads(text) if path.suffix == ".json" else [json.loads(x) for x in text.splitlines() if x.strip()]
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON at line {exc.lineno}: {exc.msg}", path=str(path)) from None
    out = []
    for i, item in enumerate(items):
        value = item.get(column) if isinstance(item, dict) else item if isinstance(item, str) else None
        if isinstance(value, str):
            out.append((str(item.get("id", i)) if isinstance(item, dict) else str(i), value))
    return out


async def _codec(ctx: StageContext) -> pl.DataFrame:
    from calib.probes.codec import codec_probe

    spec = ctx.spec
    codec = spec.probes.codec  # type: ignore[union-attr]
    if codec is None:
        return pl.DataFrame(schema=CODEC_SCHEMA)
    datasets: dict[str, list[tuple[str, str]]] = {}
    for item in codec.datasets:
        datasets[item.name] = await asyncio.to_thread(_dataset_texts, ctx, item.source, item.text_column, item.limit)
    seen = {d.name: d.seen for d in codec.datasets}
    rows = []
    for name in spec.models.probed():
        samples = await codec_probe(ctx.resources.server(name), datasets, n_context=codec.n_context,
                                    seed=spec.study.seed, separator=codec.separator, concurrency=codec.concurrency)
        for s in samples:
            ok = s.error is None
            rows.append({"model": name, "dataset": s.dataset, "seen": seen[s.dataset], "sample_id": s.sample_id,
                         "tokens": s.tokens, "ll_without": s.ll_without if ok else None,
                         "ll_with": s.ll_with if ok else None, "delta": s.delta if ok else None,
                         "context_ids": list(s.context_ids), "error": s.error})
        record_requests(ctx, name)
    return pl.DataFrame(rows, schema=CODEC_SCHEMA)


codec_stage = Stage("codec", (), "codec", "1", _codec_settings, _codec)
