"""The ``anthropic`` kind through recorded answers of the Messages API (tests/servers/recorded/).

The SDK sends its requests through ``httpx2.MockTransport``: :class:`Recorded` answers them from the
recorded JSON files in order and keeps every request, so the tests check both what the kind makes of
an answer and the request body the SDK sends (messages, tools, system). Nothing reaches the network.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from calib._exceptions import InvalidParameterError
from calib.servers import (
    CapabilityError,
    ChatMessage,
    ChatParams,
    RequestCache,
    RequestFailed,
    SamplingParams,
    Tool,
    ToolCall,
    create_server,
    require,
)
from calib.servers.anthropic import AnthropicServer

RECORDED = Path(__file__).parent / "recorded"
SECRET = "sk-ant-test-3c0ffee-never-anywhere"
MODEL = "claude-sonnet-5"
RUN_PYTHON = Tool("run_python", "Run Python code in the sandbox and return its stdout.",
                  {"type": "object", "properties": {"code": {"type": "string"}, "timeout_s": {"type": "integer"}},
                   "required": ["code"]})


def recorded(name: str) -> dict[str, Any]:
    """One recorded answer: ``status``, ``headers``, ``body``."""
    return json.loads((RECORDED / f"{name}.json").read_text())


class Recorded:
    """An ``httpx2`` mock transport handler answering with recorded responses, in order (the last repeats)."""

    def __init__(self, *names: str) -> None:
        self.answers = [recorded(n) for n in names]
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        return httpx2.Response(answer["status"], headers=answer["headers"], json=answer["body"])

    def body(self, i: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[i].content)

    def server(self, **config: Any) -> AnthropicServer:
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(self))
        return create_server("judge", {"kind": "anthropic", "model": MODEL, "http_client": client, **config})


def run(coro):
    return asyncio.run(coro)


async def _with(server: AnthropicServer, fn):
    try:
        return await fn(server)
    finally:
        await server.aclose()


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    return SECRET


def test_a_text_answer_and_the_request_the_sdk_sends(api_key):
    mock = Recorded("messages_text")
    messages = [ChatMessage("system", "You judge code."), ChatMessage("system", "Answer in one line."),
                ChatMessage("user", "Are these equivalent?")]
    answer = run(_with(mock.server(), lambda s: s.chat(messages, params=ChatParams(max_tokens=64, stop=("\n\n",)))))
    assert answer.content == "The two functions are equivalent: both return the sum of their arguments."
    assert (answer.tool_calls, answer.finish_reason, answer.input_tokens, answer.output_tokens) == (
        (), "end_turn", 41, 17)
    (request,) = mock.requests
    assert request.method == "POST" and request.url.path == "/v1/messages"
    assert mock.body() == {"model": MODEL, "max_tokens": 64, "system": "You judge code.\n\nAnswer in one line.",
                           "messages": [{"role": "user", "content": "Are these equivalent?"}],
                           "stop_sequences": ["\n\n"]}
    assert api_key in request.headers.get("authorization", "") + request.headers.get("x-api-key", "")


def test_tool_use_blocks_become_tool_calls_and_results_go_back_as_tool_result_blocks(api_key):
    mock = Recorded("messages_tool_use", "messages_text")

    async def go(s: AnthropicServer):
        first = await s.chat([ChatMessage("user", "Does add(2, 3) print 5?")], tools=[RUN_PYTHON])
        (call,) = first.tool_calls
        history = [ChatMessage("user", "Does add(2, 3) print 5?"),
                   ChatMessage("assistant", first.content, tool_calls=first.tool_calls),
                   ChatMessage("tool", "5\n", tool_call_id=call.id)]
        second = await s.chat(history, tools=[RUN_PYTHON])
        return first, second

    first, second = run(_with(mock.server(), go))
    assert first.tool_calls == (ToolCall("toolu_01A09q90qw90lq917835lq9", "run_python",
                                         {"code": "print(add(2, 3))", "timeout_s": 5}),)
    assert first.content == "I'll run the function on a few inputs." and first.finish_reason == "tool_use"
    assert second.finish_reason == "end_turn"
    tools = [{"name": "run_python", "description": RUN_PYTHON.description, "input_schema": RUN_PYTHON.parameters}]
    assert mock.body(0)["tools"] == tools and mock.body(1)["tools"] == tools
    assert "system" not in mock.body(0)
    assert mock.body(1)["messages"] == [
        {"role": "user", "content": "Does add(2, 3) print 5?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "I'll run the function on a few inputs."},
            {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "run_python",
             "input": {"code": "print(add(2, 3))", "timeout_s": 5}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "5\n"}]},
    ]


def test_overloaded_is_retried_by_the_sdk_then_answers(api_key):
    mock = Recorded("error_overloaded_529", "messages_text")
    answer = run(_with(mock.server(max_retries=2), lambda s: s.chat([ChatMessage("user", "Hi")])))
    assert answer.finish_reason == "end_turn" and len(mock.requests) == 2
    assert mock.body(0) == mock.body(1)


def test_a_request_that_still_fails_is_recorded_without_the_key(api_key):
    always = Recorded("error_overloaded_529")
    invalid = Recorded("error_invalid_request_400")

    async def go(mock: Recorded):
        s = mock.server(max_retries=2)
        try:
            with pytest.raises(RequestFailed) as excinfo:
                await s.chat([ChatMessage("user", "Hi")])
            return excinfo.value, s
        finally:
            await s.aclose()

    overloaded, server = run(go(always))
    assert len(always.requests) == 3 and overloaded.attempts == 3 and overloaded.status == 529
    assert "overloaded_error: Overloaded" in overloaded.error and overloaded.route == "/v1/messages"
    assert server.stats.failed == [overloaded]
    refused, _ = run(go(invalid))
    assert len(invalid.requests) == 1 and refused.attempts == 1 and refused.status == 400
    assert "invalid_request_error" in refused.error
    for text in (str(overloaded), json.dumps(overloaded.to_dict()), str(refused), repr(server)):
        assert api_key not in text


def test_chat_only_capabilities_and_refusals(api_key):
    mock = Recorded("messages_text")

    async def go(s: AnthropicServer):
        caps = await s.capabilities()
        with pytest.raises(CapabilityError) as completions:
            await s.complete(["def f():"], SamplingParams())
        with pytest.raises(CapabilityError) as scoring:
            await s.score("a", "b")
        return caps, completions.value, scoring.value

    caps, completions, scoring = run(_with(mock.server(), go))
    assert (caps.kind, caps.name, caps.model, caps.chat, caps.tools) == ("anthropic", "judge", MODEL, True, True)
    assert not (caps.scoring or caps.tokenize or caps.embeddings or caps.batch_prompts or caps.token_ids_in)
    assert "'judge'" in str(completions) and "chat only" in str(completions) and "completions" in str(completions)
    assert "lacks scoring" in str(scoring)
    with pytest.raises(CapabilityError, match="'judge' \\(anthropic.*lacks scoring"):
        require(caps, ["scoring"])
    assert mock.requests == []  # nothing was sent: capabilities are documented, not probed


def test_the_cache_answers_a_repeat_and_never_holds_the_key(api_key, tmp_path):
    mock = Recorded("messages_tool_use")
    path = tmp_path / "cache.sqlite"

    async def once():
        cache = RequestCache(path)
        try:
            return await _with(mock.server(cache=cache, revision="2025-09"),
                               lambda s: s.chat([ChatMessage("user", "Run it.")], tools=[RUN_PYTHON]))
        finally:
            cache.close()

    first, second = run(once()), run(once())
    assert first == second and len(mock.requests) == 1
    for file in tmp_path.iterdir():
        assert api_key.encode() not in file.read_bytes()


def test_the_key_comes_only_from_the_named_environment_variable(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("JUDGE_KEY", SECRET)
    with pytest.raises(InvalidParameterError, match="ANTHROPIC_API_KEY \\(api_key_env\\) is not set"):
        Recorded("messages_text").server()
    mock = Recorded("messages_text")
    run(_with(mock.server(api_key_env="JUDGE_KEY"), lambda s: s.chat([ChatMessage("user", "Hi")])))
    assert SECRET in mock.requests[0].headers.get("authorization", "") + mock.requests[0].headers.get("x-api-key", "")
    with pytest.raises(InvalidParameterError, match="api_key_env"):
        create_server("judge", {"kind": "anthropic", "model": MODEL, "api_key": SECRET})
    with pytest.raises(InvalidParameterError, match="give model"):
        create_server("judge", {"kind": "anthropic", "api_key_env": "JUDGE_KEY"})
