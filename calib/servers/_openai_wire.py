"""The OpenAI wire format as the ``openai`` kind uses it: chat messages out; choices, log-probs and usage in.

vLLM names a token by id in a log-prob key (``token_id:<id>``) when asked for ``return_tokens_as_token_ids``;
:mod:`calib.servers.openai` explains when it asks.
"""

from __future__ import annotations

import json
import re
from typing import Any

from calib.servers._http import usage_count
from calib.servers.base import ChatMessage, ServerError, TokenLogprob

__all__ = ["chat_token_logprobs", "openai_message", "openai_usage"]

_TOKEN_ID = re.compile(r"^token_id:(\d+)$")
# The routes whose answers carry ``usage`` (the OpenAI API, vLLM, SGLang and calib serve alike).
_USAGE_ROUTES = frozenset({"/v1/completions", "/v1/chat/completions", "/v1/embeddings"})


def openai_message(message: ChatMessage) -> dict[str, Any]:
    """A :class:`ChatMessage` in the OpenAI chat format (tool calls with JSON-encoded arguments)."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                             for c in message.tool_calls]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return out


def openai_usage(route: str, answer: Any) -> tuple[int | None, int | None] | None:
    """``(prompt_tokens, completion_tokens)`` of an answer's ``usage`` (None for a count it lacks);
    None for a route without usage (``/tokenize``, ``/v1/models``, ...).

    An embeddings answer states no ``completion_tokens``: it generated none, so its output is 0.
    """
    if route not in _USAGE_ROUTES:
        return None
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if not isinstance(usage, dict):
        return None, None
    prompt, completion = usage_count(usage.get("prompt_tokens")), usage_count(usage.get("completion_tokens"))
    if route == "/v1/embeddings" and completion is None and prompt is not None:
        completion = 0
    return prompt, completion


def _choices(server: str, answer: Any, route: str) -> list[dict[str, Any]]:
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        raise ServerError(f"server {server!r}: {route} answered without choices")
    return choices


def _key_id(key: str) -> tuple[int | None, str]:
    match = _TOKEN_ID.match(key)
    return (int(match.group(1)), "") if match else (None, key)


def _echo_tokens(logprobs: dict[str, Any], start: int, stop: int, ids: list[int] | None,
                 top: int) -> list[TokenLogprob]:
    """TokenLogprobs for positions [start, stop) of an OpenAI ``logprobs`` object.

    Token ids come from ``ids`` (vLLM's ``token_ids`` / ``prompt_token_ids``, indexed from the first
    position) or from ``token_id:N`` strings (``return_tokens_as_token_ids``); else they are None.
    """
    texts = logprobs.get("tokens") or []
    values = logprobs.get("token_logprobs") or []
    tops = logprobs.get("top_logprobs") or []
    out = []
    for pos in range(start, stop):
        token_id, text = _key_id(str(texts[pos])) if pos < len(texts) else (None, "")
        if ids is not None and pos < len(ids):
            token_id = int(ids[pos])
        value = values[pos]
        if value is None:
            raise ServerError(f"the server gave no log-prob at token {pos}")
        alternatives = tops[pos] if pos < len(tops) and isinstance(tops[pos], dict) else {}
        ranked = sorted(((*_key_id(k), float(v)) for k, v in alternatives.items()), key=lambda t: -t[2])
        out.append(TokenLogprob(token_id=token_id, token=text, logprob=float(value), top=tuple(ranked[:top])))
    return out


def chat_token_logprobs(server: str, choice: dict[str, Any], top: int) -> tuple[TokenLogprob, ...]:
    """The output-token log-probs of a chat choice (``choice["logprobs"]["content"]``), one per generated token.

    Each item is ``{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}, ...]}`` (the OpenAI chat
    API, vLLM and calib serve alike). Tokens are named by text only (``token_id`` None, unless a server
    names them ``token_id:N``); the top alternatives are sorted by descending log-prob and cut to ``top``
    (vLLM lists the sampled token first). The OpenAI API gives -9999.0 for a chosen token outside its top 20:
    such a value is a floor, not a log-prob.

    Raises
    ------
    ServerError
        The answer carries no log-probs although they were asked for, or an item lacks a numeric log-prob.
    """
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if content is None and not ((choice.get("message") or {}).get("content") or ""):
        return ()  # nothing was generated: the APIs give null content
    if not isinstance(content, list):
        raise ServerError(f"server {server!r}: /v1/chat/completions answered without logprobs.content although "
                          f"asked for logprobs=true; the host does not return chat log-probs for this model")
    out = []
    for pos, item in enumerate(content):
        value = item.get("logprob") if isinstance(item, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ServerError(f"server {server!r}: /v1/chat/completions logprobs.content[{pos}] has no numeric "
                              f"logprob: {str(item)[:120]!r}")
        alternatives = [a for a in item.get("top_logprobs") or [] if isinstance(a, dict)
                        and isinstance(a.get("logprob"), (int, float))]
        ranked = sorted(((*_key_id(str(a.get("token", ""))), float(a["logprob"])) for a in alternatives),
                        key=lambda t: -t[2])
        token_id, text = _key_id(str(item.get("token", "")))
        out.append(TokenLogprob(token_id=token_id, token=text, logprob=float(value), top=tuple(ranked[:top])))
    return tuple(out)
