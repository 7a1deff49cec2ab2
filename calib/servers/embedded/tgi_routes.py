"""Hugging Face TGI's native routes for the embedded server (shapes as TGI's router, ``router/src``).

``POST /generate`` answers a ``GenerateResponse``; ``POST /`` (what the ``text-generation`` client
calls) answers the same wrapped in a list; ``POST /tokenize`` (``{"inputs"}``) answers
``[{id, text, start, stop}]``; ``GET /info`` describes the model. Validation errors are 422
``{"error": "Input validation error: ...", "error_type": "validation"}``, as TGI's.

TGI semantics kept: sampling happens when ``do_sample`` is set or any of temperature, top-k, top-p is
given; token log-probs (``details.tokens``, ``top_tokens``) are those of the distribution after those
warpers, prefill log-probs (``decoder_input_details``, always enabled here) those of the raw logits;
``generated_text`` keeps a stop sequence that ended generation. One difference: TGI notices a stop
sequence only when the text ends with it, this server wherever it appears in the new text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from aiohttp import web

from calib._version import __version__
from calib.servers.base import SamplingParams
from calib.servers.embedded._request import (
    MODEL,
    SERVED_NAME,
    Handler,
    ParamError,
    clamp,
    get_bool,
    get_float,
    get_int,
    read_json,
    run_model,
)
from calib.servers.embedded.model import EmbeddedModel

__all__ = ["add_routes", "tokenize"]

Route = Callable[[EmbeddedModel, str, dict[str, Any]], Any]

_MAX_STOP_SEQUENCES = 64


def _error(status: int, message: str, error_type: str) -> web.Response:
    return web.json_response({"error": message, "error_type": error_type}, status=status)


def _route(fn: Route, *, reads_body: bool = True, wrap: bool = False) -> Handler:
    """An aiohttp handler running ``fn(model, served_name, body)`` in the model thread, errors as TGI's."""

    @functools.wraps(fn)
    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            body = await read_json(request) if reads_body else {}
            result = await run_model(request, fn, request.app[MODEL], request.app[SERVED_NAME], body)
            return web.json_response([result] if wrap else result)
        except ValueError as exc:  # ParamError, InvalidParameterError, ContextLengthError
            return _error(422, f"Input validation error: {exc}", "validation")
        except Exception as exc:  # noqa: BLE001 - a server answers every request
            return _error(500, f"Request failed during generation: {type(exc).__name__}: {exc}", "generation")

    return handler


def _inputs(body: dict[str, Any]) -> str:
    inputs = body.get("inputs")
    if not isinstance(inputs, str) or not inputs:
        raise ParamError("inputs", "`inputs` cannot be empty")
    return inputs


def _positive(p: dict[str, Any], key: str) -> float | None:
    value = get_float(p, key, None)
    if value is not None and value <= 0:
        raise ParamError(key, f"`{key}` must be strictly positive")
    return value


def _parameters(p: dict[str, Any], n_input: int, model: EmbeddedModel) -> SamplingParams:
    """TGI's validation (``router/src/validation.rs``) of ``parameters``, as :class:`SamplingParams`."""
    temperature = _positive(p, "temperature")
    top_k = get_int(p, "top_k", None)
    if top_k is not None and top_k <= 0:
        raise ParamError("top_k", "`top_k` must be strictly positive")
    top_p = get_float(p, "top_p", None)
    if top_p is not None and not 0.0 < top_p < 1.0:
        raise ParamError("top_p", "`top_p` must be > 0.0 and < 1.0")
    for key, neutral in (("repetition_penalty", 1.0), ("frequency_penalty", 0.0)):
        if get_float(p, key, neutral) != neutral:
            raise ParamError(key, f"`{key}` is not supported by calib's embedded server")
    if p.get("typical_p") is not None or p.get("grammar") is not None or get_bool(p, "watermark", False):
        raise ParamError("typical_p", "typical_p, grammar and watermark are not supported by calib's embedded server")
    if get_int(p, "best_of", 1) != 1:
        raise ParamError("best_of", "`best_of` > 1 is not supported by calib's embedded server")
    stop = p.get("stop") or []
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise ParamError("stop", "`stop` must be a list of strings")
    if len(stop) > _MAX_STOP_SEQUENCES:
        raise ParamError("stop", f"`stop` supports up to {_MAX_STOP_SEQUENCES} stop sequences. Given: {len(stop)}")
    max_total = model.max_model_len
    if n_input > max_total - 1:
        raise ParamError("inputs", f"`inputs` must have less than {max_total - 1} tokens. Given: {n_input}")
    max_new = get_int(p, "max_new_tokens", max_total - n_input)
    if max_new <= 0:
        raise ParamError("max_new_tokens", "`max_new_tokens` must be strictly positive")
    if n_input + max_new > max_total:
        raise ParamError("max_new_tokens", f"`inputs` tokens + `max_new_tokens` must be <= {max_total}. Given: "
                                           f"{n_input} `inputs` tokens and {max_new} `max_new_tokens`")
    top_n = get_int(p, "top_n_tokens", 0, minimum=0, maximum=model.vocab_size)
    sampling = (get_bool(p, "do_sample", False) or temperature not in (None, 1.0) or top_k is not None
                or top_p is not None)
    return SamplingParams(max_tokens=max_new, temperature=(temperature or 1.0) if sampling else 0.0,
                          top_p=top_p or 1.0, top_k=top_k, stop=tuple(stop),
                          seed=get_int(p, "seed", None, minimum=0), logprobs=top_n)


