"""A loopback "hosted" proxy in front of ``calib serve``: it shapes a real model server like a host's API.

Tests put it between calib and the session's served tiny model (``served_model``) to stand for the
hosts calib cannot reach here. It listens on 127.0.0.1 only and forwards every request it does not
answer itself. :class:`LoopbackProxy` is the forwarding machinery (a thread with its own event loop);
``answer(path, body)`` decides per request: None forwards it, a ``web.Response`` answers instead.

:class:`HostedProxy` modes (more come with the hosted issue):

``direct``              forward everything;
``no_tokenize``         no ``/tokenize`` or ``/detokenize`` (a host without a tokenizer route);
``chat_only``           additionally no ``/v1/completions``: only ``/v1/models`` and chat (a chat-only host);
``outage_after_probe``  completions of at most one token (what calib's capability probe sends) are
                        answered; every longer one gets HTTP 500 "quota exceeded" (an outage or an
                        exhausted quota after the host looked healthy).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from typing import Any

from aiohttp import ClientSession, web

__all__ = ["MODES", "HostedProxy", "LoopbackProxy"]

MODES = ("direct", "no_tokenize", "chat_only", "outage_after_probe")


class LoopbackProxy:
    """Forwards to ``upstream`` what :meth:`answer` leaves alone; counts requests per path."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.requests: Counter[str] = Counter()
        self.url = ""
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def answer(self, path: str, body: dict[str, Any] | None) -> web.Response | None:
        """The proxy's own answer to a request (None: forward it upstream)."""
        return None

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        self.requests[request.path] += 1
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        own = self.answer(request.path, body if isinstance(body, dict) else None)
        if own is not None:
            return own
        async with ClientSession() as session:
            async with session.request(request.method, self.upstream + request.path_qs, data=raw,
                                       headers={"Content-Type": request.headers.get("Content-Type", "")}) as up:
                return web.Response(body=await up.read(), status=up.status, content_type=up.content_type)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app)
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
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def _not_found(path: str) -> web.Response:
    return web.json_response({"error": {"message": f"Not Found: {path}", "type": "invalid_request_error"}},
                             status=404)


class HostedProxy(LoopbackProxy):
    """A host of one of :data:`MODES` made of a real model server."""

    def __init__(self, upstream: str, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: one of {MODES}")
        super().__init__(upstream)
        self.mode = mode

    def answer(self, path: str, body: dict[str, Any] | None) -> web.Response | None:
        if self.mode == "direct":
            return None
        if path in ("/tokenize", "/detokenize") and self.mode in ("no_tokenize", "chat_only"):
            return _not_found(path)
        if path == "/v1/completions":
            if self.mode == "chat_only":
                return _not_found(path)
            if self.mode == "outage_after_probe" and int((body or {}).get("max_tokens") or 16) > 1:
                return web.json_response({"error": {"message": "quota exceeded", "type": "insufficient_quota"}},
                                         status=500)
        return None
