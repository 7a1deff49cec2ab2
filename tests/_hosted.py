"""A loopback "hosted" proxy in front of ``calib serve``: it shapes a real model server like a host's API.

Tests put it between calib and the session's served tiny model (``served_model``) to stand for the
hosts calib cannot reach here. It listens on 127.0.0.1 only and forwards every request it does not
answer itself. :class:`LoopbackProxy` is the forwarding machinery (a thread with its own event loop);
``answer(path, body)`` decides per request: None forwards it, a ``web.Response`` answers instead
(``answer_async`` where the decision needs a request of its own upstream). It counts the requests per
path, those in flight, and the usage (``prompt_tokens``, ``completion_tokens``) of the answers it
forwards.

:class:`HostedProxy` modes:

``direct``              forward everything;
``no_tokenize``         no ``/tokenize`` or ``/detokenize`` (a host without a tokenizer route);
``chat_only``           additionally no ``/v1/completions``: only ``/v1/models`` and chat (a chat-only host)
                        without output log-probs: a chat request that asks for them (``logprobs`` true or
                        ``top_logprobs`` given) gets HTTP 400 in the OpenAI API's words for a model without
                        them ("This model does not support the 'logprobs' parameter.", ``param``
                        ``logprobs``), rather than an answer with the field removed, so a client learns
                        it from the refusal; ``refused`` counts them;
``chat_logprobs``       chat only as ``chat_only`` (no completions, no tokenizer routes), but chat
                        log-probs are forwarded as asked, with ``top_logprobs`` capped at 20 as the
                        OpenAI API caps it: more gets HTTP 400 "Invalid 'top_logprobs': integer above
                        maximum value. Expected a value <= 20, but got N instead." (``refused`` counts);
``outage_after_probe``  completions of at most one token (what calib's capability probe sends) are
                        answered; every longer one gets HTTP 500 "quota exceeded" (an outage or an
                        exhausted quota after the host looked healthy);
``chat_outage_after_probe``
                        a chat-only host (as ``chat_only``) whose chat requests of at most one token (the
                        probe's) are answered and every longer one gets HTTP 500 "quota exceeded";
``rate_limited``        a request that arrives while ``concurrency`` requests (4) are being forwarded
                        gets HTTP 429 with ``Retry-After: <retry_after>`` (``"0.1"`` seconds),
                        whatever its route: a host's per-key concurrency limit. A rule by requests in
                        flight rather than per second, so that what the host refuses follows from
                        what the client sends at once, not from how fast a loaded machine runs;
                        ``throttled`` counts the 429s;
``context_refusal``     a ``/v1/completions`` request whose prompt plus ``max_tokens`` (16 when not
                        given) exceed ``context_length`` tokens (256) gets HTTP 400 in vLLM's wording
                        ("This model's maximum context length is N tokens. However, you requested M
                        tokens (P in the messages, C in the completion). ..."), which
                        :func:`calib.study.budgets.budget_after_refusal` reads. The prompt's tokens are
                        counted exactly, by the upstream's ``/tokenize`` (with the special tokens a
                        completion adds), or are the length of a token-id prompt; each prompt of a
                        list is checked, and the first that overflows is the one named (as vLLM
                        refuses a whole batch). ``refused`` counts the 400s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import Counter
from typing import Any

from aiohttp import ClientSession, web

__all__ = ["MODES", "HostedProxy", "LoopbackProxy", "context_message"]

MODES = ("direct", "no_tokenize", "chat_only", "outage_after_probe", "rate_limited", "context_refusal",
         "chat_logprobs", "chat_outage_after_probe")
#: The most top alternatives per token the ``chat_logprobs`` host returns (the OpenAI API's limit).
CHAT_TOP_LIMIT = 20
_CHAT_ONLY = ("chat_only", "chat_logprobs", "chat_outage_after_probe")


class LoopbackProxy:
    """Forwards to ``upstream`` what :meth:`answer` leaves alone; counts requests per path.

    ``bodies`` keeps every JSON object body it is sent, per path, in arrival order (what calib asked, for
    tests to compare with what it should have asked). ``in_flight`` (requests being forwarded now;
    :meth:`answer` sees those before the one it decides) and ``max_in_flight`` (the most at once); ``usage``
    sums the ``prompt_tokens`` and ``completion_tokens`` of the forwarded 2xx answers that state them,
    ``usage_answers`` counts those answers.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.requests: Counter[str] = Counter()
        self.bodies: dict[str, list[dict[str, Any]]] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.usage: Counter[str] = Counter()
        self.usage_answers = 0
        self.url = ""
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def answer(self, path: str, body: dict[str, Any] | None) -> web.Response | None:
        """The proxy's own answer to a request (None: forward it upstream)."""
        return None

    async def answer_async(self, path: str, body: dict[str, Any] | None) -> web.Response | None:
        """As :meth:`answer`, for a decision that asks the upstream first (it calls :meth:`answer`)."""
        return self.answer(path, body)

    async def upstream_json(self, path: str, body: Any) -> tuple[int, Any]:
        """POST ``body`` to the upstream's ``path``: (status, decoded JSON or None)."""
        async with ClientSession() as session:
            async with session.post(self.upstream + path, json=body) as up:
                raw = await up.read()
        try:
            return up.status, json.loads(raw)
        except ValueError:
            return up.status, None

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        self.requests[request.path] += 1
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        if isinstance(body, dict):
            self.bodies.setdefault(request.path, []).append(body)
        own = await self.answer_async(request.path, body if isinstance(body, dict) else None)
        if own is not None:
            return own
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            async with ClientSession() as session:
                async with session.request(request.method, self.upstream + request.path_qs, data=raw,
                                           headers={"Content-Type": request.headers.get("Content-Type", "")}) as up:
                    payload = await up.read()
                    response = web.Response(body=payload, status=up.status, content_type=up.content_type)
        finally:
            self.in_flight -= 1
        if response.status < 300:
            self._count_usage(payload)
        return response

    def _count_usage(self, payload: bytes) -> None:
        try:
            usage = json.loads(payload).get("usage")
        except (ValueError, AttributeError):
            return
        if isinstance(usage, dict) and all(isinstance(usage.get(k), int) for k in ("prompt_tokens",
                                                                                  "completion_tokens")):
            self.usage.update({k: usage[k] for k in ("prompt_tokens", "completion_tokens")})
            self.usage_answers += 1

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = self._runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
        self._ready.set()
        self._loop.run_forever()

    def __enter__(self) -> LoopbackProxy:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        # Close the listening socket and the open connections first, so no handler is left pending.
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def _not_found(path: str) -> web.Response:
    return web.json_response({"error": {"message": f"Not Found: {path}", "type": "invalid_request_error"}},
                             status=404)


