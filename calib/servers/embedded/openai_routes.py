"""vLLM's OpenAI-compatible routes for the embedded server (shapes as vLLM's ``openai/protocol.py``).

Extensions vLLM adds and calib relies on are honoured: prompts as token ids, ``top_k``,
``prompt_logprobs`` (``choices[i].prompt_logprobs``: ``None`` first, then ``{token_id: {logprob, rank,
decoded_token}}``), ``return_tokens_as_token_ids``, ``return_token_ids``, and ``/tokenize`` and
``/detokenize``. Errors are ``{"error": {"message", "type", "param", "code"}}`` with status 400
(404 for an unknown model).
"""

from __future__ import annotations

import base64
import functools
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from aiohttp import web

from calib._version import __version__
from calib.servers.base import SamplingParams, TokenLogprob
from calib.servers.embedded._request import (
    MODEL,
    SERVED_NAME,
    Handler,
    NotFound,
    ParamError,
    check_model_name,
    clamp,
    get_bool,
    get_float,
    get_int,
    get_stop,
    read_json,
    run_model,
)
from calib.servers.embedded.model import EmbeddedModel, Generation

__all__ = ["add_routes", "tokenize"]

Route = Callable[[EmbeddedModel, str, dict[str, Any]], dict[str, Any]]


def _error(status: int, message: str, type_: str, param: str | None = None) -> web.Response:
    return web.json_response({"error": {"message": message, "type": type_, "param": param, "code": status}},
                             status=status)


def _route(fn: Route, *, reads_body: bool = True) -> Handler:
    """An aiohttp handler running ``fn(model, served_name, body)`` in the model thread, errors as vLLM's."""

    @functools.wraps(fn)
    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            body = await read_json(request) if reads_body else {}
            check_model_name(request.app, body)
            result = await run_model(request, fn, request.app[MODEL], request.app[SERVED_NAME], body)
            return web.json_response(result)
        except NotFound as exc:
            return _error(404, str(exc), "NotFoundError", "model")
        except ParamError as exc:
            return _error(400, str(exc), "BadRequestError", exc.param)
        except ValueError as exc:  # InvalidParameterError, ContextLengthError, SamplingParams' checks
            return _error(400, str(exc), "BadRequestError")
        except Exception as exc:  # noqa: BLE001 - a server answers every request
            return _error(500, f"{type(exc).__name__}: {exc}", "InternalServerError")

    return handler


def _unsupported(body: dict[str, Any]) -> None:
    """Reject options the embedded server would otherwise silently ignore."""
    if body.get("stream"):
        raise ParamError("stream", "stream=true is not supported by calib's embedded server; send stream=false")
    for key in ("presence_penalty", "frequency_penalty"):
        if body.get(key) not in (None, 0, 0.0):
            raise ParamError(key, f"{key} is not supported by calib's embedded server; leave it at 0")
    if body.get("repetition_penalty") not in (None, 1, 1.0):
        raise ParamError("repetition_penalty", "repetition_penalty is not supported by calib's embedded server")
    if body.get("logit_bias"):
        raise ParamError("logit_bias", "logit_bias is not supported by calib's embedded server")
    if body.get("best_of") not in (None, 1):
        raise ParamError("best_of", "best_of > 1 is not supported by calib's embedded server")
    # vLLM extensions that would change the result if silently ignored.
    for key in ("ignore_eos", "include_stop_str_in_output", "stop_token_ids", "min_tokens", "min_p",
                "response_format", "guided_json", "guided_regex", "guided_choice", "guided_grammar"):
        if body.get(key):
            raise ParamError(key, f"{key} is not supported by calib's embedded server")


def _sampling(body: dict[str, Any], max_tokens: int, logprobs: int | None) -> SamplingParams:
    top_k = get_int(body, "top_k", None)
    return SamplingParams(max_tokens=max_tokens, temperature=get_float(body, "temperature", 1.0),
                          top_p=get_float(body, "top_p", 1.0), top_k=None if top_k in (None, 0, -1) else top_k,
                          stop=get_stop(body, "stop"), n=get_int(body, "n", 1, minimum=1, maximum=128),
                          seed=get_int(body, "seed", None), logprobs=logprobs)


