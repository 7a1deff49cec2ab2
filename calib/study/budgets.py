"""Completion budgets: how many tokens a generation may take, given the model's context and the prompt.

With the server's tokenizer the budget is computed before asking (:func:`completion_budgets`). A host
without one (no ``/tokenize``: most hosted APIs) is asked for ``max_tokens``; when it refuses because
prompt plus completion exceed its context (HTTP 400 stating its context length and the prompt's
tokens, as vLLM, the OpenAI API and calib serve word it), :func:`context_refusal` reads what the
refusal says and the request is asked again with what is left (:func:`budget_after_refusal`) —
recorded, never a silent truncation.
"""

from __future__ import annotations

import re
from typing import Any

from calib.servers.context import completion_budgets

__all__ = ["ask_chat", "ask_chat_samples", "budget_after_refusal", "completion_budgets", "context_refusal"]

_LIMIT = re.compile(r"maximum context length is (\d+)")
# "(100 in the prompt, 500 in the completion)" / "(100 in the messages, ...)": vLLM before 0.8, the
# OpenAI API, calib serve; "your request has 100 input tokens": vLLM 0.8 and later.
_USED = re.compile(r"\((\d+) in the (?:prompt|messages)|request has (\d+) input tokens")


def context_refusal(message: str) -> tuple[int, int] | None:
    """``(context length, prompt tokens)`` that a host's context-length refusal states, or None for another error."""
    limit, used = _LIMIT.search(message), _USED.search(message)
    if limit is None or used is None:
        return None
    return int(limit.group(1)), int(used.group(1) or used.group(2))


def budget_after_refusal(message: str, asked: int) -> int | None:
    """The completion budget to ask again with after the refusal ``message`` of a request for ``asked`` tokens.

    What the context leaves after the prompt, by the host's own count (the same rule as
    :func:`completion_budgets`, which counts the prompt with the server's tokenizer); None when the
    message is not a context refusal or leaves nothing smaller to ask for (then the failure stands).
    """
    refusal = context_refusal(message)
    if refusal is None:
        return None
    limit, used = refusal
    budget = limit - used
    return budget if 1 <= budget < asked else None


async def ask_chat(server: Any, messages: list[Any], params: Any) -> tuple[Any, int | None]:
    """One chat request; a context-length refusal is asked again once with what the host says is left.

    Returns the reply and the lowered ``max_tokens`` (None when the first request was answered): the
    caller records it (a ``budget_lowered`` event), so that nothing is truncated silently.
    """
    from dataclasses import replace

    from calib._exceptions import CalibError

    try:
        return await server.chat(messages, params=params), None
    except CalibError as exc:  # RequestFailed is one
        lower = budget_after_refusal(str(exc), params.max_tokens)
        if lower is None:
            raise
    return await server.chat(messages, params=replace(params, max_tokens=lower)), lower


async def ask_chat_samples(server: Any, messages: list[Any], params: Any, n: int,
                           on_lowered: Any = None) -> list[Any]:
    """``n`` replies to the same messages: ``n`` chat requests at once (a chat API has no ``n``; Anthropic's none).

    Request ``i`` has seed ``params.seed + i`` (none when ``params.seed`` is None); each is :func:`ask_chat`,
    and a lowered budget is reported to ``on_lowered(asked, lowered)`` so that the caller records it.
    """
    import asyncio
    from dataclasses import replace

    async def one(i: int) -> Any:
        seed = None if params.seed is None else (params.seed + i) % 2**63
        reply, lower = await ask_chat(server, messages, replace(params, seed=seed))
        if lower is not None and on_lowered is not None:
            on_lowered(params.max_tokens, lower)
        return reply

    return list(await asyncio.gather(*(one(i) for i in range(n))))
