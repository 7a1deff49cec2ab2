"""HTTP for server kinds: one long-lived aiohttp pool per server, adaptive concurrency, retries, token usage.

aiohttp is the transport on the hot path because it was measured fastest here (the generation
servers issue: a plain aiohttp loop reached 92–94 % of a 640 requests/s loopback server at 0.3 s CPU
per 1,000 requests, where the openai SDK's default transport and httpx were CPU-bound near 66–68 %).

Retries (:func:`with_retries`) use exponential backoff with full jitter on timeouts, connection
resets, HTTP 408/409/425/429/5xx (honouring ``Retry-After``) and malformed JSON. Other 4xx answers
are the caller's mistake and fail at once. A request that still fails raises
:class:`~calib.servers.base.RequestFailed`, which the caller records; nothing is dropped silently.

Concurrency adapts to a host's rate limits (:class:`~calib.servers._limit.AdaptiveLimit`): a
throttled answer (429, or 503 with ``Retry-After``) halves the requests allowed in flight, runs of
successes grow them back up to ``max_in_flight``.

Token usage: a kind may give :class:`HttpClient` a ``usage`` reader; every answer actually received
(never one from the cache, so a re-run counts nothing twice and a cached run counts nothing) adds
what it reports to ``stats.input_tokens`` / ``stats.output_tokens``, or counts in
``stats.usage_missing`` when it reports no complete usage.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import aiohttp

from calib.servers._limit import AdaptiveLimit, HttpStats, usage_count
from calib.servers.base import RequestFailed
from calib.servers.cache import RequestCache, cache_key

__all__ = [
    "AdaptiveLimit",
    "HTTPStatusError",
    "HttpClient",
    "HttpStats",
    "MalformedResponse",
    "RetryPolicy",
    "Usage",
    "classify_error",
    "usage_count",
    "with_retries",
]

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a request is retried.

    Attempt i (0-based) waits a uniform random time in [0, min(max_delay, base_delay * 2**i)]
    ("full jitter"), or the server's Retry-After when it gives one (capped at ``max_delay``).
    ``timeout`` bounds each attempt, ``connect_timeout`` its connection.
    """

    max_attempts: int = 6
    base_delay: float = 0.5
    max_delay: float = 30.0
    timeout: float = 600.0
    connect_timeout: float = 10.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        for name in ("base_delay", "max_delay"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0 seconds, got {getattr(self, name)}")
        for name in ("timeout", "connect_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 seconds, got {getattr(self, name)}")

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before the next attempt."""
        if retry_after is not None:
            return min(self.max_delay, max(0.0, retry_after))
        return rng.uniform(0.0, min(self.max_delay, self.base_delay * (2**attempt)))


class HTTPStatusError(Exception):
    """An HTTP error answer: status, a short body and the Retry-After hint in seconds."""

    def __init__(self, status: int, body: str, retry_after: float | None = None) -> None:
        self.status, self.body, self.retry_after = status, body, retry_after
        super().__init__(f"HTTP {status}: {body}")


class MalformedResponse(Exception):
    """The server answered 2xx with a body that is not the JSON expected."""


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        import datetime as _dt

        when = parsedate_to_datetime(value)
        return max(0.0, (when - _dt.datetime.now(when.tzinfo)).total_seconds())
    except (TypeError, ValueError):
        return None


def classify_error(exc: BaseException) -> tuple[bool, float | None, int | None, str]:
    """(retryable, retry_after, status, one-line message) for an attempt's exception."""
    if isinstance(exc, HTTPStatusError):
        return exc.status in RETRYABLE_STATUS, exc.retry_after, exc.status, str(exc)
    if isinstance(exc, MalformedResponse):
        return True, None, None, f"malformed response: {exc}"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return True, None, None, f"timed out ({type(exc).__name__})"
    if isinstance(exc, (aiohttp.ClientSSLError, aiohttp.ServerFingerprintMismatch)):
        # A certificate or fingerprint does not fix itself between attempts.
        return False, None, None, f"{type(exc).__name__}: {exc}"
    if isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError)):
        return True, None, None, f"{type(exc).__name__}: {exc}".strip()
    if isinstance(exc, aiohttp.TooManyRedirects):
        return False, None, None, f"too many redirects: {exc.message}"
    if isinstance(exc, aiohttp.ContentTypeError):
        # resp.json() on a body that is not JSON (callers other than HttpClient): its status is the server's.
        retryable = exc.status < 300 or exc.status in RETRYABLE_STATUS
        return retryable, None, exc.status, f"HTTP {exc.status}: not JSON ({exc.message})"
    if isinstance(exc, aiohttp.ClientResponseError):
        # The session never raises for a status (raise_for_status=False), so this is aiohttp failing to
        # parse the answer (a bad status line or header): a malformed response, retried like one. Its
        # ``status`` (400) is the parser's, not the server's, so none is recorded.
        return True, None, None, f"malformed HTTP response: {exc.message}"
    return False, None, None, f"{type(exc).__name__}: {exc}"