class HostedProxy(LoopbackProxy):
    """A host of one of :data:`MODES` made of a real model server.

    ``concurrency`` and ``retry_after`` shape ``rate_limited``, ``context_length`` shapes
    ``context_refusal``, ``chat_top_limit`` (20) shapes ``chat_logprobs``; ``throttled`` and ``refused``
    count the 429 and 400 answers the proxy gave (the 400s of ``context_refusal``, ``chat_only`` and
    ``chat_logprobs``).
    """

    def __init__(self, upstream: str, mode: str, *, concurrency: int = 4, retry_after: str = "0.1",
                 context_length: int = 256, chat_top_limit: int = CHAT_TOP_LIMIT) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: one of {MODES}")
        super().__init__(upstream)
        self.mode = mode
        self.concurrency = concurrency
        self.retry_after = retry_after
        self.context_length = context_length
        self.chat_top_limit = chat_top_limit
        self.throttled = 0
        self.refused = 0

    def answer(self, path: str, body: dict[str, Any] | None) -> web.Response | None:
        if self.mode == "direct":
            return None
        if self.mode == "rate_limited":
            if self.in_flight >= self.concurrency:
                self.throttled += 1
                return web.json_response(
                    {"error": {"message": f"Rate limit reached: at most {self.concurrency} concurrent requests",
                               "type": "rate_limit_error", "param": None, "code": "rate_limit_exceeded"}},
                    status=429, headers={"Retry-After": self.retry_after})
            return None
        if path in ("/tokenize", "/detokenize") and self.mode in ("no_tokenize", *_CHAT_ONLY):
            return _not_found(path)
        if path == "/v1/chat/completions" and self.mode == "chat_outage_after_probe":
            if int((body or {}).get("max_tokens") or 16) > 1:
                return web.json_response({"error": {"message": "quota exceeded", "type": "insufficient_quota"}},
                                         status=500)
            return None
        if path == "/v1/chat/completions" and self.mode in _CHAT_ONLY:
            return self._chat_logprobs_check(body or {})
        if path == "/v1/completions":
            if self.mode in _CHAT_ONLY:
                return _not_found(path)
            if self.mode == "outage_after_probe" and int((body or {}).get("max_tokens") or 16) > 1:
                return web.json_response({"error": {"message": "quota exceeded", "type": "insufficient_quota"}},
                                         status=500)
        return None

    def _chat_logprobs_check(self, body: dict[str, Any]) -> web.Response | None:
        """``chat_only`` refuses chat log-probs; ``chat_logprobs`` more alternatives than ``chat_top_limit``."""
        asked = bool(body.get("logprobs")) or body.get("top_logprobs") is not None
        if self.mode == "chat_only" and asked:
            self.refused += 1
            return web.json_response({"error": {"message": "This model does not support the 'logprobs' parameter.",
                                                "type": "invalid_request_error", "param": "logprobs", "code": None}},
                                     status=400)
        top = body.get("top_logprobs")
        if self.mode == "chat_logprobs" and isinstance(top, int) and top > self.chat_top_limit:
            self.refused += 1
            return web.json_response({"error": {
                "message": f"Invalid 'top_logprobs': integer above maximum value. Expected a value <= "
                           f"{self.chat_top_limit}, but got {top} instead.",
                "type": "invalid_request_error", "param": "top_logprobs", "code": "integer_above_max_value"}},
                status=400)
        return None

    async def answer_async(self, path: str, body: dict[str, Any] | None) -> web.Response | None:
        if self.mode == "context_refusal" and path == "/v1/completions" and body is not None:
            return await self._context_check(body)
        return self.answer(path, body)

    async def prompt_tokens(self, prompt: Any, model: Any) -> int:
        """Tokens of one prompt: a token-id list's length, else the upstream's ``/tokenize`` count."""
        if isinstance(prompt, list):
            return len(prompt)
        status, answer = await self.upstream_json("/tokenize", {"model": model, "prompt": str(prompt),
                                                               "add_special_tokens": True})
        if status != 200 or not isinstance(answer, dict) or not isinstance(answer.get("tokens"), list):
            raise AssertionError(f"the upstream's /tokenize answered {status}: {str(answer)[:200]}")
        return len(answer["tokens"])

    async def _context_check(self, body: dict[str, Any]) -> web.Response | None:
        prompt = body.get("prompt")
        # One prompt: a string or a token-id list; several: a list of strings or of token-id lists.
        many = isinstance(prompt, list) and bool(prompt) and all(isinstance(p, str | list) for p in prompt)
        completion = int(body.get("max_tokens") or 16)
        for one in (prompt if many else [prompt]):
            tokens = await self.prompt_tokens(one, body.get("model"))
            if tokens + completion > self.context_length:
                self.refused += 1
                return web.json_response({"error": {
                    "message": context_message(self.context_length, tokens, completion),
                    "type": "BadRequestError", "param": None, "code": 400}}, status=400)
        return None


def context_message(context_length: int, prompt_tokens: int, completion_tokens: int) -> str:
    """vLLM's context-length refusal, word for word."""
    return (f"This model's maximum context length is {context_length} tokens. However, you requested "
            f"{prompt_tokens + completion_tokens} tokens ({prompt_tokens} in the messages, {completion_tokens} in "
            f"the completion). Please reduce the length of the messages or completion.")
