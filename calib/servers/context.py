"""What a model's context leaves for a completion after its prompt (the budget rule every study kind and the
mitigation pairs share; calib.study.budgets answers hosts that only say it in a refusal)."""

from __future__ import annotations

from typing import Any

__all__ = ["completion_budgets"]


async def completion_budgets(server: Any, caps: dict[str, Any], prompts: list[str], max_tokens: int) -> list[int]:
    """Completion tokens per prompt: ``max_tokens``, lowered to what the model's context leaves after the prompt.

    The paper generates up to 500 tokens; a model with a short context (the organism's 512) gets what
    fits, so that no request is refused. Needs the server's tokenizer and ``max_context``; without them
    every prompt gets ``max_tokens`` (and a refusal is answered by :func:`calib.study.budgets.budget_after_refusal`).
    """
    limit = caps.get("max_context")
    if not limit or not caps.get("tokenize") or not hasattr(server, "tokenize"):
        return [max_tokens] * len(prompts)
    lengths = [len(await server.tokenize(p)) for p in prompts]
    return [min(max_tokens, int(limit) - n - 1) for n in lengths]
