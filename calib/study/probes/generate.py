"""The ``generate`` stage of a probes study: every panel model answers every prompt n times (docs/probes.md).

**One budget per problem.** Every condition of one problem (original, fuzzed, dead code, the
isomorphisms) is asked with the same ``max_tokens``: the spec's ``probes.max_tokens``, lowered to the
smallest room the model's context leaves after any of the problem's prompts (:func:`shared_budgets`).
A budget that shrank with the prompt would give the longer prompts (dead code, the Iso contract) more
truncated completions, a bias in the direction of the hypothesis (Rajput et al., "scale-aware
diagnostics", §7.2 uses dead code to bound the prompt-length effect, which a shrinking budget would
confound). A condition whose prompt leaves no room at all is an **overflow**.

**Missing, not failed.** A generation whose request failed (after the server's retries) or whose
prompt overflowed the context is *missing* (``missing`` = ``request_failed`` | ``overflow``): it has
no text and no test result; pass@k counts only completed generations (calib.study.probes.analysis).
Through the chat route each of the n samples is its own request, so one failure loses one sample; a
context refusal is an overflow (never asked again with a lower budget, which would break the equal
budget).
"""

from __future__ import annotations

import asyncio
from typing import Any

import polars as pl

from calib._exceptions import CalibError, InputError
from calib.study.budgets import completion_budgets, context_refusal
from calib.study.probes.tables import PROBE_GENERATIONS_SCHEMA
from calib.study.requests import record_requests
from calib.study.runner import RunOptions, StageContext
from calib.study.spec import StudySpec

__all__ = ["generate", "generate_settings", "shared_budgets"]

_GENERATE_CHUNK = 8  # prompts per chunk of the generate stage (per model)


def shared_budgets(rooms: dict[str, tuple[str, int]]) -> dict[str, int]:
    """prompt_id -> the budget its problem's conditions share; 0 marks an overflow.

    ``rooms`` maps prompt_id -> (task_id, completion tokens the context leaves after that prompt,
    already capped at the spec's ``max_tokens``). A problem's budget is the smallest room of its prompts
    that leave any (room >= 1); a prompt that leaves none is an overflow (0).
    """
    smallest: dict[str, int] = {}
    for task, room in rooms.values():
        if room >= 1:
            smallest[task] = min(room, smallest.get(task, room))
    return {pid: smallest[task] if room >= 1 else 0 for pid, (task, room) in rooms.items()}


def generate_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    p = spec.probes
    assert p is not None
    out = {"n": p.n, "temperature": p.temperature, "max_tokens": p.max_tokens, "stop": p.stop, "style": p.style,
           "seed": spec.study.seed, "servers": {name: spec.servers[name] for name in spec.models.probed()}}
    if spec.generation.route == "chat":  # the completion route's key stays as it was (runs before chat stay done)
        from calib.data.rules import load_rule

        out["chat_rule"] = load_rule(spec.generation.chat_rule).fingerprint()
    return out


def _chat_rule(ctx: StageContext) -> Any | None:
    """The prompt-selection rule when the panel is asked through chat (``[generation] route``), else None."""
    from calib.data.rules import load_rule

    if ctx.spec.generation.route != "chat":
        ctx.resources.facts["generation"] = {"route": "complete", "rule": None}
        return None
    rule = load_rule(ctx.spec.generation.chat_rule)
    if rule.shows_suffix:
        raise InputError(f"generation.rule = {rule.name!r} shows the model the answer, and a probes task has none to "
                         "show; use a rule that does not (natural, continue)")
    ctx.resources.facts["generation"] = {"route": "chat", "rule": rule.record()}
    return rule


def _why(exc: Exception) -> str:
    return exc.error if hasattr(exc, "error") else " ".join(str(exc).split())  # type: ignore[attr-defined]


async def _chat_samples(ctx: StageContext, server: Any, rule: Any, item: dict[str, Any], budget: int) -> list:
    """The n answers of one prompt through the chat route: n requests (seeds seed, seed + 1, ... when sampling).

    Each answer is a ``Completion`` or, for a request that failed, ``(missing, why)``. An ``mbpp``-style
    program is found in the reply as on the completion route; a ``completion``-style prompt's
    continuation is read back by the rule.
    """
    from calib.servers import ChatMessage, ChatParams, Completion

    p = ctx.spec.probes
    assert p is not None
    messages = [ChatMessage(role=m["role"], content=m["content"])
                for m in rule.messages(item["prompt"], language="python")]
    seed = ctx.spec.study.seed if p.temperature > 0 else None

    async def one(i: int) -> Any:
        params = ChatParams(max_tokens=budget, temperature=p.temperature, stop=p.stop,
                            seed=None if seed is None else (seed + i) % 2**63)
        try:
            reply = await server.chat(messages, params=params)
        except CalibError as exc:  # RequestFailed is one
            return ("overflow" if context_refusal(str(exc)) else "request_failed"), _why(exc)
        text = reply.content if p.style == "mbpp" else rule.continuation(reply.content, item["prompt"])
        return Completion(text=text, finish_reason=reply.finish_reason)

    return list(await asyncio.gather(*(one(i) for i in range(p.n))))