def _max_tokens(body: dict[str, Any], key: str, default: int | None, prompt_len: int, model: EmbeddedModel) -> int:
    value = get_int(body, key, default, minimum=0)
    if body.get(key, 0) is None or value is None:  # vLLM: null means "the rest of the context"
        value = max(model.max_model_len - prompt_len, 0)
    return value


def _parse_prompts(model: EmbeddedModel, prompt: Any, key: str = "prompt") -> list[tuple[list[int], str | None]]:
    """``(token_ids, text)`` per prompt: a string, a list of strings, a list of ids or a list of id lists."""
    def ids_ok(x: Any) -> bool:
        return isinstance(x, list) and len(x) > 0 and all(isinstance(i, int) and not isinstance(i, bool) for i in x)

    if isinstance(prompt, str):
        items: list[Any] = [prompt]
    elif ids_ok(prompt):
        items = [prompt]
    elif isinstance(prompt, list) and prompt and all(isinstance(p, str) or ids_ok(p) for p in prompt):
        items = prompt
    else:
        raise ParamError(key, f"{key} must be a string, a list of strings, a list of token ids or a list of "
                              f"token-id lists (non-empty), got {str(prompt)[:80]!r}")
    out = []
    for item in items:
        if isinstance(item, str):
            out.append((model.tokenize(item), item))
        else:
            model.check_ids(item)
            out.append((list(item), None))
    return out


def _ordered(entry: TokenLogprob) -> dict[int, tuple[float, int, str]]:
    """vLLM's per-position dict: the chosen token first, then the top alternatives."""
    out = {entry.token_id: (entry.logprob, entry.rank, entry.token)}
    for r, (i, text, lp) in enumerate(entry.top, start=1):
        out.setdefault(i, (lp, r, text))
    return out


def _prompt_logprobs_json(entries: Sequence[TokenLogprob | None]) -> list[dict[str, Any] | None]:
    return [None if e is None else {str(i): {"logprob": clamp(lp), "rank": r, "decoded_token": t}
                                    for i, (lp, r, t) in _ordered(e).items()} for e in entries]


def _completion_logprobs(model: EmbeddedModel, token_ids: Sequence[int], entries: Sequence[TokenLogprob | None],
                         k: int, as_ids: bool) -> dict[str, Any]:
    def name(i: int) -> str:
        return f"token_id:{i}" if as_ids else model.token_text(i)

    tokens, token_logprobs, top_logprobs, offsets = [], [], [], []
    offset = 0
    for tid, entry in zip(token_ids, entries):
        token = f"token_id:{tid}" if as_ids else (model.detokenize([tid]) if entry is None else name(tid))
        tokens.append(token)
        offsets.append(offset)
        offset += len(token)
        if entry is None:
            token_logprobs.append(None)
            top_logprobs.append(None)
            continue
        token_logprobs.append(clamp(entry.logprob))
        # As vLLM (and the OpenAI API): up to k + 1 entries, the chosen token first.
        items = list(_ordered(entry).items())[:k + 1]
        top_logprobs.append({name(i): clamp(lp) for i, (lp, _, _) in items})
    return {"text_offset": offsets, "token_logprobs": token_logprobs, "tokens": tokens, "top_logprobs": top_logprobs}


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens, "prompt_tokens_details": None}


def _complete_one(model: EmbeddedModel, ids: list[int], params: SamplingParams,
                  prompt_top: int | None) -> tuple[list[Generation], list[TokenLogprob | None] | None]:
    """Runs in the model thread: the generations of one prompt and, when asked, its prompt log-probs."""
    model.check_length(len(ids), params.max_tokens)
    if params.max_tokens > 0:
        gens = model.generate(ids, params)
    else:
        if not ids:
            raise ParamError("prompt", "prompt must hold at least one token")
        empty = Generation((), "", "", "length", None, (), None)
        gens = [empty] * params.n
    plp = model.prompt_logprobs(ids, prompt_top) if prompt_top is not None else None
    return gens, plp


