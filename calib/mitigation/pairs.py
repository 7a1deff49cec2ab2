"""Preference pairs from an audit: the memorized body as the rejected completion, a preferred one beside it.

The functional-memorization paper's Appendix H.1. The memorized set is the audit's counterfactually memorized
members (verdict ``textual`` or ``functional``); each pair's prompt is the prompt both models were audited
with (the context's last tokens ending in the signature) and its rejected completion y_l is x's body, which
continues that prompt exactly. The preferred completion y_w comes from one of three sources:

- ``ref`` (DPO-ref): the reference model's greedy completion of the same prompt, from the audit's
  generations table;
- ``target`` (DPO-target): samples of the target at temperature 1.0 (:data:`TARGET_ROUNDS`: 5 samples), then,
  for functions no sample of the first round qualifies, a larger round at 1.4 (10 samples); the first
  sample that qualifies is kept;
- ``rewrite`` (DPO-rewrite): K = 10 rewrites by a chat model with the paper's prompt verbatim
  (:data:`REWRITE_SYSTEM`, :data:`REWRITE_USER`) at temperatures spread evenly over [0.6, 1.0]; the first
  that qualifies (in temperature order) is kept.

A candidate qualifies (:func:`check_candidate`) when (i) the reconstructed function (signature + body)
parses, (ii) BLEU(y, y_w) <= 0.3 on the bodies, and (iii) its execution similarity to x on x's input
states, SIM_func(x, signature + y_w), is <= 0.2 (calib's executor; a candidate whose similarity cannot be
measured, because x has no valid input state, does not qualify). When none does, the pair falls back to the
reference's greedy completion, and the fall-back is counted, as the paper reports it.

The paper's numbers (the sample sizes of the target rounds are not given there) and calib's choices are in
docs/mitigation.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from calib._exceptions import CalibError, InvalidParameterError

__all__ = ["MAX_BLEU", "MAX_SIM_FUNC", "PAIRS_SCHEMA", "REWRITE_SYSTEM", "REWRITE_TEMPERATURES", "REWRITE_USER",
           "SOURCES", "TARGET_ROUNDS", "Candidate", "Memorized", "build_pairs", "check_candidate",
           "memorized_set", "rewrite_body", "write_jsonl"]

#: Where the preferred completion comes from (module docstring).
SOURCES = ("ref", "target", "rewrite")
#: Acceptance: the most textual overlap with the memorized body (BLEU) and the most execution similarity.
MAX_BLEU = 0.3
MAX_SIM_FUNC = 0.2
#: DPO-target: (temperature, samples) of each round; a round runs only for functions not yet covered.
TARGET_ROUNDS: tuple[tuple[float, int], ...] = ((1.0, 5), (1.4, 10))
#: DPO-rewrite: K = 10 temperatures spread evenly over [0.6, 1.0].
REWRITE_TEMPERATURES: tuple[float, ...] = tuple(round(0.6 + 0.4 * i / 9, 6) for i in range(10))

#: The paper's rewrite prompt (Appendix H.1, "Function rewrite prompt"), verbatim.
REWRITE_SYSTEM = "You are an expert Python engineer. You always return correct, runnable Python."
REWRITE_USER = (
    "Below is Python code (imports and helper definitions) that ends with a function and its body:\n"
    "```python\n{code}\n```\n"
    "For the last function `{signature}`, write a functionally substantially different version that is valid, "
    "runnable Python. Requirements:\n"
    "1. The function should be functionally different: it should implement an entirely different logic and "
    "cannot return the same results for the same inputs.\n"
    "2. It should not share textual overlap with the original body: use different local names, control flow, "
    "data structures and comments.\n"
    "3. It should be valid, runnable code; Keep the EXACT same signature line and the original indentation.\n"
    "Return ONLY the complete rewritten function (signature + body) in one ```python block, with no "
    "explanation."
)

PAIRS_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String(),
    "verdict": pl.String(),  # the audit's verdict: textual | functional
    "kind": pl.String(),  # the sample's kind (organism: verbatim | business_rule | near_duplicate), or null
    "language": pl.String(),
    "source": pl.String(),  # the source asked for: ref | target | rewrite
    "prompt": pl.String(),  # the audit's prompt: context tail ending in the signature
    "chosen": pl.String(),  # y_w, continuing the prompt; null when there is none (no reference generation)
    "rejected": pl.String(),  # y_l: the memorized body, continuing the prompt
    "chosen_from": pl.String(),  # reference | target | rewrite; null with chosen
    "fallback": pl.Boolean(),  # target/rewrite: no candidate qualified, chosen is the reference's; ref: false
    "candidates": pl.Int64(),  # candidates checked (distinct bodies; a rewrite without the signature not counted)
    "rejections": pl.String(),  # JSON: reason -> candidates rejected for it (request_failed: requests, not candidates)
    "chosen_bleu": pl.Float64(),  # BLEU(y_l, y_w) of the chosen body
    "chosen_sim_func": pl.Float64(),  # SIM_func(x, y_w) of an accepted candidate; null for the reference's
}

_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Memorized:
    """One memorized function of an audit and what its pair is made from."""

    sample_id: str
    verdict: str
    kind: str | None
    language: str
    prompt: str
    signature: str
    body: str
    context: str
    reference: str | None  # the reference's greedy completion (its body), None when it did not come back

    @property
    def function(self) -> str:
        return self.signature + self.body


@dataclass(frozen=True)
class Candidate:
    """What the acceptance check found for one candidate body."""

    body: str
    accepted: bool
    reason: str  # "" when accepted; unparsable | textual_overlap | functional_overlap | not_measured
    # (a rewrite that changed the signature never becomes a Candidate: counted as signature_changed)
    bleu: float | None = None
    sim_func: float | None = None


def _body(signature: str, function: str | None, text: str | None) -> str | None:
    """A generation's body: its parsed-back function after the signature, else its raw text."""
    if function is not None and function.startswith(signature):
        return function[len(signature):]
    return text


