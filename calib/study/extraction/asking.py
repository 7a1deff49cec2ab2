"""How an extraction or census study asks one server for a window's generations: completion route or chat.

The generation procedures (``greedy_prefix``, ``greedy_logprob``, ``sampled``:
:mod:`calib.study.extraction.generated`) need the model's continuation of a window's prefix. Through
the completion route the prefix is the prompt. Through a chat route (``[generation] route = "chat"``)
the spec's prompt-selection rule (:mod:`calib.data.rules`) makes the messages from the prefix — and, for
a rule that shows it (``parrot``), the suffix — and reads the continuation back from the reply; the
same rule for members and controls, target and reference (docs/hosted.md "Generation through chat").
A chat request is one generation (Anthropic has no ``n``), so ``n`` samples are ``n`` requests with
seeds ``seed``, ``seed + 1``, ...; a context-length refusal is asked again once with what the host
says is left (:func:`calib.study.budgets.ask_chat_samples`) and reported to ``on_lowered``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["REQUEST_SAMPLES", "Asker", "Generation", "chat_budget"]

#: Generations asked per completion request (n above it is split into several requests).
REQUEST_SAMPLES = 32
#: Tokens a code-block reply may spend besides the code: the fence, its language tag and a line of prose.
_REPLY_OVERHEAD = 16


@dataclass(frozen=True)
class Generation:
    """One generation of a window: the continuation read back, the chat reply as sent, output-token log-probs."""

    text: str
    reply: str | None = None
    tokens: tuple[Any, ...] | None = None


def chat_budget(rule: Any, suffix_tokens: int, prefix_tokens: int) -> int:
    """``max_tokens`` of a chat request for a suffix of ``suffix_tokens`` tokens under ``rule``.

    A ``raw`` reply is the continuation itself; a code reply may first repeat the prompt (``continue``
    repeats its last line, ``parrot`` all of it), so it gets the prefix's tokens and the fence's besides.
    Text after the suffix's length is never compared, so a larger budget changes no score.
    """
    if rule.reply == "raw":
        return suffix_tokens
    return suffix_tokens + prefix_tokens + _REPLY_OVERHEAD


class Asker:
    """Asks one server for generations of windows, through its completion route or through chat by ``rule``."""

    def __init__(self, server: Any, *, rule: Any = None, language: str = "python",
                 on_lowered: Callable[[int, int], None] | None = None) -> None:
        self.server = server
        self.rule = rule
        self.language = language
        self.on_lowered = on_lowered

    @property
    def route(self) -> str:
        return "complete" if self.rule is None else "chat"

    async def generate(self, prefix: str, suffix: str, *, max_tokens: int, temperature: float, n: int = 1,
                       seed: int | None = None, logprobs: int | None = None,
                       language: str | None = None) -> list[Generation]:
        """``n`` generations after ``prefix`` (``max_tokens`` each; ``logprobs``: top alternatives per token)."""
        if self.rule is not None:
            return await self._chat(prefix, suffix, max_tokens, temperature, n, seed, logprobs,
                                    language or self.language)
        from calib.servers import SamplingParams

        out: list[Generation] = []
        for start in range(0, n, REQUEST_SAMPLES):
            size = min(REQUEST_SAMPLES, n - start)
            at = None if seed is None else (seed + start) % 2**63
            (completions,) = await self.server.complete([prefix], SamplingParams(
                max_tokens=max_tokens, temperature=temperature, n=size, seed=at, logprobs=logprobs))
            if len(completions) != size:
                raise ValueError(f"asked for n = {size} generations, the server returned {len(completions)}")
            out.extend(Generation(text=c.text, tokens=tuple(c.tokens) if logprobs is not None else None)
                       for c in completions)
        return out

    async def _chat(self, prefix: str, suffix: str, max_tokens: int, temperature: float, n: int,
                    seed: int | None, logprobs: int | None, language: str) -> list[Generation]:
        from calib.servers import ChatMessage, ChatParams
        from calib.study.budgets import ask_chat_samples

        rule = self.rule
        messages = [ChatMessage(role=m["role"], content=m["content"]) for m in
                    rule.messages(prefix, language=language, suffix=suffix if rule.shows_suffix else None)]
        extra = {} if logprobs is None else {"logprobs": logprobs}
        params = ChatParams(max_tokens=max_tokens, temperature=temperature, seed=seed, **extra)
        replies = await ask_chat_samples(self.server, messages, params, n, self.on_lowered)
        return [Generation(text=rule.continuation(r.content, prefix), reply=r.content,
                           tokens=None if r.logprobs is None else tuple(r.logprobs)) for r in replies]
