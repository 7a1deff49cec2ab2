"""The ``llm`` executor against recorded Anthropic answers (tests/executors/recorded/) and a real tiny model.

The ``anthropic`` kind sends its requests through ``httpx2.MockTransport``: :class:`Recorded` answers
them in order from the recorded Messages-API bodies and keeps every request, so the tests check what the
executor asked (the paper's prompts, the retry prompt's previous preamble and error) as well as what the
real sandbox made of the model's inputs and preambles. Nothing reaches the network.
"""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.llm import LEVELS, LLMExecutor
from calib.executors.llm.prompting import PROMPTS_DIR, common_imports, input_states, load_prompt, parse_json_answer
from calib.servers import ChatParams, create_server
from tests.executors._recorded import Recorded as _Recorded

NO_BWRAP = "bubblewrap (bwrap) is not installed; CI installs it (apt-get install bubblewrap)"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason=NO_BWRAP)

SCORE = """def score(values, limit):
    total = 0
    for v in values:
        if v > limit:
            total += limit
        else:
            total += v
    return total
"""
SCORE_CHANGED = SCORE.replace("total += v\n", "total += v + 1\n")
SCALED = "def scaled(n):\n    return round(n * FACTOR, DIGITS)\n"
SCALED_CONTEXT = "import os\n\nFACTOR = 1.5\nDIGITS = 2\n\n"
CONFIG = ExecutorConfig(workers=2, seed=0)


class Recorded(_Recorded):
    """The recorded ``llm_*.json`` answers."""

    prefix = "llm"

    def user(self, i: int) -> str:
        return self.body(i)["messages"][0]["content"]


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-llm-executor-never-anywhere")


def run_levels(mock: Recorded, truth: str, candidates: list[str], levels, context: str = "", config=CONFIG):
    async def go():
        server = mock.server()
        try:
            ex = LLMExecutor(config, server, level=levels[0])
            return await ex.compare_levels(truth, candidates, levels=levels, context=context)
        finally:
            await server.aclose()

    return asyncio.run(go())


def run_one(mock: Recorded, level: str, truth: str, candidates: list[str], context: str = ""):
    async def go():
        server = mock.server()
        try:
            return await LLMExecutor(CONFIG, server, level=level).compare(truth, candidates, context=context)
        finally:
            await server.aclose()

    return asyncio.run(go())


# ------------------------------------------------------------------------------------------------ prompts
def test_the_prompts_are_the_papers_verbatim_with_placeholders_filled():
    # Sentences copied from the paper's Appendix C (*Detecting Functional Memorization in Code Language Models*).
    gen = load_prompt("input_generation")
    assert gen.system.startswith("You are an expert Python test input generator. Generate inputs that a function "
                                 "can actually execute without errors.")
    text = gen.render(function_code=SCORE)
    assert "```python\n" + SCORE + "\n```" in text and "{function_code}" not in text
    assert text.endswith('Respond with ONLY valid JSON: {"test_inputs": [{"param1": value1, ...}, ...]}')
    assert "Generate 10 diverse inputs." in text and "do NOT include 'self'" in text
    pre = load_prompt("preamble").render(file_context="X = 1", function_code=SCORE, common_imports="import os")
    assert "These imports are already available:\n```python\nimport os\n```" in pre
    assert pre.endswith('Respond with ONLY valid JSON: {"preamble": "<complete python code>"}')
    retry = load_prompt("preamble_retry")
    assert retry.system.startswith("You are an expert Python code analyst. A preamble you wrote to make a function "
                                   "run standalone did not work.")
    assert set(retry.placeholders) == {"file_context", "function_code", "previous_preamble", "execution_error"}
    assert (PROMPTS_DIR / "python" / "v1" / "common_imports.py").is_file()


def test_common_imports_compile_and_guard_every_import():
    import ast

    tree = ast.parse(common_imports())
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    guarded = [n for n in tree.body if isinstance(n, ast.Try)]
    assert len(imports) == len(guarded) >= 30  # one try/except ImportError per import
    assert all(t.handlers[0].type.id == "ImportError" for t in guarded)
    names = {a.asname or a.name for n in imports for a in n.names}
    assert {"os", "np", "pd", "math", "re"} <= names