async def with_retries(
    server: str,
    route: str,
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    classify: Callable[[BaseException], tuple[bool, float | None, int | None, str]] = classify_error,
    rng: random.Random | None = None,
    on_retry: Callable[[], None] | None = None,
) -> T:
    """Run ``attempt`` until it succeeds, retrying what ``classify`` calls retryable.

    Raises
    ------
    RequestFailed
        After ``policy.max_attempts`` attempts, or at once for a non-retryable error; it names the
        server, the route, the attempts and the last error.
    """
    rng = rng or random.Random()
    for i in range(policy.max_attempts):
        try:
            return await attempt()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is classified and recorded
            retryable, retry_after, status, message = classify(exc)
            message = " ".join(message.split())[:300]
            if not retryable or i + 1 == policy.max_attempts:
                raise RequestFailed(server, route, i + 1, message, status) from exc
            if on_retry is not None:
                on_retry()
            await asyncio.sleep(policy.delay(i, retry_after, rng))
    raise AssertionError("unreachable")  # pragma: no cover


Usage = Callable[[str, Any], tuple[int | None, int | None] | None]
"""``(route, answer) -> (input tokens, output tokens)`` an answer reports (None for a count it lacks), or
None for a route whose answers carry no usage (``/tokenize``, ``/v1/models``: not counted at all)."""