def memorized_set(samples: pl.DataFrame, generations: pl.DataFrame, claims: pl.DataFrame) -> list[Memorized]:
    """The audit's counterfactually memorized members (verdict textual or functional), in sample order."""
    verdicts = {r["sample_id"]: r["verdict"] for r in claims.iter_rows(named=True)
                if r["membership"] == "member" and r["verdict"] in ("textual", "functional")}
    reference = {r["sample_id"]: r for r in generations.iter_rows(named=True) if r["role"] == "reference"}
    out = []
    for s in samples.iter_rows(named=True):
        if s["sample_id"] not in verdicts:
            continue
        g = reference.get(s["sample_id"])
        ref = _body(s["signature"], g["function"], g["text"]) if g is not None else None
        out.append(Memorized(sample_id=s["sample_id"], verdict=verdicts[s["sample_id"]], kind=s["kind"],
                             language=s["language"], prompt=s["prompt"], signature=s["signature"], body=s["body"],
                             context=s["context"] or "", reference=ref))
    return out


def rewrite_body(signature: str, reply: str) -> str | None:
    """The body of a rewrite reply: its fenced block's function after the unchanged signature, else None.

    The prompt asks for the complete function in one ```python block with the EXACT signature line; a reply
    whose function does not start with the signature (ignoring blank lines before it) gives None.
    """
    found = _FENCE.search(reply)
    code = found.group(1) if found else reply
    code = code.replace("\r\n", "\n").lstrip("\n")
    if not code.startswith(signature):
        return None
    return code[len(signature):].rstrip() + "\n" if code[len(signature):].strip() else None


async def check_candidate(m: Memorized, body: str, executor: Any, *, bleu: Any = None) -> Candidate:
    """The paper's acceptance rule for one candidate body of ``m`` (module docstring), cheapest test first."""
    from calib.data.parseback import parse_back

    parsed = parse_back(m.language, m.signature, body)
    if parsed.outcome != "ok" or parsed.function is None:
        return Candidate(body, False, "unparsable")
    body = parsed.function[len(m.signature):] if parsed.function.startswith(m.signature) else body
    if bleu is None:
        from calib.metrics.textual import Bleu

        bleu = Bleu()
    overlap = bleu.score(m.body, body, m.language)
    if overlap > MAX_BLEU:
        return Candidate(body, False, "textual_overlap", bleu=overlap)
    comparison = await executor.compare(m.function, [m.signature + body], context=m.context)
    sim = comparison.candidates[0].sim_func if comparison.candidates else None
    if sim is None:
        return Candidate(body, False, "not_measured", bleu=overlap)
    if sim > MAX_SIM_FUNC:
        return Candidate(body, False, "functional_overlap", bleu=overlap, sim_func=sim)
    return Candidate(body, True, "", bleu=overlap, sim_func=sim)


async def _budget(server: Any, prompt: str, max_tokens: int) -> int:
    """``max_tokens``, lowered to what the model's context leaves after ``prompt`` (the audit's rule,
    calib.servers.context.completion_budgets), at least 1 so that the request is asked and its failure recorded."""
    from calib.servers.context import completion_budgets

    caps = (await server.capabilities()).to_dict()
    return max(1, (await completion_budgets(server, caps, [prompt], max_tokens))[0])


async def _target_bodies(server: Any, m: Memorized, temperature: float, n: int, *, seed: int, max_tokens: int,
                         stop: Sequence[str]) -> list[str]:
    from calib.data.parseback import parse_back
    from calib.servers.messages import SamplingParams

    params = SamplingParams(max_tokens=await _budget(server, m.prompt, max_tokens), temperature=temperature, n=n,
                            seed=seed, stop=tuple(stop))
    [completions] = await server.complete([m.prompt], params)
    out = []
    for c in completions:
        parsed = parse_back(m.language, m.signature, c.text)
        out.append(_body(m.signature, parsed.function, c.text) or c.text)
    return out