def test_json_answers_become_input_states_as_python_literals():
    answer = ('```json\n{"test_inputs": [{"a": [1, 2.5, "x"], "b": null, "c": true, "self": {}}, 3, '
              '{"d": {"k": 1}}]}\n```')
    states, dropped = input_states(parse_json_answer(answer, "test_inputs"), limit=10)
    # repr of the JSON values: null -> None, true -> True; 'self' dropped; the bare 3 dropped
    assert states == [{"args": {"a": "[1, 2.5, 'x']", "b": "None", "c": "True"}, "files": {}},
                      {"args": {"d": "{'k': 1}"}, "files": {}}]
    assert dropped == 1
    assert len(input_states([{"n": i} for i in range(15)], limit=10)[0]) == 10
    with pytest.raises(ValueError, match="test_inputs"):
        parse_json_answer("Sure! Here are inputs: n=3", "test_inputs")


# ------------------------------------------------------------------------------------------------ recorded
@needs_bwrap
def test_good_inputs_and_preamble_are_conclusive_and_calib_decides_sim_func():
    mock = Recorded("score_inputs", "empty_preamble")
    result = run_one(mock, "preamble", SCORE, [SCORE, SCORE_CHANGED])
    assert result.conclusive, result.reason
    assert result.valid_inputs == 10 and result.executor == "llm"
    x_itself, changed = result.candidates
    assert x_itself.sim_func == 1.0
    # SCORE_CHANGED adds 1 per value <= limit: outputs equal only where no value is <= limit, i.e. the inputs
    # values=[] (limit 1), [7, 8, 9] (limit 5), [10] (limit 3) and [3, 3] (limit 1): 4 of 10 -> 0.4
    assert changed.sim_func == pytest.approx(0.4)
    assert [r.state["args"] for r in result.inputs][0] == {"values": "[1, 5, 2]", "limit": "3"}
    assert "llm level: preamble" in result.warnings and "llm prompts: python/v1" in result.warnings
    assert any(w.startswith("llm answer input_generation: {\"test_inputs\"") for w in result.warnings)
    assert result.config["llm_level"] == "preamble"
    first, second = mock.body(0), mock.body(1)
    assert first["system"].startswith("You are an expert Python test input generator.")
    assert SCORE in mock.user(0) and "These imports are already available" in mock.user(1)
    assert second["max_tokens"] == 4096  # the executor's default ChatParams


@needs_bwrap
def test_a_model_answering_garbage_is_inconclusive_llm_inputs():
    mock = Recorded("garbage")
    result = run_one(mock, "bare", SCORE, [SCORE])
    assert not result.conclusive and result.reason.startswith("llm_inputs: ")
    assert "\n" not in result.reason and "test_inputs" in result.reason
    assert result.candidates[0].sim_func is None and result.candidates[0].outcome == "not_run"
    assert len(mock.requests) == 1


@needs_bwrap
def test_a_crashing_preamble_fails_once_and_the_retry_fixes_it():
    mock = Recorded("scaled_inputs", "preamble_crashing", "preamble_fixed")
    results = run_levels(mock, SCALED, [SCALED], ("bare", "preamble", "preamble_retry"), context=SCALED_CONTEXT)
    assert len(mock.requests) == 3  # inputs once, preamble once, retry once
    bare = results["bare"]
    assert not bare.conclusive and "missing_name" in bare.reason  # FACTOR is not there
    # DIGITS = int('two') raises: as one script the preamble would stop before x runs
    preamble = results["preamble"]
    assert not preamble.conclusive
    assert preamble.reason == "preamble_failed: preamble line 2: ValueError (DIGITS stand-ins)"
    assert preamble.valid_inputs == 0 and {r.reason for r in preamble.inputs} == {"preamble"}
    retry = results["preamble_retry"]
    assert retry.conclusive, retry.reason
    assert retry.candidates[0].sim_func == 1.0
    # round(n * 1.5, 2) for n = 0, 1, 2, 3, 5, 8, 13, -4, 7, 21 (the recorded inputs)
    # (canonical output states write floats as {"float": repr})
    assert [float(json.loads(r.output)["return"]["float"]) for r in retry.inputs] == [
        0.0, 1.5, 3.0, 4.5, 7.5, 12.0, 19.5, -6.0, 10.5, 31.5]
    prompt = mock.user(2)
    assert mock.body(2)["system"].startswith("You are an expert Python code analyst. A preamble you wrote")
    assert "Your PREVIOUS preamble (it failed):\n```python\nFACTOR = 1.5\nDIGITS = int('two')\n" in prompt
    assert "preamble line 2: ValueError" in prompt  # the sandbox's warning, in preamble line numbers
    assert "not a valid execution: preamble_failed: preamble line 2" in prompt
    assert SCALED_CONTEXT.strip() in prompt and SCALED in prompt
    assert any(w.startswith("llm answer preamble_retry:") for w in retry.warnings)


