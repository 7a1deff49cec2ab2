"""``calib check --estimate``: the requests and tokens each stage will ask of each server, and their cost.

Each study kind estimates its own stages (``StudyKind.estimate``: the kind's ``estimate`` module) as
:class:`Line` rows, one per (stage, server), from the data the study will use: its offline stage (the
functional ``extract``, the extraction ``samples``, the probes task list) is run here without a run
directory; no generation or scoring request is sent. This module holds what the kinds share: token
bounds of a text, the offline stage context, pricing by ``[budget.prices]``, the comparison with the
``[budget]`` caps and the printed table (docs/cli.md, ``calib check``; docs/hosted.md "Estimating cost").

Every figure is either exact or an upper bound, and says which (``exact``: the names of the exact ones).
Retries, context-length refusals asked again and the capability probes are never in the figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

__all__ = ["CHAT_TEMPLATE_TOKENS", "FIGURES", "SPECIAL_TOKENS", "Estimate", "Line", "batched_requests",
           "chat_tokens_bound", "counted", "estimate_lines", "estimate_study", "offline_context", "organism_built",
           "render", "tokens_bound"]

#: Tokens a server may add to a prompt beyond its text (a begin-of-text token, a leading space marker).
SPECIAL_TOKENS = 4
#: Tokens a chat template may add per message (role markers, separators); the chat bound allows this many.
CHAT_TEMPLATE_TOKENS = 32
#: The figures of a line, in print order.
FIGURES = ("requests", "tokenizer_requests", "input_tokens", "output_tokens")


@dataclass
class Line:
    """What one stage asks of one server.

    ``requests``: generation and scoring requests (completions, chat, teacher-forced scoring);
    ``tokenizer_requests``: ``/tokenize`` and ``/detokenize`` requests (free, but ``budget.requests``
    counts them); ``input_tokens`` and ``output_tokens``: the tokens those requests read and may
    generate. ``exact`` names the figures that are exact; every other one is an upper bound.
    """

    stage: str
    server: str
    requests: int
    input_tokens: int
    output_tokens: int
    tokenizer_requests: int = 0
    exact: set[str] = field(default_factory=set)


@dataclass
class Estimate:
    """A kind's estimate: its lines, and notes saying what is unknown before a stage runs and the bound used."""

    lines: list[Line] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def tokens_bound(text: str) -> int:
    """At most how many tokens ``text`` is as a prompt: one per UTF-8 byte, plus :data:`SPECIAL_TOKENS`.

    Byte-level BPE and SentencePiece (byte fallback) tokens each cover at least one byte.
    """
    return len(text.encode("utf-8", "surrogatepass")) + SPECIAL_TOKENS


def chat_tokens_bound(messages: list[dict[str, str]]) -> int:
    """At most how many tokens a chat request of ``messages`` reads: each content's bytes and
    :data:`CHAT_TEMPLATE_TOKENS` per message for the template, plus :data:`SPECIAL_TOKENS`."""
    return sum(len(m["content"].encode("utf-8", "surrogatepass")) + CHAT_TEMPLATE_TOKENS
               for m in messages) + SPECIAL_TOKENS


def counted(spec: Any, name: str) -> bool:
    """Whether server ``name``'s requests count against ``[budget]`` (every kind but the in-process embedded one)."""
    return spec.servers[name].get("kind") != "embedded"


def batched_requests(spec: Any, name: str, caps: dict[str, Any] | None, per_chunk: list[int]) -> int | None:
    """Completion requests for chunks of ``per_chunk`` prompts each, all at one completion budget.

    A server that takes several prompts per request (``batch_prompts``) gets up to its ``batch_size``
    (the openai kind's key, 32 by default) per request; one that does not, one request per prompt.
    None when the server was not probed (whether it batches is unknown).
    """
    if caps is None:
        return None
    size = int(spec.servers[name].get("batch_size", 32)) if caps.get("batch_prompts") else 1
    return sum(math.ceil(k / size) for k in per_chunk)


def organism_built(spec: Any) -> bool:
    """Whether the spec's organism is in the cache (an offline stage would otherwise build it: minutes)."""
    from calib.organism.build import organism_folder

    org = spec.organism
    return org is not None and (organism_folder(org.preset, seed=org.seed, cache_dir=org.cache_dir)
                                / "organism.json").is_file()


def offline_context(spec: Any, resources: Any) -> Any:
    """What an offline stage (extract, samples, tasks) needs of a stage context, without a run directory."""
    from calib.study.runner import RunOptions

    return SimpleNamespace(spec=spec, options=RunOptions(progress=False), resources=resources,
                           event=lambda *args, **fields: None, phase_progress=lambda label: (lambda *a: None))


def _cost(entry: dict[str, Any], price: Any) -> float | None:
    if price is None:
        return None
    return (entry["input_tokens"] * price.input + entry["output_tokens"] * price.output) / 1e6


