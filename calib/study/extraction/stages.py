"""The ``extraction`` and ``census`` study kinds: matched-control conformal tests and single-document census.

The second method of DESIGN.md ("The three methods" 2; Cooper et al., "Extractable Memorization From
First Principles"): a generation counts as evidence of memorization only when its score beats a
threshold calibrated on matched non-members scored by exactly the same procedure.

``extraction`` (populations): samples → windows → scores → operating_points → extraction_claims →
budgets → paired → report. Every member and control is cut, with the target server's tokenizer, into
a prefix of ℓ_p tokens (at a token offset) and suffixes of ℓ_s tokens; every model scores each window
by teacher forcing (one scoring pass gives greedy, top-k and base-policy scores) and, for the
near-verbatim procedures, by one greedy generation of ℓ_s tokens. The conformal test then runs at a
grid of target levels per (model, procedure, suffix length).

``census`` (single documents): samples → windows → scores → census → report. Every window of a
candidate document and of its matched control document is scored; the threshold is the largest
(decontaminated) control-window score rounded up to a power of ten, and the census is the share of the
document's characters covered by windows above it.

Stages meet only through the run directory's tables (:mod:`calib.study.tables`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from calib._exceptions import CalibError, InputError
from calib.study.functional import (
    ROLES,
    Resources,
    _corpus_samples,
    _limit,
    _organism_samples,
    _record_requests,
    corpus_documents,
)
from calib.study.runner import RunOptions, Stage, StageContext
from calib.study.spec import ORGANISM_MODEL_PREFIX, PROBABILISTIC, StudySpec
from calib.study.tables import (
    BUDGETS_SCHEMA,
    CENSUS_SCHEMA,
    EXTRACTION_CLAIMS_SCHEMA,
    OPERATING_POINTS_SCHEMA,
    PAIRED_SCHEMA,
    SAMPLES_SCHEMA,
    SCORES_SCHEMA,
    WINDOWS_SCHEMA,
)

__all__ = ["CENSUS_STAGES", "EXTRACTION_STAGES", "Resources", "budget_grid", "procedure_names"]

_LN10 = math.log(10.0)
# Conformal calibration needs finite scores; a zero probability (log10 = -inf) sorts below every real
# log10 probability (> -400 for any double, > -1e5 for any sequence a server can score) as this does.
_ZERO = -1e300
_WINDOW_CHUNK = 8  # samples per chunk of the windows stage
_SCORE_CHUNK = 16  # (window, role) items per chunk of the scores stage


def _roles(spec: StudySpec) -> list[tuple[str, str]]:
    """(role, server name) of the models the study scores: the target, and the reference when set."""
    return [(role, name) for role in ROLES if (name := getattr(spec.models, role)) is not None]


def procedure_names(spec: StudySpec) -> list[str]:
    """The procedure of every score row: ``base`` expands to ``base`` (T = 1) and ``base_t<T>`` per temperature."""
    out = []
    for procedure in spec.extraction.procedures:
        if procedure == "base":
            out.extend(_base_name(t) for t in spec.extraction.temperatures)
        else:
            out.append(procedure)
    return out


def _base_name(temperature: float) -> str:
    return "base" if float(temperature) == 1.0 else f"base_t{float(temperature):g}"


def _probabilistic(procedure: str) -> bool:
    return procedure in PROBABILISTIC or procedure.startswith("base_t")


def _hash(*parts: Any) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


# --- samples ------------------------------------------------------------------------------------
def _samples_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    limit = options.limit if options.limit is not None else spec.data.limit
    return {"kind": spec.study.kind, "data": spec.data.model_dump(mode="json"),
            "organism": spec.organism and spec.organism.model_dump(mode="json"),
            "census": spec.census and spec.census.model_dump(mode="json"), "seed": spec.study.seed, "limit": limit}


def _sample_row(sid: str, text: str, membership: str, kind: str | None, source: str) -> dict[str, Any]:
    return {"sample_id": sid, "language": None, "membership": membership, "kind": kind, "source": source,
            "context": "", "signature": "", "body": text, "function": text, "prompt": None,
            "prompt_context_tokens": None}


def _extra_controls(ctx: StageContext, truth_sources: set[str]) -> list[dict[str, Any]]:
    """``[organism] extra_controls`` never-trained stdlib functions from the organism's control pool."""
    from calib.organism.corpus import load_stdlib_functions, split_corpus

    org = ctx.spec.organism
    split = split_corpus(load_stdlib_functions(), seed=org.seed)
    pool = [f for f in split.control_pool + split.member_pool
            if f"stdlib:{f.path}::{f.qualname}" not in truth_sources]
    # member-pool functions not planted were never trained on either (the target saw only planted items)
    rng = np.random.default_rng([org.seed, 7])
    chosen = sorted(rng.permutation(len(pool))[:org.extra_controls].tolist())
    rows = []
    for i in chosen:
        f = pool[i]
        source = f"stdlib:{f.path}::{f.qualname}"
        rows.append(_sample_row(_hash("extra-control", source, f.source), f.source, "control", "extra_control", source))
    return rows


