"""What ``calib check`` asks of an extraction or census study's servers, and what the study measures."""

from __future__ import annotations

from typing import Any

__all__ = ["describe", "needs", "nothing_measured"]


def needs(spec: Any) -> dict[str, list[str]]:
    """Server name -> the capabilities beyond completion (``calib.servers.base.Capabilities`` fields)."""
    from calib.study.kinds import Needs
    from calib.study.sections.extraction import GENERATION_ONLY

    need = Needs()
    add = need.add
    e = spec.extraction
    logprob = [p for p in e.procedures if p not in GENERATION_ONLY]
    if spec.prompt.tokenizer == "server":
        add(spec.models.target, "tokenize")  # windows are cut with the target's tokenizer
    elif spec.prompt.tokenizer == "completions":
        add(spec.models.target, "echo_logprobs")  # ... with its completions route's echoed tokens
    for name in (spec.models.target, spec.models.reference):
        if name is None:
            continue
        if logprob:  # teacher-forced log-probs of the suffix's tokens, re-tokenized by each model's server
            add(name, "scoring")
            add(name, "tokenize")
        if any(float(t) != 1.0 for t in e.temperatures) and "base" in e.procedures:
            add(name, "full_distribution")
        chat = spec.generation.route == "chat"
        if any(p in e.procedures for p in ("near_verbatim_greedy", "near_verbatim", *GENERATION_ONLY)):
            add(name, "chat" if chat else "complete")  # near-verbatim and the generation procedures generate
        if "greedy_logprob" in e.procedures:  # the greedy generation's output-token log-probs
            add(name, "chat_logprobs" if chat else "output_logprobs")
    return need


def nothing_measured(summary: dict[str, Any]) -> str | None:
    """Why the finished extraction or census run scored no window (its summary.json says), or None."""
    from calib.report.extraction.empty import nothing_measured as why

    return why(summary)


def describe(spec: Any) -> dict[str, Any]:
    """What the study measures: its extraction procedures."""
    return {"procedures": list(spec.extraction.procedures)}