def _sum(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Figures added up; exact where every part is."""
    out: dict[str, Any] = {key: sum(e[key] for e in entries) for key in FIGURES}
    out["exact"] = [key for key in FIGURES if all(key in e["exact"] for e in entries)]
    costs = [e["cost"] for e in entries if e["cost"] is not None]
    out["cost"] = sum(costs) if costs else None
    out["cost_exact"] = all(e["cost_exact"] for e in entries if e["cost"] is not None)
    return out


def estimate_lines(spec: Any, found: Estimate) -> dict[str, Any]:
    """The ``estimate`` object of ``calib check --json``: lines priced, per-server and total sums, budget check."""
    budget = spec.budget
    prices = budget.prices if budget is not None else {}
    stages = []
    for line in found.lines:
        entry: dict[str, Any] = {"stage": line.stage, "server": line.server, "counted": counted(spec, line.server),
                                 **{key: int(getattr(line, key)) for key in FIGURES},
                                 "exact": [key for key in FIGURES if key in line.exact]}
        entry["cost"] = _cost(entry, prices.get(line.server)) if entry["counted"] else None
        entry["cost_exact"] = {"input_tokens", "output_tokens"} <= line.exact
        stages.append(entry)
    kept = [e for e in stages if e["counted"]]
    names = dict.fromkeys(e["server"] for e in kept)
    servers = {name: _sum([e for e in kept if e["server"] == name]) for name in names}
    total = _sum(kept)
    total["tokens"] = total["input_tokens"] + total["output_tokens"]
    return {"stages": stages, "servers": servers, "total": total,
            "currency": budget.currency if budget is not None else None,
            "notes": list(found.notes), "budget": over_caps(spec, kept)}


def over_caps(spec: Any, kept: list[dict[str, Any]]) -> list[str]:
    """One sentence per ``[budget]`` cap the estimate exceeds, naming the stage the study would stop at about."""
    budget = spec.budget
    if budget is None or not kept:
        return []
    caps = [("requests", budget.requests, lambda e: e["requests"] + e["tokenizer_requests"], "requests"),
            ("tokens", budget.tokens, lambda e: e["input_tokens"] + e["output_tokens"], "tokens"),
            ("cost", budget.cost, lambda e: e["cost"] or 0.0, budget.currency)]
    out = []
    for key, cap, value, unit in caps:
        if cap is None:
            continue
        running, stop = 0.0, None
        for entry in kept:
            running += value(entry)
            if stop is None and running >= cap:
                stop = entry["stage"]
        if stop is None:
            continue
        exact = all({"requests": {"requests", "tokenizer_requests"}, "tokens": {"input_tokens", "output_tokens"},
                     "cost": {"input_tokens", "output_tokens"}}[key] <= set(e["exact"]) for e in kept)
        shown = f"{running:.4f} {unit}" if key == "cost" else f"{int(running):,} {unit}"
        out.append(f"the estimate{'' if exact else ' (an upper bound)'} exceeds budget.{key} = {cap:,g} "
                   f"({shown}): the study will stop at about stage {stop}")
    return out


async def estimate_study(spec: Any, resources: Any, caps: dict[str, dict[str, Any] | None]) -> dict[str, Any] | None:
    """The study kind's estimate (``StudyKind.estimate``) as the ``estimate`` object; None for a kind without one.

    ``caps``: server name -> its probed capabilities (None: not probed). Sends no generation request.
    """
    from calib.study.kinds import study_kind

    record = study_kind(spec.study.kind)
    if record.estimate is None:
        return None
    return estimate_lines(spec, await record.estimate(spec, resources, caps))


def _figure(entry: dict[str, Any], key: str, label: str) -> str:
    sign = "=" if key in entry["exact"] else "<="
    return f"{label} {sign} {entry[key]:,}"


def _figures(entry: dict[str, Any], currency: str | None) -> str:
    parts = [_figure(entry, "requests", "requests")]
    if entry["tokenizer_requests"]:
        parts.append(_figure(entry, "tokenizer_requests", "tokenizer requests"))
    parts += [_figure(entry, "input_tokens", "input tokens"), _figure(entry, "output_tokens", "output tokens")]
    if entry.get("cost") is not None:
        parts.append(f"cost {'=' if entry['cost_exact'] else '<='} {entry['cost']:.4f} {currency}")
    return ", ".join(parts)


def render(found: dict[str, Any]) -> list[str]:
    """The estimate as ``calib check --estimate`` prints it (two-space indented lines)."""
    out = ["  estimate ('=' exact, '<=' an upper bound; retries, context refusals and probes not counted):"]
    if not found["stages"]:
        out.append("    nothing estimated")
    for e in found["stages"]:
        tail = "" if e["counted"] else " (in-process: not counted by [budget])"
        out.append(f"    {e['stage']} {e['server']}: {_figures(e, found['currency'])}{tail}")
    for name, entry in found["servers"].items() if len(found["servers"]) > 1 else ():
        out.append(f"    server {name}: {_figures(entry, found['currency'])}")
    if found["stages"] and found["servers"]:
        total = found["total"]
        out.append(f"    total: {_figures(total, found['currency'])}")
    out += [f"    note: {note}" for note in found["notes"]]
    out += [f"    budget: {line}" for line in found["budget"]]
    return out
