"""What the embedded server's route modules share: application keys, request errors, typed request fields.

:mod:`calib.servers.embedded.app` builds the application; ``openai_routes.py`` and ``tgi_routes.py`` add
their routes to it. All three read the keys and helpers here, so the route modules do not import the
application module that imports them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from aiohttp import web

from calib._exceptions import InvalidParameterError
from calib.servers.embedded.model import EmbeddedModel

__all__ = [
    "EXECUTOR",
    "LOGPROB_FLOOR",
    "MODEL",
    "SERVED_NAME",
    "Handler",
    "NotFound",
    "ParamError",
    "check_model_name",
    "clamp",
    "get_bool",
    "get_float",
    "get_int",
    "get_stop",
    "read_json",
    "run_model",
]

MODEL = web.AppKey("model", EmbeddedModel)
SERVED_NAME = web.AppKey("served_name", str)
EXECUTOR = web.AppKey("executor", ThreadPoolExecutor)

# Log-probs in JSON as vLLM writes them: -inf (a token outside top-k) becomes -9999.0.
LOGPROB_FLOOR = -9999.0

T = TypeVar("T")


class ParamError(InvalidParameterError):
    """A request field has a bad value; ``param`` names the field."""

    def __init__(self, param: str | None, message: str) -> None:
        self.param = param
        super().__init__(message)


class NotFound(Exception):
    """The request names a model this server does not serve."""


async def run_model(request: web.Request, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` in the application's single model thread."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(request.app[EXECUTOR], partial(fn, *args, **kwargs))


async def read_json(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object, or a :class:`ParamError` saying why not."""
    raw = await request.read()
    try:
        body = json.loads(raw) if raw else None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ParamError(None, f"the request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ParamError(None, "the request body must be a JSON object")
    return body


def check_model_name(app: web.Application, body: Mapping[str, Any]) -> None:
    """Raise :class:`NotFound` when ``body["model"]`` names another model."""
    name = body.get("model")
    model = app[MODEL]
    if name is not None and name not in (app[SERVED_NAME], str(model.model_dir), model.model_dir.name):
        raise NotFound(f"The model `{name}` does not exist.")


def clamp(logprob: float) -> float:
    """A log-prob JSON can carry (vLLM floors -inf at -9999.0)."""
    return max(logprob, LOGPROB_FLOOR)


# -- typed access to request fields ----------------------------------------------------------------

def get_int(body: Mapping[str, Any], key: str, default: Any, *, minimum: int | None = None,
            maximum: int | None = None) -> Any:
    """``body[key]`` as an int within bounds (``default`` when absent or null)."""
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParamError(key, f"{key} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ParamError(key, f"{key} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ParamError(key, f"{key} must be <= {maximum}, got {value}")
    return value


def get_float(body: Mapping[str, Any], key: str, default: Any) -> Any:
    """``body[key]`` as a float (``default`` when absent or null)."""
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParamError(key, f"{key} must be a number, got {value!r}")
    return float(value)


def get_bool(body: Mapping[str, Any], key: str, default: bool) -> bool:
    """``body[key]`` as a bool (``default`` when absent or null)."""
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ParamError(key, f"{key} must be true or false, got {value!r}")
    return value


def get_stop(body: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """Stop sequences: a string or a list of strings (none when absent or null)."""
    value = body.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return tuple(value)
    raise ParamError(key, f"{key} must be a string or a list of strings, got {value!r}")


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