async def _rewrite_bodies(server: Any, m: Memorized, temperature: float, *, seed: int,
                          max_tokens: int) -> list[str | None]:
    from calib.servers.messages import ChatMessage, ChatParams

    user = REWRITE_USER.format(code=(m.prompt + m.body).rstrip("\n"), signature=m.signature.strip())
    reply = await server.chat([ChatMessage("system", REWRITE_SYSTEM), ChatMessage("user", user)],
                              params=ChatParams(max_tokens=max_tokens, temperature=temperature, seed=seed))
    body = rewrite_body(m.signature, reply.content)
    # a reply without the unchanged signature cannot qualify: None, counted as signature_changed
    return [body]


async def _pair(m: Memorized, source: str, *, target: Any, rewriter: Any, executor: Any, seed: int,
                max_tokens: int, stop: Sequence[str]) -> dict[str, Any]:
    from calib.metrics.textual import Bleu

    bleu = Bleu()
    row: dict[str, Any] = {"sample_id": m.sample_id, "verdict": m.verdict, "kind": m.kind, "language": m.language,
                           "source": source, "prompt": m.prompt, "rejected": m.body, "candidates": 0,
                           "rejections": "{}", "chosen_sim_func": None, "fallback": False}
    rejections: dict[str, int] = {}
    seen: set[str] = set()
    if source != "ref":
        rounds = (TARGET_ROUNDS if source == "target" else tuple((t, 1) for t in REWRITE_TEMPERATURES))
        for number, (temperature, n) in enumerate(rounds):
            try:
                if source == "target":
                    bodies = await _target_bodies(target, m, temperature, n, seed=seed + number,
                                                  max_tokens=max_tokens, stop=stop)
                else:
                    bodies = await _rewrite_bodies(rewriter, m, temperature, seed=seed + number,
                                                   max_tokens=max_tokens)
            except CalibError:  # a failed request (retried by the server) loses its candidates, not the pair
                rejections["request_failed"] = rejections.get("request_failed", 0) + 1
                continue
            for body in bodies:
                if body is None:
                    rejections["signature_changed"] = rejections.get("signature_changed", 0) + 1
                    continue
                if body in seen:
                    continue
                seen.add(body)
                found = await check_candidate(m, body, executor, bleu=bleu)
                if found.accepted:
                    row.update(candidates=len(seen), rejections=json.dumps(rejections, sort_keys=True),
                               chosen=found.body, chosen_from=source, chosen_bleu=found.bleu,
                               chosen_sim_func=found.sim_func)
                    return row
                rejections[found.reason] = rejections.get(found.reason, 0) + 1
        row.update(candidates=len(seen), rejections=json.dumps(rejections, sort_keys=True), fallback=True)
    if m.reference is None:
        row.update(chosen=None, chosen_from=None, chosen_bleu=None)
        return row
    row.update(chosen=m.reference, chosen_from="reference", chosen_bleu=_safe_bleu(bleu, m.body, m.reference,
                                                                                    m.language))
    return row


def _safe_bleu(bleu: Any, reference: str, candidate: str, language: str) -> float | None:
    from calib.metrics.base import MetricUnavailable

    try:
        return bleu.score(reference, candidate, language)
    except MetricUnavailable:
        return None


async def build_pairs(memorized: Sequence[Memorized], source: str, *, target: Any = None, rewriter: Any = None,
                      executor: Any = None, seed: int = 0, max_tokens: int = 500,
                      stop: Sequence[str] = ()) -> pl.DataFrame:
    """The pairs table (:data:`PAIRS_SCHEMA`) of ``memorized`` with preferred completions from ``source``.

    ``target`` (a completion server) is needed for ``source="target"``, ``rewriter`` (a chat server) for
    ``"rewrite"``, and ``executor`` for both: an :class:`~calib.executors.base.Executor`, or a function from a
    language to one.
    """
    if source not in SOURCES:
        raise InvalidParameterError(f"source={source!r}: choose one of {', '.join(SOURCES)}")
    if source == "target" and target is None:
        raise InvalidParameterError("source 'target' needs the target model's server")
    if source == "rewrite" and rewriter is None:
        raise InvalidParameterError("source 'rewrite' needs a chat server for the rewrites")
    if source != "ref" and executor is None:
        raise InvalidParameterError(f"source {source!r} needs an executor for the execution-similarity check")
    def executor_for(language: str) -> Any:
        return executor if executor is None or hasattr(executor, "compare") else executor(language)

    rows = [await _pair(m, source, target=target, rewriter=rewriter, executor=executor_for(m.language), seed=seed,
                        max_tokens=max_tokens, stop=stop) for m in memorized]
    return pl.DataFrame(rows, schema=PAIRS_SCHEMA)


def write_jsonl(pairs: pl.DataFrame, path: str | Path) -> int:
    """Write the pairs that have a preferred completion as JSON lines ``{"prompt", "chosen", "rejected"}``.

    That is the preference format trl's ``DPOTrainer`` and most preference trainers read (standard, not
    conversational); returns the number of lines written.
    """
    n = 0
    with Path(path).open("w", encoding="utf-8") as f:
        for row in pairs.iter_rows(named=True):
            if row["chosen"] is None:
                continue
            f.write(json.dumps({"prompt": row["prompt"], "chosen": row["chosen"], "rejected": row["rejected"]},
                               ensure_ascii=False) + "\n")
            n += 1
    return n