def completions(model: EmbeddedModel, served_name: str, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /v1/completions``."""
    _unsupported(body)
    if body.get("suffix"):
        raise ParamError("suffix", "suffix is not supported by calib's embedded server")
    prompts = _parse_prompts(model, body.get("prompt"))
    echo = get_bool(body, "echo", False)
    logprobs = get_int(body, "logprobs", None, minimum=0, maximum=model.vocab_size)
    prompt_top = get_int(body, "prompt_logprobs", None, minimum=0, maximum=model.vocab_size)
    if prompt_top is None and echo and logprobs is not None:
        prompt_top = logprobs  # as vLLM: echo with logprobs scores the prompt with that many alternatives
    as_ids = get_bool(body, "return_tokens_as_token_ids", False)
    return_ids = get_bool(body, "return_token_ids", False)

    choices, n_prompt, n_completion = [], 0, 0
    for ids, text in prompts:
        params = _sampling(body, _max_tokens(body, "max_tokens", 16, len(ids), model), logprobs)
        gens, plp = _complete_one(model, ids, params, prompt_top)
        n_prompt += len(ids)
        prompt_text = text if text is not None else model.detokenize(ids)
        for gen in gens:
            n_completion += len(gen.token_ids)
            token_ids, entries, out_text = list(gen.token_ids), list(gen.logprobs), gen.text
            if echo:
                token_ids, out_text = ids + token_ids, prompt_text + out_text
                entries = (plp or [None] * len(ids)) + entries
            choices.append({
                "index": len(choices),
                "text": out_text,
                "logprobs": None if logprobs is None else _completion_logprobs(model, token_ids, entries, logprobs,
                                                                               as_ids),
                "finish_reason": gen.finish_reason,
                "stop_reason": gen.stop_reason,
                "prompt_logprobs": None if plp is None else _prompt_logprobs_json(plp),
                "prompt_token_ids": ids if return_ids else None,
                "token_ids": list(gen.token_ids) if return_ids else None,
            })
    return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
            "model": served_name, "choices": choices, "usage": _usage(n_prompt, n_completion),
            "system_fingerprint": None}


def _messages(body: dict[str, Any]) -> list[dict[str, str]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ParamError("messages", "messages must be a non-empty list of {role, content} objects")
    out = []
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ParamError("messages", f"each message must be an object with a role, got {str(m)[:80]!r}")
        content = m.get("content")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        if content is not None and not isinstance(content, str):
            raise ParamError("messages", f"message content must be a string or a list of text parts, got {content!r}")
        out.append({"role": m["role"], "content": content or ""})
    return out


def _chat_logprobs(model: EmbeddedModel, entries: Sequence[TokenLogprob], k: int, as_ids: bool) -> dict[str, Any]:
    def item(i: int, lp: float) -> dict[str, Any]:
        token = f"token_id:{i}" if as_ids else model.token_text(i)
        return {"token": token, "logprob": clamp(lp), "bytes": list(token.encode("utf-8", errors="replace"))}

    content = []
    for e in entries:
        # As vLLM: the first k entries of the chosen-token-first dict.
        top = [item(i, lp) for i, (lp, _, _) in list(_ordered(e).items())[:k]]
        content.append({**item(e.token_id, e.logprob), "top_logprobs": top})
    return {"content": content}


def chat_completions(model: EmbeddedModel, served_name: str, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /v1/chat/completions`` (no tool calling in the embedded server)."""
    _unsupported(body)
    if body.get("tools") and body.get("tool_choice") != "none":
        raise ParamError("tools", "tool calling is not supported by calib's embedded server (capabilities: "
                                  "tools=false); send no tools or tool_choice='none'")
    if not model.has_chat_template:
        raise ParamError("messages", f"the model at {model.model_dir} has no chat template; use /v1/completions")
    prompt = model.apply_chat_template(_messages(body), add_generation_prompt=get_bool(body, "add_generation_prompt",
                                                                                       True))
    ids = model.tokenize(prompt)
    want_logprobs = get_bool(body, "logprobs", False)
    top = get_int(body, "top_logprobs", 0 if want_logprobs else None, minimum=0, maximum=model.vocab_size)
    if top is not None and not want_logprobs:
        raise ParamError("top_logprobs", "top_logprobs needs logprobs=true")
    key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    params = _sampling(body, _max_tokens(body, key, None, len(ids), model), top)
    gens, _ = _complete_one(model, ids, params, None)
    as_ids = get_bool(body, "return_tokens_as_token_ids", False)
    choices = [{
        "index": i,
        "message": {"role": "assistant", "content": g.text, "refusal": None, "tool_calls": [],
                    "reasoning_content": None},
        "logprobs": _chat_logprobs(model, g.logprobs, top, as_ids) if want_logprobs else None,
        "finish_reason": g.finish_reason,
        "stop_reason": g.stop_reason,
    } for i, g in enumerate(gens)]
    return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": served_name, "choices": choices, "usage": _usage(len(ids), sum(len(g.token_ids) for g in gens)),
            "prompt_logprobs": None, "system_fingerprint": None}


