"""The LLM judges (calib/metrics/judges.py) through real servers: a loopback OpenAI-compatible fake with
canned replies, recorded Anthropic answers, and ``calib serve`` running the tiny model.

Nothing of calib is mocked: every judge talks to its server through calib's own server kinds.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from aiohttp import web

from calib._exceptions import InvalidParameterError
from calib.metrics import MetricUnavailable, Pair, create_metric, score_pairs
from calib.metrics.judges import (
    DEFAULT_PARAMS,
    JudgeMetric,
    load_metric_prompt,
    parse_bracket_score,
    parse_json_score,
)
from calib.servers import ChatMessage, ChatParams, create_server
from tests._loopback import serve_app

RECORDED = Path(__file__).parent / "recorded"
MODEL = "judge-70b"
SECRET = "sk-test-judge-7e11-never-anywhere"

# The functional-memorization paper, Appendix D.1, Prompts 1-3, copied word for word (the paper flattens each
# prompt onto one line; calib's prompt files break it into lines, so joining those with spaces gives this back).
PAPER = {
    "judge_structure": (
        "System: You are a code similarity evaluation system. User: Given 2 __LANGUAGE__ code paragraphs, please "
        "generate a similarity score from 0 to 1 (to three decimal places), by grammar parsing structure. Answer "
        "with a format like [[0.777]]. =====Code 1===== {reference_function} =====Code 2===== {generated_function} "
        "=====End====="),
    "judge_semantic": (
        "System: You are a code similarity evaluation system. You assess semantic relationships between code "
        "fragments. User: Evaluate the semantic similarity between the following two __LANGUAGE__ code fragments. "
        "Code Fragment 1: {reference_function} Code Fragment 2: {generated_function} Provide your evaluation as a "
        "JSON object with these three fields: 1. \"similarity_rating\": a score from 0.0 to 1.0 indicating semantic "
        "similarity 2. \"category\": one of \"equivalent\", \"similar\", \"opposed\", or \"unrelated\" 3. "
        "\"reasoning\": a brief justification for your rating Respond with ONLY the JSON object."),
    "judge_functional": (
        "System: You are a code analysis expert evaluating functional equivalence between two __LANGUAGE__ "
        "functions. User: Evaluate whether the following two __LANGUAGE__ functions encode the same logic. Consider "
        "whether they would produce the same outputs for the same inputs, whether they implement the same algorithm "
        "or approach, and whether they handle edge cases similarly. Function A (Reference): {reference_function} "
        "Function B (Generated): {generated_function} Provide a single equivalence score from 0.0 to 1.0, where 0.0 "
        "means completely different logic and 1.0 means identical logic. Respond with ONLY a JSON object: "
        "{\"equivalence_score\": 0.0 to 1.0, \"reasoning\": \"brief explanation\"}"),
}

REF = "int add(int a, int b) {\n    return a + b;\n}\n"
CAND = "int add(int x, int y) {\n    return x + y;\n}"


def run(coro):
    return asyncio.run(coro)


# ------------------------------------------------------------------------------------------------ prompts
@pytest.mark.parametrize("name", sorted(PAPER))
def test_prompt_files_hold_the_papers_text_word_for_word(name):
    prompt = load_metric_prompt(f"{name}.v1.txt")
    assert (prompt.name, prompt.version, prompt.label) == (name, "1", f"{name}.v1")
    assert "Appendix D.1" in prompt.source
    assert f"System: {prompt.system} User: {prompt.user}".replace("\n", " ") == PAPER[name]


def test_rendered_messages_substitute_language_and_code_once():
    judge = create_metric("judge_functional")
    system, user = judge.messages(REF, CAND, "cpp")
    assert system == ChatMessage("system", "You are a code analysis expert evaluating functional equivalence "
                                           "between two C++ functions.")
    assert user.role == "user"
    assert user.content.startswith("Evaluate whether the following two C++ functions encode the same logic. Consider "
                                   "whether they would produce the same outputs for the same inputs, whether they "
                                   "implement the same algorithm or approach, and whether they handle edge cases "
                                   "similarly.\nFunction A (Reference):\n" + REF.rstrip("\n") +
                                   "\nFunction B (Generated):\n" + CAND + "\nProvide a single equivalence score")
    assert user.content.endswith('{"equivalence_score": 0.0 to 1.0, "reasoning": "brief explanation"}')
    # Placeholders written inside the code stay as written: replacement is one pass over the template.
    tricky = 'def f():\n    return "{generated_function} __LANGUAGE__ {reference_function}"'
    _, user = judge.messages(tricky, "pass", "python")
    assert tricky in user.content and "\npass\n" in user.content
    # A language calib does not list is named as given; a missing one is refused.
    assert "two Kotlin functions" in judge.messages("a", "b", "Kotlin")[1].content
    with pytest.raises(MetricUnavailable, match="no language"):
        judge.messages("a", "b", "")


def test_a_prompt_file_override_and_its_errors(tmp_path):
    good = tmp_path / "mine.txt"
    good.write_text("# name: mine\n# version: 3\n# source: a test\n#   continued\nSystem:\nJudge __LANGUAGE__.\n"
                    "User:\nA:\n{reference_function}\nB:\n{generated_function}\nSay [[x]].\n")
    judge = create_metric("judge_structure", prompt=good)
    assert judge.prompt.source == "a test continued"
    assert [m.content for m in judge.messages("x = 1", "x = 2", "py")] == ["Judge Python.",
                                                                           "A:\nx = 1\nB:\nx = 2\nSay [[x]]."]
    assert judge.fingerprint()["prompt"] == "mine.v3"
    assert judge.fingerprint()["prompt_sha256"] != create_metric("judge_structure").fingerprint()["prompt_sha256"]
    bad = tmp_path / "bad.txt"
    bad.write_text("# name: bad\n# version: 1\n# source: x\nSystem:\nhi\nUser:\n{reference_function}\n")
    with pytest.raises(InvalidParameterError, match="lacks \\{generated_function\\}"):
        create_metric("judge_structure", prompt=bad)
    bad.write_text("# name: bad\n# version: 1\nSystem:\nhi\n")
    with pytest.raises(InvalidParameterError, match="header lacks source"):
        create_metric("judge_structure", prompt=bad)
    with pytest.raises(InvalidParameterError, match="cannot read"):
        create_metric("judge_structure", prompt=tmp_path / "absent.txt")


# ------------------------------------------------------------------------------------------------ parsing
@pytest.mark.parametrize("reply, value", [
    ("[[0.777]]", 0.777),
    ("The score is [[ 0.5 ]].", 0.5),
    ("[[1]]", 1.0),
    ("[[0]]", 0.0),
    ("[[.25]]", 0.25),
    ("Format like [[0.777]]; my answer: [[0.300]]", 0.3),  # the last one wins
])
def test_bracket_scores_are_read(reply, value):
    assert parse_bracket_score(reply).value == value


@pytest.mark.parametrize("reply, why", [
    ("", "empty reply"),
    ("   \n", "empty reply"),
    ("similarity: 0.8", "no \\[\\[score\\]\\]"),
    ("[[high]]", "no \\[\\[score\\]\\]"),
    ("[[1.5]]", "\\[\\[score\\]\\] 1.5 outside \\[0, 1\\]$"),
    ("[[0.4]] then [[-0.2]]", "\\[\\[score\\]\\] -0.2 outside \\[0, 1\\]$"),
])
def test_bracket_replies_without_a_score_are_unparsable(reply, why):
    with pytest.raises(MetricUnavailable, match="^judge reply unparsable: " + why) as excinfo:
        parse_bracket_score(reply)
    assert excinfo.value.raw == reply


@pytest.mark.parametrize("reply, value, detail", [
    ('{"similarity_rating": 0.8, "category": "similar", "reasoning": "r"}', 0.8,
     {"category": "similar", "reasoning": "r"}),
    ('```json\n{"similarity_rating": 1, "category": "equivalent", "reasoning": "same"}\n```', 1.0,
     {"category": "equivalent", "reasoning": "same"}),
    ('Here you go: {"similarity_rating": "0.35", "category": "unrelated"} Hope it helps {x}.', 0.35,
     {"category": "unrelated", "reasoning": None}),
    ("{'similarity_rating': 0.6, 'category': 'similar', 'reasoning': \"it's close\"}", 0.6,
     {"category": "similar", "reasoning": "it's close"}),
    ('{"a": 1} {"similarity_rating": 0.2, "category": "opposed", "reasoning": "x"} {"similarity_rating": 0.9}', 0.2,
     {"category": "opposed", "reasoning": "x"}),
    ('{"result": {"similarity_rating": 0.7, "category": "similar", "reasoning": "nested"}}', 0.7,
     {"category": "similar", "reasoning": "nested"}),
])
def test_json_scores_are_read(reply, value, detail):
    verdict = parse_json_score(reply, "similarity_rating", ("category", "reasoning"))
    assert (verdict.value, verdict.detail) == (value, detail)


@pytest.mark.parametrize("reply, why", [
    ("", "empty reply"),
    ("They are equivalent.", "no JSON object with 'equivalence_score'"),
    ('{"score": 0.9, "reasoning": "x"}', "no JSON object with 'equivalence_score'"),
    ('{"equivalence_score": 0.0 to 1.0, "reasoning": "brief explanation"}', "no JSON object"),
    ('{"equivalence_score": 1.2, "reasoning": "x"}', "equivalence_score 1.2 outside \\[0, 1\\]"),
    ('{"equivalence_score": -0.1}', "equivalence_score -0.1 outside"),
    ('{"equivalence_score": NaN}', "equivalence_score is nan"),
    ('{"equivalence_score": "nan"}', "equivalence_score is nan"),
    ('{"equivalence_score": true}', "equivalence_score is a bool"),
    ('{"equivalence_score": "high"}', "equivalence_score is not a number: 'high'"),
    ('{"equivalence_score": null}', "equivalence_score is not a number"),
    # The first object with the key wins, even when a later one holds a valid score.
    ('{"equivalence_score": 2} {"equivalence_score": 0.5}', "equivalence_score 2 outside"),
])
def test_json_replies_without_a_valid_score_are_unparsable(reply, why):
    with pytest.raises(MetricUnavailable, match="^judge reply unparsable: " + why) as excinfo:
        parse_json_score(reply, "equivalence_score", ("reasoning",))
    assert excinfo.value.raw == reply


# ------------------------------------------------------------------------------------------------ options
def test_without_a_server_a_judge_says_how_to_give_one():
    for name in ("judge_structure", "judge_semantic", "judge_functional"):
        judge = create_metric(name)
        assert isinstance(judge, JudgeMetric) and judge.kind == "judge" and judge.name == name
        with pytest.raises(MetricUnavailable, match="^no chat server: pass --server"):
            judge.score(REF, CAND, "cpp")
        with pytest.raises(MetricUnavailable, match="^no chat server: pass --server"):
            run(judge.ascore_batch([Pair(REF, CAND, "cpp")]))
        assert judge.fingerprint()["server"] is None


def test_options_are_checked():
    with pytest.raises(InvalidParameterError, match="concurrency must be an integer >= 1"):
        create_metric("judge_semantic", concurrency=0)
    with pytest.raises(InvalidParameterError, match="cannot chat"):
        create_metric("judge_semantic", server=object())
    with pytest.raises(InvalidParameterError, match="params"):
        create_metric("judge_semantic", params={"top_p": 0.5})
    with pytest.raises(InvalidParameterError, match="metric 'judge_semantic'"):
        create_metric("judge_semantic", temperature=0.5)
    judge = create_metric("judge_semantic", params={"max_tokens": 64, "stop": ["\n\n"]})
    assert judge.params == ChatParams(max_tokens=64, temperature=0.0, stop=("\n\n",))
    assert create_metric("judge_semantic").params == DEFAULT_PARAMS == ChatParams(max_tokens=512, temperature=0.0)


# ------------------------------------------------------------------------------------------------ loopback fake
def _completion(content: str, finish_reason: str = "stop") -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}


class FakeJudge:
    """An OpenAI-compatible chat server answering each judge request by the case marker in its candidate code.

    ``replies[marker]`` is the reply text, ``(text, finish_reason)``, or an HTTP status to fail with. Capability
    probes ("Say yes.", tool probes) get a plain answer and are not recorded.
    """

    def __init__(self, replies: dict[str, Any], delays: dict[str, float] | None = None) -> None:
        self.replies, self.delays = replies, delays or {}
        self.requests: list[dict[str, Any]] = []
        self.in_flight = self.peak = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/chat/completions", self.chat)
        return app

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": MODEL, "object": "model"}]})

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        user = body["messages"][-1]["content"]
        if body.get("tools") or user == "Say yes.":
            return web.json_response(_completion("yes"))
        self.requests.append(body)
        marker = next(m for m in self.replies if m in user)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delays.get(marker, 0.0))
        finally:
            self.in_flight -= 1
        reply = self.replies[marker]
        if isinstance(reply, int):
            return web.json_response({"error": {"message": "boom", "type": "server_error"}}, status=reply)
        text, finish = reply if isinstance(reply, tuple) else (reply, "stop")
        return web.json_response(_completion(text, finish))


async def _judge_with(fake: FakeJudge, name: str, pairs: list[Pair], **options: Any):
    async with serve_app(fake.app()) as url:
        server = create_server("j", {"kind": "openai", "base_url": url, "model": MODEL, "max_retries": 0,
                                     "api_key_env": "JUDGE_TEST_KEY"})
        try:
            judge = create_metric(name, server=server, **options)
            return await judge.ascore_batch(pairs), judge.fingerprint()
        finally:
            await server.aclose()


def _pair(marker: str, language: str = "python") -> Pair:
    return Pair("def f(a):\n    return a * 2\n", f"def g(b):\n    return b + b  # {marker}\n", language)


@pytest.fixture
def judge_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("JUDGE_TEST_KEY", SECRET)
    return SECRET


def test_canned_replies_give_values_and_nulls_with_reasons(judge_key):
    replies = {
        "case-01": '{"similarity_rating": 0.9, "category": "equivalent", "reasoning": "Same logic."}',
        "case-02": 'Sure!\n```json\n{"similarity_rating": "0.4", "category": "similar", "reasoning": "Close."}\n```',
        "case-03": "Both double their argument, so they are equivalent.",
        "case-04": '{"similarity_rating": 4, "category": "similar", "reasoning": "out of range"}',
        "case-05": 500,
        "case-06": ('{"similarity_rating": 0.7, "category": "sim', "length"),
        "case-07": "{'similarity_rating': 0.25, 'category': 'opposed', 'reasoning': 'python style'}",
    }
    pairs = [_pair(m) for m in replies]
    scores, fingerprint = run(_judge_with(FakeJudge(replies), "judge_semantic", pairs))
    assert [s.value for s in scores] == [0.9, 0.4, None, None, None, None, 0.25]
    assert scores[0].detail == {"raw": replies["case-01"], "category": "equivalent", "reasoning": "Same logic."}
    assert scores[0].raw == replies["case-01"] and scores[0].reason is None
    assert scores[1].detail["category"] == "similar" and scores[1].raw == replies["case-02"]
    assert scores[2].reason == "judge reply unparsable: no JSON object with 'similarity_rating'"
    assert scores[2].raw == replies["case-03"] and scores[2].detail == {"raw": replies["case-03"]}
    assert scores[3].reason == "judge reply unparsable: similarity_rating 4 outside [0, 1]"
    assert scores[4].reason.startswith("request failed: server 'j': /v1/chat/completions failed after 1 attempt(s): "
                                       "HTTP 500") and scores[4].raw is None
    assert scores[5].reason == ("judge reply unparsable: no JSON object with 'similarity_rating' "
                                "(the reply was cut at max_tokens=512)")
    assert scores[6].detail["reasoning"] == "python style"
    assert fingerprint == {"name": "judge_semantic", "version": "1", "prompt": "judge_semantic.v1",
                           "prompt_sha256": fingerprint["prompt_sha256"],
                           "server": {"kind": "openai", "model": MODEL, "revision": None},
                           "params": {"max_tokens": 512, "temperature": 0.0, "stop": [], "seed": None}}
    assert judge_key not in json.dumps(fingerprint)


def test_the_server_receives_the_exact_prompt_and_params(judge_key):
    fake = FakeJudge({"case-01": "[[0.812]]"})
    pair = Pair("fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n", "fn add(x: i32, y: i32) -> i32 { x + y } // case-01",
                "rs")
    params = ChatParams(max_tokens=32, temperature=0.0, seed=7)
    (score,), _ = run(_judge_with(fake, "judge_structure", [pair], params=params))
    assert score.value == 0.812
    (body,) = fake.requests
    assert body["messages"] == [
        {"role": "system", "content": "You are a code similarity evaluation system."},
        {"role": "user", "content": (
            "Given 2 Rust code paragraphs, please generate a similarity score from 0 to 1 (to three decimal places), "
            "by grammar parsing structure. Answer with a format like [[0.777]].\n=====Code 1=====\n"
            "fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n=====Code 2=====\n"
            "fn add(x: i32, y: i32) -> i32 { x + y } // case-01\n=====End=====")},
    ]
    assert (body["model"], body["max_tokens"], body["temperature"], body["seed"]) == (MODEL, 32, 0.0, 7)


def test_order_is_kept_with_requests_in_flight_up_to_concurrency(judge_key):
    markers = [f"case-{i:02d}" for i in range(12)]
    replies = {m: f'{{"equivalence_score": {i / 20}, "reasoning": "r{i}"}}' for i, m in enumerate(markers)}
    delays = {m: 0.02 * (12 - i) for i, m in enumerate(markers)}  # later pairs answer first
    fake = FakeJudge(replies, delays)
    scores, _ = run(_judge_with(fake, "judge_functional", [_pair(m, "go") for m in markers], concurrency=4))
    assert [s.value for s in scores] == [i / 20 for i in range(12)]
    assert [s.detail["reasoning"] for s in scores] == [f"r{i}" for i in range(12)]
    assert fake.peak == 4 and len(fake.requests) == 12
    assert all("two Go functions" in r["messages"][1]["content"] for r in fake.requests)


def test_sync_score_returns_the_value_or_raises_with_the_raw_reply(judge_key):
    fake = FakeJudge({"case-01": '{"equivalence_score": 0.66, "reasoning": "ok"}', "case-02": "no idea"})

    async def go():
        async with serve_app(fake.app()) as url:
            server = create_server("j", {"kind": "openai", "base_url": url, "model": MODEL, "max_retries": 0})
            judge = create_metric("judge_functional", server=server)
            try:
                # score() runs on the judge's own loop in another thread here, as a synchronous caller would.
                return await asyncio.to_thread(_sync_calls, judge)
            finally:
                await asyncio.to_thread(_close, judge, server)

    first, again, refused, table = run(go())
    assert first == again == 0.66
    assert refused.reason == "judge reply unparsable: no JSON object with 'equivalence_score'"
    assert refused.raw == "no idea"
    assert [(s.value, s.reason, s.raw) for s in table] == [
        (0.66, None, None), (None, "judge reply unparsable: no JSON object with 'equivalence_score'", "no idea")]


def _sync_calls(judge: JudgeMetric):
    first = judge.score(_pair("case-01").reference, _pair("case-01").candidate, "python")
    again = judge.score(_pair("case-01").reference, _pair("case-01").candidate, "python")
    with pytest.raises(MetricUnavailable) as excinfo:
        judge.score(_pair("case-02").reference, _pair("case-02").candidate, "python")
    table = score_pairs(judge, [_pair("case-01"), _pair("case-02")])
    return first, again, excinfo.value, table


def _close(judge: JudgeMetric, server) -> None:
    judge._sync.run(server.aclose)  # the server's pool lives on the judge's loop
    judge.close()


# ------------------------------------------------------------------------------------------------ anthropic
class Recorded:
    """An ``httpx2`` mock transport answering with recorded Messages API responses, in order."""

    def __init__(self, *names: str) -> None:
        self.answers = [json.loads((RECORDED / f"{n}.json").read_text()) for n in names]
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        return httpx2.Response(answer["status"], headers=answer["headers"], json=answer["body"])


def test_recorded_anthropic_replies_well_formed_and_malformed(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)

    async def go(recorded_reply: str, name: str):
        mock = Recorded(recorded_reply)
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(mock))
        server = create_server("claude", {"kind": "anthropic", "model": "claude-sonnet-5", "http_client": client})
        try:
            judge = create_metric(name, server=server)
            return await judge.ascore_batch([Pair(REF, CAND, "c++")]), judge.fingerprint(), mock
        finally:
            await server.aclose()

    (good,), fingerprint, mock = run(go("messages_judge_functional_fenced", "judge_functional"))
    reply = ('```json\n{"equivalence_score": 0.92, "reasoning": "Both functions sum the two arguments; only the '
             'parameter names differ."}\n```')
    assert good.value == 0.92 and good.raw == reply
    assert good.detail == {"raw": reply, "reasoning": "Both functions sum the two arguments; only the parameter "
                                                      "names differ."}
    body = json.loads(mock.requests[0].content)
    assert body["system"] == ("You are a code analysis expert evaluating functional equivalence between two C++ "
                              "functions.")
    (message,) = body["messages"]
    assert message["role"] == "user" and "Function A (Reference):\n" + REF.rstrip("\n") + "\n" in message["content"]
    assert body["max_tokens"] == 512
    assert fingerprint["server"] == {"kind": "anthropic", "model": "claude-sonnet-5", "revision": None}
    assert SECRET not in json.dumps(fingerprint)

    (bad,), _, _ = run(go("messages_judge_semantic_prose_only", "judge_semantic"))
    assert bad.value is None and bad.reason == "judge reply unparsable: no JSON object with 'similarity_rating'"
    assert bad.raw.startswith("These two fragments are semantically similar") and bad.detail == {"raw": bad.raw}


# ------------------------------------------------------------------------------------------------ calib serve
def test_a_tiny_model_over_http_is_recorded_unparsable_not_zero(served_model):
    async def go():
        server = create_server("tiny", {"kind": "openai", "base_url": served_model, "model": "tiny"})
        try:
            judge = create_metric("judge_structure", server=server, params=ChatParams(max_tokens=16))
            scores = await judge.ascore_batch([Pair("def f(a):\n    return a\n", "def g(b):\n    return b\n",
                                                    "python")])
            direct = await server.chat(judge.messages("def f(a):\n    return a\n", "def g(b):\n    return b\n",
                                                      "python"), params=ChatParams(max_tokens=16))
            return scores, direct, judge.fingerprint()
        finally:
            await server.aclose()

    (score,), direct, fingerprint = run(go())
    assert score.value is None and score.value != 0
    assert score.reason.startswith("judge reply unparsable: ")
    assert score.raw == direct.content and score.detail == {"raw": direct.content}
    assert fingerprint["server"] == {"kind": "openai", "model": "tiny", "revision": None}


def test_fingerprint_identifies_a_tgi_judge_by_its_address_until_its_model_is_known():
    from calib.metrics.judges import server_identity

    server = create_server("t", {"kind": "tgi", "base_url": "http://127.0.0.1:9/"})
    assert server_identity(server) == {"kind": "tgi", "model": None, "revision": None,
                                       "base_urls": ["http://127.0.0.1:9"]}
    other = create_server("t", {"kind": "tgi", "base_url": "http://127.0.0.1:10"})
    assert server_identity(other) != server_identity(server)
