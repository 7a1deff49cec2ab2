"""The LLM-judge filter against a loopback chat server of the test's own, through calib's openai kind."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator

import polars as pl
import pytest
from aiohttp import web

from calib._exceptions import InvalidParameterError
from calib.data.judge import VERDICTS_SCHEMA, judge_filter, load_judge_prompt, parse_verdict
from calib.servers.registry import create_server
from tests._loopback import serve_app

N = 12
FAILING = 11  # this function's request fails (HTTP 400, not retried)
# Scripted answers per function: valid JSON, JSON inside prose, garbage, out-of-range, failing severity.
ANSWERS = {
    0: '{"severity": 8, "reason": "pricing rules"}',
    1: 'Here is my verdict:\n```json\n{"severity": 6, "reason": "custom scoring"}\n```\nHope it helps.',
    2: "This function is boring, I would say three out of ten.",
    3: '{"severity": 2, "reason": "getter"}',
    4: '{"severity": 42, "reason": "off the scale"}',
    5: '{"severity": "9", "reason": "trading thresholds"}',
}


def answer_for(i: int) -> str:
    return ANSWERS.get(i, '{"severity": 7, "reason": "logic"}' if i % 2 else '{"severity": 1, "reason": "plain"}')


FUNCTIONS = pl.DataFrame({"function_id": [f"f{i:02d}" for i in range(N)], "language": ["python"] * N,
                          "signature": [f"def fn{i:02d}(x):" for i in range(N)],
                          "body": [f"\n    return x + {i}\n" for i in range(N)]})


@contextlib.asynccontextmanager
async def judge_server(seen: list[str]) -> AsyncIterator[str]:
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "judge", "object": "model"}]})

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        text = body["messages"][-1]["content"]
        found = re.search(r"def fn(\d+)", text)
        if found:
            seen.append(f"f{found.group(1)}")
            await asyncio.sleep(0.001 * (N - int(found.group(1))))  # answers arrive out of order
            if int(found.group(1)) == FAILING:
                return web.json_response({"error": {"message": "bad request"}}, status=400)
            content = answer_for(int(found.group(1)))
        else:
            content = "yes"  # the capability probe
        return web.json_response({"id": "x", "object": "chat.completion", "model": "judge", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}})

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    async with serve_app(app) as url:
        yield url


def run_judge(**kwargs):
    seen: list[str] = []

    async def main():
        async with judge_server(seen) as url:
            server = create_server("j", {"kind": "openai", "base_url": url, "model": "judge", "max_retries": 0})
            try:
                return await judge_filter(server, FUNCTIONS, **kwargs)
            finally:
                await server.aclose()

    return asyncio.run(main()), seen


def expected_verdict(function_id: str) -> tuple[int | None, str | None]:
    if int(function_id[1:]) == FAILING:
        return None, "request_failed"
    verdict = parse_verdict(answer_for(int(function_id[1:])))
    return verdict.severity, verdict.error


def test_stops_as_soon_as_want_pass_and_records_every_verdict():
    result, seen = run_judge(want=3, seed=11, concurrency=4)
    verdicts = result.verdicts
    assert verdicts.schema == VERDICTS_SCHEMA
    assert result.kept.height == 3 and not result.exhausted
    assert verdicts["passed"].sum() == 3 and verdicts["passed"][-1]  # the last judged is the third pass
    assert verdicts.height > 3
    assert sorted(seen) == sorted(verdicts["function_id"])  # nothing judged beyond what is recorded
    assert result.kept["function_id"].to_list() == verdicts.filter("passed")["function_id"].to_list()
    for row in verdicts.to_dicts():
        severity, error = expected_verdict(row["function_id"])
        assert row["severity"] == severity
        assert (row["error"] or "").split(":")[0] == (error or "")
        assert row["passed"] == (severity is not None and severity >= 5)
    assert result.prompt_version == "judge_meaningful_logic.v1"


def test_unparsable_answers_are_recorded_not_fatal():
    result, _ = run_judge(want=N, seed=0, concurrency=8)
    assert result.exhausted and result.verdicts.height == N
    bad = result.verdicts.filter(pl.col("error") == "judge_unparsable")
    assert sorted(bad["function_id"]) == ["f02", "f04"]
    assert bad["answer"][0] in (ANSWERS[2], ANSWERS[4])
    good = {r["function_id"]: r for r in result.verdicts.to_dicts()}
    assert (good["f01"]["severity"], good["f01"]["reason"]) == (6, "custom scoring")  # JSON inside prose
    assert good["f05"]["severity"] == 9 and good["f03"]["passed"] is False
    failed = good[f"f{FAILING}"]
    assert failed["error"].startswith("request_failed: HTTP 400") and failed["answer"] is None


def test_order_is_deterministic_with_a_seed():
    a, _ = run_judge(want=4, seed=3, concurrency=3)
    b, _ = run_judge(want=4, seed=3, concurrency=3)
    c, _ = run_judge(want=N, seed=4, concurrency=5)
    d, _ = run_judge(want=N, seed=5, concurrency=5)
    assert a.verdicts.drop("answer").equals(b.verdicts.drop("answer")) and a.kept.equals(b.kept)
    assert a.verdicts["order"].to_list() == list(range(a.verdicts.height))
    assert c.verdicts["function_id"].to_list() != d.verdicts["function_id"].to_list()


def test_parse_verdict_edge_cases():
    assert parse_verdict('{"reason": "no severity"} then {"severity": 10}').severity == 10
    assert parse_verdict('{"severity": 7.0, "reason": 3}') == parse_verdict('{"severity": 7, "reason": "3"}')
    for garbage in ("", "{", '{"severity": true}', '{"severity": 0}', "[1, 2]", "severity: 5"):
        assert parse_verdict(garbage).error == "judge_unparsable"


def test_prompt_file_has_a_versioned_header_and_renders_code_with_braces():
    prompt = load_judge_prompt()
    assert (prompt.name, prompt.version) == ("judge_meaningful_logic", "1")
    assert "NOT the paper's prompt" in prompt.source
    text = prompt.render(language="c", function="int f(void) { return {0}; }")
    assert "int f(void) { return {0}; }" in text and "```c" in text and "{function}" not in text


def test_invalid_parameters_are_named():
    for kwargs, name in (({"want": 0}, "want"), ({"want": 1, "threshold": 11}, "threshold"),
                         ({"want": 1, "concurrency": 0}, "concurrency")):
        with pytest.raises(InvalidParameterError, match=name):
            asyncio.run(judge_filter(None, FUNCTIONS, seed=0, **kwargs))  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="body"):
        asyncio.run(judge_filter(None, FUNCTIONS.drop("body"), want=1, seed=0))  # type: ignore[arg-type]
