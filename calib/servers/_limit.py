"""Counters of a server's requests and the adaptive limit on those in flight (AIMD).

Hosted APIs limit requests per key and answer an overload with HTTP 429 (or 503 with ``Retry-After``).
Retrying at full concurrency only feeds the overload, while a fixed low concurrency wastes what a host
can take; so the limit adapts as TCP's congestion window does, additive increase and multiplicative
decrease (:class:`AdaptiveLimit`). :class:`HttpStats` holds the counters the run records per server
(the ``requests`` event of :mod:`calib.study.requests`), token usage included.
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass, field
from typing import Any

from calib.servers.base import RequestFailed

__all__ = ["AdaptiveLimit", "HttpStats", "usage_count"]


@dataclass
class HttpStats:
    """Counters of one client, recorded per server in the run's ``requests`` event.

    ``attempts`` requests sent, ``retries``, ``failures`` (requests that failed after their retries,
    kept in ``failed``) and ``cache_hits``; ``throttled`` answers (HTTP 429, or 503 with
    ``Retry-After``), the concurrency ``limit`` now and the lowest it reached (``limit_min``); and the
    token usage the answers reported: ``input_tokens``, ``output_tokens``, and ``usage_missing``
    answers that reported no complete usage (what part they reported is still added, so the totals are
    lower bounds when it is not 0). Usage counts only answers received over the network, never cache
    hits.
    """

    attempts: int = 0
    retries: int = 0
    failures: int = 0
    cache_hits: int = 0
    failed: list[RequestFailed] = field(default_factory=list)
    throttled: int = 0
    limit: int = 0
    limit_min: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usage_missing: int = 0

    def add_usage(self, input_tokens: int | None, output_tokens: int | None) -> None:
        """Add one received answer's token counts (None: the answer did not report that count)."""
        if input_tokens is None or output_tokens is None:
            self.usage_missing += 1
        self.input_tokens += input_tokens or 0
        self.output_tokens += output_tokens or 0


def usage_count(value: Any) -> int | None:
    """A token count as an answer's usage states it: a non-negative integer, else None (not reported)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


class _Slot:
    """One request's place among those in flight (``async with limit.slot() as slot``).

    The request says how it went before the block ends: :meth:`succeeded` or :meth:`throttled`; a slot
    left without either (a timeout, another error) neither grows nor shrinks the limit.
    """

    __slots__ = ("_limit", "generation", "outcome", "retry_after")

    def __init__(self, limit: AdaptiveLimit) -> None:
        self._limit = limit
        self.generation = -1
        self.outcome: str | None = None
        self.retry_after: float | None = None

    def succeeded(self) -> None:
        """The server answered (2xx)."""
        self.outcome = "ok"

    def throttled(self, retry_after: float | None = None) -> None:
        """The server refused for load (429, 503 with Retry-After), asking to wait ``retry_after`` seconds."""
        self.outcome, self.retry_after = "throttled", retry_after

    async def __aenter__(self) -> _Slot:
        self.generation = await self._limit._acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._limit._release(self)


class AdaptiveLimit:
    """At most ``limit`` requests in flight, the limit adapted to the server's throttling (AIMD).

    The limit starts at ``ceiling``. A throttled answer halves it (never below 1), at most once per
    overload: only a request sent under the current limit halves it, so a burst of 429s from requests
    that were already in flight when the first came back halves once (TCP's one decrease per window).
    Each ``limit`` successive successes (counted from the last throttle) add 1, up to ``ceiling``.
    A ``Retry-After`` also holds back new requests until it has passed (at most ``max_pause`` seconds):
    it is the host's word that any request sooner is refused. Waiting requests are served first come,
    first served, and never failed by the limit.

    Parameters
    ----------
    ceiling
        The most requests in flight (``max_in_flight``).
    stats
        Where ``throttled``, ``limit`` and ``limit_min`` are kept.
    adaptive
        False keeps the limit at ``ceiling`` (a plain bound; throttled answers are still counted).
    max_pause
        Cap on the pause a ``Retry-After`` asks for, in seconds.
    """

    def __init__(self, ceiling: int, stats: HttpStats | None = None, *, adaptive: bool = True,
                 max_pause: float = 30.0) -> None:
        if ceiling < 1:
            raise ValueError(f"the limit must be >= 1, got {ceiling}")
        self.ceiling = ceiling
        self.adaptive = adaptive
        self.max_pause = max_pause
        self.stats = stats if stats is not None else HttpStats()
        self.stats.limit = self.stats.limit_min = ceiling
        self.in_flight = 0
        self._generation = 0  # bumped by each decrease: a request's slot remembers the one it was sent under
        self._successes = 0
        self._paused_until = 0.0  # event-loop time
        self._resume: asyncio.TimerHandle | None = None  # wakes the waiters when a pause ends
        self._resume_loop: asyncio.AbstractEventLoop | None = None
        self._waiters: collections.deque[asyncio.Future[int]] = collections.deque()

    @property
    def limit(self) -> int:
        """Requests allowed in flight now."""
        return self.stats.limit

    def slot(self) -> _Slot:
        """A place among the requests in flight, for ``async with`` (waits until one is free)."""
        return _Slot(self)

    def _free(self, loop: asyncio.AbstractEventLoop) -> bool:
        return self.in_flight < self.stats.limit and loop.time() >= self._paused_until

    async def _acquire(self) -> int:
        """Wait for a slot; the generation (count of decreases) it was granted under."""
        loop = asyncio.get_running_loop()
        if not self._waiters and self._free(loop):
            self.in_flight += 1
            return self._generation
        waiter: asyncio.Future[int] = loop.create_future()
        self._waiters.append(waiter)
        self._wake()  # a pause needs its timer; a free slot goes to the first in line
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                # Granted a slot, then cancelled before taking it: hand it on.
                self.in_flight -= 1
                self._wake()
            else:
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass
            raise

    def _wake(self) -> None:
        """Grant slots to waiters, first come first served, while the limit and any pause allow."""
        if not self._waiters:
            return
        loop = asyncio.get_running_loop()
        while self._waiters and self._free(loop):
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(self._generation)
        if self._waiters and loop.time() < self._paused_until:
            if self._resume is None or self._resume.cancelled() or self._resume_loop is not loop:
                self._resume, self._resume_loop = loop.call_at(self._paused_until, self._resumed), loop

    def _resumed(self) -> None:
        self._resume = None
        self._wake()

    def _release(self, slot: _Slot) -> None:
        self.in_flight -= 1
        stats = self.stats
        if slot.outcome == "throttled":
            stats.throttled += 1
            if self.adaptive:
                self._successes = 0
                if slot.generation == self._generation:
                    stats.limit = max(1, stats.limit // 2)
                    stats.limit_min = min(stats.limit_min, stats.limit)
                    self._generation += 1
                if slot.retry_after:
                    loop = asyncio.get_running_loop()
                    self._paused_until = max(self._paused_until,
                                             loop.time() + min(self.max_pause, max(0.0, slot.retry_after)))
        elif slot.outcome == "ok" and self.adaptive and stats.limit < self.ceiling:
            self._successes += 1
            if self._successes >= stats.limit:
                stats.limit += 1
                self._successes = 0
        self._wake()
