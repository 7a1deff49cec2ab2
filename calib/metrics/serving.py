"""What the server-backed metrics (the LLM judges, ``embedding`` with a server) share: a server's identity in a
score's provenance and a runner of coroutines from synchronous metric code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["SyncRunner", "server_identity"]

T = TypeVar("T")


def server_identity(server: Any) -> dict[str, Any]:
    """What identifies a server's model in a fingerprint: ``kind``, ``model`` and ``revision`` (no keys).

    Read from the server's attributes (its spec), never from a probe, so that it is the same before and
    after the first request; give ``model`` in an openai server's spec for it to be known up front. A
    server whose model is not known up front (TGI) is identified by its base URLs as well.
    """
    kind = getattr(server, "kind", None)
    model = getattr(server, "model", None)
    if not isinstance(model, str):
        model = getattr(server, "model_dir", None)
        model = None if model is None else str(model)
    revision = getattr(server, "revision", None)
    identity: dict[str, Any] = {"kind": kind if isinstance(kind, str) else type(server).__name__, "model": model,
                                "revision": revision if isinstance(revision, str) else None}
    if model is None:  # a TGI server names its model only once probed: its address stands in
        urls = getattr(server, "base_urls", None) or [getattr(server, "base_url", None)]
        urls = sorted(u for u in urls if isinstance(u, str))
        if urls:
            identity["base_urls"] = urls
    return identity


class SyncRunner:
    """Runs coroutines for a metric's synchronous ``score`` on one private event loop.

    Server clients keep connection pools bound to the loop that opened them, so successive sync calls
    must share one loop (a fresh ``asyncio.run`` per call would strand the pool).
    """

    def __init__(self) -> None:
        self._runner: asyncio.Runner | None = None

    def run(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run the coroutine ``make()`` to completion; refuses inside a running event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("score() is synchronous and cannot run inside an event loop; await ascore_batch()")
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(make())

    def close(self) -> None:
        """Close the private loop (after the server's pool on it has been closed)."""
        if self._runner is not None:
            self._runner.close()
            self._runner = None
