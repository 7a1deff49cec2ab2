"""Request bookkeeping every study kind shares: one ``requests`` event per server, and failures as cells."""

from __future__ import annotations

from calib.study.runner import StageContext

__all__ = ["record_requests", "request_failure"]


# Counters a server's stats may lack (a kind of another package, a test double): recorded as null.
_OPTIONAL = ("throttled", "limit_min", "input_tokens", "output_tokens", "usage_missing")


def record_requests(ctx: StageContext, name: str) -> None:
    """One ``requests`` event per server: attempts, retries, failures after retries, cache hits, throttled
    answers (429), the lowest concurrency limit reached, and the token usage the answers reported
    (``input_tokens``, ``output_tokens``; ``usage_missing`` answers without it). The counters are the
    server's totals so far; usage counts requests sent, never cache hits."""
    stats = getattr(ctx.resources.server(name), "stats", None)
    if stats is not None:
        ctx.event("requests", server=name, attempts=stats.attempts, retries=stats.retries,
                  failures=stats.failures, cache_hits=stats.cache_hits,
                  **{key: getattr(stats, key, None) for key in _OPTIONAL})


def request_failure(exc: Exception) -> str:
    """A failed request as a table's ``error`` cell: ``request failed: WHY`` (at most 500 characters)."""
    why = exc.error if hasattr(exc, "error") else " ".join(str(exc).split())
    return f"request failed: {why}"[:500]
