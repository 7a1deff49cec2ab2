"""The ``anthropic`` kind: chat and tool use through the ``anthropic`` SDK (judges and agent executors).

Chat only: :meth:`AnthropicServer.complete` raises :class:`~calib.servers.base.CapabilityError`, and
the kind offers no scoring, tokenizer or embeddings. A system message becomes the ``system``
parameter (several are joined), tool calls are ``tool_use`` blocks of an assistant message, and tool
results are ``tool_result`` blocks of the next user message (consecutive results share one). The
Messages API of the installed SDK takes no temperature or seed, so :class:`ChatParams` contributes
``max_tokens`` and ``stop`` only.

Retries are the SDK's own (``max_retries``; it retries 408, 409, 429, 5xx and 529 "overloaded" with
backoff and honours ``retry-after``); a request that still fails raises
:class:`~calib.servers.base.RequestFailed`, recorded in ``stats.failed``. The SDK's retries are out of
calib's sight, so ``max_in_flight`` stays fixed and ``stats.throttled`` counts only the 429s that
outlasted them.

Token usage: each answer received over the network (not from the cache) adds its ``usage`` to
``stats``: ``input_tokens`` plus, where prompt caching reports them, ``cache_creation_input_tokens``
and ``cache_read_input_tokens`` (all the input the model read) to ``stats.input_tokens``, and
``output_tokens`` to ``stats.output_tokens``.

Config keys: ``model`` (required), ``api_key_env`` (the environment variable holding the key,
``ANTHROPIC_API_KEY`` by default), ``base_url``, ``max_retries`` (4), ``timeout`` (seconds, 600),
``max_in_flight`` (8), ``revision`` (part of the cache identity), ``cache`` (a
:class:`~calib.servers.cache.RequestCache`) and ``http_client`` (an ``httpx2.AsyncClient`` to send
requests through, e.g. a mock transport in tests).

Provenance (:meth:`AnthropicServer.provenance`): the spec's model and the ``model`` each answer names;
the API reports no revision, dtype or server version, so they are recorded as null with that reason.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import anthropic

from calib._exceptions import InvalidParameterError
from calib.servers._config import api_key_from_env, check_config, positive
from calib.servers._http import HttpStats, usage_count
from calib.servers.base import (
    Capabilities,
    CapabilityError,
    ChatMessage,
    ChatParams,
    ChatResponse,
    Completion,
    RequestFailed,
    SamplingParams,
    ScoredContinuation,
    Tool,
    ToolCall,
    require_chat_logprobs,
    server_record,
)
from calib.servers.cache import cache_key
from calib.servers.registry import register

__all__ = ["AnthropicServer", "anthropic_request"]

_KEYS = frozenset({"kind", "model", "api_key_env", "base_url", "max_retries", "timeout", "max_in_flight",
                   "revision", "cache", "http_client"})
_ROUTE = "/v1/messages"


def anthropic_request(messages: Sequence[ChatMessage], tools: Sequence[Tool] = ()) -> dict[str, Any]:
    """``messages`` (and ``tools``) as Messages API arguments: ``system``, ``messages``, ``tools``."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            system.append(m.content)
        elif m.role == "tool":
            if not m.tool_call_id:
                raise InvalidParameterError("a tool message needs tool_call_id, the id of the tool call it answers")
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            last = out[-1] if out else None
            if last and last["role"] == "user" and isinstance(last["content"], list) and all(
                    b.get("type") == "tool_result" for b in last["content"]):
                last["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m.role == "assistant" and m.tool_calls:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": m.role, "content": m.content})
    request: dict[str, Any] = {"messages": out}
    if system:
        request["system"] = "\n\n".join(system)
    if tools:
        request["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                            for t in tools]
    return request


@register("anthropic")
class AnthropicServer:
    """A chat-only client of the Anthropic Messages API."""

    kind = "anthropic"

    def __init__(self, name: str, config: Mapping[str, Any]) -> None:
        check_config(name, self.kind, config, _KEYS)
        model = config.get("model")
        if not isinstance(model, str) or not model:
            raise InvalidParameterError(f"server {name!r} (anthropic): give model, e.g. model = \"claude-sonnet-5\"")
        self.name = name
        self.model = model
        self.revision: str | None = config.get("revision")
        self.max_retries = config.get("max_retries", 4)
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise InvalidParameterError(f"server {name!r}: max_retries must be an integer >= 0, "
                                        f"got {self.max_retries!r}")
        timeout = positive(name, "timeout", config.get("timeout", 600.0), float)
        max_in_flight = positive(name, "max_in_flight", config.get("max_in_flight", 8))
        self._semaphore = asyncio.Semaphore(max_in_flight)
        key = api_key_from_env(name, config.get("api_key_env", "ANTHROPIC_API_KEY"))
        self._client = anthropic.AsyncAnthropic(api_key=key, base_url=config.get("base_url"),
                                                max_retries=self.max_retries, timeout=timeout,
                                                http_client=config.get("http_client"))
        self.cache = config.get("cache")
        self.identity = {"kind": self.kind, "model": self.model, "revision": self.revision}
        self.stats = HttpStats(limit=max_in_flight, limit_min=max_in_flight)
        self._answered: set[str] = set()  # the model each answer names (provenance)

    def __repr__(self) -> str:
        return f"AnthropicServer(name={self.name!r}, model={self.model!r})"

    async def capabilities(self) -> Capabilities:
        """Chat and tools; nothing else (no network probe: the API's abilities are documented)."""
        return Capabilities(kind=self.kind, name=self.name, model=self.model, complete=False, chat=True, tools=True,
                            notes=("chat only: no completions, scoring, tokenizer or embeddings",
                                   "the Messages API takes no temperature or seed"))

    def provenance(self) -> dict[str, Any]:
        """The spec's model and the models the answers named; the API reports no revision, dtype or version."""
        hosted = "the Anthropic API does not report it"
        revision = ((self.revision, "spec revision (stated, not reported by the API)") if self.revision else
                    (None, f"{hosted} and the spec states no revision"))
        return server_record(self.kind, {"model": (self.model, "spec model"), "revision": revision,
                                         "dtype": (None, hosted), "server_version": (None, hosted)},
                             response_models=sorted(self._answered))

    def _chat_only(self, what: str) -> CapabilityError:
        return CapabilityError(f"server {self.name!r} (anthropic, model {self.model!r}) lacks {what}: it is chat "
                               f"only; use an openai, tgi or embedded server for {what}")

    async def complete(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Completion]]:
        """Always raises :class:`CapabilityError`: the kind is chat only."""
        raise self._chat_only("completions")

    async def score(self, prompt: str, continuation: str, *, top_logprobs: int = 0,
                    temperatures: Sequence[float] = ()) -> ScoredContinuation:
        """Always raises :class:`CapabilityError`: the kind is chat only."""
        raise self._chat_only("scoring")

    async def chat(self, messages: Sequence[ChatMessage], *, tools: Sequence[Tool] = (),
                   params: ChatParams | None = None) -> ChatResponse:
        """The model's next message; ``tool_use`` blocks become :class:`ToolCall` objects.

        The Messages API gives no log-probs: ``params.logprobs`` raises :class:`CapabilityError` (``chat_logprobs``).
        """
        params = params or ChatParams()
        if params.logprobs is not None:
            require_chat_logprobs(await self.capabilities(), params.logprobs)
        request = {"model": self.model, "max_tokens": params.max_tokens, **anthropic_request(messages, tools)}
        if params.stop:
            request["stop_sequences"] = list(params.stop)
        key = cache_key(self.identity, f"POST {_ROUTE}", request) if self.cache is not None else None
        if key is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.stats.cache_hits += 1
                return ChatResponse(**{**hit, "tool_calls": tuple(ToolCall(**c) for c in hit["tool_calls"])})
        async with self._semaphore:
            self.stats.attempts += 1
            try:
                message = await self._client.messages.create(**request)
            except anthropic.APIStatusError as exc:
                status = exc.status_code
                if status == 429:
                    self.stats.throttled += 1
                retried = status in (408, 409, 429) or status >= 500
                raise self._failed(self.max_retries + 1 if retried else 1, f"HTTP {status}: {_detail(exc)}",
                                   status) from exc
            except anthropic.APIConnectionError as exc:
                raise self._failed(self.max_retries + 1, f"{type(exc).__name__}: {exc}") from exc
        if isinstance(message.model, str) and message.model and len(self._answered) < 50:
            self._answered.add(message.model)
        content = "".join(b.text for b in message.content if b.type == "text")
        calls = tuple(ToolCall(id=b.id, name=b.name, arguments=dict(b.input))
                      for b in message.content if b.type == "tool_use")
        usage = message.usage
        self._count_usage(usage)
        response = ChatResponse(content=content, tool_calls=calls, finish_reason=message.stop_reason,
                                input_tokens=usage.input_tokens if usage else None,
                                output_tokens=usage.output_tokens if usage else None)
        if key is not None:
            self.cache.put(key, f"POST {_ROUTE}", dataclasses.asdict(response))
        return response

    def _count_usage(self, usage: Any) -> None:
        """Add a received answer's tokens to ``stats`` (the input counts cached prompt tokens too)."""
        if usage is None:
            self.stats.add_usage(None, None)
            return
        read = usage_count(getattr(usage, "input_tokens", None))
        if read is not None:
            for extra in ("cache_creation_input_tokens", "cache_read_input_tokens"):
                read += usage_count(getattr(usage, extra, None)) or 0
        self.stats.add_usage(read, usage_count(getattr(usage, "output_tokens", None)))

    def _failed(self, attempts: int, error: str, status: int | None = None) -> RequestFailed:
        failure = RequestFailed(self.name, _ROUTE, attempts, " ".join(error.split())[:300], status)
        self.stats.failures += 1
        self.stats.failed.append(failure)
        return failure

    async def aclose(self) -> None:
        """Close the SDK's connection pool."""
        await self._client.close()


def _detail(exc: anthropic.APIStatusError) -> str:
    """``<error type>: <message>`` from an API error body (never the request or its headers)."""
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    if error:
        return f"{error.get('type', 'error')}: {error.get('message', '')}"
    return str(exc.message)
