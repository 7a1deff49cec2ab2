"""The ``openai`` kind: any OpenAI-compatible server (vLLM first, SGLang, calib's embedded server).

Requests go through :class:`~calib.servers._http.HttpClient` (aiohttp), not the ``openai`` SDK: on the
hot path aiohttp was measured about 1.4 times faster at a third of the CPU (the generation servers
issue). ``/v1/completions`` carries up to ``batch_size`` prompts per request where the server accepts
a list.

Scoring a continuation (teacher forcing) and how it is aligned
--------------------------------------------------------------
:meth:`OpenAIServer.score` never aligns by string matching. The prompt (with the special tokens the
server adds, e.g. BOS) and the continuation (without) are tokenized **separately** by the server's own
``/tokenize``; their concatenation fixes which tokens are the continuation's.

* Where the server accepts token-id prompts (vLLM, calib's embedded server), exactly those ids are
  sent, so the boundary is exact by construction. Log-probs come from vLLM's ``prompt_logprobs``
  (ids, ranks and top alternatives per position) or else from ``echo`` + ``logprobs`` with
  ``max_tokens`` 0 (1 where the server demands at least one generated token; it is discarded).
* Where it accepts only text, the joined text is sent, and the server's tokens of the joined text
  (``/tokenize`` of prompt + continuation, and the ids in the answer where it returns them) must equal
  the separately tokenized ids. When they differ — the server re-tokenizes across the
  prompt/continuation boundary, e.g. a prompt ending in a space merges with the continuation's first
  word — :class:`~calib.servers.base.ServerError` names the first differing token position; calib
  does not guess an alignment. End the prompt at a token boundary or use a server that accepts token
  ids.

The top alternatives of ``echo`` + ``logprobs`` are keyed by token text, which merges distinct tokens
that decode alike; the kind asks vLLM for them by id (``return_tokens_as_token_ids``, the token text is
then empty) and prefers ``prompt_logprobs``, which is keyed by id and carries each token's rank.

Config keys: ``base_url`` or ``base_urls``, ``model`` (default: the first one ``/v1/models`` lists),
``api_key_env`` (the name of an environment variable holding the key, sent only in the
``Authorization`` header), ``max_in_flight`` (32), ``timeout`` (seconds per attempt, 600),
``max_retries`` (5), ``revision`` (part of the cache identity), ``batch_size`` (prompts per
``/v1/completions`` request, 32), ``dtype`` (the weights' dtype the server was started with, e.g.
vLLM's ``--dtype``: recorded in the run, checked against ``GET /info`` where the server has it) and
``cache`` (a :class:`~calib.servers.cache.RequestCache`).

Rate limits and token usage: ``max_in_flight`` is a ceiling. An HTTP 429 (or 503 with ``Retry-After``)
halves the requests in flight and runs of successes grow them back
(:class:`~calib.servers._limit.AdaptiveLimit`). Every answer of ``/v1/completions``,
``/v1/chat/completions`` and ``/v1/embeddings`` received over the network, the capability probe's
included, adds its ``usage`` (``prompt_tokens``, ``completion_tokens``) to :attr:`OpenAIServer.stats`;
an answer from the cache adds nothing.

Provenance (:meth:`OpenAIServer.provenance`): the model and ``root`` of ``/v1/models``, ``/version``,
TGI's ``GET /info`` where the server offers it (its ``model_sha`` and ``model_dtype``; vLLM has no
such route and reports neither), and the ``model`` and ``system_fingerprint`` of every answer.

The request cache keys on kind, model, revision and the request body; without a ``revision`` the base
URLs stand in for it, so that two servers that give the same name to different weights never share
answers. A sampled request without a seed is cached like any other: a re-run returns the same samples.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from calib._exceptions import InvalidParameterError
from calib.servers._config import (
    api_key_from_env,
    boundary_error,
    check_config,
    first_mismatch,
    positive,
    stated_dtype,
)
from calib.servers._http import HttpClient, RetryPolicy
from calib.servers._openai_probe import _OpenAIProbe
from calib.servers._openai_wire import _choices, _echo_tokens, chat_token_logprobs, openai_message, openai_usage
from calib.servers.base import (
    Capabilities,
    ChatMessage,
    ChatParams,
    ChatResponse,
    Completion,
    SamplingParams,
    ScoredContinuation,
    ServerError,
    TokenLogprob,
    Tool,
    ToolCall,
    require,
    require_chat_logprobs,
    server_record,
)
from calib.servers.registry import register

__all__ = ["OpenAIServer"]

_KEYS = frozenset({"kind", "base_url", "base_urls", "model", "api_key_env", "max_in_flight", "timeout",
                   "max_retries", "revision", "batch_size", "dtype", "cache"})


@register("openai")
class OpenAIServer(_OpenAIProbe):
    """A client of one OpenAI-compatible server (or several replicas of it)."""

    kind = "openai"

    def __init__(self, name: str, config: Mapping[str, Any]) -> None:
        check_config(name, self.kind, config, _KEYS)
        urls = config.get("base_urls") or ([config["base_url"]] if config.get("base_url") else [])
        if isinstance(urls, str):
            urls = [urls]
        if not urls:
            raise InvalidParameterError(f"server {name!r} (openai): give base_url or base_urls, e.g. "
                                        f"base_url = \"http://127.0.0.1:8000\"")
        # Tolerate base URLs written with the OpenAI SDK's /v1 suffix: calib adds the routes itself.
        self.base_urls = [re.sub(r"/v1/?$", "", str(u).rstrip("/")) for u in urls]
        self.name = name
        self.model: str | None = config.get("model")
        self.revision: str | None = config.get("revision")
        self.dtype = stated_dtype(name, config)
        # What the probe and the answers said about the server (provenance): /v1/models' entry,
        # /version, /info, and each answer's model and system_fingerprint.
        self._about: dict[str, Any] = {}
        self._answered: dict[str, set[str]] = {"model": set(), "system_fingerprint": set()}
        self.batch_size = positive(name, "batch_size", config.get("batch_size", 32))
        max_in_flight = positive(name, "max_in_flight", config.get("max_in_flight", 32))
        max_retries = config.get("max_retries", 5)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise InvalidParameterError(f"server {name!r}: max_retries must be an integer >= 0, got {max_retries!r}")
        timeout = positive(name, "timeout", config.get("timeout", 600.0), float)
        key = api_key_from_env(name, config.get("api_key_env"))
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        identity: dict[str, Any] = {"kind": self.kind, "model": self.model, "revision": self.revision}
        if self.revision is None:
            identity["base_urls"] = sorted(self.base_urls)
        self.policy = RetryPolicy(max_attempts=max_retries + 1, timeout=timeout)
        self._http = HttpClient(name, self.base_urls, headers=headers, max_in_flight=max_in_flight,
                                policy=self.policy, cache=config.get("cache"), identity=identity,
                                usage=openai_usage)
        self._caps: Capabilities | None = None
        self._probe_lock = asyncio.Lock()
        # What the probe found about the completions route (see _probe): the max_tokens that scoring by
        # prompt_logprobs and by echo work with, and vLLM's ways of naming tokens by id.
        self._plp_max_tokens = 1
        self._echo_max_tokens = 1
        self._return_token_ids = False
        self._ids_as_tokens = False

    def __repr__(self) -> str:
        return f"OpenAIServer(name={self.name!r}, base_urls={self.base_urls!r}, model={self.model!r})"

    @property
    def stats(self):
        """Request counters, throttling, token usage and the requests that failed after their retries (to record)."""
        return self._http.stats

    # ----------------------------------------------------------------------------------- completion
    async def complete(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Completion]]:
        """``params.n`` completions per prompt, in prompt order; up to ``batch_size`` prompts per request."""
        caps = await self.capabilities()
        if params.logprobs:
            require(caps, [], top_logprobs=params.logprobs)
        prompts = list(prompts)
        size = self.batch_size if caps.batch_prompts else 1
        chunks = [prompts[i:i + size] for i in range(0, len(prompts), size)]
        answers = await asyncio.gather(*(self._complete_chunk(chunk, params) for chunk in chunks))
        return [completions for answer in answers for completions in answer]

    async def _complete_chunk(self, prompts: list[str], params: SamplingParams) -> list[list[Completion]]:
        body: dict[str, Any] = {"model": self.model, "prompt": prompts if len(prompts) > 1 else prompts[0],
                                "max_tokens": params.max_tokens, "temperature": params.temperature,
                                "top_p": params.top_p, "n": params.n}
        if params.top_k is not None:
            body["top_k"] = params.top_k
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        if params.logprobs is not None:
            body["logprobs"] = params.logprobs
            # Ids of the generated tokens: vLLM's return_token_ids keeps the token texts as well;
            # older vLLM names tokens "token_id:N" instead (their text is then empty).
            if self._return_token_ids:
                body["return_token_ids"] = True
            elif self._ids_as_tokens:
                body["return_tokens_as_token_ids"] = True
        answer = await self._http.post_json("/v1/completions", body)
        self._note(answer)
        choices = sorted(_choices(self.name, answer, "/v1/completions"), key=lambda c: c.get("index", 0))
        if len(choices) != len(prompts) * params.n:
            raise ServerError(f"server {self.name!r}: /v1/completions answered {len(choices)} choices for "
                              f"{len(prompts)} prompt(s) x n={params.n}")
        out = [self._completion(c, params) for c in choices]
        return [out[i * params.n:(i + 1) * params.n] for i in range(len(prompts))]

    def _completion(self, choice: dict[str, Any], params: SamplingParams) -> Completion:
        tokens: tuple[TokenLogprob, ...] = ()
        logprobs = choice.get("logprobs")
        if params.logprobs is not None and isinstance(logprobs, dict):
            ids = choice.get("token_ids") if isinstance(choice.get("token_ids"), list) else None
            tokens = tuple(_echo_tokens(logprobs, 0, len(logprobs.get("tokens") or []), ids, params.logprobs))
        return Completion(text=choice.get("text") or "", finish_reason=choice.get("finish_reason"), tokens=tokens)

    # ----------------------------------------------------------------------------------- scoring
    async def _tokenize(self, text: str, add_special_tokens: bool) -> list[int]:
        answer = await self._http.post_json("/tokenize", {"model": self.model, "prompt": text,
                                                          "add_special_tokens": add_special_tokens})
        ids = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(ids, list):
            raise ServerError(f"server {self.name!r}: /tokenize answered without a token list")
        return [int(i) for i in ids]

    async def score(self, prompt: str, continuation: str, *, top_logprobs: int = 0,
                    temperatures: Sequence[float] = ()) -> ScoredContinuation:
        """Teacher-forced log-probs of ``continuation`` after ``prompt``, aligned by token ids.

        See the module docstring for the alignment; raises :class:`ServerError` where the server
        re-tokenizes across the boundary and :class:`CapabilityError` where it cannot score.
        """
        caps = await self.capabilities()
        require(caps, ["scoring", "tokenize"], top_logprobs=top_logprobs)
        if any(float(t) != 1.0 for t in temperatures):
            require(caps, ["full_distribution"])
        prompt_ids, cont_ids = await asyncio.gather(self._tokenize(prompt, True), self._tokenize(continuation, False))
        if not prompt_ids:
            raise InvalidParameterError(f"server {self.name!r}: the prompt {prompt!r} has no tokens, so the first "
                                        f"continuation token has no log-prob; give a non-empty prompt")
        expected = prompt_ids + cont_ids
        if not cont_ids:
            return ScoredContinuation(tuple(prompt_ids), (), ())
        if caps.token_ids_in:
            sent: Any = expected
        else:
            joined = await self._tokenize(prompt + continuation, True)
            pos = first_mismatch(expected, joined)
            if pos is not None:
                raise boundary_error(self.name, "/tokenize of prompt + continuation", pos, len(prompt_ids),
                                     expected, joined)
            sent = prompt + continuation
        if caps.prompt_logprobs:
            tokens = await self._score_prompt_logprobs(sent, expected, len(prompt_ids), top_logprobs)
        else:
            tokens = await self._score_echo(sent, expected, len(prompt_ids), top_logprobs)
        return ScoredContinuation(tuple(prompt_ids), tuple(cont_ids), tuple(tokens))

    async def _score_prompt_logprobs(self, sent: Any, expected: list[int], n_prompt: int,
                                     top: int) -> list[TokenLogprob]:
        body = self._completion_body(sent, max_tokens=self._plp_max_tokens, prompt_logprobs=top)
        answer = await self._http.post_json("/v1/completions", body)
        choice = _choices(self.name, answer, "/v1/completions")[0]
        positions = choice.get("prompt_logprobs")
        if not isinstance(positions, list) or len(positions) < len(expected):
            raise ServerError(f"server {self.name!r}: prompt_logprobs covers "
                              f"{len(positions) if isinstance(positions, list) else 0} positions, the scored "
                              f"sequence has {len(expected)} tokens")
        returned = choice.get("prompt_token_ids")
        if isinstance(returned, list):
            pos = first_mismatch(expected, returned[:len(expected)])
            if pos is not None:
                raise boundary_error(self.name, "prompt_token_ids", pos, n_prompt, expected, returned)
        tokens = []
        for pos in range(n_prompt, len(expected)):
            entries = positions[pos]
            token_id = expected[pos]
            if not isinstance(entries, dict) or str(token_id) not in entries:
                have = sorted(entries, key=lambda k: entries[k].get("rank") or 0)[:1] if isinstance(entries, dict) \
                    else []
                got = list(expected)
                got[pos] = int(have[0]) if have else -1
                raise boundary_error(self.name, "prompt_logprobs", pos, n_prompt, expected, got)
            mine = entries[str(token_id)]
            # vLLM sends the top k and the scored token (k + 1 entries when it is outside the top k).
            alternatives = sorted(
                ((int(k), v.get("decoded_token") or "", float(v["logprob"]), v.get("rank"))
                 for k, v in entries.items()),
                key=lambda t: (t[3] if isinstance(t[3], int) else 1 << 30, -t[2]))
            tokens.append(TokenLogprob(
                token_id=token_id, token=mine.get("decoded_token") or "", logprob=float(mine["logprob"]),
                top=tuple(a[:3] for a in alternatives[:top]),
                rank=mine.get("rank") if isinstance(mine.get("rank"), int) else None))
        return tokens

    async def _score_echo(self, sent: Any, expected: list[int], n_prompt: int, top: int) -> list[TokenLogprob]:
        # Alternatives keyed by text merge distinct tokens that decode alike (byte pieces of one
        # character), so ask for them by id where the server can name them so.
        extra: dict[str, Any] = {}
        if self._return_token_ids:
            extra["return_token_ids"] = True
        if self._ids_as_tokens:
            extra["return_tokens_as_token_ids"] = True
        body = self._completion_body(sent, max_tokens=self._echo_max_tokens, echo=True, logprobs=top, **extra)
        answer = await self._http.post_json("/v1/completions", body)
        choice = _choices(self.name, answer, "/v1/completions")[0]
        logprobs = choice.get("logprobs")
        if not isinstance(logprobs, dict) or len(logprobs.get("token_logprobs") or []) < len(expected):
            raise ServerError(f"server {self.name!r}: echo + logprobs returned fewer positions than the "
                              f"{len(expected)} tokens scored")
        ids = choice.get("prompt_token_ids") if isinstance(choice.get("prompt_token_ids"), list) else None
        tokens = _echo_tokens(logprobs, n_prompt, len(expected), ids, top)
        got = [t.token_id for t in tokens]
        if all(i is not None for i in got):
            full = expected[:n_prompt] + got
            pos = first_mismatch(expected, full)
            if pos is not None:
                raise boundary_error(self.name, "echo tokens", pos, n_prompt, expected, full)
        return [TokenLogprob(token_id=expected[n_prompt + i], token=t.token, logprob=t.logprob, top=t.top,
                             rank=t.rank) for i, t in enumerate(tokens)]

    # ----------------------------------------------------------------------------------- tokenizer
    async def tokenize(self, text: str) -> list[int]:
        """The server's token ids of ``text`` (vLLM's /tokenize, no special tokens added)."""
        require(await self.capabilities(), ["tokenize"])
        return await self._tokenize(text, False)

    async def detokenize(self, token_ids: Sequence[int]) -> str:
        """The server's text of ``token_ids`` (vLLM's /detokenize)."""
        require(await self.capabilities(), ["tokenize"])
        answer = await self._http.post_json("/detokenize", {"model": self.model, "tokens": [int(i) for i in token_ids]})
        if not isinstance(answer, dict) or not isinstance(answer.get("prompt"), str):
            raise ServerError(f"server {self.name!r}: /detokenize answered without a prompt string")
        return answer["prompt"]

    async def prompt_tokens(self, text: str) -> list[dict[str, Any]]:
        """``text`` echoed with ``logprobs`` 0 and the answer's usage; vLLM: no BOS, prompt_token_ids or token_id:N."""
        require(await self.capabilities(), ["echo_logprobs"])
        vllm = {"add_special_tokens": False, "return_token_ids": self._return_token_ids} if self._ids_as_tokens else {}
        body = self._completion_body(text, max_tokens=self._echo_max_tokens, echo=True, logprobs=0, **vllm)
        bodies = [body, {**body, "return_tokens_as_token_ids": True}] if vllm and not self._return_token_ids else [body]
        answers = await asyncio.gather(*(self._http.post_json("/v1/completions", b) for b in bodies))
        return [{**_choices(self.name, a, "/v1/completions")[0], "usage": a.get("usage")} for a in answers]

    # ----------------------------------------------------------------------------------- chat, embeddings
    async def chat(self, messages: Sequence[ChatMessage], *, tools: Sequence[Tool] = (),
                   params: ChatParams | None = None) -> ChatResponse:
        """The model's next message through /v1/chat/completions (OpenAI tool-call format; ``params.logprobs``:
        ``logprobs: true``, ``top_logprobs: k``, refused first where the server lacks ``chat_logprobs``)."""
        caps = await self.capabilities()
        require(caps, ["chat", "tools"] if tools else ["chat"])
        params = params or ChatParams()
        body: dict[str, Any] = {"model": self.model, "messages": [openai_message(m) for m in messages],
                                "max_tokens": params.max_tokens, "temperature": params.temperature}
        if params.logprobs is not None:
            require_chat_logprobs(caps, params.logprobs)
            body.update(logprobs=True, top_logprobs=params.logprobs)
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        if tools:
            body["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                               "parameters": t.parameters}} for t in tools]
        answer = await self._http.post_json("/v1/chat/completions", body)
        self._note(answer)
        choice = _choices(self.name, answer, "/v1/chat/completions")[0]
        message = choice.get("message") or {}
        calls = tuple(self._tool_call(c) for c in message.get("tool_calls") or [])
        usage = answer.get("usage") or {}
        logprobs = None if params.logprobs is None else chat_token_logprobs(self.name, choice, params.logprobs)
        return ChatResponse(content=message.get("content") or "", tool_calls=calls,
                            finish_reason=choice.get("finish_reason"), input_tokens=usage.get("prompt_tokens"),
                            output_tokens=usage.get("completion_tokens"), logprobs=logprobs)

    def _tool_call(self, call: dict[str, Any]) -> ToolCall:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError as exc:
                raise ServerError(f"server {self.name!r}: the model called {function.get('name')!r} with arguments "
                                  f"that are not JSON: {arguments[:200]!r}") from exc
        if not isinstance(arguments, dict):
            raise ServerError(f"server {self.name!r}: tool call arguments must be a JSON object, got {arguments!r}")
        return ToolCall(id=str(call.get("id") or ""), name=str(function.get("name") or ""), arguments=arguments)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text through /v1/embeddings."""
        require(await self.capabilities(), ["embeddings"])
        answer = await self._http.post_json("/v1/embeddings", {"model": self.model, "input": list(texts)})
        data = sorted(answer.get("data") or [], key=lambda d: d.get("index", 0)) if isinstance(answer, dict) else []
        if len(data) != len(texts):
            raise ServerError(f"server {self.name!r}: /v1/embeddings answered {len(data)} vectors for "
                              f"{len(texts)} texts")
        return [[float(x) for x in d["embedding"]] for d in data]

    def _note(self, answer: Any) -> None:
        """Keep the ``model`` and ``system_fingerprint`` an answer names (OpenAI's dated snapshot, its backend)."""
        if isinstance(answer, dict):
            for key, seen in self._answered.items():
                if isinstance(answer.get(key), str) and answer[key] and len(seen) < 50:
                    seen.add(answer[key])

    def provenance(self) -> dict[str, Any]:
        """The model, revision, dtype and server version, each with its source or why it is null."""
        if not self._about:
            why = "the server was not probed in this run"
            return server_record(self.kind, {k: (None, why) for k in ("model", "revision", "dtype", "server_version")},
                                 base_urls=self.base_urls)
        entry, info = self._about["entry"], self._about["info"]
        if info.get("model_sha"):
            revision = (info["model_sha"], "GET /info model_sha")
        elif self.revision:
            revision = (self.revision, "spec revision (stated, not reported by the server)")
        else:
            revision = (None, "the server does not report it (no model_sha in GET /info) and the spec states no "
                              "revision")
        return server_record(self.kind, {
            "model": (self.model, "GET /v1/models" if entry else "spec model"),
            "root": (entry.get("root"), "GET /v1/models root" if entry.get("root") else
                     "GET /v1/models names no root (vLLM's model path)"),
            "revision": revision,
            "dtype": self._about["dtype"],
            "server_version": ((self._about["server_version"], "GET /version") if self._about["server_version"] else
                               (info.get("version"), "GET /info version") if info.get("version") else
                               (None, "neither GET /version nor GET /info answered a version")),
        }, base_urls=self.base_urls, response_models=sorted(self._answered["model"]),
            system_fingerprints=sorted(self._answered["system_fingerprint"]))

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()


