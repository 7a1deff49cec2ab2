"""The ``agent`` executor against recorded Anthropic tool-use answers (tests/executors/recorded/agent_*.json)
and the embedded tiny model over HTTP.

The ``anthropic`` kind sends its requests through ``httpx2.MockTransport``: :class:`Recorded` answers them
in order from recorded Messages-API bodies (the last one repeats) and keeps every request, so the tests
check what the model was sent (tool results, never a candidate) as well as what the real sandbox made of
its preambles and input states. Nothing reaches the network.
"""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from calib.executors.agent import TOOLS, AgentExecutor, agent_system_prompt, transcript_lines
from calib.executors.base import ExecutorConfig
from calib.servers import ChatMessage, ChatParams, ToolCall, create_server
from tests.executors._recorded import Recorded as _Recorded

NO_BWRAP = "bubblewrap (bwrap) is not installed; CI installs it (apt-get install bubblewrap)"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason=NO_BWRAP)

SCALED = "def scaled(n):\n    return round(n * FACTOR, DIGITS)\n"
# equal to x below 10; from 10 on it rounds to an int (round(19.5) = 20, not 19.5)
SCALED_CHANGED = "def scaled(n):\n    return round(n * FACTOR, DIGITS) if n < 10 else round(n * FACTOR)\n"
CONTEXT = "import os\n\nFACTOR = 1.5\nDIGITS = 2\n\n"
CONFIG = ExecutorConfig(workers=2, seed=0)


