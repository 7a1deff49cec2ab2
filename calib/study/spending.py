"""What a study invocation has asked of its model servers, and the ``[budget]`` caps on it (docs/hosted.md).

Every HTTP server kind counts, per server, the requests it sent and the token usage its answers
reported (:class:`calib.servers._limit.HttpStats`); the embedded kind, which runs in this process,
costs nothing and counts nothing. :func:`spent` adds them up (and prices them by
``[budget.prices.NAME]``); :func:`over_budget` says which cap, if any, is reached.
:meth:`calib.study.runner.StageContext.chunked` asks before each chunk: once a cap is reached no chunk
starts, the chunks in flight finish and are kept, and the stage stops with :class:`BudgetReached`
(``calib study`` exits 4). Run again — with the cap raised, or as it is for another slice — and the
study resumes from the kept chunks.
"""

from __future__ import annotations

from typing import Any

from calib._exceptions import CalibError

__all__ = ["BudgetReached", "over_budget", "spent"]


class BudgetReached(CalibError):
    """A ``[budget]`` cap stopped the study; what was done is kept and a re-run resumes (exit code 4)."""

    exit_code = 4


def spent(resources: Any) -> dict[str, Any]:
    """Requests, tokens and cost of this invocation so far: totals and per server (only servers that count)."""
    budget = resources.spec.budget
    prices = budget.prices if budget is not None else {}
    servers: dict[str, dict[str, Any]] = {}
    for name, server in resources.started_servers().items():
        stats = getattr(server, "stats", None)
        if stats is None:
            continue
        entry = {"requests": int(stats.attempts), "input_tokens": int(getattr(stats, "input_tokens", 0)),
                 "output_tokens": int(getattr(stats, "output_tokens", 0)),
                 "usage_missing": int(getattr(stats, "usage_missing", 0))}
        price = prices.get(name)
        entry["cost"] = (entry["input_tokens"] * price.input + entry["output_tokens"] * price.output) / 1e6 \
            if price is not None else 0.0
        servers[name] = entry
    total = {key: sum(s[key] for s in servers.values()) for key in ("requests", "input_tokens", "output_tokens",
                                                                     "usage_missing", "cost")}
    total["tokens"] = total["input_tokens"] + total["output_tokens"]
    return {**total, "currency": budget.currency if budget is not None else None, "servers": servers}


def over_budget(resources: Any) -> str | None:
    """Which ``[budget]`` cap this invocation has reached, as a sentence; None while every cap holds."""
    budget = resources.spec.budget
    if budget is None:
        return None
    now = spent(resources)
    if budget.requests is not None and now["requests"] >= budget.requests:
        return f"{now['requests']:,} requests sent (budget.requests = {budget.requests:,})"
    if budget.tokens is not None and now["tokens"] >= budget.tokens:
        lower = f", at least: {now['usage_missing']} answer(s) reported no usage" if now["usage_missing"] else ""
        return f"{now['tokens']:,} tokens used (budget.tokens = {budget.tokens:,}{lower})"
    if budget.cost is not None and now["cost"] >= budget.cost:
        return (f"{now['cost']:.4f} {budget.currency} spent (budget.cost = {budget.cost:g} {budget.currency}, at "
                "budget.prices)")
    return None
