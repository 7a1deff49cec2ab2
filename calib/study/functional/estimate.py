"""``calib check --estimate`` for a functional study: the generate stage's requests and tokens per model.

The samples are counted by running the ``extract`` stage (offline) without a run directory. Each
sample is completed once by the target and once by the reference, at ``[generation] max_tokens``
(the output bound). The prompt is the organism's signature (exact text), or — for a corpus, where the
``prompt`` stage keeps the last ``[prompt] max_context_tokens`` of the context by a tokenizer — at most
the whole context and the signature (the input bound counts both). Completion requests: one per sample
on the chat route and on a server that takes one prompt per request; a server that takes several gets
up to ``batch_size`` per request, exact when every prompt has the same completion budget (no
tokenizer or no stated context), else at most one per sample.
"""

from __future__ import annotations

import math
from typing import Any

from calib._exceptions import CalibError
from calib.study.estimate import (
    Estimate,
    Line,
    batched_requests,
    chat_tokens_bound,
    offline_context,
    organism_built,
    tokens_bound,
)
from calib.study.resources import ROLES

__all__ = ["estimate", "measure_notes"]


async def _samples(spec: Any, resources: Any) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The samples the study will audit, or None and why they are not known before a stage that needs more."""
    from calib.study.functional.stages import STAGES

    if spec.data.source == "organism" and not organism_built(spec):
        return None, "the organism is not built yet (its first stage builds it): samples unknown, nothing estimated"
    if spec.data.hub is not None:
        return None, "data.hub: the corpus is downloaded by the extract stage; samples unknown, nothing estimated"
    try:
        frame = await STAGES[0].run(offline_context(spec, resources))
    except CalibError as exc:
        return None, f"extract: {' '.join(str(exc).split())}"
    return frame.to_dicts(), None


def _chat_messages(spec: Any, row: dict[str, Any], prompt: str) -> list[dict[str, str]]:
    from calib.data.rules import load_rule

    rule = load_rule(spec.generation.chat_rule)
    suffix = None
    if rule.shows_suffix:
        x, signature = row["function"], row["signature"]
        suffix = x[len(signature):] if x.startswith(signature) else "\n" + x
    return rule.messages(prompt, language=row["language"], suffix=suffix)


def _prompt_text(spec: Any, row: dict[str, Any]) -> str:
    """The prompt itself (organism) or a text at least as long (corpus: the whole context and the signature)."""
    if spec.data.source == "organism":
        return row["prompt"]
    return (row.get("context") or "") + row["signature"]


def _chunks(n: int, chunk_items: int) -> list[int]:
    """Prompts per role in each chunk of the generate stage (chunks of (sample, role) items, both roles)."""
    per = max(1, chunk_items // len(ROLES))
    return [min(per, n - i) for i in range(0, n, per)]


async def estimate(spec: Any, resources: Any, caps: dict[str, dict[str, Any] | None]) -> Estimate:
    """The generate stage's requests, tokenizer requests and token bounds per model (see the module)."""
    from calib.study.functional.stages import _GENERATE_CHUNK

    found = Estimate()
    rows, why = await _samples(spec, resources)
    if rows is None:
        found.notes.append(str(why))
        found.notes += measure_notes(spec, None)
        return found
    chat = spec.generation.route == "chat"
    organism = spec.data.source == "organism"
    if chat:
        sizes = [chat_tokens_bound(_chat_messages(spec, r, _prompt_text(spec, r))) for r in rows]
    else:
        sizes = [tokens_bound(_prompt_text(spec, r)) for r in rows]
    n = len(rows)
    if spec.data.judge is not None:  # the judge draws every function until data.limit pass; those are audited
        _judge_line(spec, rows, found)
        n = min(spec.data.limit or n, n)
    inputs = sum(sorted(sizes, reverse=True)[:n])  # the n longest prompts bound whichever n are audited
    if not organism:
        found.notes.append("prompt: each prompt keeps at most prompt.max_context_tokens of its context; the input "
                           "bound counts the whole context")
    for role in ROLES:
        name = getattr(spec.models, role)
        c = caps.get(name)
        line = Line("generate", name, requests=n, input_tokens=inputs, output_tokens=n * spec.generation.max_tokens)
        if chat:  # one chat request per sample, no tokenizer request
            line.exact.update(("requests", "tokenizer_requests"))
        else:
            budgets_vary = c is not None and bool(c.get("tokenize")) and bool(c.get("max_context"))
            batched = batched_requests(spec, name, c, _chunks(n, _GENERATE_CHUNK))
            if batched is not None and (batched == n or not budgets_vary):
                line.requests = batched
                line.exact.add("requests")
            elif c is None:
                found.notes.append(f"server {name} was not probed: at most one completion request per sample")
            # each prompt's completion budget is counted by the server's tokenizer first, where it has one
            line.tokenizer_requests = n if budgets_vary or c is None else 0
            if c is not None:
                line.exact.add("tokenizer_requests")
        found.lines.append(line)
    if not chat and spec.prompt.tokenizer == "server" and not organism:
        found.notes.append(f"prompt: the target's tokenizer cuts each prompt's context ({n} samples, a few "
                           "tokenizer requests each; not in the figures)")
    if spec.prompt.tokenizer == "completions" and not organism:
        found.notes.append(f"prompt: the target's completions route tokenizes each prompt's context ({n} samples, a "
                           "few echo requests each, nothing generated, billed as prompt tokens; not in the figures)")
    _other_servers(spec, found, n)
    return found


