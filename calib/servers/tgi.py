"""The ``tgi`` kind: Hugging Face text-generation-inference through the ``text-generation`` client.

Generation goes through :class:`text_generation.AsyncClient` (``POST /``), each call wrapped in
:func:`~calib.servers._http.with_retries` (rate limits, overload, shard faults, timeouts, resets and
malformed answers are retried; validation errors fail at once) and bounded by the same adaptive limit
as the JSON routes the client lacks (``GET /info``, ``POST /tokenize``, through aiohttp): at most
``max_in_flight`` requests, halved when TGI answers 429 (its queue is full) and grown back by runs of
successes (:class:`~calib.servers._limit.AdaptiveLimit`).

Token usage: each ``/generate`` answer received over the network (not from the cache) adds its
``details.generated_tokens`` to ``stats.output_tokens`` and, where it carries prefill details
(scoring asks for them), their length to ``stats.input_tokens``. A completion's answer does not state
its prompt's length, so it also counts in ``stats.usage_missing``; the capability probe's requests are
not counted.

Scoring a continuation
----------------------
:meth:`TGIServer.score` sends prompt + continuation with ``decoder_input_details`` (prefill log-probs)
and aligns the answer **by token ids**: the prompt and the continuation are tokenized separately by
the server's ``/tokenize`` (which always adds the model's special tokens; those of the continuation,
the tokens with an empty character span, are dropped), and the prefill ids must equal their
concatenation. TGI takes text only, so where it re-tokenizes across the prompt/continuation boundary
the ids differ and :class:`~calib.servers.base.ServerError` names the first differing position;
calib never aligns by string matching.

TGI returns ``top_n_tokens`` alternatives only for *generated* tokens, never for prefill positions.
Top alternatives at continuation position i therefore come from one more request per position: the
prompt plus the text of the first i continuation tokens (cut at the token's offset from
``/tokenize``), one generated token, ``top_n_tokens = k``; its prefill ids are checked the same way. A
token that starts inside a character (byte-level BPE) cannot be reached by a text prompt: that
position raises :class:`~calib.servers.base.ServerError`. TGI caps ``top_n_tokens``
with ``--max-top-n-tokens`` (5 by default). TGI 3 computes prefill log-probs only when started with
``--enable-prefill-logprobs``; without it the capability probe reports no prompt log-probs and a
study that scores stops before any work, saying so. TGI has no ``/detokenize``.

Config keys: ``base_url``, ``max_in_flight`` (32), ``timeout`` (seconds per attempt, 600),
``max_retries`` (5), ``api_key_env`` (sent as ``Authorization: Bearer``), ``revision`` (part of the
cache identity), ``dtype`` (checked against ``/info``'s ``model_dtype``; recorded where ``/info`` has
none) and ``cache`` (a :class:`~calib.servers.cache.RequestCache`).

Provenance (:meth:`TGIServer.provenance`) comes from ``GET /info``: ``model_id``, ``model_sha`` (the
weights' commit), ``model_dtype``, ``model_device_type``, ``version`` and the router's ``sha``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from text_generation import AsyncClient
from text_generation import errors as tgi_errors
from text_generation.types import Response

from calib._exceptions import InvalidParameterError
from calib.servers._config import (
    api_key_from_env,
    boundary_error,
    check_config,
    first_mismatch,
    positive,
    stated_dtype,
)
from calib.servers._http import HttpClient, RetryPolicy, usage_count, with_retries
from calib.servers._tgi_probe import _TGIProbe
from calib.servers._tgi_wire import (
    _FINISH,
    PREFILL_FIX,
    _prefixes,
    _strip_specials,
    _top,
    classify_tgi,
)
from calib.servers.base import (
    Capabilities,
    CapabilityError,
    Completion,
    RequestFailed,
    SamplingParams,
    ScoredContinuation,
    ServerError,
    TokenLogprob,
    require,
    server_record,
)
from calib.servers.cache import cache_key
from calib.servers.registry import register

__all__ = ["TGIServer"]

_KEYS = frozenset({"kind", "base_url", "max_in_flight", "timeout", "max_retries", "api_key_env", "revision",
                   "dtype", "cache"})


@register("tgi")
class TGIServer(_TGIProbe):
    """A client of one TGI server."""

    kind = "tgi"

    def __init__(self, name: str, config: Mapping[str, Any]) -> None:
        check_config(name, self.kind, config, _KEYS)
        base_url = config.get("base_url")
        if not isinstance(base_url, str) or not base_url:
            raise InvalidParameterError(f"server {name!r} (tgi): give base_url, e.g. base_url = "
                                        f"\"http://127.0.0.1:8080\"")
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.revision: str | None = config.get("revision")
        self.model: str | None = None
        self.dtype = stated_dtype(name, config)
        self._info: dict[str, Any] | None = None  # GET /info, kept for provenance
        max_in_flight = positive(name, "max_in_flight", config.get("max_in_flight", 32))
        max_retries = config.get("max_retries", 5)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise InvalidParameterError(f"server {name!r}: max_retries must be an integer >= 0, got {max_retries!r}")
        timeout = positive(name, "timeout", config.get("timeout", 600.0), float)
        key = api_key_from_env(name, config.get("api_key_env"))
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.policy = RetryPolicy(max_attempts=max_retries + 1, timeout=timeout)
        identity: dict[str, Any] = {"kind": self.kind, "model": None, "revision": self.revision}
        if self.revision is None:
            identity["base_url"] = self.base_url
        self._http = HttpClient(name, [self.base_url], headers=headers, max_in_flight=max_in_flight,
                                policy=self.policy, cache=config.get("cache"), identity=identity)
        self._client = AsyncClient(self.base_url, headers=headers, timeout=max(1, round(timeout)))
        self._caps: Capabilities | None = None
        self._probe_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"TGIServer(name={self.name!r}, base_url={self.base_url!r})"

    @property
    def stats(self):
        """Request counters, throttling, token usage and the requests that failed after their retries (to record)."""
        return self._http.stats

    # ----------------------------------------------------------------------------------- requests
    async def _generate(self, prompt: str, *, record: bool = True, sample: int | None = None,
                        **parameters: Any) -> Response:
        """One ``generate`` call: from the cache, else with retries (``sample`` only keys the cache)."""
        cache = self._http.cache if record else None
        key = None
        if cache is not None:
            key = cache_key(self._http.identity, "POST /generate",
                            {"inputs": prompt, "parameters": parameters, "sample": sample})
            hit = cache.get(key)
            if hit is not None:
                self._http.stats.cache_hits += 1
                return Response.model_validate(hit)

        async def attempt() -> Response:
            async with self._http.limiter.slot() as slot:
                self._http.stats.attempts += 1
                try:
                    answer = await self._client.generate(prompt, **parameters)
                except (tgi_errors.RateLimitExceededError, tgi_errors.OverloadedError):
                    # HTTP 429 (TGI's full queue is "overloaded"); the client does not pass Retry-After on.
                    slot.throttled()
                    raise
                slot.succeeded()
                return answer

        try:
            response = await with_retries(self.name, "/generate", attempt, self.policy, classify=classify_tgi,
                                          on_retry=self._count_retry)
        except RequestFailed as failure:
            if record:
                self._http.stats.failures += 1
                self._http.stats.failed.append(failure)
            raise
        self._count_usage(response)
        if key is not None:
            cache.put(key, "POST /generate", response.model_dump(mode="json"))
        return response

    def _count_usage(self, response: Response) -> None:
        """Add a received answer's tokens to ``stats``: generated tokens, and the prefill's where given."""
        details = response.details
        generated = usage_count(getattr(details, "generated_tokens", None))
        prefill = getattr(details, "prefill", None)
        self._http.stats.add_usage(len(prefill) if prefill else None, generated)

    def _count_retry(self) -> None:
        self._http.stats.retries += 1

    async def _tokens(self, text: str) -> list[dict[str, Any]]:
        """TGI's ``/tokenize`` of ``text``: ``[{id, text, start, stop}]`` (special tokens included)."""
        answer = await self._http.post_json("/tokenize", {"inputs": text})
        if not isinstance(answer, list) or not all(isinstance(t, dict) and "id" in t for t in answer):
            raise ServerError(f"server {self.name!r}: /tokenize answered {str(answer)[:80]!r}, not a token list")
        return answer

    def provenance(self) -> dict[str, Any]:
        """The model, revision, dtype and server version from ``GET /info``, each with its source or why null."""
        info = self._info
        if info is None:
            why = "the server was not probed in this run"
            return server_record(self.kind, {k: (None, why) for k in ("model", "revision", "dtype", "server_version")},
                                 base_url=self.base_url)
        if info.get("model_sha"):
            revision = (info["model_sha"], "GET /info model_sha")
        elif self.revision:
            revision = (self.revision, "spec revision (stated; GET /info has no model_sha)")
        else:
            revision = (None, "GET /info has no model_sha (a local model directory) and the spec states no revision")
        return server_record(self.kind, {
            "model": (info.get("model_id"), "GET /info model_id" if info.get("model_id") else
                      "GET /info has no model_id"),
            "revision": revision,
            "dtype": info["dtype"],
            "device": (info.get("model_device_type"), "GET /info model_device_type" if info.get("model_device_type")
                       else "GET /info has no model_device_type"),
            "server_version": (info.get("version"), "GET /info version" if info.get("version") else
                               "GET /info has no version"),
            "server_sha": (info.get("sha"), "GET /info sha (the server's build commit)" if info.get("sha") else
                           "GET /info has no sha (the server's build commit)"),
        }, base_url=self.base_url)

    # ----------------------------------------------------------------------------------- completion
    async def complete(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Completion]]:
        """``params.n`` completions per prompt (one prompt per request; n > 1 by repeated seeded calls)."""
        caps = await self.capabilities()
        if params.logprobs:
            require(caps, [], top_logprobs=params.logprobs)
        return list(await asyncio.gather(*(self._complete_one(p, params) for p in prompts)))

    async def _complete_one(self, prompt: str, params: SamplingParams) -> list[Completion]:
        parameters: dict[str, Any] = {"max_new_tokens": params.max_tokens, "do_sample": not params.greedy}
        if params.stop:
            parameters["stop_sequences"] = list(params.stop)
        if params.logprobs:
            parameters["top_n_tokens"] = params.logprobs
        if not params.greedy:
            parameters["temperature"] = params.temperature
            if params.top_p < 1.0:
                parameters["top_p"] = params.top_p
            if params.top_k is not None:
                parameters["top_k"] = params.top_k
        if params.max_tokens == 0:
            return [Completion(text="", finish_reason="length")] * params.n
        if params.greedy:
            # Greedy decoding is deterministic: one call answers all n.
            response = await self._generate(prompt, **parameters)
            return [self._completion(response, params)] * params.n
        if params.seed is not None:
            calls = [self._generate(prompt, seed=params.seed + j, **parameters) for j in range(params.n)]
        else:
            calls = [self._generate(prompt, sample=j, **parameters) for j in range(params.n)]
        return [self._completion(r, params) for r in await asyncio.gather(*calls)]

    def _completion(self, response: Response, params: SamplingParams) -> Completion:
        details = response.details
        reason = details.finish_reason.value if hasattr(details.finish_reason, "value") else str(details.finish_reason)
        text = response.generated_text
        if reason == "stop_sequence":
            # TGI keeps the stop sequence in the text; calib's completions end before it.
            cuts = [text.find(s) for s in params.stop if s and s in text]
            if cuts:
                text = text[:min(cuts)]
        tokens: tuple[TokenLogprob, ...] = ()
        if params.logprobs is not None:
            tops = details.top_tokens or []
            tokens = tuple(
                TokenLogprob(token_id=t.id, token=t.text, logprob=float(t.logprob or 0.0),
                             top=_top(tops[i]) if i < len(tops) else ())
                for i, t in enumerate(details.tokens))
        return Completion(text=text, finish_reason=_FINISH.get(reason, reason), tokens=tokens)

    # ----------------------------------------------------------------------------------- scoring
    async def score(self, prompt: str, continuation: str, *, top_logprobs: int = 0,
                    temperatures: Sequence[float] = ()) -> ScoredContinuation:
        """Teacher-forced log-probs of ``continuation`` after ``prompt``, aligned by token ids.

        See the module docstring; raises :class:`ServerError` where TGI re-tokenizes across the boundary
        and :class:`CapabilityError` where it cannot score (no prefill log-probs: the message names
        ``--enable-prefill-logprobs``).
        """
        caps = await self.capabilities()
        require(caps, ["scoring", "tokenize"], top_logprobs=top_logprobs)
        if any(float(t) != 1.0 for t in temperatures):
            require(caps, ["full_distribution"])
        if not prompt:
            raise InvalidParameterError(f"server {self.name!r}: TGI cannot score after an empty prompt; give a "
                                        f"non-empty prompt")
        p_tokens, c_tokens = await asyncio.gather(self._tokens(prompt), self._tokens(continuation) if continuation
                                                  else asyncio.sleep(0, result=[]))
        prompt_ids = [t["id"] for t in _strip_specials(p_tokens, leading=False)]
        cont_tokens = _strip_specials(c_tokens, leading=True)
        cont_ids = [t["id"] for t in cont_tokens]
        expected = prompt_ids + cont_ids
        if not cont_ids:
            return ScoredContinuation(tuple(prompt_ids), (), ())
        response = await self._generate(prompt + continuation, max_new_tokens=1, decoder_input_details=True)
        prefill = response.details.prefill
        got = [t.id for t in prefill]
        pos = first_mismatch(expected, got[:len(expected)])
        if pos is not None:
            raise boundary_error(self.name, "prefill", pos, len(prompt_ids), expected, got)
        n = len(prompt_ids)
        if any(prefill[i].logprob is None for i in range(n, len(expected))):
            raise CapabilityError(f"server {self.name!r} (tgi, model {self.model!r}) lacks prompt_logprobs: "
                                  f"{PREFILL_FIX}")
        tops: list[tuple[tuple[int | None, str, float], ...]] = [()] * len(cont_ids)
        if top_logprobs:
            prefixes = _prefixes(continuation, cont_tokens)
            tops = list(await asyncio.gather(*(
                self._top_at(prompt, prefixes[i], expected, n, i, top_logprobs) for i in range(len(cont_ids)))))
        tokens = tuple(TokenLogprob(token_id=cont_ids[i], token=prefill[n + i].text,
                                    logprob=float(prefill[n + i].logprob), top=tops[i])
                       for i in range(len(cont_ids)))
        return ScoredContinuation(tuple(prompt_ids), tuple(cont_ids), tokens)

    async def _top_at(self, prompt: str, prefix: str | None, expected: list[int], n_prompt: int,
                      i: int, k: int) -> tuple[tuple[int | None, str, float], ...]:
        """The top-k alternatives at continuation position ``i``: one generated token after the prefix."""
        if prefix is None:
            raise ServerError(f"server {self.name!r}: continuation token {i} starts inside a character, and TGI "
                              f"takes text only, so the top alternatives at that position cannot be asked for; "
                              f"score with top_logprobs=0 or use a server that accepts token-id prompts")
        response = await self._generate(prompt + prefix, max_new_tokens=1, decoder_input_details=True,
                                        top_n_tokens=k)
        got = [t.id for t in response.details.prefill]
        pos = first_mismatch(expected[:n_prompt + i], got[:n_prompt + i])
        if pos is not None:
            raise boundary_error(self.name, f"prefix of continuation token {i}", pos, n_prompt, expected, got)
        top = response.details.top_tokens
        if not top:
            raise ServerError(f"server {self.name!r}: /generate answered no top_tokens for top_n_tokens={k}")
        return _top(top[0])[:k]

    # ----------------------------------------------------------------------------------- tokenizer
    async def tokenize(self, text: str) -> list[int]:
        """The server's token ids of ``text`` (TGI's /tokenize, without the special tokens it adds)."""
        require(await self.capabilities(), ["tokenize"])
        if not text:
            return []
        return [t["id"] for t in _strip_specials(await self._tokens(text), leading=True)]

    async def detokenize(self, token_ids: Sequence[int]) -> str:
        """TGI has no detokenize route: always raises :class:`CapabilityError`."""
        raise CapabilityError(f"server {self.name!r} (tgi) lacks detokenize: TGI offers /tokenize only; use an "
                              f"openai server (vLLM's /detokenize) or calib's embedded server")

    async def aclose(self) -> None:
        """Close the connection pool of the JSON routes (the client opens a session per call)."""
        await self._http.aclose()