def embeddings(model: EmbeddedModel, served_name: str, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /v1/embeddings`` (mean-pooled last hidden state, L2-normalised)."""
    inputs = _parse_prompts(model, body.get("input"), key="input")
    fmt = body.get("encoding_format") or "float"
    if fmt not in ("float", "base64"):
        raise ParamError("encoding_format", f"encoding_format must be 'float' or 'base64', got {fmt!r}")
    vectors = model.embed([ids for ids, _ in inputs])
    if body.get("dimensions") not in (None, len(vectors[0])):
        raise ParamError("dimensions", f"this model's embeddings have {len(vectors[0])} dimensions; "
                                       "it cannot return another number")
    data = []
    for i, v in enumerate(vectors):
        vec: Any = v if fmt == "float" else base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode("ascii")
        data.append({"index": i, "object": "embedding", "embedding": vec})
    n = sum(len(ids) for ids, _ in inputs)
    return {"id": f"embd-{uuid.uuid4().hex}", "object": "list", "created": int(time.time()), "model": served_name,
            "data": data, "usage": _usage(n, 0)}


def models(model: EmbeddedModel, served_name: str, body: dict[str, Any]) -> dict[str, Any]:
    """``GET /v1/models``."""
    card = {"id": served_name, "object": "model", "created": int(time.time()), "owned_by": "calib",
            "root": str(model.model_dir), "parent": None, "max_model_len": model.max_model_len, "permission": []}
    return {"object": "list", "data": [card]}


def _tokenize(model: EmbeddedModel, served_name: str, body: dict[str, Any]) -> dict[str, Any]:
    if "messages" in body:
        text = model.apply_chat_template(_messages(body), add_generation_prompt=get_bool(body, "add_generation_prompt",
                                                                                         True))
        ids = model.tokenize(text, add_special_tokens=get_bool(body, "add_special_tokens", False))
    else:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise ParamError("prompt", f"prompt must be a string, got {str(prompt)[:80]!r}")
        ids = model.tokenize(prompt, add_special_tokens=get_bool(body, "add_special_tokens", True))
    strs = model.token_strs(ids) if get_bool(body, "return_token_strs", False) else None
    return {"count": len(ids), "max_model_len": model.max_model_len, "tokens": ids, "token_strs": strs}


def _detokenize(model: EmbeddedModel, served_name: str, body: dict[str, Any]) -> dict[str, Any]:
    tokens = body.get("tokens")
    if not isinstance(tokens, list):
        raise ParamError("tokens", f"tokens must be a list of token ids, got {str(tokens)[:80]!r}")
    return {"prompt": model.detokenize(tokens)}


def _version(model: EmbeddedModel, served_name: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"version": __version__}


tokenize = _route(_tokenize)


def add_routes(app: web.Application) -> None:
    """Register the OpenAI-compatible routes (``/tokenize`` is registered by :func:`make_app`)."""
    app.router.add_post("/v1/completions", _route(completions))
    app.router.add_post("/v1/chat/completions", _route(chat_completions))
    app.router.add_post("/v1/embeddings", _route(embeddings))
    app.router.add_get("/v1/models", _route(models, reads_body=False))
    app.router.add_post("/detokenize", _route(_detokenize))
    app.router.add_get("/version", _route(_version, reads_body=False))
