"""Rate limits and token usage (issue "hosted"): HttpClient's adaptive concurrency against a rate-limited
host, the usage each kind records, and a host's context-length refusal.

The hosts are tests/_hosted.py's loopback proxy: ``rate_limited`` in front of the fault server
(tests/servers/faultserver.py, its own process, 0.2 s per request) answers 429 with Retry-After to a
request that arrives while 4 are being forwarded; ``direct`` and ``context_refusal`` stand in front of
``calib serve`` (the session's tiny model). The assertions count requests and answers, never time.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from calib.servers import ChatMessage, ChatParams, RequestCache, RequestFailed, SamplingParams, create_server
from calib.servers._http import AdaptiveLimit, HttpClient, HttpStats, RetryPolicy
from calib.study.budgets import budget_after_refusal, context_refusal
from tests._hosted import HostedProxy, context_message
from tests.servers.faultserver import FaultServer, answer_text

ROUTE = "/v1/completions"
CONCURRENCY = 4  # what the rate-limited host forwards at once
CEILING = 16  # the client's max_in_flight
# Patient enough that no request of a fixed-concurrency client runs out of attempts either.
PATIENT = RetryPolicy(max_attempts=400, base_delay=0.01, max_delay=1.0, timeout=30.0)

pytestmark = pytest.mark.filterwarnings("ignore:The `dict` method is deprecated:DeprecationWarning")


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def upstream() -> FaultServer:
    with FaultServer(service_time=0.2, slots=64) as srv:
        yield srv
        assert "Traceback" not in srv.log(), srv.log()


def _body(rid: str, service_time: float | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "fault", "prompt": f"prompt of {rid}", "max_tokens": 4, "request_id": rid}
    if service_time is not None:
        body["fault"] = {"mode": "ok", "service_time": service_time}
    return body


async def _burst(client: HttpClient, tag: str, n: int = 40) -> list[Any]:
    """``n`` requests at once (each holds the host 0.2 s): all are answered, or the test fails."""
    bodies = [_body(f"{tag}-{i}") for i in range(n)]
    answers = await asyncio.gather(*(client.post_json(ROUTE, b) for b in bodies))
    for body, answer in zip(bodies, answers):
        assert answer["request_id"] == body["request_id"]
        assert answer["choices"][0]["text"] == answer_text(body["prompt"])
    return answers


# --------------------------------------------------------------------------- adaptive concurrency
def test_concurrency_halves_on_429_and_grows_back_after_successes(upstream):
    async def adaptive(host: HostedProxy) -> tuple[HttpStats, int, int, int]:
        client = HttpClient("hosted", [host.url], max_in_flight=CEILING, policy=PATIENT, seed=1)
        try:
            await _burst(client, "adaptive")
            after_burst = client.stats.limit
            throttled = host.throttled
            # One request at a time never exceeds the host's limit: each success counts towards growth.
            sent = 0
            while client.stats.limit < CEILING and sent < 200:
                await client.post_json(ROUTE, _body(f"grow-{sent}", service_time=0.0))
                sent += 1
            return client.stats, after_burst, throttled, sent
        finally:
            await client.aclose()

    with HostedProxy(upstream.url, "rate_limited", concurrency=CONCURRENCY, retry_after="0.05") as host:
        stats, after_burst, throttled, sent = run(adaptive(host))
        assert host.max_in_flight <= CONCURRENCY
        assert host.throttled == throttled  # the sequential requests were never refused
    # Every request was answered; each 429 was seen and retried, none failed.
    assert (stats.failures, stats.failed) == (0, [])
    assert stats.throttled == throttled > 0
    assert stats.retries == stats.throttled
    # The limit came down to what the host allows, or below.
    assert stats.limit_min <= CONCURRENCY
    # No storm of 429s: one burst over the limit, then probes of one more request. At 16 in flight the
    # first wave alone gets 12 refusals; far fewer than one 429 per request follow.
    assert throttled < 40
    # Growth: +1 after as many successes in a row as the limit, back to max_in_flight.
    assert stats.limit == CEILING
    assert sent <= sum(range(after_burst, CEILING))


def test_adaptation_draws_fewer_429s_than_a_fixed_limit(upstream):
    async def burst(host: HostedProxy, adaptive: bool, tag: str) -> HttpStats:
        client = HttpClient("hosted", [host.url], max_in_flight=CEILING, policy=PATIENT, seed=2, adaptive=adaptive)
        try:
            await _burst(client, tag)
            return client.stats
        finally:
            await client.aclose()

    with HostedProxy(upstream.url, "rate_limited", concurrency=CONCURRENCY, retry_after="0.05") as host:
        fixed = run(burst(host, False, "fixed"))
        fixed_429 = host.throttled
        adapted = run(burst(host, True, "adapted"))
        adapted_429 = host.throttled - fixed_429
    assert (fixed.throttled, adapted.throttled) == (fixed_429, adapted_429)
    assert fixed.limit == fixed.limit_min == CEILING  # a fixed limit stays where it is
    assert adapted.limit_min <= CONCURRENCY
    # A fixed 16 keeps 12 requests bouncing off the host for as long as the burst lasts.
    assert adapted_429 < fixed_429, (adapted_429, fixed_429)


def test_the_limit_halves_once_per_overload_and_waiters_are_never_failed():
    async def go() -> tuple[list[int], HttpStats]:
        limit = AdaptiveLimit(8)
        slots = [limit.slot() for _ in range(8)]
        for s in slots:
            await s.__aenter__()
        waiting = asyncio.ensure_future(_take(limit))  # a ninth request waits
        await asyncio.sleep(0)
        assert not waiting.done()
        seen = []
        for s in slots:  # all 8, sent under the limit 8, come back throttled: one halving
            s.throttled(None)
            await s.__aexit__(None, None, None)
            seen.append(limit.limit)
        await waiting  # it got a slot once fewer than 4 were in flight
        return seen, limit.stats

    seen, stats = run(go())
    assert seen == [4] * 8
    assert (stats.throttled, stats.limit, stats.limit_min) == (8, 4, 4)


async def _take(limit: AdaptiveLimit) -> None:
    async with limit.slot() as slot:
        slot.succeeded()


def test_growth_needs_as_many_successes_as_the_limit_and_stops_at_the_ceiling():
    async def go() -> list[int]:
        limit = AdaptiveLimit(4)
        async with limit.slot() as slot:
            slot.throttled(None)  # 4 -> 2
        async with limit.slot() as slot:
            slot.throttled(None)  # sent under 2: -> 1
        seen = []
        for _ in range(12):
            await _take(limit)
            seen.append(limit.limit)
        return seen

    # 1 success -> 2, 2 more -> 3, 3 more -> 4, then it stays at the ceiling.
    assert run(go()) == [2, 2, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4]


def test_a_retry_after_holds_back_new_requests_and_cancelled_waiters_leave_no_trace():
    async def go() -> tuple[bool, int]:
        limit = AdaptiveLimit(2)
        async with limit.slot() as slot:
            slot.throttled(0.05)  # -> 1, and nothing is sent for 0.05 s
        first = asyncio.ensure_future(_take(limit))
        cancelled = asyncio.ensure_future(_take(limit))
        await asyncio.sleep(0)
        held = not first.done()
        cancelled.cancel()
        await first  # sent once the pause is over
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        return held, limit.in_flight

    held, in_flight = run(go())
    assert held and in_flight == 0


# --------------------------------------------------------------------------- token usage
def _openai(url: str, **config: Any):
    return create_server("target", {"kind": "openai", "base_url": url, "model": "tiny", **config})


def test_openai_usage_totals_equal_the_usage_the_answers_carried(served_model, tmp_path):
    prompts = ["def add(a, b):", "import json\n", "class Foo:"]

    async def go(host: HostedProxy) -> dict[str, Any]:
        with RequestCache(tmp_path / "cache.sqlite") as cache:
            server = _openai(host.url, cache=cache, revision="r1")
            try:
                await server.capabilities()  # the probe's completions count too: they were sent
                before = (server.stats.input_tokens, server.stats.output_tokens)
                (one,) = await server.complete([prompts[0]], SamplingParams(max_tokens=6, logprobs=0))
                single = (server.stats.input_tokens - before[0], server.stats.output_tokens - before[1])
                prompt_ids = await server._tokenize(prompts[0], True)
                await server.complete(prompts, SamplingParams(max_tokens=5))
                await server.chat([ChatMessage("user", "Say hi.")], params=ChatParams(max_tokens=4))
                await server.embed(["a b c", "def f(): pass"])
                sent = dict(vars(server.stats))
                # A repeat comes from the cache: nothing is sent, so no usage is added.
                await server.complete(prompts, SamplingParams(max_tokens=5))
                return {"sent": sent, "after": dict(vars(server.stats)), "single": single,
                        "expected_single": (len(prompt_ids), len(one[0].tokens))}
            finally:
                await server.aclose()

    with HostedProxy(served_model, "direct") as host:
        got = run(go(host))
        usage, answers = dict(host.usage), host.usage_answers
    sent, after = got["sent"], got["after"]
    assert answers > 4
    assert (sent["input_tokens"], sent["output_tokens"]) == (usage["prompt_tokens"], usage["completion_tokens"])
    assert sent["usage_missing"] == 0 and sent["output_tokens"] > 0
    # One completion: its prompt's tokens by the server's tokenizer, and the tokens it generated.
    assert got["single"] == got["expected_single"]
    assert after["cache_hits"] == sent["cache_hits"] + 1
    assert {k: after[k] for k in ("attempts", "input_tokens", "output_tokens", "usage_missing")} == {
        k: sent[k] for k in ("attempts", "input_tokens", "output_tokens", "usage_missing")}


def test_an_answer_without_usage_is_counted_as_missing():
    from calib.servers._openai_wire import openai_usage

    assert openai_usage("/v1/completions", {"usage": {"prompt_tokens": 3, "completion_tokens": 2}}) == (3, 2)
    assert openai_usage("/v1/chat/completions", {"choices": []}) == (None, None)
    assert openai_usage("/v1/embeddings", {"usage": {"prompt_tokens": 7, "total_tokens": 7}}) == (7, 0)
    assert openai_usage("/tokenize", {"tokens": [1, 2]}) is None
    stats = HttpStats()
    stats.add_usage(3, 2)
    stats.add_usage(None, None)
    stats.add_usage(None, 4)  # a TGI completion: generated tokens only
    assert (stats.input_tokens, stats.output_tokens, stats.usage_missing) == (3, 6, 2)


def test_tgi_usage_counts_generated_and_prefill_tokens(served_model):
    async def go():
        server = create_server("reference", {"kind": "tgi", "base_url": served_model})
        try:
            await server.capabilities()
            assert (server.stats.input_tokens, server.stats.output_tokens) == (0, 0)  # probes are not counted
            (completions,) = await server.complete(["def add(a, b):"], SamplingParams(max_tokens=5, logprobs=0))
            completed = (server.stats.input_tokens, server.stats.output_tokens, server.stats.usage_missing)
            scored = await server.score("def add(a, b):", "\n    return a + b")
            return completions, completed, scored, dict(vars(server.stats))
        finally:
            await server.aclose()

    completions, completed, scored, stats = run(go())
    assert completed == (0, len(completions[0].tokens), 1)  # a completion does not state its prompt's length
    # Scoring asks for prefill details: prompt + continuation in, one generated token out.
    assert stats["input_tokens"] == len(scored.prompt_token_ids) + len(scored.continuation_token_ids)
    assert stats["output_tokens"] == completed[1] + 1 and stats["usage_missing"] == 1


def test_anthropic_usage_counts_each_answer_received_once(monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-usage")
    recorded = json.loads((Path(__file__).parent / "recorded" / "messages_text.json").read_text())
    requests = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        requests.append(request)
        return httpx2.Response(recorded["status"], headers=recorded["headers"], json=recorded["body"])

    async def go() -> HttpStats:
        with RequestCache(tmp_path / "cache.sqlite") as cache:
            server = create_server("judge", {"kind": "anthropic", "model": "claude-sonnet-5", "cache": cache,
                                             "http_client": httpx2.AsyncClient(transport=httpx2.MockTransport(answer))})
            try:
                for question in ("Equal?", "Equal?", "Different?"):
                    await server.chat([ChatMessage("user", question)])
                return server.stats
            finally:
                await server.aclose()

    stats = run(go())
    assert len(requests) == 2 and stats.cache_hits == 1
    usage = recorded["body"]["usage"]
    assert (stats.input_tokens, stats.output_tokens, stats.usage_missing) == (
        2 * usage["input_tokens"], 2 * usage["output_tokens"], 0)
    assert stats.limit == stats.limit_min == 8


# --------------------------------------------------------------------------- context refusal
def test_a_context_overflow_is_refused_in_vllms_words_and_the_budget_it_leaves_is_read(served_model):
    context, prompt, asked = 64, "def add(a, b):\n    return a + b\n", 100

    async def go(host: HostedProxy):
        server = _openai(host.url, max_retries=0)
        try:
            await server.capabilities()
            prompt_tokens = len(await server._tokenize(prompt, True))
            with pytest.raises(RequestFailed) as refused:
                await server.complete([prompt], SamplingParams(max_tokens=asked))
            budget = budget_after_refusal(str(refused.value), asked)
            (answer,) = await server.complete([prompt], SamplingParams(max_tokens=budget))
            return prompt_tokens, refused.value, budget, answer
        finally:
            await server.aclose()

    with HostedProxy(served_model, "context_refusal", context_length=context) as host:
        prompt_tokens, failure, budget, answer = run(go(host))
        refused = host.refused
    assert (failure.status, failure.attempts, refused) == (400, 1, 1)  # a refusal is not retried
    assert context_message(context, prompt_tokens, asked) in failure.error
    assert context_refusal(failure.error) == (context, prompt_tokens)
    assert budget == context - prompt_tokens
    assert len(answer) == 1 and answer[0].finish_reason in ("length", "stop")


def test_the_context_refusal_checks_each_prompt_of_a_batch(served_model):
    with HostedProxy(served_model, "context_refusal", context_length=20) as host:
        assert run(host.prompt_tokens([1, 2, 3], "tiny")) == 3  # a token-id prompt counts its ids
        server = _openai(host.url, max_retries=0, batch_size=8)

        async def batch():
            try:
                await server.capabilities()  # some of the probe's requests are refused too: they tell the limits
                before = host.refused
                with pytest.raises(RequestFailed) as refused:
                    await server.complete(["x", "def " * 30], SamplingParams(max_tokens=4))
                return refused.value, host.refused - before
            finally:
                await server.aclose()

        failure, refusals = run(batch())
        assert refusals == 1
    assert failure.status == 400 and "maximum context length is 20 tokens" in failure.error
    assert budget_after_refusal(failure.error, 4) is None  # the long prompt alone overflows: nothing fits