async def _budgets(ctx: StageContext, name: str, prompts: pl.DataFrame) -> dict[str, int]:
    """prompt_id -> the shared budget of its problem for model ``name`` (0: overflow)."""
    p = ctx.spec.probes
    assert p is not None
    caps = await ctx.resources.probe(name)
    rows = prompts.select("prompt_id", "task_id", "prompt").rows()
    rooms = await completion_budgets(ctx.resources.server(name), caps, [r[2] for r in rows], p.max_tokens)
    return shared_budgets({pid: (task, room) for (pid, task, _), room in zip(rows, rooms)})


async def generate(ctx: StageContext) -> pl.DataFrame:
    from calib.probes.prompting import extract_program, prompt_signature
    from calib.servers import RequestFailed, SamplingParams

    spec = ctx.spec
    p = spec.probes
    assert p is not None
    prompts = ctx.table("prompts").filter(pl.col("applicable") & pl.col("reference_passed"))
    budgets = {m: await _budgets(ctx, m, prompts) for m in spec.models.probed()}
    items = [{**r, "model": m} for m in spec.models.probed() for r in prompts.iter_rows(named=True)]
    rule = _chat_rule(ctx)

    async def one(item: dict[str, Any]) -> list[dict[str, Any]]:
        name = item["model"]
        server = ctx.resources.server(name)
        caps = await ctx.resources.probe(name)
        budget = budgets[name][item["prompt_id"]]
        head = {"prompt_id": item["prompt_id"], "task_id": item["task_id"], "label": item["label"], "model": name,
                "model_name": caps.get("model") or name, "max_tokens": budget or None}

        def missing(i: int, why: str, reason: str) -> dict[str, Any]:
            return {**head, "sample_index": i, "text": None, "program": None, "finish_reason": None,
                    "error": f"request failed: {why}"[:500] if reason == "request_failed" else why[:500],
                    "missing": reason}

        if budget < 1:
            why = "overflow: the prompt fills the model's context"
            ctx.event("sample_error", prompt_id=item["prompt_id"], model=name, error=why)
            return [missing(i, why, "overflow") for i in range(p.n)]
        if rule is not None:
            completions = await _chat_samples(ctx, server, rule, item, budget)
        else:
            params = SamplingParams(max_tokens=budget, temperature=p.temperature, stop=p.stop, n=p.n,
                                    seed=spec.study.seed if p.temperature > 0 else None)
            try:
                completions = (await server.complete([item["prompt"]], params))[0]
            except (RequestFailed, CalibError) as exc:
                reason = "overflow" if context_refusal(str(exc)) else "request_failed"
                completions = [(reason, _why(exc))] * p.n
        signature = prompt_signature(item["prompt"], item["entry_point"])
        rows = []
        for i, completion in enumerate(completions):
            if isinstance(completion, tuple):
                reason, why = completion
                ctx.event("sample_error", prompt_id=item["prompt_id"], model=name, sample_index=i, missing=reason,
                          error=why[:300])
                rows.append(missing(i, why, reason))
                continue
            program, why = extract_program(completion.text, style=p.style, signature=signature,
                                           entry_point=item["entry_point"])
            rows.append({**head, "sample_index": i, "text": completion.text, "program": program,
                         "finish_reason": completion.finish_reason, "error": why, "missing": None})
        return rows

    async def work(chunk: list[dict[str, Any]]) -> pl.DataFrame:
        done = await asyncio.gather(*(one(item) for item in chunk))
        return pl.DataFrame([row for rows in done for row in rows], schema=PROBE_GENERATIONS_SCHEMA)

    frame = await ctx.chunked(items, _GENERATE_CHUNK, work, PROBE_GENERATIONS_SCHEMA, label="generate",
                              concurrency=p.concurrency)
    for name in spec.models.probed():
        record_requests(ctx, name)
    return frame
