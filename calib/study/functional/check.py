"""What ``calib check`` asks of a functional study's servers, and what the study measures."""

from __future__ import annotations

from typing import Any

__all__ = ["describe", "needs", "nothing_measured"]


def needs(spec: Any) -> dict[str, list[str]]:
    """Server name -> the capabilities beyond completion (``calib.servers.base.Capabilities`` fields)."""
    from calib.study.kinds import Needs

    need = Needs()
    add = need.add
    route = "chat" if spec.generation.route == "chat" else "complete"
    for name in (spec.models.target, spec.models.reference):
        add(name, route)  # both models complete every prompt, through the same route
    if spec.data.source != "organism" and spec.prompt.tokenizer == "server":
        add(spec.models.target, "tokenize")  # prompts keep the last P context tokens, by the target's tokenizer
    elif spec.data.source != "organism" and spec.prompt.tokenizer == "completions":
        add(spec.models.target, "echo_logprobs")  # ... counted by its completions route's echoed tokens
    if spec.execute.executor in ("llm", "agent") and spec.execute.server is not None:
        add(spec.execute.server, "chat")  # the llm executor's model writes inputs and preambles
        if spec.execute.executor == "agent":
            add(spec.execute.server, "tools")  # the agent's loop is tool calls
    if spec.dedup is not None and spec.dedup.semantic and spec.dedup.embedding_server:
        add(spec.dedup.embedding_server, "embeddings")
    if spec.data.judge is not None:
        add(spec.data.judge.server, "chat")  # the [data.judge] filter asks it about every drawn function
    for _, metric, server in spec.measure.measured():  # every judge and embedding server, each checked
        add(server, "chat" if metric.startswith("judge_") else "embeddings")
    return need


def nothing_measured(summary: dict[str, Any]) -> str | None:
    """Why the finished run scored no sample (its report's summary.json says), or None."""
    from calib.report.functional.counts import nothing_measured as why

    return why(summary)


def describe(spec: Any) -> dict[str, Any]:
    """What the study measures: its similarity metrics."""
    out: dict[str, Any] = {"metrics": list(spec.measure.metrics), "route": spec.generation.route}
    if spec.generation.chat_rule is not None:
        from calib.data.rules import load_rule

        out["rule"] = load_rule(spec.generation.chat_rule).fingerprint()
    if spec.dedup is not None and spec.dedup.source == "bands":
        # the table the dedup stage will search: readable, its shards unchanged, built with [dedup]'s settings
        from calib.study.functional.dedup import band_table_for

        table = band_table_for(spec.dedup)
        out["band_table"] = {"path": str(table.path), "functions": table.functions,
                             "settings": table.manifest["settings"]}
    return out