class HttpClient:
    """A JSON-over-HTTP client for one server: one connection pool, at most ``max_in_flight``
    requests at once (fewer while the server throttles: :class:`AdaptiveLimit`), retries, an optional
    request cache, token usage, and several base URLs served round-robin.

    Parameters
    ----------
    name
        The server's name (in errors and records).
    base_urls
        One or more base URLs (replicas of one server); requests are spread across them.
    headers
        Sent with every request (e.g. an ``Authorization`` header built from an environment variable);
        never part of a cache key or a record.
    max_in_flight
        The most requests in flight at once (the ceiling of the adaptive limit).
    policy
        Retry and timeout policy.
    cache, identity
        A :class:`RequestCache` and the server identity (kind, model, revision, ...) hashed into
        every key; without a cache nothing is stored.
    usage
        Reads the token usage of an answer (:data:`Usage`); each answer received over the network
        adds it to ``stats``.
    adaptive
        False keeps ``max_in_flight`` fixed whatever the server answers (throttled answers are still
        counted and retried).
    """

    def __init__(
        self,
        name: str,
        base_urls: Sequence[str],
        *,
        headers: Mapping[str, str] | None = None,
        max_in_flight: int = 32,
        policy: RetryPolicy | None = None,
        cache: RequestCache | None = None,
        identity: Mapping[str, Any] | None = None,
        seed: int | None = None,
        usage: Usage | None = None,
        adaptive: bool = True,
    ) -> None:
        if not base_urls:
            raise ValueError(f"server {name!r}: give at least one base URL")
        if max_in_flight < 1:
            raise ValueError(f"server {name!r}: max_in_flight must be >= 1, got {max_in_flight}")
        self.name = name
        self.base_urls = [u.rstrip("/") for u in base_urls]
        self._next_url = itertools.cycle(self.base_urls)
        self.headers = dict(headers or {})
        self.max_in_flight = max_in_flight
        self.policy = policy or RetryPolicy()
        self.cache = cache
        self.identity = dict(identity or {})
        self.stats = HttpStats()
        self.limiter = AdaptiveLimit(max_in_flight, self.stats, adaptive=adaptive, max_pause=self.policy.max_delay)
        self._usage = usage
        self._rng = random.Random(seed)
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.max_in_flight, limit_per_host=0, keepalive_timeout=60,
                                             ttl_dns_cache=300)
            timeout = aiohttp.ClientTimeout(total=self.policy.timeout, sock_connect=self.policy.connect_timeout)
            self._session = aiohttp.ClientSession(connector=connector, timeout=timeout, headers=self.headers,
                                                  json_serialize=json.dumps, raise_for_status=False)
        return self._session

    async def _once(self, method: str, route: str, body: Any) -> Any:
        session = self._open()
        async with self.limiter.slot() as slot:
            self.stats.attempts += 1
            url = next(self._next_url) + route
            async with session.request(method, url, json=body) as resp:
                raw = await resp.read()
                if resp.status >= 400:
                    text = raw[:300].decode("utf-8", "replace")
                    retry_after = _retry_after(resp.headers.get("Retry-After"))
                    if resp.status == 429 or (resp.status == 503 and retry_after is not None):
                        slot.throttled(retry_after)
                    raise HTTPStatusError(resp.status, text, retry_after)
                slot.succeeded()
        try:
            answer = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise MalformedResponse(f"{route} answered {raw[:80]!r}") from exc
        if self._usage is not None:
            counts = self._usage(route, answer)
            if counts is not None:
                self.stats.add_usage(*counts)
        return answer

    def _count_retry(self) -> None:
        self.stats.retries += 1

    async def request_json(self, method: str, route: str, body: Any = None, *, use_cache: bool = True) -> Any:
        """Send one JSON request (with retries) and return the decoded JSON answer.

        With a cache, an identical earlier request is answered from it without network work.

        Raises
        ------
        RequestFailed
            When the request fails after its retries (also appended to ``stats.failed``).
        """
        key = None
        if self.cache is not None and use_cache:
            key = cache_key(self.identity, f"{method} {route}", body)
            hit = self.cache.get(key)
            if hit is not None:
                self.stats.cache_hits += 1
                return hit
        try:
            result = await with_retries(self.name, route, lambda: self._once(method, route, body), self.policy,
                                        rng=self._rng, on_retry=self._count_retry)
        except RequestFailed as failure:
            self.stats.failures += 1
            self.stats.failed.append(failure)
            raise
        if key is not None:
            self.cache.put(key, f"{method} {route}", result)
        return result

    async def probe(
        self,
        method: str,
        route: str,
        body: Any = None,
        *,
        classify: Callable[[BaseException], tuple[bool, float | None, int | None, str]] | None = None,
    ) -> tuple[Any, RequestFailed | None]:
        """One capability-probe request, with retries: ``(answer, None)`` or ``(None, failure)``.

        A refusal tells what the server can do, so it is returned rather than raised, and it is
        neither cached nor counted among the run's failed requests.
        """
        try:
            answer = await with_retries(self.name, route, lambda: self._once(method, route, body), self.policy,
                                        classify=classify or classify_error, rng=self._rng, on_retry=self._count_retry)
        except RequestFailed as failure:
            return None, failure
        return answer, None

    async def post_json(self, route: str, body: Any, *, use_cache: bool = True) -> Any:
        """POST ``body`` as JSON to ``route``."""
        return await self.request_json("POST", route, body, use_cache=use_cache)

    async def get_json(self, route: str, *, use_cache: bool = False) -> Any:
        """GET ``route`` (not cached by default: probes must see the live server)."""
        return await self.request_json("GET", route, None, use_cache=use_cache)

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._session is not None and not self._session.closed:
            await self._session.close()