def _judge_line(spec: Any, rows: list[dict[str, Any]], found: Estimate) -> None:
    """The ``judge`` stage: at most one chat request per extracted function (judging stops once data.limit
    pass), each reading the rendered judge prompt and answering at most 256 tokens (calib.data.judge)."""
    from calib.data.judge import load_judge_prompt

    judge = spec.data.judge
    prompt = load_judge_prompt(judge.prompt)
    inputs = sum(chat_tokens_bound([{"role": "user", "content": prompt.render(
        language=r["language"] or "code", function=r["function"])}]) for r in rows)
    found.lines.append(Line("judge", judge.server, requests=len(rows), input_tokens=inputs,
                            output_tokens=256 * len(rows)))
    found.notes.append(f"judge: functions are judged in a seeded order until data.limit ({spec.data.limit or 'all'}) "
                       f"pass: at most one request per function ({len(rows)}); generate counts the data.limit "
                       "samples kept")


def _other_servers(spec: Any, found: Estimate, n: int | None = None) -> None:
    """Notes for the requests of later stages that depend on what the generations are."""
    if spec.execute.executor in ("llm", "agent") and spec.execute.server is not None:
        found.notes.append(f"execute: the {spec.execute.executor} executor's chat requests to "
                           f"{spec.execute.server} depend on the generations; not estimated")
    for note in measure_notes(spec, n):
        found.notes.append(note)
    if spec.dedup is not None and spec.dedup.semantic and spec.dedup.embedding_server:
        found.notes.append(f"dedup: embedding requests to {spec.dedup.embedding_server} are not estimated")


def measure_notes(spec: Any, n: int | None) -> list[str]:
    """One note per judge and embedding server of ``[measure]``: the metrics it scores and, with ``n`` samples
    known, at most how many requests the measure stage sends it.

    A judge metric sends one chat request per (sample, completion) it scores (2 n at most: a missing
    completion is not sent, a cached score is not asked again), each answering at most
    ``measure.judge_max_tokens`` tokens. The ``embedding`` metric embeds the distinct texts of each chunk of
    64 pairs (calib.metrics.run) in requests of 32 texts (calib.metrics.embedding): at most
    ceil(2 k / 32) requests for a chunk of k pairs. Their input tokens depend on the generations: not in the
    figures.
    """
    from calib.metrics.embedding import EmbeddingMetric
    from calib.metrics.run import acompute_similarities

    chunk = acompute_similarities.__kwdefaults__["chunk_size"]
    batch = EmbeddingMetric.__init__.__kwdefaults__["batch_size"]
    per_server: dict[str, list[str]] = {}
    for name, _, server in spec.measure.measured():
        if server is not None:
            per_server.setdefault(server, []).append(name)
    notes = []
    for server, names in per_server.items():
        judges = [name for name in names if name.startswith("judge_")]
        embeds = [name for name in names if not name.startswith("judge_")]
        for kind, which in (("judge", judges), ("embedding", embeds)):
            if not which:
                continue
            listed = ", ".join(which)
            if n is None:
                notes.append(f"measure: {kind} requests to {server} ({listed}) depend on the samples: not estimated")
                continue
            pairs = 2 * n
            if kind == "judge":
                requests = pairs * len(which)
                what = (f"at most {requests} chat requests (one per sample and completion, {len(which)} metric(s): "
                        f"{listed}), at most {spec.measure.judge_max_tokens} answer tokens each")
            else:
                per = sum(math.ceil(2 * min(chunk, pairs - i) / batch) for i in range(0, pairs, chunk))
                what = f"at most {per * len(which)} embedding requests ({listed}: {batch} texts each)"
            notes.append(f"measure: {what} to {server}; their input tokens depend on the generations: not in the "
                         "figures")
    return notes
