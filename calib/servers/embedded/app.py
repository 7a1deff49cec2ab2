"""The embedded server's HTTP application: vLLM's OpenAI-compatible routes and TGI's native routes.

:func:`make_app` builds an aiohttp application around an :class:`EmbeddedModel`. Routes are shaped as
the real servers shape them, so that the ``openai`` SDK, the ``text-generation`` client and
lm-evaluation-harness's local-completions talk to it unchanged:

- vLLM (``openai_routes.py``): ``POST /v1/completions``, ``/v1/chat/completions``, ``/v1/embeddings``,
  ``/tokenize`` (``{"prompt"}`` or ``{"messages"}``), ``/detokenize``; ``GET /v1/models``, ``/version``.
- TGI (``tgi_routes.py``): ``POST /`` and ``/generate``, ``/tokenize`` (``{"inputs"}``); ``GET /info``.
- Both: ``GET /health``.

Every model call runs in one worker thread, so requests never run the model concurrently and the
event loop stays free. Streaming is not offered (``stream: true`` is a 400/422).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web

from calib.servers.embedded import openai_routes, tgi_routes
from calib.servers.embedded._request import EXECUTOR, MODEL, SERVED_NAME, Handler
from calib.servers.embedded.model import EmbeddedModel

__all__ = ["make_app"]


async def _health(request: web.Request) -> web.Response:
    return web.Response(status=200)


def _tokenize_dispatch(openai_tokenize: Handler, tgi_tokenize: Handler) -> Handler:
    # vLLM and TGI both serve POST /tokenize: TGI's body has "inputs", vLLM's "prompt" or "messages".
    async def tokenize(request: web.Request) -> web.StreamResponse:
        try:
            body = json.loads(await request.read() or b"null")
        except ValueError:
            body = None
        if isinstance(body, dict) and "inputs" in body:
            return await tgi_tokenize(request)
        return await openai_tokenize(request)

    return tokenize


def make_app(model: EmbeddedModel, *, served_name: str) -> web.Application:
    """An aiohttp application serving ``model`` under the name ``served_name``.

    The application owns a one-thread executor for model calls; it is shut down on cleanup.
    """
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[MODEL] = model
    app[SERVED_NAME] = served_name
    app[EXECUTOR] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="calib-embedded-model")

    async def _shutdown(app: web.Application) -> None:
        app[EXECUTOR].shutdown(wait=True, cancel_futures=True)

    app.on_cleanup.append(_shutdown)
    app.router.add_get("/health", _health)
    openai_routes.add_routes(app)
    tgi_routes.add_routes(app)
    app.router.add_post("/tokenize", _tokenize_dispatch(openai_routes.tokenize, tgi_routes.tokenize))
    return app
