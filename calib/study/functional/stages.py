"""The ``functional`` study kind: extract → prompt → generate → execute → measure → analyze → report.

The functional-memorization method (docs/architecture.md "The three methods" 1; the paper's §3): functions x from
a model's training data are completed from their signature (plus up to P context tokens) by a target
model (trained on x) and a reference model (not trained on x), greedily; x and both completions are
executed on the same input states and compared textually and structurally; each sample gets a verdict
(textually memorized, functionally memorized, neither, inconclusive). Stages meet only through the
run directory's tables (:mod:`calib.study.tables`).

This module holds extract, prompt, generate and report; :mod:`calib.study.functional.execute`,
:mod:`calib.study.functional.measure` (measure, analyze) and :mod:`calib.study.functional.dedup` the rest.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from calib._exceptions import CalibError
from calib.study.budgets import ask_chat, budget_after_refusal, completion_budgets
from calib.study.functional.dedup import dedup_stage
from calib.study.functional.execute import execute_stage
from calib.study.functional.judge import JUDGE_STAGE, judged_functions
from calib.study.functional.measure import analyze_stage, measure_stage
from calib.study.report_stage import report_done, write_report_stage
from calib.study.requests import record_requests, request_failure
from calib.study.resources import ROLES
from calib.study.runner import RunOptions, Stage, StageContext
from calib.study.sampling import corpus_samples, limit_rows, organism_samples
from calib.study.spec import StudySpec
from calib.study.tables import GENERATIONS_SCHEMA, SAMPLES_SCHEMA

__all__ = ["DEDUP_STAGE", "ROLES", "STAGES", "functional_stages"]

_GENERATE_CHUNK = 8  # (sample, role) items: 4 samples, both roles


# --- extract ------------------------------------------------------------------------------------
def _extract_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    limit = options.limit if options.limit is not None else spec.data.limit
    return {"data": spec.data.model_dump(mode="json"), "organism": spec.organism and spec.organism.model_dump(
        mode="json"), "seed": spec.study.seed, "limit": limit}


async def _extract(ctx: StageContext) -> pl.DataFrame:
    spec, data = ctx.spec, ctx.spec.data
    limit = ctx.options.limit if ctx.options.limit is not None else data.limit
    if data.source == "organism":
        frame = organism_samples(ctx)
    else:
        frame = await asyncio.to_thread(corpus_samples, ctx)
    functions = frame.height
    if data.judge is None:  # with [data.judge] the judge draws until the limit passes (calib.study.functional.judge)
        frame = limit_rows(frame, limit, spec.study.seed)
    ctx.resources.counts["functions"] = functions
    ctx.event("extracted", functions=functions, samples=frame.height, dropped=ctx.resources.counts.get("dropped"))
    if frame.height == 0:
        dropped = ctx.resources.counts.get("dropped", {})
        caps = ", data.max_file_bytes/max_line_chars" if {"too_large", "long_line"} & set(dropped) else ""
        listed = ", ".join(f"{k} {v}" for k, v in sorted(dropped.items()))
        raise CalibError(f"data ({data.source}): no function to audit; check data.paths, data.language and "
                         f"data.min_lines/max_lines ({data.min_lines}-{data.max_lines}){caps}"
                         + (f" (dropped: {listed})" if listed else ""))
    return frame


# --- prompt -------------------------------------------------------------------------------------
def _prompt_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    p = spec.prompt
    out: dict[str, Any] = {"prompt": p.model_dump(mode="json")}
    if p.tokenizer in ("server", "completions"):
        out["tokenizer"] = spec.servers[spec.models.target]
    elif p.tokenizer == "file" and p.tokenizer_file is not None and Path(p.tokenizer_file).is_file():
        out["tokenizer_sha256"] = hashlib.sha256(Path(p.tokenizer_file).read_bytes()).hexdigest()
    return out


async def _prompt_tokenizer(ctx: StageContext) -> tuple[Any, int, dict[str, Any]]:
    """What counts the context tokens (``[prompt] tokenizer``), the budget in its units, and what it was."""
    from calib.data.tokenizers import CharTokenizer
    from calib.study.tokenizer_source import tokenizer_source

    p = ctx.spec.prompt
    tokenizer, described = await tokenizer_source(p, ctx.resources, ctx.spec.models.target)
    budget = tokenizer.budget(p.max_context_tokens) if isinstance(tokenizer, CharTokenizer) else p.max_context_tokens
    return tokenizer, budget, described


async def _prompt(ctx: StageContext) -> pl.DataFrame:
    samples = ctx.table("functions")
    if ctx.spec.data.judge is not None:
        samples = judged_functions(ctx, samples)
    if ctx.spec.data.source == "organism":
        return samples  # the organism's prompts are the signatures (its models saw functions from position 0)
    from calib.data.prompts import build_prompts

    tokenizer, budget, described = await _prompt_tokenizer(ctx)
    ctx.resources.facts["prompt_tokenizer"] = described
    prompted = await build_prompts(tokenizer, samples, max_context_tokens=budget)
    return prompted.select(list(SAMPLES_SCHEMA)).cast(SAMPLES_SCHEMA)


# --- generate -----------------------------------------------------------------------------------
def _generation_params(spec: StudySpec) -> Any:
    from calib.servers import SamplingParams

    g = spec.generation
    return SamplingParams(max_tokens=g.max_tokens, temperature=g.temperature, stop=tuple(g.stop), seed=spec.study.seed)


def _generate_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    out = {"generation": spec.generation.model_dump(mode="json", exclude={"concurrency"}),
           "servers": {role: spec.servers[getattr(spec.models, role)] for role in ROLES}, "seed": spec.study.seed}
    if spec.generation.chat_rule is not None:  # the rule file's bytes, not only its name, decide the requests
        from calib.data.rules import load_rule

        out["rule"] = load_rule(spec.generation.chat_rule).fingerprint()
    return out


def _chat_asker(ctx: StageContext, params: Any, lowered: dict[str, int], replies: dict[tuple[str, str], str]) -> Any:
    """``ask(role, row)``: one sample's completion through the role's chat route, by the spec's prompt rule.

    The rule builds the messages from the sample's prompt (and, for a rule that shows it, the expected
    continuation: x after its signature) and reads the continuation back from the reply, the same way
    for every sample and both models (docs/hosted.md "Generation through chat"). A context-length
    refusal is asked again once with what the host says is left, as on the completion route. Each reply
    as the host sent it goes to ``replies`` by ``(sample_id, role)`` (the table keeps it beside the text).
    """
    from calib.data.rules import load_rule
    from calib.servers import ChatMessage, ChatParams, Completion

    rule = load_rule(ctx.spec.generation.chat_rule)
    ctx.resources.facts["generation"] = {"route": "chat", "rule": rule.record()}
    chat_params = ChatParams(max_tokens=params.max_tokens, temperature=params.temperature, stop=params.stop,
                             seed=params.seed)

    async def ask(role: str, row: dict[str, Any]) -> Any:
        server = ctx.resources.server(getattr(ctx.spec.models, role))
        suffix = None
        if rule.shows_suffix:
            x, signature = row["function"], row["signature"]
            suffix = x[len(signature):] if x.startswith(signature) else "\n" + x
        messages = [ChatMessage(role=m["role"], content=m["content"])
                    for m in rule.messages(row["prompt"], language=row["language"], suffix=suffix)]
        reply, lower = await ask_chat(server, messages, chat_params)
        if lower is not None:
            ctx.event("budget_lowered", sample_id=row["sample_id"], role=role, asked=chat_params.max_tokens,
                      budget=lower)
            lowered[role] = lowered.get(role, 0) + 1
        replies[(row["sample_id"], role)] = reply.content
        return Completion(text=rule.continuation(reply.content, row["prompt"]), finish_reason=reply.finish_reason)

    return ask


async def _generate(ctx: StageContext) -> pl.DataFrame:
    from calib.data.parseback import parse_back
    from calib.servers import RequestFailed

    samples = ctx.table("samples").filter(pl.col("prompt").is_not_null())
    params = _generation_params(ctx.spec)
    params_hash = hashlib.sha256(json.dumps(params.to_dict(), sort_keys=True).encode()).hexdigest()[:16]
    models = {}
    for role in ROLES:
        name = getattr(ctx.spec.models, role)
        models[role] = (await ctx.resources.probe(name)).get("model") or name
    base = samples.select("sample_id", "language", "signature", "function", "prompt").to_dicts()
    # Both roles of a sample in the same chunk: the two servers work at the same time.
    items = [{**r, "role": role} for r in base for role in ROLES]

    lowered: dict[str, int] = {}  # requests asked again with a lower budget after a context refusal, per role
    replies: dict[tuple[str, str], str] = {}  # the chat route's replies as sent, by (sample_id, role)
    chat = _chat_asker(ctx, params, lowered, replies) if ctx.spec.generation.route == "chat" else None
    if chat is None:
        ctx.resources.facts["generation"] = {"route": "complete", "rule": None}

    async def by_chat(role: str, chunk: list[dict[str, Any]]) -> tuple[list[Any], list[str | None]]:
        """Each sample's chat answer (one request each), failures recorded per sample."""
        async def one(r: dict[str, Any]) -> tuple[list[Any], str | None]:
            try:
                return [await chat(role, r)], None
            except (RequestFailed, CalibError) as exc:  # recorded per sample, never fatal
                return [], request_failure(exc)

        done = await asyncio.gather(*(one(r) for r in chunk))
        return [d[0] for d in done], [d[1] for d in done]

    async def complete(role: str, chunk: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if chat is not None:
            answers, failures = await by_chat(role, chunk)
            return rows_of(role, chunk, answers, failures)
        server = ctx.resources.server(getattr(ctx.spec.models, role))
        budgets = await completion_budgets(server, ctx.resources.capabilities[getattr(ctx.spec.models, role)],
                                            [r["prompt"] for r in chunk], params.max_tokens)
        answers: list[Any] = [[] for _ in chunk]
        failures: list[str | None] = [None] * len(chunk)

        async def one(i: int, batch: Any) -> list[Any]:
            """One prompt's completions; a context refusal is asked again with what the host says is left."""
            try:
                return (await server.complete([chunk[i]["prompt"]], batch))[0]
            except (RequestFailed, CalibError) as exc:
                lower = budget_after_refusal(str(exc), batch.max_tokens)
                if lower is None:
                    raise
                ctx.event("budget_lowered", sample_id=chunk[i]["sample_id"], role=role, asked=batch.max_tokens,
                          budget=lower)
                lowered[role] = lowered.get(role, 0) + 1
                return (await server.complete([chunk[i]["prompt"]], replace(batch, max_tokens=lower)))[0]

        for budget in sorted(set(budgets)):  # one request per completion budget
            idx = [i for i, b in enumerate(budgets) if b == budget]
            if budget < 1:
                for i in idx:
                    failures[i] = "prompt fills the model's context"
                continue
            batch = replace(params, max_tokens=budget)
            got = None
            if len(idx) > 1:
                try:
                    got = await server.complete([chunk[i]["prompt"] for i in idx], batch)
                except (RequestFailed, CalibError):
                    got = None
            if got is None:
                got = []
                for i in idx:  # one bad prompt must not sink the others of its batch: ask one by one
                    try:
                        got.append(await one(i, batch))
                    except (RequestFailed, CalibError) as exc:  # recorded per sample, never fatal
                        got.append([])
                        failures[i] = request_failure(exc)
            for i, answer in zip(idx, got):
                answers[i] = answer
        return rows_of(role, chunk, answers, failures)

    def rows_of(role: str, chunk: list[dict[str, Any]], answers: list[Any],
                failures: list[str | None]) -> list[dict[str, Any]]:
        rows = []
        for r, answer, failure in zip(chunk, answers, failures):
            completion = answer[0] if answer else None
            text = completion.text if completion is not None else None
            function, error = None, failure
            if text is not None:
                parsed = parse_back(r["language"], r["signature"], text)
                function = parsed.function
                error = None if function is not None else f"generation {parsed.outcome}"
            if error is not None:
                ctx.event("sample_error", sample_id=r["sample_id"], role=role, error=error)
            rows.append({"sample_id": r["sample_id"], "role": role, "model": models[role],
                         "params_hash": params_hash, "text": text, "function": function,
                         "finish_reason": completion.finish_reason if completion is not None else None,
                         "error": error, "reply": replies.pop((r["sample_id"], role), None)})
        return rows

    async def work(chunk: list[dict[str, Any]]) -> pl.DataFrame:
        parts = {role: [r for r in chunk if r["role"] == role] for role in ROLES}
        done = await asyncio.gather(*(complete(role, part) for role, part in parts.items() if part))
        by_key = {(row["sample_id"], row["role"]): row for rows in done for row in rows}
        return pl.DataFrame([by_key[(r["sample_id"], r["role"])] for r in chunk], schema=GENERATIONS_SCHEMA)

    frame = await ctx.chunked(items, _GENERATE_CHUNK, work, GENERATIONS_SCHEMA, label="generate",
                              concurrency=ctx.spec.generation.concurrency)
    for role in ROLES:
        record_requests(ctx, getattr(ctx.spec.models, role))
    if lowered:  # the manifest's counts, for the report's Methods
        ctx.resources.counts["max_tokens_lowered"] = dict(sorted(lowered.items()))
    return frame


# --- report -------------------------------------------------------------------------------------
def _report_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    return {"analyze": spec.analyze.model_dump(mode="json"), "report": spec.report.model_dump(mode="json"),
            "study": spec.study.model_dump(mode="json")}


STAGES: tuple[Stage, ...] = (
    Stage("extract", (), "functions", "1", _extract_settings, _extract, offline=True),
    Stage("prompt", ("functions",), "samples", "1", _prompt_settings, _prompt),
    Stage("generate", ("samples",), "generations", "2", _generate_settings, _generate),  # 2: the reply column
    execute_stage,
    measure_stage,
    analyze_stage,
    Stage("report", ("samples", "generations", "executions", "similarities", "claims"), None, "1",
          _report_settings, write_report_stage, done=report_done),
)

#: The duplication stage of a functional study with a ``[dedup]`` table (after the samples are known).
DEDUP_STAGE = dedup_stage


def functional_stages(spec: StudySpec) -> tuple[Stage, ...]:
    """The functional study's stages; with ``[data.judge]`` the judge stage runs after extract (the prompt stage and
    the report read its judgments), with ``[dedup]`` the dedup stage after prompt (the report reads it)."""
    if spec.dedup is None and spec.data.judge is None:
        return STAGES
    extract, prompt, *middle, report = STAGES
    head: tuple[Stage, ...] = (extract, prompt)
    if spec.data.judge is not None:
        head = (extract, JUDGE_STAGE, replace(prompt, reads=(*prompt.reads, "judgments")))
        report = replace(report, reads=(*report.reads, "judgments"))
    if spec.dedup is not None:
        head = (*head, DEDUP_STAGE)
        report = replace(report, reads=(*report.reads, "duplicates"))
    return (*head, *middle, report)