class Recorded(_Recorded):
    """The recorded ``agent_*.json`` answers."""

    prefix = "agent"

    def tool_results(self) -> list[str]:
        """The content of every tool_result block the model was sent, over all requests (last request's
        history holds all earlier ones)."""
        return [b["content"] for m in self.body(len(self.requests) - 1)["messages"] if isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_result"]


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-agent-executor-never-anywhere")


def run_agent(mock: Recorded, candidates: list[str], truth: str = SCALED, context: str = CONTEXT, **options):
    async def go():
        server = mock.server()
        try:
            return await AgentExecutor(CONFIG, server, **options).compare_with_transcript(truth, candidates,
                                                                                          context=context)
        finally:
            await server.aclose()

    return asyncio.run(go())


# ------------------------------------------------------------------------------------------------ recorded
@needs_bwrap
def test_a_good_agent_is_conclusive_and_never_sees_a_candidate():
    mock = Recorded("good_build", "good_submit")
    result, transcript = run_agent(mock, [SCALED, SCALED_CHANGED])
    assert len(mock.requests) == 2
    assert result.conclusive, result.reason
    assert result.executor == "agent" and result.valid_inputs == 10
    x_itself, changed = result.candidates
    assert x_itself.sim_func == 1.0
    # inputs n = 0, 1, 2, 3, 5, 8, 13, -4, 7, 21: the changed candidate differs only at n = 13 and 21 -> 8 / 10
    assert changed.sim_func == pytest.approx(0.8)
    assert [i for i, m in enumerate(changed.matches) if not m] == [6, 9]
    # what the model was sent: x's outputs in its run result, nothing of the candidates
    first, second = mock.body(0), mock.body(1)
    assert [t["name"] for t in first["tools"]] == ["write_preamble", "run", "submit"]
    # both tool results of the first answer went back in one user message, as the Messages API wants
    assert [b["type"] for b in second["messages"][2]["content"]] == ["tool_result", "tool_result"]
    assert first["system"].startswith("You are an expert Python engineer building a test harness.")
    assert "at least 8 of the 10 inputs" in first["system"] and "80% of x's executable lines" in first["system"]
    assert SCALED.strip() in first["messages"][0]["content"] and "FACTOR = 1.5" in first["messages"][0]["content"]
    stored, ran = mock.tool_results()
    assert stored == "ok: preamble stored (2 lines)"
    report = json.loads(ran)
    assert report["valid_inputs"] == 10 and report["would_count"] is True and report["coverage"] == 1.0
    assert "undefined_names" not in report and "errors" not in report
    # round(n * 1.5, 2) for n = 13 is 19.5 (a float; canonical output states write floats as {"float": repr})
    assert report["inputs"][6] == {"index": 6, "args": {"n": "13"}, "valid": True,
                                   "output": {"return": {"float": "19.5"}}}
    sent = mock.requests[0].content.decode() + mock.requests[1].content.decode()
    assert "if n < 10" not in sent and "round(n * FACTOR)" not in sent  # the candidate's code
    # the candidate's own output at n = 13 is the int 20 (round(19.5)); no tool result holds it in any form
    assert json.loads(changed.outputs[6])["return"] == 20
    assert all(changed.outputs[6] not in r for r in mock.tool_results())
    assert [row["output"]["return"] for row in report["inputs"]].count(20) == 0
    # the transcript: system, user, assistant (2 calls), 2 tool results, assistant (submit), its result
    assert [m.role for m in transcript] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool"]
    assert transcript[5].content == "All ten inputs are valid. The candidates are surely equivalent."
    assert "agent turns: 2" in result.warnings and "agent tokens: 1040" in result.warnings  # 2 x (400 + 120)
    assert any(w.startswith("agent assistant: I'll reconstruct") and "[call run {" in w for w in result.warnings)
    assert result.config["agent_server"] == "coder" and result.config["agent_max_turns"] == 20


@needs_bwrap
def test_a_looping_agent_stops_at_max_turns_inconclusive():
    mock = Recorded("loop_run")
    result, transcript = run_agent(mock, [SCALED], max_turns=4)
    assert len(mock.requests) == 4
    assert not result.conclusive
    assert result.reason == "agent_budget: 4 turns without a submission (max_turns=4)"
    assert result.candidates[0].sim_func is None and result.candidates[0].outcome == "not_run"
    # no preamble was written: FACTOR is unresolved, x ran on a stand-in (strict: invalid), and every run says so
    last = json.loads(mock.tool_results()[-1])
    assert last["valid_inputs"] == 0 and last["inputs"][0]["reason"] == "standin"
    assert last["undefined_names"] == ["DIGITS", "FACTOR"] and last["would_count"] is False
    assert sum(1 for m in transcript if m.role == "tool") == 4


@needs_bwrap
def test_the_token_budget_ends_the_loop():
    # each recorded answer reports 400 + 120 = 520 tokens: after two answers 1040 >= 1000
    mock = Recorded("loop_run")
    result, _ = run_agent(mock, [SCALED], max_tokens=1000)
    assert len(mock.requests) == 2
    assert result.reason == "agent_budget: 1040 tokens without a submission (max_tokens=1000)"


@needs_bwrap
def test_the_wall_clock_budget_ends_the_loop():
    mock = Recorded("loop_run")
    result, _ = run_agent(mock, [SCALED], max_turns=10_000, max_seconds=0.3)
    assert result.reason == "agent_budget: 0.3 s without a submission (max_seconds=0.3)"
    assert 1 <= len(mock.requests) < 10_000


@needs_bwrap
def test_given_inputs_are_used_whatever_the_agent_submits():
    # the agent submits 3 states, but the caller gave 10: the agent only builds the preamble
    given = [{"args": {"n": str(n)}, "files": {}} for n in (0, 1, 2, 3, 5, 8, 13, -4, 7, 21)]

    async def go():
        server = Recorded("few_submit").server()
        try:
            return await AgentExecutor(CONFIG, server).compare(SCALED, [SCALED_CHANGED], context=CONTEXT,
                                                               inputs=given)
        finally:
            await server.aclose()

    result = asyncio.run(go())
    assert result.conclusive and result.valid_inputs == 10
    assert result.candidates[0].sim_func == pytest.approx(0.8)  # as in the good agent's test: n = 13, 21 differ


@needs_bwrap
def test_a_submitted_crashing_preamble_is_inconclusive_preamble_failed():
    mock = Recorded("crash_build", "crash_submit")
    result, _ = run_agent(mock, [SCALED])
    assert not result.conclusive
    # DIGITS = int('two') raises: as one script the preamble would stop before x runs (strict, as the llm executor)
    assert result.reason == "preamble_failed: preamble line 2: ValueError (DIGITS stand-ins)"
    assert result.valid_inputs == 0 and {r.reason for r in result.inputs} == {"preamble"}
    assert result.candidates[0].sim_func is None
    report = json.loads(mock.tool_results()[1])  # the model was told before it submitted
    assert report["would_count"] is False and "preamble line 2: ValueError" in report["errors"]


@needs_bwrap
def test_too_few_submitted_inputs_is_inconclusive_with_the_valid_inputs_reason():
    mock = Recorded("few_submit")
    result, _ = run_agent(mock, [SCALED])
    assert len(mock.requests) == 1
    assert not result.conclusive and result.reason.startswith("valid_inputs 3 < 8")
    assert len(result.inputs) == 3 and result.candidates[0].sim_func is None


def test_a_failing_request_is_inconclusive_agent_request():
    mock = Recorded("error_400")
    result, transcript = run_agent(mock, [SCALED])
    assert not result.conclusive
    assert result.reason.startswith("agent_request: HTTP 400: invalid_request_error: prompt is too long")
    assert [m.role for m in transcript] == ["system", "user"]


def test_an_agent_that_only_talks_is_nudged_once_then_inconclusive():
    mock = Recorded("text_only")
    result, _ = run_agent(mock, [SCALED])
    assert len(mock.requests) == 2
    assert result.reason == "agent_no_tool_call: the model answered twice without calling a tool"
    assert mock.body(1)["messages"][-1]["content"].startswith("Please continue by calling one of the tools")
    assert result.candidates[0].sim_func is None  # "they look equivalent" is ignored


# ------------------------------------------------------------------------------------------------ units
def test_tools_and_prompt_and_transcript_lines():
    assert [t.name for t in TOOLS] == ["write_preamble", "run", "submit"]
    assert all(t.parameters["type"] == "object" and t.parameters["required"] for t in TOOLS)
    assert "{n_inputs}" in agent_system_prompt() and "{min_valid}" in agent_system_prompt()
    lines = transcript_lines([ChatMessage("assistant", "ok", (ToolCall("t1", "run", {"inputs": [{"n": 1}]}),)),
                              ChatMessage("tool", "x" * 5000, tool_call_id="t1")], limit=60)
    assert lines[0] == 'agent assistant: ok [call run {"inputs": [{"n": 1}]}]'
    assert len(lines[1]) == 60 and lines[1].startswith("agent tool result t1: xxx") and lines[1].endswith("...")


def test_bad_parameters_are_refused_with_a_message():
    with pytest.raises(ValueError, match="needs a server that can chat"):
        AgentExecutor(CONFIG, object())
    server = Recorded("text_only").server()
    with pytest.raises(ValueError, match="max_turns=0"):
        AgentExecutor(CONFIG, server, max_turns=0)
    with pytest.raises(ValueError, match="max_seconds=-1"):
        AgentExecutor(CONFIG, server, max_seconds=-1)
    asyncio.run(server.aclose())


# ------------------------------------------------------------------------------------------------ real model
def test_the_embedded_tiny_model_over_http_is_inconclusive_agent_tools(served_model):
    async def go():
        server = create_server("tiny", {"kind": "openai", "base_url": served_model, "model": "tiny"})
        try:
            ex = AgentExecutor(CONFIG, server, chat_params=ChatParams(max_tokens=24))
            return await ex.compare_with_transcript(SCALED, [SCALED], context=CONTEXT), await server.capabilities()
        finally:
            await server.aclose()

    (result, transcript), caps = asyncio.run(go())
    # calib serve answers a chat request with tools 400 (the embedded server does not call tools), so the openai
    # kind's probe finds tools=False and refuses before sending the agent's first request
    assert caps.chat and not caps.tools
    assert not result.conclusive and "\n" not in result.reason
    assert result.reason.startswith("agent_tools: server 'tiny'") and "lacks tools" in result.reason
    assert [m.role for m in transcript] == ["system", "user"]
    assert result.candidates[0].sim_func is None and result.config["agent_server"] == "tiny"


def test_the_embedded_kind_in_process_is_inconclusive_agent_tools(tiny_model_dir):
    async def go():
        server = create_server("local", {"kind": "embedded", "model_dir": str(tiny_model_dir), "threads": 1})
        try:
            return await AgentExecutor(CONFIG, server).compare(SCALED, [SCALED], context=CONTEXT)
        finally:
            await server.aclose()

    result = asyncio.run(go())
    # the embedded kind's chat raises CapabilityError when given tools: no request is made
    assert not result.conclusive
    assert result.reason.startswith("agent_tools: server 'local' (embedded") and "lacks tools" in result.reason