@needs_bwrap
def test_a_conclusive_preamble_is_not_retried():
    mock = Recorded("score_inputs", "empty_preamble", "garbage")
    results = run_levels(mock, SCORE, [], ("preamble", "preamble_retry"))
    assert len(mock.requests) == 2
    assert results["preamble"].conclusive and results["preamble_retry"].conclusive
    assert results["preamble_retry"].config["llm_level"] == "preamble_retry"


@needs_bwrap
def test_an_unparsable_preamble_is_llm_preamble_and_the_retry_sees_the_raw_answer():
    mock = Recorded("score_inputs", "garbage", "empty_preamble")
    results = run_levels(mock, SCORE, [SCORE], ("preamble", "preamble_retry"))
    assert results["preamble"].reason.startswith('llm_preamble: no JSON object with "preamble"')
    assert results["preamble_retry"].conclusive and results["preamble_retry"].candidates[0].sim_func == 1.0
    retry = mock.user(2)
    assert "Your PREVIOUS preamble (it failed):\n```python\nI'm sorry, I can only help" in retry
    assert 'Executing the function then failed with:\n```\nno JSON object with "preamble"' in retry


@needs_bwrap
def test_too_few_valid_inputs_is_inconclusive_with_the_valid_inputs_reason():
    mock = Recorded("too_few_inputs")
    result = run_one(mock, "common_imports", SCORE, [SCORE])
    assert not result.conclusive
    assert result.reason.startswith("valid_inputs 3 < 8")  # 3 objects among 6 entries
    assert len(result.inputs) == 3 and result.candidates[0].sim_func is None


@needs_bwrap
def test_strict_levels_count_inputs_that_used_a_stand_in_as_invalid():
    truth = "def pick(n):\n    return n if n > 2 else helper(n)\n"
    other = "def pick(n):\n    return n if n > 3 else helper(n)\n"
    states = [{"args": {"n": str(n)}} for n in range(10)]
    config = ExecutorConfig(workers=2, min_valid=7)

    async def go(strict: bool):
        server = Recorded("garbage").server()  # given inputs: the model is never asked
        try:
            ex = LLMExecutor(config, server, level="common_imports", strict=strict)
            return await ex.compare(truth, [truth, other], inputs=states)
        finally:
            await server.aclose()

    strict, lenient = asyncio.run(go(True)), asyncio.run(go(False))
    # helper is unresolved: the sandbox binds a stand-in, so n = 0, 1, 2 "work" only through it
    assert [r.reason for r in strict.inputs] == ["standin"] * 3 + [""] * 7
    assert strict.conclusive and strict.valid_inputs == 7
    same, changed = strict.candidates
    assert same.sim_func == 1.0 and same.matches == (None,) * 3 + (True,) * 7
    # the changed candidate differs only at n = 3 (it calls helper(3)): 6 of the 7 valid inputs
    assert changed.sim_func == pytest.approx(6 / 7) and changed.matches[3] is False
    assert lenient.conclusive and lenient.valid_inputs == 10 and lenient.candidates[1].sim_func == pytest.approx(0.9)


def test_a_failing_request_is_inconclusive_llm_request_not_an_exception():
    mock = Recorded("error_400")
    results = run_levels(mock, SCORE, [SCORE], LEVELS)
    for level in LEVELS:
        assert not results[level].conclusive
        assert results[level].reason.startswith("llm_request: HTTP 400")
        assert results[level].config["llm_level"] == level


def test_bad_levels_and_servers_are_refused_with_a_message():
    with pytest.raises(ValueError, match="level='agent'"):
        LLMExecutor(CONFIG, object(), level="agent")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs a server that can chat"):
        LLMExecutor(CONFIG, object(), level="bare")


# ------------------------------------------------------------------------------------------------ real model
@needs_bwrap
def test_the_embedded_tiny_model_over_http_completes_inconclusive(served_model):
    async def go():
        server = create_server("tiny", {"kind": "openai", "base_url": served_model, "model": "tiny"})
        try:
            ex = LLMExecutor(CONFIG, server, level="preamble_retry", chat_params=ChatParams(max_tokens=24))
            return await ex.compare(SCORE, [SCORE])
        finally:
            await server.aclose()

    result = asyncio.run(go())
    # the paper's input prompt with x is longer than the tiny model's 512-token context: the server refuses
    # the request (HTTP 400), which is an inconclusive sample, not an exception
    assert not result.conclusive and "\n" not in result.reason
    assert result.reason.startswith("llm_request: HTTP 400") and "maximum context length" in result.reason
    assert result.candidates[0].sim_func is None and result.config["llm_server"] == "tiny"
