"""What goes to a server and what comes back: sampling and chat parameters, completions, log-probs, tool calls.

Plain frozen records shared by every kind; :mod:`calib.servers.base` (the Server seam, whose module
docstring fixes the log-probability convention) re-exports every name here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "CHAT_MAX_TOP_LOGPROBS",
    "ChatMessage",
    "ChatParams",
    "ChatResponse",
    "Completion",
    "SamplingParams",
    "ScoredContinuation",
    "TokenLogprob",
    "Tool",
    "ToolCall",
]


@dataclass(frozen=True)
class SamplingParams:
    """Decoding parameters of a completion request.

    ``temperature = 0`` is greedy decoding. ``logprobs`` asks for that many top alternatives per
    generated token (``None``: no log-probs). ``stop`` sequences end the completion and are not
    part of its text.
    """

    max_tokens: int = 500
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int | None = None
    stop: tuple[str, ...] = ()
    n: int = 1
    seed: int | None = None
    logprobs: int | None = None

    def __post_init__(self) -> None:
        if self.max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1], got {self.top_p}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be >= 1 or None, got {self.top_k}")
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if self.logprobs is not None and self.logprobs < 0:
            raise ValueError(f"logprobs must be >= 0 or None, got {self.logprobs}")
        object.__setattr__(self, "stop", tuple(self.stop))

    @property
    def greedy(self) -> bool:
        """True for greedy (argmax) decoding."""
        return self.temperature == 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain data, e.g. for hashing into a cache key."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TokenLogprob:
    """One token with its log-prob and, when asked for, the top alternatives at its position.

    ``top`` holds ``(token_id, token_text, logprob)`` triples in descending log-prob order (ids are
    ``None`` where an API gives only text). ``rank`` is the token's 1-based rank in the full
    distribution where the server reports it (vLLM does), else ``None``.
    """

    token_id: int | None
    token: str
    logprob: float
    top: tuple[tuple[int | None, str, float], ...] = ()
    rank: int | None = None


@dataclass(frozen=True)
class Completion:
    """One generated completion of one prompt."""

    text: str
    finish_reason: str | None
    tokens: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True)
class ScoredContinuation:
    """Teacher-forced log-probs of ``continuation`` given ``prompt``, aligned by token ids.

    ``prompt_token_ids`` and ``continuation_token_ids`` come from the server's own tokenizer (the
    prompt and the continuation tokenized separately and concatenated, so the boundary is exact);
    ``tokens[i]`` scores ``continuation_token_ids[i]`` with its top alternatives (temperature 1).
    ``temperature_logprobs[T]`` holds the continuation's per-token log-probs under the base policy at
    temperature T, for servers that normalise over the whole vocabulary
    (:attr:`Capabilities.full_distribution`).
    """

    prompt_token_ids: tuple[int, ...]
    continuation_token_ids: tuple[int, ...]
    tokens: tuple[TokenLogprob, ...]
    temperature_logprobs: dict[float, tuple[float, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Tool:
    """A tool a chat model may call: a name, a description and a JSON-schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model made: its id, the tool's name and the decoded arguments."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ChatMessage:
    """One chat message. ``role`` is system, user, assistant or tool; a tool result names the call it
    answers in ``tool_call_id``; an assistant message may carry ``tool_calls``."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


#: The most top alternatives per token a chat API returns (the OpenAI API's ``top_logprobs`` limit, vLLM's default).
CHAT_MAX_TOP_LOGPROBS = 20


@dataclass(frozen=True)
class ChatParams:
    """Decoding parameters of a chat request.

    ``logprobs`` asks for the output tokens' log-probs: ``None`` asks none; ``0`` to ``20`` the chosen
    token's log-prob plus that many top alternatives per generated token (the OpenAI chat API's
    ``logprobs=true`` with ``top_logprobs``).
    """

    max_tokens: int = 1024
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    logprobs: int | None = None

    def __post_init__(self) -> None:
        if self.logprobs is not None and not 0 <= self.logprobs <= CHAT_MAX_TOP_LOGPROBS:
            raise ValueError(f"logprobs must be None or 0..{CHAT_MAX_TOP_LOGPROBS} (top alternatives per generated "
                             f"token, the chat APIs' limit), got {self.logprobs}")


@dataclass(frozen=True)
class ChatResponse:
    """A chat model's answer: text, tool calls, why it stopped, and token usage.

    ``logprobs`` holds one :class:`TokenLogprob` per generated token when :attr:`ChatParams.logprobs` asked
    for them (else ``None``): its text, its log-prob and the top alternatives, descending (``token_id`` is
    ``None`` where the API names tokens by text only, as chat APIs do).
    """

    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None
