"""The ``windows`` and ``score`` stages of extraction and census studies: prefix/suffix windows, every score."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import polars as pl

from calib._exceptions import CalibError
from calib.study.extraction.common import base_name, procedure_names, scored_roles, stable_hash
from calib.study.extraction.samples import organism_document
from calib.study.requests import record_requests
from calib.study.runner import RunOptions, Stage, StageContext
from calib.study.sections.extraction import GENERATION_ONLY
from calib.study.spec import ORGANISM_MODEL_PREFIX, StudySpec
from calib.study.tables import (
    SCORES_SCHEMA,
    WINDOWS_SCHEMA,
)
from calib.study.tokenizer_source import token_units, tokenizer_settings, tokenizer_source

__all__ = ["score_window", "scores_stage", "window_starts", "windows_stage"]

_LN10 = math.log(10.0)
_WINDOW_CHUNK = 8  # samples per chunk of the windows stage
_SCORE_CHUNK = 16  # (window, role) items per chunk of the scores stage


# --- windows ------------------------------------------------------------------------------------
def _windows_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    e = spec.extraction
    return {"kind": spec.study.kind, "prefix_tokens": e.prefix_tokens, "suffix_tokens": list(e.suffix_tokens),
            "offset": e.offset, "stride": e.stride if spec.study.kind == "census" else None,
            "tokenizer": spec.servers[spec.models.target] if spec.prompt.tokenizer == "server"
            else tokenizer_settings(spec.prompt, spec.servers, spec.models.target),
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


async def _boundaries(tokenizer: Any, text: str, ids: list[int], cuts: list[int]) -> dict[int, int | None]:
    """Character offset in ``text`` of each token boundary in ``cuts`` (None where a cut splits a character).

    Decodes the pieces between consecutive cuts; where the pieces do not add up to the text exactly (a
    cut inside a multi-byte character), falls back to decoding each whole prefix.
    """
    cuts = sorted(set(cuts))
    pieces = await asyncio.gather(*(tokenizer.detokenize(ids[a:b]) for a, b in zip([0, *cuts[:-1]], cuts)))
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
        head = await tokenizer.detokenize(ids[:cut])
        out[cut] = len(head) if text.startswith(head) else None
    return out


async def _windows(ctx: StageContext) -> pl.DataFrame:
    spec, e = ctx.spec, ctx.spec.extraction
    census = spec.study.kind == "census"
    samples = ctx.table("samples")
    tokenizer, described = await tokenizer_source(spec.prompt, ctx.resources, spec.models.target)
    ctx.resources.facts["window_tokenizer"] = described
    # lengths in the tokenizer's units: tokens, or a character budget's characters
    lp, unit_offset = max(1, token_units(tokenizer, e.prefix_tokens)), token_units(tokenizer, e.offset)
    stride = max(1, token_units(tokenizer, e.stride))
    units = {ls: max(1, token_units(tokenizer, ls)) for ls in e.suffix_tokens}
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
                    source = organism_document(truth, ref)[2]
                pairs_of.setdefault(by_ref[source], []).append(pair.name)
    items = samples.to_dicts()
    what = "characters" if described["source"] == "chars" else "tokens"

    async def one(r: dict[str, Any]) -> list[dict[str, Any]]:
        text = r["function"]
        base = {"sample_id": r["sample_id"], "membership": r["membership"], "kind": r["kind"]}
        ids = await tokenizer.tokenize(text)
        documents = pairs_of.get(r["sample_id"], [None]) if census else [None]
        rows: list[dict[str, Any]] = []
        plan = [(s, ls) for ls in e.suffix_tokens
                for s in window_starts(len(ids), lp, units[ls], census=census, offset=unit_offset, stride=stride)]
        for ls in e.suffix_tokens:  # a suffix length with no window is recorded, with the reason
            if not any(length == ls for _, length in plan):
                error = (f"too short: {len(ids)} {what}, a window needs {0 if census else unit_offset} + "
                         f"{lp} + {units[ls]}")
                rows.extend({**base, "document": d, "prefix_tokens": e.prefix_tokens, "suffix_tokens": ls,
                             "window_id": stable_hash("too short", r["sample_id"], d, e.prefix_tokens, ls),
                             "error": error}
                            for d in documents)
        if not plan:
            return rows
        cuts = [c for s, ls in plan for c in (s, s + lp, s + lp + units[ls])]
        offsets = await _boundaries(tokenizer, text, ids, cuts)
        for s, ls in plan:
            a, b, c = offsets.get(s), offsets.get(s + lp), offsets.get(s + lp + units[ls])
            error = None
            prefix = suffix = None
            if a is None or b is None or c is None:
                error = "a token boundary splits a character"
            else:
                prefix, suffix = text[a:b], text[b:c]
                again = await asyncio.gather(tokenizer.tokenize(prefix), tokenizer.tokenize(suffix))
                if again[0] != ids[s:s + lp] or again[1] != ids[s + lp:s + lp + units[ls]]:
                    error = "the cut does not re-tokenize to the same tokens"
            for d in documents:
                rows.append({**base, "document": d, "prefix_tokens": e.prefix_tokens, "suffix_tokens": ls,
                             "start_token": s, "char_start": b, "char_end": c,
                             "window_id": stable_hash(r["sample_id"], d, e.prefix_tokens, ls, s),
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
    out = {"extraction": e.model_dump(mode="json", exclude={"concurrency", "offset", "stride"}),
           "servers": {role: spec.servers[name] for role, name in scored_roles(spec)}, "seed": spec.study.seed}
    if any(p in GENERATION_ONLY for p in e.procedures):  # the window tokenizer counts their tokens
        out["tokenizer"] = tokenizer_settings(spec.prompt, spec.servers, spec.models.target)
    if spec.generation.route == "chat":  # the completion route's key stays as it was (runs before chat stay done)
        from calib.data.rules import load_rule

        out["route"] = "chat"
        out["rule"] = load_rule(spec.generation.chat_rule).fingerprint()
    return out


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


async def score_window(server: Any, prefix: str, suffix: str, spec: StudySpec, tokenizer: Any = None, *,
                       asker: Any = None, language: str | None = None, top_logprobs: int = 0) -> list[dict[str, Any]]:
    """Every procedure's score of one window by one server: ``procedure, value, log10_value, detail`` rows.

    One teacher-forced scoring pass gives the greedy, top-k and base-policy scores; the near-verbatim
    procedures add one greedy generation of ℓ_s tokens (and a scoring pass of it when it differs from
    the suffix but lies within ε token edits). The generation-only procedures (``greedy_prefix``,
    ``greedy_logprob``, ``sampled``: :mod:`calib.study.extraction.generated`) only generate — through
    ``asker`` (its completion route when None, or chat by a rule), in ``language`` for a rule's messages,
    with ``top_logprobs`` alternatives per output token for ``greedy_logprob`` — and count tokens with
    ``tokenizer`` (the window tokenizer; the server's own when None).
    """
    from calib.study.extraction.asking import Asker
    from calib.study.extraction.generated import generation_scores

    rows: list[dict[str, Any]] = []
    if any(p not in GENERATION_ONLY for p in spec.extraction.procedures):
        rows.extend(await _logprob_scores(server, prefix, suffix, spec))
    if any(p in GENERATION_ONLY for p in spec.extraction.procedures):
        rows.extend(await generation_scores(asker or Asker(server), server if tokenizer is None else tokenizer,
                                            prefix, suffix, spec, language=language, top_logprobs=top_logprobs))
    return rows


async def _logprob_scores(server: Any, prefix: str, suffix: str, spec: StudySpec) -> list[dict[str, Any]]:
    """The rows of the procedures that read teacher-forced log-probs (every one but the generation-only ones)."""
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
            add(base_name(t), scores.log10_base[float(t)], {"temperature": float(t)})
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
    roles = scored_roles(spec)
    models = {}
    for role, name in roles:
        models[role] = (await ctx.resources.probe(name)).get("model") or name
    names = procedure_names(spec)
    tokenizer = None  # the window tokenizer counts the generation-only procedures' tokens
    askers: dict[str, Any] = {}
    if any(p in GENERATION_ONLY for p in spec.extraction.procedures):
        tokenizer, described = await tokenizer_source(spec.prompt, ctx.resources, spec.models.target)
        ctx.resources.facts["window_tokenizer"] = described
        askers = _askers(ctx, roles)
    top = {role: _top_logprobs(spec, ctx.resources.capabilities.get(name) or {}) for role, name in roles}
    languages = dict(ctx.table("samples").select("sample_id", "language").iter_rows())
    default_language = "python" if spec.data.source == "organism" else "text"
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
            got = await score_window(server, item["prefix"], item["suffix"], spec, tokenizer,
                                     asker=askers.get(item["role"]), top_logprobs=top[item["role"]],
                                     language=languages.get(item["sample_id"]) or default_language)
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
        record_requests(ctx, name)
    return frame


def _askers(ctx: StageContext, roles: list[tuple[str, str]]) -> dict[str, Any]:
    """Each role's :class:`~calib.study.extraction.asking.Asker`: its completion route, or chat by the spec's rule."""
    from calib.study.extraction.asking import Asker

    spec = ctx.spec
    rule = None
    if spec.generation.route == "chat":
        from calib.data.rules import load_rule

        rule = load_rule(spec.generation.chat_rule)
        if "greedy_logprob" in spec.extraction.procedures and rule.reply != "raw":
            raise CalibError(f"generation.rule: greedy_logprob through chat reads the reply's own tokens, so it needs "
                             f"a rule whose reply is 'raw' (the rule {rule.name!r} reads a {rule.reply})")
    ctx.resources.facts["generation"] = {"route": spec.generation.route,
                                         "rule": None if rule is None else rule.record()}

    def lowered(role: str) -> Any:
        return lambda asked, budget: ctx.event("budget_lowered", role=role, asked=asked, budget=budget)

    return {role: Asker(ctx.resources.server(name), rule=rule, on_lowered=lowered(role)) for role, name in roles}


def _top_logprobs(spec: StudySpec, caps: dict[str, Any]) -> int:
    """Alternatives per output token that ``greedy_logprob`` asks: what the route returns, at most 20 (0 unused)."""
    if "greedy_logprob" not in spec.extraction.procedures:
        return 0
    key = "chat_max_top_logprobs" if spec.generation.route == "chat" else "max_top_logprobs"
    return max(0, min(20, int(caps.get(key) or 0)))


windows_stage = Stage("windows", ("samples",), "windows", "1", _windows_settings, _windows)
scores_stage = Stage("score", ("windows",), "scores", "1", _scores_settings, _scores)
