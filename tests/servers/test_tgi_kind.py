"""The ``tgi`` kind: the ``text-generation`` client against a real ``calib serve`` (TGI's routes) and a
loopback server of this file's own that answers like TGI 3 started without ``--enable-prefill-logprobs``
and injects TGI's error answers (overloaded, validation)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.metadata
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from text_generation import errors as tgi_errors

from calib._exceptions import InvalidParameterError
from calib.servers import (
    CapabilityError,
    RequestCache,
    RequestFailed,
    SamplingParams,
    ServerError,
    create_server,
    require,
)
from calib.servers._http import RetryPolicy
from calib.servers.tgi import TGIServer, _prefixes, classify_tgi
from tests._loopback import serve_app

# text-generation 0.7 calls pydantic's deprecated .dict() on every request.
pytestmark = pytest.mark.filterwarnings("ignore:The `dict` method is deprecated:DeprecationWarning")

SECRET = "hf-test-0b6d7f2e-never-anywhere"
PROMPTS = ["def add(a, b):", "import json\n", "class Foo:"]
FAST = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.05, timeout=10.0)


def run(coro):
    return asyncio.run(coro)


def tgi(url: str, **config: Any) -> TGIServer:
    return create_server("reference", {"kind": "tgi", "base_url": url, **config})


async def _with(server: TGIServer, fn):
    try:
        return await fn(server)
    finally:
        await server.aclose()


# --------------------------------------------------------------------------- against calib serve
def test_capabilities_come_from_info_tokenize_and_a_prefill_probe(served_model):
    caps = run(_with(tgi(served_model), lambda s: s.capabilities()))
    assert (caps.kind, caps.name, caps.model, caps.max_context) == ("tgi", "reference", "tiny", 512)
    assert isinstance(caps.server_version, str)
    assert caps.prompt_logprobs and caps.scoring and caps.tokenize
    assert caps.max_top_logprobs >= 5
    assert not (caps.echo_logprobs or caps.batch_prompts or caps.token_ids_in or caps.chat or caps.embeddings)
    assert any("/detokenize" in n for n in caps.notes)


def test_greedy_n_is_one_request_and_sampled_n_uses_seeds(served_model):
    async def go(s: TGIServer):
        await s.capabilities()
        before = s.stats.attempts
        greedy = await s.complete(PROMPTS, SamplingParams(max_tokens=6, n=2))
        greedy_requests = s.stats.attempts - before
        sampled = await s.complete(PROMPTS[:1], SamplingParams(max_tokens=8, temperature=1.0, n=3, seed=11))
        again = await s.complete(PROMPTS[:1], SamplingParams(max_tokens=8, temperature=1.0, n=3, seed=11))
        return greedy, greedy_requests, sampled, again

    greedy, greedy_requests, sampled, again = run(_with(tgi(served_model), go))
    assert greedy_requests == len(PROMPTS)
    assert all(len(c) == 2 and c[0] == c[1] and c[0].finish_reason == "length" for c in greedy)
    texts = [c.text for c in sampled[0]]
    assert texts == [c.text for c in again[0]] and len(set(texts)) > 1


def test_stop_sequences_end_the_text_before_them(served_model):
    async def go(s: TGIServer):
        (greedy,) = await s.complete(["def add(a, b):"], SamplingParams(max_tokens=24))
        text = greedy[0].text
        k = next(i for i in range(2, len(text)) if text[i].isalnum() and "\ufffd" not in text[:i + 1])
        (stopped,) = await s.complete(["def add(a, b):"], SamplingParams(max_tokens=24, stop=(text[k],)))
        return text, text[k], stopped[0]

    text, stop, stopped = run(_with(tgi(served_model), go))
    assert stopped.text == text[:text.index(stop)]  # TGI keeps the stop sequence; calib cuts it
    assert stopped.finish_reason == "stop"


def test_completion_logprobs_carry_ids_and_top_tokens(served_model):
    ((completion,),) = run(_with(tgi(served_model), lambda s: s.complete(["class Foo:"],
                                                                           SamplingParams(max_tokens=4, logprobs=3))))
    assert len(completion.tokens) == 4
    for tok in completion.tokens:
        assert isinstance(tok.token_id, int) and len(tok.top) == 3
        assert tok.top[0][0] == tok.token_id and tok.logprob == pytest.approx(tok.top[0][2])


def test_score_is_aligned_by_ids_with_one_top_k_request_per_token(served_model):
    async def go(s: TGIServer):
        await s.capabilities()
        before = s.stats.attempts
        scored = await s.score("def add(a, b):", "\n    return a + b", top_logprobs=5)
        requests = s.stats.attempts - before
        plain = await s.score("def add(a, b):", "\n    return a + b")
        return scored, requests, plain, await s.tokenize("def add(a, b):"), await s.tokenize("\n    return a + b")

    scored, requests, plain, prompt_ids, cont_ids = run(_with(tgi(served_model), go))
    assert scored.prompt_token_ids == tuple(prompt_ids) and scored.continuation_token_ids == tuple(cont_ids)
    assert requests == 2 + 1 + len(cont_ids)  # /tokenize twice, the prefill, one top-k request per token
    assert [t.logprob for t in plain.tokens] == [t.logprob for t in scored.tokens]
    assert all(t.top == () for t in plain.tokens)
    for tok in scored.tokens:
        assert len(tok.top) == 5 and tok.top[0][2] >= tok.logprob - 1e-6
        assert any(i == tok.token_id for i, _, _ in tok.top) == (tok.logprob >= tok.top[-1][2] - 1e-6)


def test_a_re_tokenized_boundary_is_refused_naming_the_position(served_model):
    async def go(s: TGIServer):
        for word in ("json", "return", "import", "self", "value", "string", "encoder"):
            for cut in range(1, len(word)):
                head, tail = "x = " + word[:cut], word[cut:]
                if await s.tokenize(head + tail) != await s.tokenize(head) + await s.tokenize(tail):
                    with pytest.raises(ServerError) as excinfo:
                        await s.score(head, tail)
                    return excinfo.value, len(await s.tokenize(head))
        raise AssertionError("no merging pair found")

    error, n_prompt = run(_with(tgi(served_model), go))
    assert "'reference'" in str(error) and "re-tokenizes across the prompt/continuation boundary" in str(error)
    assert f"token {n_prompt - 1} " in str(error) or f"token {n_prompt} " in str(error)


def test_a_token_starting_inside_a_character_has_log_probs_but_no_reachable_alternatives(served_model):
    async def go(s: TGIServer):
        plain = await s.score("x =", " 'é'")
        with pytest.raises(ServerError) as excinfo:
            await s.score("x =", " 'é'", top_logprobs=2)
        openai = create_server("same", {"kind": "openai", "base_url": served_model})
        try:
            return plain, excinfo.value, await openai.score("x =", " 'é'")
        finally:
            await openai.aclose()

    plain, error, by_ids = run(_with(tgi(served_model), go))
    assert plain.continuation_token_ids == by_ids.continuation_token_ids
    assert [t.logprob for t in plain.tokens] == pytest.approx([t.logprob for t in by_ids.tokens], abs=1e-5)
    assert "continuation token 2 starts inside a character" in str(error) and "top_logprobs=0" in str(error)


def test_prefixes_follow_tgis_byte_offsets():
    # TGI's /tokenize: byte offsets, and U+FFFD for the text of a token holding part of a character.
    tokens = [{"text": "a", "start": 0, "stop": 1}, {"text": "\ufffd", "start": 1, "stop": 2},
              {"text": "\ufffd", "start": 2, "stop": 3}, {"text": "b", "start": 3, "stop": 4}]
    assert _prefixes("aéb", tokens) == ["", "a", None, "aé"]
    whole = [{"text": "a", "start": 0, "stop": 1}, {"text": "é", "start": 1, "stop": 3}]
    assert _prefixes("aé", whole) == ["", "a"]


def test_detokenize_is_a_capability_tgi_lacks(served_model):
    with pytest.raises(CapabilityError, match="'reference' \\(tgi\\) lacks detokenize.*/tokenize only"):
        run(_with(tgi(served_model), lambda s: s.detokenize([1, 2])))


def test_the_cache_answers_a_rerun_and_n_samples_stay_distinct(served_model, tmp_path, monkeypatch):
    monkeypatch.setenv("CALIB_TGI_TOKEN", SECRET)
    path = tmp_path / "cache.sqlite"

    async def once():
        cache = RequestCache(path)
        s = tgi(served_model, cache=cache, revision="r1", api_key_env="CALIB_TGI_TOKEN")
        try:
            await s.capabilities()
            before = s.stats.attempts
            out = await s.complete(PROMPTS[:1], SamplingParams(max_tokens=6, temperature=1.0, n=3))
            scored = await s.score("def add(a, b):", " return", top_logprobs=2)
            return out, scored, s.stats.attempts - before
        finally:
            await s.aclose()
            cache.close()

    first, scored, sent = run(once())
    again, rescored, resent = run(once())
    assert sent > 0 and resent == 0 and (again, rescored) == (first, scored)
    assert len({c.text for c in first[0]}) > 1  # unseeded samples are cached per sample, not merged
    for file in tmp_path.iterdir():
        assert SECRET.encode() not in file.read_bytes(), file.name


# --------------------------------------------------------------------------- a TGI 3 without prefill log-probs
class Tgi3Server:
    """Answers like TGI 3 without --enable-prefill-logprobs; ``inputs`` starting with ``overloaded``
    get two 503 overloaded answers first, ``invalid`` a 422 validation error."""

    def __init__(self) -> None:
        self.headers: list[dict[str, str]] = []
        self.attempts: dict[str, int] = {}

    async def generate(self, request: web.Request) -> web.Response:
        self.headers.append(dict(request.headers))
        body = await request.json()
        inputs = body["inputs"]
        self.attempts[inputs] = self.attempts.get(inputs, 0) + 1
        if inputs.startswith("overloaded") and self.attempts[inputs] <= 2:
            return web.json_response({"error": "Model is overloaded", "error_type": "overloaded"}, status=503)
        if inputs.startswith("invalid"):
            return web.json_response({"error": "Input validation error: `inputs` tokens + `max_new_tokens` must "
                                               "be <= 4096", "error_type": "validation"}, status=422)
        top_n = body["parameters"].get("top_n_tokens")
        if top_n and top_n > 5:
            return web.json_response({"error": f"Input validation error: `top_n_tokens` must be >= 0 and <= 5. "
                                               f"Given: {top_n}", "error_type": "validation"}, status=422)
        prefill = [{"id": ord(c), "text": c, "logprob": None} for c in inputs] \
            if body["parameters"].get("decoder_input_details") else []
        token = {"id": 33, "text": "!", "logprob": -0.25, "special": False}
        details = {"finish_reason": "length", "generated_tokens": 1, "seed": None, "prefill": prefill,
                   "tokens": [token]}
        if top_n:
            details["top_tokens"] = [[token] * top_n]
        return web.json_response([{"generated_text": "!", "details": details}])

    async def tokenize(self, request: web.Request) -> web.Response:
        inputs = (await request.json())["inputs"]
        return web.json_response([{"id": ord(c), "text": c, "start": i, "stop": i + 1} for i, c in enumerate(inputs)])

    async def info(self, request: web.Request) -> web.Response:
        self.headers.append(dict(request.headers))
        # TGI 3's Info: the router's fields plus the backend's (model_dtype, model_device_type, flattened in).
        return web.json_response({"model_id": "org/model-7b", "model_sha": "abc123", "model_dtype": "torch.bfloat16",
                                  "model_device_type": "cuda", "max_input_tokens": 4095, "max_total_tokens": 4096,
                                  "version": "3.3.4", "sha": "0ff5a2b9c1d3e4f5", "router": "text-generation-router"})

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        app = web.Application()
        app.router.add_post("/", self.generate)
        app.router.add_post("/tokenize", self.tokenize)
        app.router.add_get("/info", self.info)
        async with serve_app(app) as url:
            yield url


def test_tgi3_without_prefill_logprobs_stops_scoring_naming_the_flag(monkeypatch):
    monkeypatch.setenv("CALIB_TGI_TOKEN", SECRET)
    fake = Tgi3Server()

    async def go():
        async with fake.running() as url:
            s = tgi(url, api_key_env="CALIB_TGI_TOKEN")
            s.policy = FAST
            try:
                caps = await s.capabilities()
                with pytest.raises(CapabilityError) as excinfo:
                    await s.score("abc", "de", top_logprobs=2)
                overloaded = await s.complete(["overloaded once"], SamplingParams(max_tokens=1))
                with pytest.raises(RequestFailed) as invalid:
                    await s.complete(["invalid"], SamplingParams(max_tokens=1))
                return caps, excinfo.value, overloaded, invalid.value, s
            finally:
                await s.aclose()

    caps, error, overloaded, invalid, server = run(go())
    assert (caps.model, caps.server_version, caps.max_context) == ("org/model-7b", "3.3.4", 4096)
    assert not caps.prompt_logprobs and not caps.scoring and caps.max_top_logprobs == 5
    assert any("--enable-prefill-logprobs" in n for n in caps.notes)
    message = str(error)
    assert "'reference'" in message and "scoring" in message and "--enable-prefill-logprobs" in message
    with pytest.raises(CapabilityError, match="'reference' \\(tgi, model 'org/model-7b'\\) lacks scoring.*"
                                              "--enable-prefill-logprobs"):
        require(caps, ["scoring"])
    assert overloaded[0][0].text == "!" and fake.attempts["overloaded once"] == 3
    assert invalid.attempts == 1 and "ValidationError" in invalid.error and server.stats.failed == [invalid]
    assert all(h.get("Authorization") == f"Bearer {SECRET}" for h in fake.headers)
    assert SECRET not in str(invalid) and SECRET not in repr(server)


def test_prefill_logprobs_that_vanish_after_the_probe_raise_the_capability_error():
    fake = Tgi3Server()

    async def go():
        async with fake.running() as url:
            s = tgi(url)
            try:
                caps = await s.capabilities()
                s._caps = dataclasses.replace(caps, prompt_logprobs=True)
                with pytest.raises(CapabilityError) as excinfo:
                    await s.score("abc", "de")
                return excinfo.value
            finally:
                await s.aclose()

    assert "--enable-prefill-logprobs" in str(run(go()))


def test_provenance_records_what_info_reports_and_a_stated_dtype_must_agree():
    fake = Tgi3Server()

    async def go(**config: Any):
        async with fake.running() as url:
            s = tgi(url, **config)
            try:
                before = s.provenance()
                await s.capabilities()
                return before, s.provenance()
            finally:
                await s.aclose()

    before, record = run(go(dtype="bfloat16"))
    assert before["model"] is None and before["missing"]["dtype"] == "the server was not probed in this run"
    assert {k: record[k] for k in ("kind", "model", "revision", "dtype", "device", "server_version", "server_sha")} == {
        "kind": "tgi", "model": "org/model-7b", "revision": "abc123", "dtype": "bfloat16", "device": "cuda",
        "server_version": "3.3.4", "server_sha": "0ff5a2b9c1d3e4f5"}
    assert record["sources"]["revision"] == "GET /info model_sha" and record["missing"] == {}
    with pytest.raises(InvalidParameterError, match="states dtype = 'float16' but the server reports 'bfloat16'"):
        run(go(dtype="float16"))
    with pytest.raises(InvalidParameterError, match="dtype must name the weights' dtype.*got 16"):
        tgi("http://127.0.0.1:9", dtype=16)


def test_provenance_of_calib_serve_names_the_dtype_of_the_loaded_weights(served_model):
    s = tgi(served_model, revision="v1")
    run(_with(s, lambda s: s.capabilities()))
    record = s.provenance()
    # calib serve runs the weights as float32 on the CPU (docs/servers.md), and its /info says so.
    assert (record["model"], record["dtype"], record["device"]) == ("tiny", "float32", "cpu")
    assert record["revision"] == "v1" and "stated" in record["sources"]["revision"]  # a local directory: no model_sha
    assert record["server_version"] == importlib.metadata.version("calib")


@pytest.mark.parametrize(("error", "retryable"), [
    (tgi_errors.RateLimitExceededError("slow down"), True),
    (tgi_errors.OverloadedError("busy"), True),
    (tgi_errors.ShardNotReadyError("loading"), True),
    (tgi_errors.ValidationError("bad"), False),
    (tgi_errors.BadRequestError("bad"), False),
    (TimeoutError(), True),
])
def test_client_errors_are_classified_for_retries(error, retryable):
    assert classify_tgi(error)[0] is retryable


def test_config_errors_name_the_key():
    with pytest.raises(InvalidParameterError, match="unknown key\\(s\\) 'batch_size'"):
        create_server("t", {"kind": "tgi", "base_url": "http://127.0.0.1:1", "batch_size": 4})
    with pytest.raises(InvalidParameterError, match="give base_url"):
        create_server("t", {"kind": "tgi"})


def test_an_unreachable_server_stops_the_probe_with_a_fix():
    with pytest.raises(ServerError, match="GET http://127.0.0.1:9/info failed.*correct base_url"):
        run(_with(tgi("http://127.0.0.1:9", max_retries=0, timeout=2), lambda s: s.capabilities()))
