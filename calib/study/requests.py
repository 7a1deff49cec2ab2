"""Request bookkeeping every study kind shares: one ``requests`` event per server, and failures as cells."""

from __future__ import annotations

from calib.study.runner import StageContext

__all__ = ["record_requests", "request_failure"]


def record_requests(ctx: StageContext, name: str) -> None:
    """One ``requests`` event per server: attempts, retries, failures after retries, cache hits."""
    stats = getattr(ctx.resources.server(name), "stats", None)
    if stats is not None:
        ctx.event("requests", server=name, attempts=stats.attempts, retries=stats.retries,
                  failures=stats.failures, cache_hits=stats.cache_hits)


def request_failure(exc: Exception) -> str:
    """A failed request as a table's ``error`` cell: ``request failed: WHY`` (at most 500 characters)."""
    why = exc.error if hasattr(exc, "error") else " ".join(str(exc).split())
    return f"request failed: {why}"[:500]
