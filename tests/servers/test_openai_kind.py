"""The ``openai`` kind against a real ``calib serve`` (vLLM's routes) and a stricter loopback server.

``served_model`` (tests/servers/conftest.py) serves the tiny model over HTTP on 127.0.0.1 with the
vLLM extensions (token-id prompts, ``prompt_logprobs``, ``/tokenize``); :class:`StrictServer` below
answers like the OpenAI API itself where vLLM is lenient (no token ids, no ``max_tokens`` 0, at most
20 log-probs, unknown arguments refused), so that the probe's fallbacks and the chat tool-call format
are tested too.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.metadata
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from calib._exceptions import InvalidParameterError
from calib.servers import (
    CapabilityError,
    ChatMessage,
    ChatParams,
    RequestCache,
    RequestFailed,
    SamplingParams,
    ServerError,
    Tool,
    ToolCall,
    create_server,
    require,
)
from calib.servers.openai import OpenAIServer
from tests._loopback import serve_app

SECRET = "sk-test-5f1e0c9a-never-anywhere"
PROMPTS = ["def add(a, b):", "import json\n", "class Foo:", "for i in range(", "return "]


def run(coro):
    return asyncio.run(coro)


async def _with(server: OpenAIServer, fn):
    try:
        return await fn(server)
    finally:
        await server.aclose()


def served(url: str, **config: Any) -> OpenAIServer:
    return create_server("target", {"kind": "openai", "base_url": url, **config})


async def _merging_pair(server: OpenAIServer) -> tuple[str, str]:
    """A prompt and continuation that the tokenizer merges across their boundary."""
    for word in ("json", "return", "import", "self", "value", "string", "encoder"):
        for cut in range(1, len(word)):
            head, tail = "x = " + word[:cut], word[cut:]
            joined = await server._tokenize(head + tail, True)
            if joined != await server._tokenize(head, True) + await server._tokenize(tail, False):
                return head, tail
    raise AssertionError("no merging pair found")


# --------------------------------------------------------------------------- against calib serve
def test_capabilities_probe_what_the_server_offers_once(served_model):
    async def go(s: OpenAIServer):
        caps = await s.capabilities()
        attempts = s.stats.attempts
        again = await s.capabilities()
        return caps, again, attempts, s.stats.attempts

    caps, again, before, after = run(_with(served(served_model), go))
    assert again is caps and after == before  # probed once
    assert (caps.kind, caps.name, caps.model, caps.max_context) == ("openai", "target", "tiny", 512)
    assert isinstance(caps.server_version, str)
    assert caps.batch_prompts and caps.echo_logprobs and caps.prompt_logprobs and caps.token_ids_in
    assert caps.tokenize and caps.chat and caps.embeddings
    assert not caps.tools and not caps.full_distribution  # the embedded server calls no tools
    assert caps.max_top_logprobs >= 20
    assert caps.to_dict()["model"] == "tiny"


def test_a_list_of_prompts_goes_in_one_request_per_batch(served_model):
    async def go(size: int):
        s = served(served_model, batch_size=size)
        try:
            await s.capabilities()
            before = s.stats.attempts
            out = await s.complete(PROMPTS, SamplingParams(max_tokens=6))
            return out, s.stats.attempts - before
        finally:
            await s.aclose()

    batched, one_request = run(go(32))
    pairs, three_requests = run(go(2))
    assert one_request == 1 and three_requests == 3
    assert [c[0].text for c in batched] == [c[0].text for c in pairs]
    assert all(len(c) == 1 and c[0].finish_reason == "length" for c in batched)


def test_stop_sequences_end_the_text_before_them(served_model):
    async def go(s: OpenAIServer):
        (greedy,) = await s.complete(["def add(a, b):"], SamplingParams(max_tokens=24))
        text = greedy[0].text
        k = next(i for i in range(2, len(text)) if text[i].isalnum() and "\ufffd" not in text[:i + 1])
        stop = text[k]
        (stopped,) = await s.complete(["def add(a, b):"], SamplingParams(max_tokens=24, stop=(stop,)))
        return text, stop, stopped[0]

    text, stop, stopped = run(_with(served(served_model), go))
    assert stopped.text == text[:text.index(stop)]
    assert stopped.finish_reason == "stop"


def test_n_samples_with_a_seed_repeat_and_differ_across_seeds(served_model):
    def params(seed: int) -> SamplingParams:
        return SamplingParams(max_tokens=8, temperature=1.0, n=3, seed=seed)

    async def go(s: OpenAIServer):
        first = await s.complete(PROMPTS[:2], params(7))
        again = await s.complete(PROMPTS[:2], params(7))
        other = await s.complete(PROMPTS[:2], params(8))
        return first, again, other

    first, again, other = run(_with(served(served_model), go))
    texts = [[c.text for c in per_prompt] for per_prompt in first]
    assert [len(t) for t in texts] == [3, 3]
    assert texts == [[c.text for c in p] for p in again]
    assert texts != [[c.text for c in p] for p in other]
    assert len(set(texts[0])) > 1  # n samples, not one sample n times


def test_completion_logprobs_carry_ids_and_sorted_alternatives(served_model):
    async def go(s: OpenAIServer):
        return await s.complete(["class Foo:"], SamplingParams(max_tokens=5, logprobs=3))

    ((completion,),) = run(_with(served(served_model), go))
    assert len(completion.tokens) == 5
    for tok in completion.tokens:
        assert isinstance(tok.token_id, int)  # vLLM's return_token_ids
        assert len(tok.top) == 3 and [t[2] for t in tok.top] == sorted((t[2] for t in tok.top), reverse=True)
        assert tok.logprob == pytest.approx(tok.top[0][2])  # greedy: the chosen token is the argmax
    assert "".join(t.token for t in completion.tokens) == completion.text


def test_score_aligns_the_continuation_by_the_servers_token_ids(served_model):
    async def go(s: OpenAIServer):
        scored = await s.score("def add(a, b):", "\n    return a + b", top_logprobs=5)
        return scored, await s.tokenize("def add(a, b):"), await s.tokenize("\n    return a + b")

    scored, prompt_ids, cont_ids = run(_with(served(served_model), go))
    assert scored.prompt_token_ids == tuple(prompt_ids)
    assert scored.continuation_token_ids == tuple(cont_ids)
    assert [t.token_id for t in scored.tokens] == cont_ids
    for tok in scored.tokens:
        assert isinstance(tok.rank, int) and tok.rank >= 1
        assert len(tok.top) == 5 and all(isinstance(i, int) for i, _, _ in tok.top)
        assert (tok.rank == 1) == (tok.top[0][0] == tok.token_id)


def test_echo_scoring_agrees_with_prompt_logprobs(served_model):
    async def go(s: OpenAIServer):
        by_prompt_logprobs = await s.score("import json\n", "def dump(obj):", top_logprobs=4)
        s._caps = dataclasses.replace(s._caps, prompt_logprobs=False)
        by_echo = await s.score("import json\n", "def dump(obj):", top_logprobs=4)
        return by_prompt_logprobs, by_echo

    a, b = run(_with(served(served_model), go))
    assert a.continuation_token_ids == b.continuation_token_ids
    assert [t.logprob for t in b.tokens] == pytest.approx([t.logprob for t in a.tokens], abs=1e-5)
    assert [x[2] for t in b.tokens for x in t.top] == pytest.approx([x[2] for t in a.tokens for x in t.top], abs=1e-5)


def test_text_prompts_refuse_a_boundary_the_server_re_tokenizes(served_model):
    async def go(s: OpenAIServer):
        by_ids = await s.score("def add(a, b):", "\n    return a", top_logprobs=2)
        s._caps = dataclasses.replace(s._caps, token_ids_in=False)
        by_text = await s.score("def add(a, b):", "\n    return a", top_logprobs=2)
        head, tail = await _merging_pair(s)
        with pytest.raises(ServerError) as excinfo:
            await s.score(head, tail)
        return by_ids, by_text, head, await s._tokenize(head, True), excinfo.value

    by_ids, by_text, head, head_ids, error = run(_with(served(served_model), go))
    assert [t.logprob for t in by_text.tokens] == pytest.approx([t.logprob for t in by_ids.tokens], abs=1e-6)
    message = str(error)
    assert "'target'" in message and "re-tokenizes across the prompt/continuation boundary" in message
    assert "does not align by string matching" in message
    assert f"token {len(head_ids) - 1} " in message or f"token {len(head_ids)} " in message


def test_tokenize_and_detokenize_round_trip(served_model):
    async def go(s: OpenAIServer):
        ids = await s.tokenize("def add(a, b):\n    return a + b")
        return ids, await s.detokenize(ids)

    ids, text = run(_with(served(served_model), go))
    assert all(isinstance(i, int) for i in ids) and text == "def add(a, b):\n    return a + b"


def test_chat_embeddings_and_the_tools_the_server_lacks(served_model):
    tool = Tool("lookup", "Look a name up.", {"type": "object", "properties": {"name": {"type": "string"}}})

    async def go(s: OpenAIServer):
        answer = await s.chat([ChatMessage("system", "Be brief."), ChatMessage("user", "Hi")],
                              params=ChatParams(max_tokens=8))
        vectors = await s.embed(["a", "def f(): pass"])
        with pytest.raises(CapabilityError) as excinfo:
            await s.chat([ChatMessage("user", "Hi")], tools=[tool])
        return answer, vectors, excinfo.value

    answer, vectors, error = run(_with(served(served_model), go))
    assert isinstance(answer.content, str) and answer.finish_reason in ("stop", "length")
    assert answer.input_tokens > 0 and answer.tool_calls == ()
    assert len(vectors) == 2 and len(vectors[0]) == len(vectors[1]) > 0
    assert "'target'" in str(error) and "lacks tools" in str(error) and "--enable-auto-tool-choice" in str(error)


def test_require_names_server_capability_and_fix(served_model):
    caps = run(_with(served(served_model), lambda s: s.capabilities()))
    with pytest.raises(CapabilityError) as excinfo:
        require(caps, ["scoring"], top_logprobs=caps.max_top_logprobs + 1)
    assert "'target'" in str(excinfo.value) and "--max-logprobs" in str(excinfo.value)


def test_the_cache_answers_a_rerun_without_network_and_never_holds_the_key(served_model, tmp_path, monkeypatch):
    monkeypatch.setenv("CALIB_TEST_KEY", SECRET)
    path = tmp_path / "cache.sqlite"

    async def once(revision: str):
        cache = RequestCache(path)
        s = served(served_model, cache=cache, api_key_env="CALIB_TEST_KEY", revision=revision)
        try:
            await s.capabilities()
            before = s.stats.attempts
            out = await s.complete(PROMPTS[:3], SamplingParams(max_tokens=6, logprobs=2))
            scored = await s.score("def add(a, b):", " return a", top_logprobs=3)
            return out, scored, s.stats.attempts - before, repr(s)
        finally:
            await s.aclose()
            cache.close()

    first, scored, sent, text = run(once("r1"))
    again, rescored, resent, _ = run(once("r1"))
    _, _, other_revision, _ = run(once("r2"))
    assert sent > 0 and resent == 0 and other_revision == sent
    assert again == first and rescored == scored
    assert SECRET not in text
    for file in tmp_path.iterdir():
        assert SECRET.encode() not in file.read_bytes(), file.name


def test_config_errors_name_the_key_and_the_fix(monkeypatch):
    monkeypatch.delenv("CALIB_UNSET_KEY", raising=False)
    with pytest.raises(InvalidParameterError, match=r"unknown key\(s\) 'base_ur'.*allowed: .*base_url"):
        create_server("t", {"kind": "openai", "base_ur": "http://127.0.0.1:1"})
    with pytest.raises(InvalidParameterError, match="api_key_env"):
        create_server("t", {"kind": "openai", "base_url": "http://127.0.0.1:1", "api_key": SECRET})
    with pytest.raises(InvalidParameterError, match="CALIB_UNSET_KEY"):
        create_server("t", {"kind": "openai", "base_url": "http://127.0.0.1:1", "api_key_env": "CALIB_UNSET_KEY"})
    with pytest.raises(InvalidParameterError, match="base_url or base_urls"):
        create_server("t", {"kind": "openai"})
    with pytest.raises(InvalidParameterError, match="batch_size must be a positive int"):
        create_server("t", {"kind": "openai", "base_url": "http://127.0.0.1:1", "batch_size": 0})


def test_an_unreachable_server_stops_the_probe_with_a_fix():
    s = served("http://127.0.0.1:9", max_retries=0, timeout=2)
    with pytest.raises(ServerError, match="cannot reach http://127.0.0.1:9.*correct base_url"):
        run(_with(s, lambda s: s.capabilities()))


# --------------------------------------------------------------------------- a stricter server
class StrictServer:
    """An OpenAI-compatible loopback server as strict as the OpenAI API (see the module docstring)."""

    KNOWN = {"model", "prompt", "max_tokens", "temperature", "top_p", "n", "stop", "seed", "logprobs", "echo"}

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], Any]] = []

    @staticmethod
    def _error(message: str, status: int = 400) -> web.Response:
        return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=status)

    async def completions(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append((request.path, dict(request.headers), body))
        unknown = sorted(set(body) - self.KNOWN)
        if unknown:
            return self._error(f"Unrecognized request argument supplied: {unknown[0]}")
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        if not all(isinstance(p, str) for p in prompts):
            return self._error("prompt must be a string or a list of strings")
        if "fail" in prompts:
            return self._error("the prompt 'fail' is refused")
        if body.get("logprobs") is not None and body["logprobs"] > 20:
            return self._error(f"Requested sample logprobs of {body['logprobs']}, which is greater than max "
                               f"allowed: 20")
        if body.get("max_tokens", 16) < 1:
            return self._error("max_tokens must be at least 1")
        choices = []
        for prompt in prompts:
            text = prompt if body.get("echo") else ""
            chars = list(text + "ok")
            logprobs = None
            if body.get("logprobs") is not None:
                values = [None if body.get("echo") and i == 0 else -0.5 for i in range(len(chars))]
                tops = [None if v is None else {c: -0.5, "#": -1.5} for c, v in zip(chars, values)]
                logprobs = {"tokens": chars, "token_logprobs": values, "top_logprobs": tops,
                            "text_offset": list(range(len(chars)))}
            choices.append({"index": len(choices), "text": text + "ok", "logprobs": logprobs,
                            "finish_reason": "length"})
        # The OpenAI API names the dated snapshot that answered and the backend configuration.
        return web.json_response({"id": "cmpl-1", "object": "text_completion", "model": "strict-model-2024-08-06",
                                  "system_fingerprint": "fp_44709d6fcb", "choices": choices})

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append((request.path, dict(request.headers), body))
        message: dict[str, Any] = {"role": "assistant", "content": "hello"}
        finish = "stop"
        if body.get("tools"):
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "lookup", "arguments": json.dumps({"name": "x", "limit": 2})}}]}
            finish = "tool_calls"
        return web.json_response({"id": "chat-1", "object": "chat.completion", "choices": [
            {"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}})

    async def models(self, request: web.Request) -> web.Response:
        self.requests.append((request.path, dict(request.headers), None))
        return web.json_response({"object": "list", "data": [{"id": "strict-model", "object": "model"}]})

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        app = web.Application()
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        async with serve_app(app, "/v1") as url:
            yield url


def test_the_probe_falls_back_where_the_server_is_strict(monkeypatch):
    monkeypatch.setenv("CALIB_TEST_KEY", SECRET)
    strict = StrictServer()

    async def go():
        async with strict.running() as url:
            s = served(url, api_key_env="CALIB_TEST_KEY", max_retries=0)
            try:
                caps = await s.capabilities()
                with pytest.raises(CapabilityError) as no_tokenizer:
                    await s.score("a", "b")
                with pytest.raises(RequestFailed) as refused:
                    await s.complete(["fail"], SamplingParams(max_tokens=2))
                return caps, no_tokenizer.value, refused.value, s
            finally:
                await s.aclose()

    caps, no_tokenizer, refused, server = run(go())
    assert caps.model == "strict-model" and caps.max_context is None and caps.server_version is None
    assert caps.echo_logprobs and not caps.prompt_logprobs and not caps.token_ids_in and not caps.tokenize
    assert caps.max_top_logprobs == 20  # read from vLLM's refusal of 1000
    assert caps.batch_prompts and caps.chat and caps.tools and not caps.embeddings
    assert any("max_tokens 0" in n for n in caps.notes)
    assert "lacks tokenize" in str(no_tokenizer)
    assert refused.status == 400 and "'fail' is refused" in refused.error and server.stats.failed == [refused]
    for path, headers, _ in strict.requests:
        assert headers["Authorization"] == f"Bearer {SECRET}", path
    assert SECRET not in str(refused) and SECRET not in repr(server) and SECRET not in json.dumps(refused.to_dict())


def test_provenance_keeps_the_snapshot_and_fingerprint_the_answers_name():
    strict = StrictServer()

    async def go():
        async with strict.running() as url:
            s = served(url, revision="2024-08-06", dtype="torch.bfloat16")
            try:
                await s.complete(["a", "b"], SamplingParams(max_tokens=2))
                return s.provenance()
            finally:
                await s.aclose()

    record = run(go())
    assert (record["model"], record["revision"], record["dtype"], record["server_version"]) == (
        "strict-model", "2024-08-06", "bfloat16", None)
    assert record["response_models"] == ["strict-model-2024-08-06"]
    assert record["system_fingerprints"] == ["fp_44709d6fcb"]
    assert record["sources"]["dtype"] == "spec dtype (stated, not reported by the server)"
    assert set(record["missing"]) == {"root", "server_version"}  # an OpenAI-like API has no /version, no root


def test_provenance_of_calib_serve_and_a_dtype_the_server_contradicts(served_model, tiny_model_dir):
    s = served(served_model)
    run(_with(s, lambda s: s.complete(["def f():"], SamplingParams(max_tokens=2))))
    record = s.provenance()
    # vLLM's /v1/models root, its /version, and TGI's /info (calib serve has both route sets)
    assert (record["model"], record["root"], record["dtype"]) == ("tiny", str(tiny_model_dir), "float32")
    assert record["server_version"] == importlib.metadata.version("calib")
    assert record["response_models"] == ["tiny"] and record["system_fingerprints"] == []
    assert record["revision"] is None and "no model_sha" in record["missing"]["revision"]
    with pytest.raises(InvalidParameterError, match="states dtype = 'bfloat16' but the server reports 'float32'"):
        run(_with(served(served_model, dtype="bfloat16"), lambda s: s.capabilities()))


def test_chat_sends_openai_tool_calls_and_decodes_their_arguments():
    strict = StrictServer()
    tool = Tool("lookup", "Look a name up.", {"type": "object", "properties": {"name": {"type": "string"}}})
    history = [
        ChatMessage("system", "Use tools."),
        ChatMessage("user", "Find x."),
        ChatMessage("assistant", "", tool_calls=(ToolCall("call_0", "lookup", {"name": "y"}),)),
        ChatMessage("tool", '{"found": false}', tool_call_id="call_0"),
    ]

    async def go():
        async with strict.running() as url:
            s = served(url)
            try:
                return await s.chat(history, tools=[tool])
            finally:
                await s.aclose()

    answer = run(go())
    assert answer.tool_calls == (ToolCall("call_1", "lookup", {"name": "x", "limit": 2}),)
    assert (answer.content, answer.finish_reason, answer.input_tokens, answer.output_tokens) == ("", "tool_calls",
                                                                                                 11, 7)
    _, _, body = strict.requests[-1]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "lookup", "description": "Look a name up.", "parameters": tool.parameters}}]
    assert body["messages"][2]["tool_calls"] == [
        {"id": "call_0", "type": "function", "function": {"name": "lookup", "arguments": '{"name": "y"}'}}]
    assert body["messages"][3] == {"role": "tool", "content": '{"found": false}', "tool_call_id": "call_0"}
    assert body["messages"][0] == {"role": "system", "content": "Use tools."}