def _token(model: EmbeddedModel, token_id: int, logprob: float) -> dict[str, Any]:
    return {"id": token_id, "text": model.token_text(token_id), "logprob": clamp(logprob),
            "special": token_id in model.special_ids}


def _finish_reason(gen: Any) -> str:
    if gen.finish_reason == "length":
        return "length"
    return "eos_token" if gen.eos else "stop_sequence"


def generate(model: EmbeddedModel, served_name: str, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /generate``: one generation with TGI's ``details``."""
    inputs = _inputs(body)
    if body.get("stream"):
        raise ParamError("stream", "streaming is not supported by calib's embedded server; send stream=false")
    p = body.get("parameters") or {}
    if not isinstance(p, dict):
        raise ParamError("parameters", "`parameters` must be an object")
    ids = model.tokenize(inputs)
    truncate = get_int(p, "truncate", None)
    if truncate is not None:
        if truncate <= 0:
            raise ParamError("truncate", "`truncate` must be strictly positive")
        ids = ids[-truncate:]
    params = _parameters(p, len(ids), model)
    (gen,) = model.generate(ids, params, processed_logprobs=True)
    text = gen.full_text
    if get_bool(p, "return_full_text", False):
        text = inputs + text
    out: dict[str, Any] = {"generated_text": text}
    if get_bool(p, "details", False) or get_bool(p, "decoder_input_details", False):
        prefill = []
        if get_bool(p, "decoder_input_details", False):
            prefill = [{"id": i, "text": model.token_text(i), "logprob": None if e is None else clamp(e.logprob)}
                       for i, e in zip(ids, model.prompt_logprobs(ids))]
        details: dict[str, Any] = {
            "finish_reason": _finish_reason(gen),
            "generated_tokens": len(gen.token_ids),
            "seed": gen.seed,
            "prefill": prefill,
            "tokens": [_token(model, e.token_id, e.logprob) for e in gen.logprobs],
        }
        if params.logprobs:
            details["top_tokens"] = [[_token(model, i, lp) for i, _, lp in e.top] for e in gen.logprobs]
        out["details"] = details
    return out


def _tokenize(model: EmbeddedModel, served_name: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    inputs = _inputs(body)
    return [{"id": i, "text": inputs[start:stop], "start": start, "stop": stop}
            for i, start, stop in model.tokenize_with_offsets(inputs)]


def info(model: EmbeddedModel, served_name: str, body: dict[str, Any]) -> dict[str, Any]:
    """``GET /info``."""
    return {
        "model_id": served_name,
        "model_sha": None,
        "model_dtype": model.dtype,
        "model_device_type": model.device,
        "model_pipeline_tag": "text-generation",
        "max_concurrent_requests": 128,
        "max_best_of": 1,
        "max_stop_sequences": _MAX_STOP_SEQUENCES,
        "max_input_tokens": model.max_model_len - 1,
        "max_total_tokens": model.max_model_len,
        "validation_workers": 1,
        "max_client_batch_size": 1,
        "router": "calib-embedded",
        "version": __version__,
        "sha": None,
        "docker_label": None,
    }


tokenize = _route(_tokenize)


def add_routes(app: web.Application) -> None:
    """Register TGI's routes (``/tokenize`` is registered by :func:`make_app`)."""
    app.router.add_post("/", _route(generate, wrap=True))
    app.router.add_post("/generate", _route(generate))
    app.router.add_get("/info", _route(info, reads_body=False))
