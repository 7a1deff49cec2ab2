"""A loopback aiohttp server of a test's own, for answers calib's embedded server would not give."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web


@contextlib.asynccontextmanager
async def serve_app(app: web.Application, suffix: str = "") -> AsyncIterator[str]:
    """Run ``app`` on 127.0.0.1 (a free port) for the ``async with`` block; yields its base URL + ``suffix``."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}{suffix}"
    finally:
        await runner.cleanup()