async def _extraction_samples(ctx: StageContext) -> pl.DataFrame:
    spec, data = ctx.spec, ctx.spec.data
    limit = ctx.options.limit if ctx.options.limit is not None else data.limit
    if data.source == "organism":
        frame = _organism_samples(ctx)
        if spec.organism.extra_controls:
            truth = pl.read_parquet(ctx.resources.organism().truth)
            extra = await asyncio.to_thread(_extra_controls, ctx, set(truth["source"]))
            frame = pl.concat([frame, pl.DataFrame(extra, schema=SAMPLES_SCHEMA)])
    elif data.unit == "document":
        frame = await asyncio.to_thread(_document_samples, ctx)
    else:
        frame = await asyncio.to_thread(_corpus_samples, ctx)
    functions = frame.height
    frame = _limit(frame, limit, spec.study.seed)
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
    from calib.study._corpus_caps import count_dropped

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
        rows.append(_sample_row(_hash("document", doc.source, doc.text), doc.text, membership,
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
                text, kind, source, truth_membership = _organism_document(truth, ref)
                if truth_membership != membership and membership == "control" and truth_membership == "member":
                    raise InputError(f"census.pairs {pair.name!r}: control = {ref!r} is a member of the target's "
                                     "training data; a control must be a non-member")
            else:
                try:
                    text = Path(ref).read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    raise InputError(f"census.pairs {pair.name!r}: cannot read {side} {ref!r}: {exc}") from None
                kind, source = None, ref
            sid = _hash("census", source, text)
            row = rows.get(sid) or _sample_row(sid, text, membership, kind, source)
            if row["membership"] != membership:
                raise InputError(f"census.pairs {pair.name!r}: {ref!r} is both a candidate document and a control")
            rows[sid] = row
    return pl.DataFrame(list(rows.values()), schema=SAMPLES_SCHEMA)


def _organism_document(truth: pl.DataFrame, ref: str) -> tuple[str, str, str, str]:
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


# --- windows ------------------------------------------------------------------------------------
def _windows_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    e = spec.extraction
    return {"kind": spec.study.kind, "prefix_tokens": e.prefix_tokens, "suffix_tokens": list(e.suffix_tokens),
            "offset": e.offset, "stride": e.stride if spec.study.kind == "census" else None,
            "tokenizer": spec.servers[spec.models.target],
            "pairs": spec.census and [p.model_dump(mode="json") for p in spec.census.pairs]}


def window_starts(n_tokens: int, prefix: int, suffix: int, *, census: bool, offset: int = 0,
                  stride: int = 1) -> list[int]:
    """Token offsets of the windows of a text of ``n_tokens`` tokens.

    A population sample has one window, at ``offset`` (the natural prefix); a census document has one
    every ``stride`` tokens, from its first token to the last full window.
    """
    last = n_tokens - prefix - suffix
    if last < 0:
        return []
    if census:
        return list(range(0, last + 1, stride))
    return [offset] if offset <= last else []


async def _boundaries(server: Any, text: str, ids: list[int], cuts: list[int]) -> dict[int, int | None]:
    """Character offset in ``text`` of each token boundary in ``cuts`` (None where a cut splits a character).

    Decodes the pieces between consecutive cuts; where the pieces do not add up to the text exactly (a
    cut inside a multi-byte character), falls back to decoding each whole prefix.
    """
    cuts = sorted(set(cuts))
    pieces = await asyncio.gather(*(server.detokenize(ids[a:b]) for a, b in zip([0, *cuts[:-1]], cuts)))
    out: dict[int, int | None] = {}
    position = 0
    for cut, piece in zip(cuts, pieces):
        if text.startswith(piece, position):
            position += len(piece)
            out[cut] = position
            continue
        break
    else:
        return out
    for cut in cuts:
        if cut in out:
            continue
        head = await server.detokenize(ids[:cut])
        out[cut] = len(head) if text.startswith(head) else None
    return out


async def _windows(ctx: StageContext) -> pl.DataFrame:
    spec, e = ctx.spec, ctx.spec.extraction
    census = spec.study.kind == "census"
    samples = ctx.table("samples")
    name = spec.models.target
    server = ctx.resources.server(name)
    await ctx.resources.probe(name)
    pairs_of: dict[str, list[str | None]] = {}
    if census:
        by_ref = {}
        for r in samples.iter_rows(named=True):
            by_ref[r["source"]] = r["sample_id"]
        truth = None
        for pair in spec.census.pairs:
            for ref in (pair.document, *pair.control):
                source = ref
                if ref.startswith(ORGANISM_MODEL_PREFIX):
                    if truth is None:
                        truth = pl.read_parquet(ctx.resources.organism().truth)
                    source = _organism_document(truth, ref)[2]
                pairs_of.setdefault(by_ref[source], []).append(pair.name)
    items = samples.to_dicts()

    async def one(r: dict[str, Any]) -> list[dict[str, Any]]:
        text = r["function"]
        base = {"sample_id": r["sample_id"], "membership": r["membership"], "kind": r["kind"]}
        ids = await server.tokenize(text)
        documents = pairs_of.get(r["sample_id"], [None]) if census else [None]
        rows: list[dict[str, Any]] = []
        plan = [(s, ls) for ls in e.suffix_tokens
                for s in window_starts(len(ids), e.prefix_tokens, ls, census=census, offset=e.offset,
                                       stride=e.stride)]
        for ls in e.suffix_tokens:  # a suffix length with no window is recorded, with the reason
            if not any(length == ls for _, length in plan):
                error = (f"too short: {len(ids)} tokens, a window needs {0 if census else e.offset} + "
                         f"{e.prefix_tokens} + {ls}")
                rows.extend({**base, "document": d, "prefix_tokens": e.prefix_tokens, "suffix_tokens": ls,
                             "window_id": _hash("too short", r["sample_id"], d, e.prefix_tokens, ls), "error": error}
                            for d in documents)
        if not plan:
            return rows
        cuts = [c for s, ls in plan for c in (s, s + e.prefix_tokens, s + e.prefix_tokens + ls)]
        offsets = await _boundaries(server, text, ids, cuts)
        for s, ls in plan:
            a, b, c = offsets.get(s), offsets.get(s + e.prefix_tokens), offsets.get(s + e.prefix_tokens + ls)
            error = None
            prefix = suffix = None
            if a is None or b is None or c is None:
                error = "a token boundary splits a character"
            else:
                prefix, suffix = text[a:b], text[b:c]
                again = await asyncio.gather(server.tokenize(prefix), server.tokenize(suffix))
                if (again[0] != ids[s:s + e.prefix_tokens] or again[1] != ids[s + e.prefix_tokens:
                                                                               s + e.prefix_tokens + ls]):
                    error = "the cut does not re-tokenize to the same tokens"
            for d in documents:
                rows.append({**base, "document": d, "prefix_tokens": e.prefix_tokens, "suffix_tokens": ls,
                             "start_token": s, "char_start": b, "char_end": c,
                             "window_id": _hash(r["sample_id"], d, e.prefix_tokens, ls, s),
                             "prefix": prefix if error is None else None, "suffix": suffix if error is None else None,
                             "error": error})
        return rows

    async def work(chunk: list[dict[str, Any]]) -> pl.DataFrame:
        done = await asyncio.gather(*(one(r) for r in chunk))
        return pl.DataFrame([row for rows in done for row in rows], schema=WINDOWS_SCHEMA)

    frame = await ctx.chunked(items, _WINDOW_CHUNK, work, WINDOWS_SCHEMA, label="windows",
                              concurrency=e.concurrency)
    errors = frame.filter(pl.col("error").is_not_null())
    for reason, n in errors.group_by("error").len().iter_rows():
        ctx.event("windows_skipped", reason=reason, rows=n)
    if frame.filter(pl.col("error").is_null()).height == 0:
        raise CalibError("no sample is long enough for a window of extraction.prefix_tokens + suffix_tokens "
                         f"({e.prefix_tokens} + {min(e.suffix_tokens)}) tokens; shorten them or use longer texts")
    return frame


# --- scores -------------------------------------------------------------------------------------
def _scores_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    e = spec.extraction
    return {"extraction": e.model_dump(mode="json", exclude={"concurrency", "offset", "stride"}),
            "servers": {role: spec.servers[name] for role, name in _roles(spec)}, "seed": spec.study.seed}


def _log10_sum(a: float, b: float) -> float:
    """log10(10^a + 10^b) without overflow or underflow."""
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    hi, lo = max(a, b), min(a, b)
    return hi + math.log1p(10.0 ** (lo - hi)) / _LN10


def _value(log10: float) -> float:
    return 0.0 if log10 == -math.inf else 10.0 ** log10


async def score_window(server: Any, prefix: str, suffix: str, spec: StudySpec) -> list[dict[str, Any]]:
    """Every procedure's score of one window by one server: ``procedure, value, log10_value, detail`` rows.

    One teacher-forced scoring pass gives the greedy, top-k and base-policy scores; the near-verbatim
    procedures add one greedy generation of ℓ_s tokens (and a scoring pass of it when it differs from
    the suffix but lies within ε token edits).
    """
    from rapidfuzz.distance import Levenshtein

    from calib.servers import SamplingParams
    from calib.servers.scoring import extraction_scores

    e = spec.extraction
    procedures = e.procedures
    top = e.top_k if "top_k" in procedures else 1
    others = [t for t in e.temperatures if float(t) != 1.0] if "base" in procedures else []
    scored = await server.score(prefix, suffix, top_logprobs=top, temperatures=others)
    temperatures = [1.0, *others]
    scores = extraction_scores(scored, top_k=top, temperatures=temperatures)
    n = scores.n_tokens
    rows: list[dict[str, Any]] = []

    def add(procedure: str, log10: float, detail: dict[str, Any] | None = None) -> None:
        rows.append({"procedure": procedure, "value": _value(log10), "log10_value": log10,
                     "detail": json.dumps({"n_tokens": n, **(detail or {})}, sort_keys=True)})

    if "greedy" in procedures:
        add("greedy", 0.0 if scores.greedy_match else -math.inf)
    if "top_k" in procedures:
        add("top_k", scores.log10_top_k, {"k": e.top_k})
    if "base" in procedures:
        for t in e.temperatures:
            add(_base_name(t), scores.log10_base[float(t)], {"temperature": float(t)})
    if "near_verbatim_greedy" in procedures or "near_verbatim" in procedures:
        (completion,), = await server.complete([prefix], SamplingParams(max_tokens=n, temperature=0.0,
                                                                         seed=spec.study.seed))
        generated = (await server.tokenize(completion.text))[:n]
        target = list(scored.continuation_token_ids)
        distance = Levenshtein.distance(generated, target)
        within = distance <= e.epsilon
        detail = {"distance": distance, "epsilon": e.epsilon, "generation": completion.text}
        if "near_verbatim_greedy" in procedures:
            add("near_verbatim_greedy", 0.0 if within else -math.inf, detail)
        if "near_verbatim" in procedures:
            mass = scores.log10_base[1.0]
            if within and generated != target and generated:
                text = await server.detokenize(generated)
                other = await server.score(prefix, text, top_logprobs=1)
                mass = _log10_sum(mass, math.fsum(t.logprob for t in other.tokens) / _LN10)
            add("near_verbatim", mass, detail)
    return rows


async def _scores(ctx: StageContext) -> pl.DataFrame:
    from calib.servers import RequestFailed

    spec = ctx.spec
    windows = ctx.table("windows").filter(pl.col("error").is_null())
    roles = _roles(spec)
    models = {}
    for role, name in roles:
        models[role] = (await ctx.resources.probe(name)).get("model") or name
    names = procedure_names(spec)
    # A cut shared by several windows (a control document of several census pairs) is scored once.
    cuts = windows.group_by(["sample_id", "prefix_tokens", "suffix_tokens", "start_token"], maintain_order=True).agg(
        pl.col("window_id"), pl.col("prefix").first(), pl.col("suffix").first())
    base = cuts.select("window_id", "sample_id", "suffix_tokens", "prefix", "suffix").to_dicts()
    items = [{**w, "role": role} for w in base for role, _ in roles]
    server_of = dict(roles)

    async def one(item: dict[str, Any]) -> list[dict[str, Any]]:
        head = {"sample_id": item["sample_id"], "role": item["role"], "model": models[item["role"]],
                "suffix_tokens": item["suffix_tokens"]}
        server = ctx.resources.server(server_of[item["role"]])
        try:
            got = await score_window(server, item["prefix"], item["suffix"], spec)
            rows = [{**head, **row, "error": None} for row in got]
        except (RequestFailed, CalibError, ValueError) as exc:  # one bad window is recorded, never fatal
            why = exc.error if hasattr(exc, "error") else " ".join(str(exc).split())
            ctx.event("sample_error", window_id=item["window_id"][0], role=item["role"], error=why[:300])
            rows = [{**head, "procedure": p, "value": None, "log10_value": None, "detail": None,
                     "error": f"unscored: {why}"[:500]} for p in names]
        return [{**row, "window_id": wid} for wid in item["window_id"] for row in rows]

    async def work(chunk: list[dict[str, Any]]) -> pl.DataFrame:
        done = await asyncio.gather(*(one(item) for item in chunk))
        return pl.DataFrame([row for rows in done for row in rows], schema=SCORES_SCHEMA)

    frame = await ctx.chunked(items, _SCORE_CHUNK, work, SCORES_SCHEMA, label="score",
                              concurrency=spec.extraction.concurrency)
    for _, name in roles:
        _record_requests(ctx, name)
    return frame


# --- analysis helpers ---------------------------------------------------------------------------
def _finite(log10: Sequence[float]) -> np.ndarray:
    arr = np.asarray(log10, dtype=float)
    return np.where(np.isneginf(arr), _ZERO, arr)


def _unfinite(value: float | None) -> float | None:
    if value is None:
        return None
    return -math.inf if value <= _ZERO / 2 else float(value)


def _alphas(spec: StudySpec) -> list[float]:
    from calib.stats import parse_alpha

    levels = {parse_alpha(a) for a in spec.analyze.alphas} | {parse_alpha(spec.analyze.alpha)}
    return sorted(levels)


def _groups(ctx: StageContext) -> list[dict[str, Any]]:
    """Scored windows grouped by (role, procedure, suffix length), members and controls apart."""
    windows = ctx.table("windows").filter(pl.col("error").is_null()).select("window_id", "membership", "kind")
    scores = ctx.table("scores").filter(pl.col("log10_value").is_not_null())
    joined = scores.join(windows, on="window_id", how="inner")
    drop = set(ctx.spec.analyze.decontaminate)
    joined = joined.with_columns(
        (pl.col("sample_id").is_in(list(drop)) | pl.col("window_id").is_in(list(drop))).alias("contaminated"))
    out = []
    for (role, procedure, suffix), part in joined.sort("window_id").group_by(
            ["role", "procedure", "suffix_tokens"], maintain_order=True):
        members = part.filter(pl.col("membership") == "member")
        controls = part.filter(pl.col("membership") == "control")
        out.append({"role": role, "procedure": procedure, "suffix_tokens": suffix, "model": part["model"][0],
                    "members": members, "controls": controls})
    out.sort(key=lambda g: (ROLES.index(g["role"]) if g["role"] in ROLES else 9, g["procedure"], g["suffix_tokens"]))
    return out


def _pools(spec: StudySpec, controls: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    pools = [("all", controls)]
    if spec.analyze.decontaminate:
        pools.append(("decontaminated", controls.filter(~pl.col("contaminated"))))
    return pools


def _primary_pool(spec: StudySpec, controls: pl.DataFrame) -> pl.DataFrame:
    return _pools(spec, controls)[-1][1]


# --- operating points ---------------------------------------------------------------------------
def _analysis_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    return {"analyze": spec.analyze.model_dump(mode="json", include={
        "alpha", "alphas", "confidence", "fdr", "fwer", "budgets", "budget_confidence", "decontaminate"})}


async def _operating_points(ctx: StageContext) -> pl.DataFrame:
    from calib.stats import alpha_dagger, sweep

    spec = ctx.spec
    frames = []
    for g in _groups(ctx):
        members = _finite(g["members"]["log10_value"].to_list())
        for pool, controls in _pools(spec, g["controls"]):
            if controls.height == 0 or members.size == 0:
                ctx.event("operating_point_skipped", role=g["role"], procedure=g["procedure"], pool=pool,
                          reason=f"{controls.height} controls, {members.size} members scored")
                continue
            values = _finite(controls["log10_value"].to_list())
            table = sweep(values, _alphas(spec), members=members, confidence=spec.analyze.confidence)
            table = table.with_columns(
                pl.col("threshold").map_elements(_unfinite, return_dtype=pl.Float64).alias("log10_threshold"),
                pl.lit(g["role"]).alias("role"), pl.lit(g["model"]).alias("model"),
                pl.lit(g["procedure"]).alias("procedure"), pl.lit(g["suffix_tokens"]).alias("suffix_tokens"),
                pl.lit(pool).alias("pool"), pl.lit(values.size).alias("n_controls"),
                pl.lit(alpha_dagger(values)).alias("alpha_dagger"))
            frames.append(table.select(list(OPERATING_POINTS_SCHEMA)).cast(OPERATING_POINTS_SCHEMA))
    if not frames:
        raise CalibError("no (model, procedure, suffix length) has both member and control scores; see the "
                         "scores table's error column and events.jsonl")
    return pl.concat(frames)


# --- per-window claims --------------------------------------------------------------------------
async def _claims(ctx: StageContext) -> pl.DataFrame:
    from calib.stats import benjamini_hochberg, calibrate, p_values

    spec, a = ctx.spec, ctx.spec.analyze
    frames = []
    for g in _groups(ctx):
        pool = _primary_pool(spec, g["controls"])
        if pool.height == 0 or g["members"].height == 0:
            continue
        controls = _finite(pool["log10_value"].to_list())
        cal = calibrate(controls, a.alpha)
        probabilistic = _probabilistic(g["procedure"])
        parts = []
        for side in (g["members"], g["controls"]):
            if side.height == 0:
                continue
            scores = _finite(side["log10_value"].to_list())
            if side is g["members"]:
                p = p_values(controls, scores)
            else:  # a control against the other controls of the pool (itself left out when it is in the pool)
                in_pool = ~side["contaminated"].to_numpy()
                ordered = np.sort(controls)
                at_least = controls.size - np.searchsorted(ordered, scores, side="left")
                n = controls.size - in_pool.astype(int)
                p = (1.0 + at_least - in_pool.astype(int)) / (n + 1.0)
            claim = cal.claims(scores) if cal.threshold is not None else None
            margin = None
            if cal.threshold is not None and probabilistic and cal.threshold > _ZERO / 2:
                margin = [None if s <= _ZERO / 2 else float(s - cal.threshold) for s in scores]
            parts.append(side.select("window_id", "sample_id", "membership", "kind", "role", "procedure",
                                     "suffix_tokens", "log10_value", "contaminated").with_columns(
                pl.Series("p_value", p, dtype=pl.Float64),
                pl.Series("margin", margin if margin is not None else [None] * side.height, dtype=pl.Float64),
                pl.Series("claim", claim.tolist() if claim is not None else [None] * side.height,
                          dtype=pl.Boolean)))
        frame = pl.concat(parts)
        members = frame.filter(pl.col("membership") == "member")
        bh = benjamini_hochberg(members["p_value"].to_numpy(), a.fdr)
        m = members.height
        frame = frame.join(members.select("window_id", pl.Series("bh", bh.rejected.tolist(), dtype=pl.Boolean),
                                          (pl.col("p_value") <= a.fwer / m).alias("bonferroni")),
                           on="window_id", how="left")
        frames.append(frame.select(list(EXTRACTION_CLAIMS_SCHEMA)).cast(EXTRACTION_CLAIMS_SCHEMA))
    return pl.concat(frames) if frames else pl.DataFrame(schema=EXTRACTION_CLAIMS_SCHEMA)


# --- budgets ------------------------------------------------------------------------------------
def budget_grid(budgets: Sequence[float]) -> list[float]:
    """Query budgets of the budgets table: powers of ten from 1 to 10^12 plus the spec's budgets."""
    return sorted({float(10 ** i) for i in range(13)} | {float(b) for b in budgets})


async def _budgets(ctx: StageContext) -> pl.DataFrame:
    from calib.stats import log10_min_probability_within

    a = ctx.spec.analyze
    claims = ctx.table("extraction_claims")
    rows = []
    for g in _groups(ctx):
        if not _probabilistic(g["procedure"]):
            continue
        members = g["members"]
        controls = _primary_pool(ctx.spec, g["controls"])
        mine = claims.filter((pl.col("role") == g["role"]) & (pl.col("procedure") == g["procedure"])
                             & (pl.col("suffix_tokens") == g["suffix_tokens"]) & (pl.col("membership") == "member"))
        claimed = mine.filter(pl.col("claim").fill_null(False))["window_id"].to_list()
        for budget in budget_grid(a.budgets):
            floor = log10_min_probability_within(budget, a.budget_confidence)
            gen_members = members.filter(pl.col("log10_value") >= floor)
            gen_controls = int((controls["log10_value"] >= floor).sum())
            extractable = int(gen_members["window_id"].is_in(claimed).sum())
            n_m, n_c = members.height, controls.height
            rows.append({"role": g["role"], "procedure": g["procedure"], "suffix_tokens": g["suffix_tokens"],
                         "budget": budget, "confidence": a.budget_confidence, "log10_min_probability": floor,
                         "n_members": n_m, "members_generated": gen_members.height, "n_controls": n_c,
                         "controls_generated": gen_controls, "members_extractable": extractable,
                         "member_rate": gen_members.height / n_m if n_m else None,
                         "control_rate": gen_controls / n_c if n_c else None,
                         "extractable_rate": extractable / n_m if n_m else None})
    return pl.DataFrame(rows, schema=BUDGETS_SCHEMA)


# --- paired comparison --------------------------------------------------------------------------
async def _paired(ctx: StageContext) -> pl.DataFrame:
    from calib.stats import calibrate, paired_difference

    spec = ctx.spec
    rows: list[dict[str, Any]] = []
    if spec.models.reference is None:
        return pl.DataFrame(rows, schema=PAIRED_SCHEMA)
    groups = {(g["role"], g["procedure"], g["suffix_tokens"]): g for g in _groups(ctx)}
    for (role, procedure, suffix), target in groups.items():
        reference = groups.get(("reference", procedure, suffix))
        if role != "target" or reference is None:
            continue
        t_members = target["members"].select("sample_id", "window_id", "log10_value")
        r_members = reference["members"].select("window_id", pl.col("log10_value").alias("ref"))
        both = t_members.join(r_members, on="window_id", how="inner")
        if both.height == 0:
            continue
        t_pool = _finite(_primary_pool(spec, target["controls"])["log10_value"].to_list())
        r_pool = _finite(_primary_pool(spec, reference["controls"])["log10_value"].to_list())
        if t_pool.size == 0 or r_pool.size == 0:
            continue
        t_scores, r_scores = _finite(both["log10_value"].to_list()), _finite(both["ref"].to_list())
        for alpha in _alphas(spec):
            t_cal, r_cal = calibrate(t_pool, alpha), calibrate(r_pool, alpha)
            if t_cal.threshold is None or r_cal.threshold is None:
                continue
            t_claim, r_claim = t_cal.claims(t_scores), r_cal.claims(r_scores)
            n11 = int(np.count_nonzero(t_claim & r_claim))
            n10 = int(np.count_nonzero(t_claim & ~r_claim))
            n01 = int(np.count_nonzero(~t_claim & r_claim))
            n00 = int(both.height - n11 - n10 - n01)
            diff = paired_difference(n11, n10, n01, n00, spec.analyze.confidence)
            rows.append({"procedure": procedure, "suffix_tokens": suffix, "alpha": alpha,
                         "certified_alpha_target": t_cal.certified_alpha,
                         "certified_alpha_reference": r_cal.certified_alpha, "n": both.height, "both": n11,
                         "target_only": n10, "reference_only": n01, "neither": n00, "difference": diff.estimate,
                         "low": diff.low, "high": diff.high})
    return pl.DataFrame(rows, schema=PAIRED_SCHEMA)


# --- census -------------------------------------------------------------------------------------
async def _census(ctx: StageContext) -> pl.DataFrame:
    from calib.stats import census, census_threshold

    spec, a = ctx.spec, ctx.spec.analyze
    samples = ctx.table("samples")
    lengths = {sid: len(text) for sid, text in samples.select("sample_id", "function").iter_rows()}
    windows = ctx.table("windows").filter(pl.col("error").is_null())
    scores = ctx.table("scores").filter(pl.col("log10_value").is_not_null()).join(
        windows.select("window_id", "membership", "document", "char_start", "char_end"), on="window_id")
    drop = set(a.decontaminate)
    budget = a.budgets[0] if a.budgets else None
    rows = []
    for pair in spec.census.pairs:
        for role, _ in _roles(spec):
            for procedure in procedure_names(spec):
                part = scores.filter((pl.col("document") == pair.name) & (pl.col("role") == role)
                                     & (pl.col("procedure") == procedure))
                doc = part.filter(pl.col("membership") == "candidate")
                ctrl = part.filter(pl.col("membership") == "control")
                removed = ctrl.filter(pl.col("window_id").is_in(list(drop)) | pl.col("sample_id").is_in(list(drop)))
                ctrl = ctrl.filter(~pl.col("window_id").is_in(list(drop)) & ~pl.col("sample_id").is_in(list(drop)))
                row: dict[str, Any] = {"document": pair.name, "role": role, "procedure": procedure,
                                       "suffix_tokens": spec.extraction.suffix_tokens[0],
                                       "n_windows": doc.height, "n_control_windows": ctrl.height,
                                       "removed_control_windows": removed.height}
                positive = ctrl.filter(pl.col("log10_value") > -math.inf)
                if doc.height == 0 or positive.height == 0:
                    row["error"] = ("the document has no scored window" if doc.height == 0 else
                                    "no control window has a positive score: the threshold is undefined")
                    rows.append(row)
                    continue
                threshold = census_threshold(positive["log10_value"].to_numpy(), log10=True)
                live = doc.filter(pl.col("log10_value") > -math.inf)
                sid = doc["sample_id"][0]
                result = census(live["char_start"].to_numpy(), live["char_end"].to_numpy(),
                                live["log10_value"].to_numpy(), threshold, log10=True,
                                document_length=lengths[sid], budget=int(budget) if budget else None,
                                budget_confidence=a.budget_confidence)
                row.update({"document_length": result.document_length,
                            "log10_threshold": result.log10_threshold,
                            "max_control_score_log10": result.max_control_score_log10,
                            "windows_above": result.windows_above, "covered_characters": result.covered_characters,
                            "coverage": result.coverage, "max_margin": result.max_margin,
                            "budget": None if result.budget is None else float(result.budget),
                            "budget_confidence": result.budget_confidence,
                            "min_log10_score_within_budget": result.min_log10_score_within_budget,
                            "windows_within_budget": result.windows_within_budget,
                            "coverage_within_budget": result.coverage_within_budget, "error": None})
                rows.append(row)
    return pl.DataFrame(rows, schema=CENSUS_SCHEMA)


# --- report -------------------------------------------------------------------------------------
def _report_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    return {"analyze": spec.analyze.model_dump(mode="json"), "report": spec.report.model_dump(mode="json"),
            "study": spec.study.model_dump(mode="json"), "extraction": spec.extraction.model_dump(mode="json")}


async def _report(ctx: StageContext) -> None:
    from calib.report import write_report
    from calib.study.rundir import now_iso

    ctx.save_manifest(finished_at=now_iso())
    await asyncio.to_thread(write_report, ctx.run.root)
    return None


_SAMPLES = Stage("samples", (), "samples", "1", _samples_settings, _extraction_samples)
_WINDOWS = Stage("windows", ("samples",), "windows", "1", _windows_settings, _windows)
_SCORES = Stage("score", ("windows",), "scores", "1", _scores_settings, _scores)
_GROUPED = ("windows", "scores")

EXTRACTION_STAGES: tuple[Stage, ...] = (
    _SAMPLES,
    _WINDOWS,
    _SCORES,
    Stage("calibrate", _GROUPED, "operating_points", "1", _analysis_settings, _operating_points),
    Stage("claims", _GROUPED, "extraction_claims", "1", _analysis_settings, _claims),
    Stage("budgets", (*_GROUPED, "extraction_claims"), "budgets", "1", _analysis_settings, _budgets),
    Stage("paired", _GROUPED, "paired", "1", _analysis_settings, _paired),
    Stage("report", ("samples", "windows", "scores", "operating_points", "extraction_claims", "budgets", "paired"),
          None, "1", _report_settings, _report, done=lambda run: (run.report / "report.html").is_file()),
)

CENSUS_STAGES: tuple[Stage, ...] = (
    Stage("samples", (), "samples", "1", _samples_settings, _census_samples),
    _WINDOWS,
    _SCORES,
    Stage("census", ("samples", "windows", "scores"), "census", "1", _analysis_settings, _census),
    Stage("report", ("samples", "windows", "scores", "census"), None, "1", _report_settings, _report,
          done=lambda run: (run.report / "report.html").is_file()),
)
