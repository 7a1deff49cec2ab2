"""HttpClient and with_retries under injected faults, against the loopback fault server.

The server (tests/servers/faultserver.py) runs in its own process on 127.0.0.1 and counts the
attempts of every request id, so each test can say exactly how often a request was sent.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
import uuid
from typing import Any

import aiohttp
import pytest
from yarl import URL

from calib.servers._http import (
    HttpClient,
    HTTPStatusError,
    MalformedResponse,
    RetryPolicy,
    _retry_after,
    classify_error,
    with_retries,
)
from calib.servers.base import RequestFailed
from calib.servers.cache import RequestCache
from tests.servers.faultserver import FaultServer, answer_text

ROUTE = "/v1/completions"
# Small delays keep the file fast. The timeout is far above a plain request (5 ms) even on a loaded
# machine, and well under the 2 s "delay" fault, which it turns into a timeout.
FAST = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.05, timeout=1.0, connect_timeout=2.0)
# The mixed test counts every attempt on both sides, so no attempt may time out unless it is meant to:
# 200 requests at once on a loaded 2-core machine once kept the server from reading one attempt within
# FAST's 1 s (the client sent 4, the server counted 3). Its timeout is 5 s and its "delay" faults hang
# for 60 s, so only they time out, however slow the machine.
MIXED = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.05, timeout=5.0, connect_timeout=5.0)
HANG = 60.0


@pytest.fixture(scope="module")
def server() -> FaultServer:
    with FaultServer(ports=3, service_time=0.005, slots=64) as srv:
        yield srv
        # Faults are injected on purpose; a traceback would be a bug of the server itself.
        assert "Traceback" not in srv.log(), srv.log()


def _ids(n: int) -> list[str]:
    tag = uuid.uuid4().hex[:8]  # request ids are unique across the tests sharing the server
    return [f"{tag}-{i}" for i in range(n)]


def _body(rid: str, fault: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "fault", "prompt": f"prompt of {rid}", "max_tokens": 4, "request_id": rid}
    if fault is not None:
        body["fault"] = fault
    return body


async def _send_all(client: HttpClient, bodies: list[dict[str, Any]]) -> list[Any]:
    try:
        return await asyncio.gather(*(client.post_json(ROUTE, b) for b in bodies), return_exceptions=True)
    finally:
        await client.aclose()


def _is_answer(result: Any, body: dict[str, Any]) -> bool:
    return (isinstance(result, dict) and result["request_id"] == body["request_id"]
            and result["choices"][0]["text"] == answer_text(body["prompt"]))


# (fault, succeeds, attempts the server sees, status recorded on failure) under MIXED (4 attempts).
CASES: list[tuple[dict[str, Any] | None, bool, int, int | None]] = [
    (None, True, 1, None),
    ({"mode": "status", "status": 500, "times": 1}, True, 2, None),
    ({"mode": "status", "status": 502, "times": 2}, True, 3, None),
    ({"mode": "status", "status": 503, "times": 3}, True, 4, None),
    ({"mode": "status", "status": 429, "retry_after": "0", "times": 2}, True, 3, None),
    ({"mode": "garbage", "times": 2}, True, 3, None),
    ({"mode": "truncated", "times": 1}, True, 2, None),
    ({"mode": "reset", "times": 2}, True, 3, None),
    ({"mode": "badhttp", "times": 1}, True, 2, None),
    ({"mode": "delay", "seconds": HANG, "times": 1}, True, 2, None),
    ({"mode": "status", "status": 503}, False, 4, 503),
    ({"mode": "garbage"}, False, 4, None),
    ({"mode": "reset"}, False, 4, None),
    ({"mode": "delay", "seconds": HANG}, False, 4, None),
    ({"mode": "status", "status": 400}, False, 1, 400),
    ({"mode": "status", "status": 404}, False, 1, 404),
]


def test_mixed_faults_lose_no_request(server: FaultServer) -> None:
    rng = random.Random(3)
    ids = _ids(200)
    # Every case at least 5 times, the rest of the 200 drawn at random (mostly plain requests).
    plan = [c for c in CASES for _ in range(5)]
    plan += [rng.choice([CASES[0]] * 5 + CASES) for _ in range(len(ids) - len(plan))]
    rng.shuffle(plan)
    bodies = [_body(rid, case[0]) for rid, case in zip(ids, plan)]
    client = HttpClient("fault", [server.url], max_in_flight=32, policy=MIXED, seed=1, adaptive=False)

    results = asyncio.run(_send_all(client, bodies))

    seen = server.stats()["attempts"]
    assert len(results) == len(bodies)
    failed = []
    for body, (fault, succeeds, attempts, status), result in zip(bodies, plan, results):
        where = f"{body['request_id']} with fault {fault}"
        assert seen[body["request_id"]] == attempts, (where, result)
        assert attempts <= MIXED.max_attempts
        if succeeds:
            assert _is_answer(result, body), where
        else:
            assert isinstance(result, RequestFailed), where
            assert (result.server, result.route, result.attempts, result.status) == ("fault", ROUTE, attempts, status)
            assert result.error and "\n" not in result.error and len(result.error) <= 300
            failed.append(result)
    # Each failure is recorded once, as the very object the caller received.
    assert sorted(map(id, client.stats.failed)) == sorted(map(id, failed))
    assert client.stats.failures == len(failed) == sum(not case[1] for case in plan)
    sent = sum(seen[rid] for rid in ids)
    assert client.stats.attempts == sent
    assert client.stats.retries == sent - len(ids)


@pytest.mark.parametrize("fault", [
    {"mode": "status", "status": 500}, {"mode": "status", "status": 502}, {"mode": "status", "status": 503},
    {"mode": "status", "status": 429}, {"mode": "garbage"}, {"mode": "truncated"}, {"mode": "reset"},
    {"mode": "badhttp"}, {"mode": "delay", "seconds": 2.0},
], ids=lambda f: f"{f['mode']}-{f.get('status', '')}")
def test_each_transient_fault_is_retried(server: FaultServer, fault: dict[str, Any]) -> None:
    (rid,) = _ids(1)
    client = HttpClient("fault", [server.url], policy=FAST)
    (result,) = asyncio.run(_send_all(client, [_body(rid, {**fault, "times": 2})]))
    assert _is_answer(result, _body(rid))
    assert result["attempt"] == 3
    assert server.stats()["attempts"][rid] == 3
    assert (client.stats.attempts, client.stats.retries, client.stats.failed) == (3, 2, [])


def test_retries_are_bounded(server: FaultServer) -> None:
    ids = _ids(3)
    policy = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.02, timeout=2.0)
    client = HttpClient("fault", [server.url], policy=policy)
    bodies = [_body(ids[0], {"mode": "status", "status": 503}), _body(ids[1], {"mode": "status", "status": 400}),
              _body(ids[2], {"mode": "status", "status": 404})]
    always_503, bad_request, not_found = asyncio.run(_send_all(client, bodies))
    seen = server.stats()["attempts"]
    assert (always_503.attempts, seen[ids[0]], always_503.status) == (3, 3, 503)
    assert "HTTP 503" in always_503.error
    # 4xx other than 408/409/425/429 are the caller's mistake: sent once.
    assert (bad_request.attempts, seen[ids[1]], bad_request.status) == (1, 1, 400)
    assert (not_found.attempts, seen[ids[2]], not_found.status) == (1, 1, 404)


def test_unknown_route_is_tried_once(server: FaultServer) -> None:
    client = HttpClient("fault", [server.url], policy=FAST)

    async def go() -> RequestFailed:
        try:
            with pytest.raises(RequestFailed) as failed:
                await client.post_json("/v1/no-such-route", {"prompt": "x"})
            return failed.value
        finally:
            await client.aclose()

    failure = asyncio.run(go())
    assert (failure.route, failure.status, failure.attempts, client.stats.attempts) == ("/v1/no-such-route", 404, 1, 1)
    assert client.stats.failed == [failure]


def test_retry_after_is_honoured(server: FaultServer) -> None:
    (rid,) = _ids(1)
    # Without the header the backoff would be at most 0.01 s; the header asks for 1 s.
    policy = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=5.0, timeout=2.0)
    client = HttpClient("fault", [server.url], policy=policy)
    started = time.monotonic()
    (result,) = asyncio.run(_send_all(client, [_body(rid, {"mode": "status", "status": 429, "retry_after": "1",
                                                          "times": 1})]))
    waited = time.monotonic() - started
    assert _is_answer(result, _body(rid)) and result["attempt"] == 2
    assert waited >= 0.95  # loose: only a lower bound, so a slow machine cannot fail it


def test_retry_after_forms_and_cap() -> None:
    assert _retry_after("3") == 3.0
    assert _retry_after("0.5") == 0.5
    assert _retry_after(None) is None and _retry_after("soon") is None
    in_ten_seconds = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8.0 <= _retry_after(in_ten_seconds) <= 10.0  # HTTP-date form, whole seconds
    assert _retry_after(email.utils.formatdate(time.time() - 60, usegmt=True)) == 0.0
    policy = RetryPolicy(base_delay=0.5, max_delay=2.0)
    assert policy.delay(0, 30.0, random.Random(0)) == 2.0  # a Retry-After past max_delay is capped
    assert policy.delay(0, 0.3, random.Random(0)) == 0.3


def test_backoff_is_full_jitter_within_bounds() -> None:
    policy = RetryPolicy(base_delay=0.1, max_delay=1.0)
    rng = random.Random(0)
    for attempt in range(8):
        bound = min(1.0, 0.1 * 2**attempt)
        delays = [policy.delay(attempt, None, rng) for _ in range(200)]
        assert all(0.0 <= d <= bound for d in delays)
        assert max(delays) > 0.8 * bound  # it does use the whole range


def test_several_base_urls_are_served_round_robin(server: FaultServer) -> None:
    assert len(server.urls) == 3
    server.reset()
    client = HttpClient("fault", server.urls, max_in_flight=4, policy=FAST)
    results = asyncio.run(_send_all(client, [_body(rid) for rid in _ids(30)]))
    assert all(isinstance(r, dict) for r in results)
    assert sorted(server.stats()["by_port"].values()) == [10, 10, 10]


def test_retries_move_to_the_next_base_url(server: FaultServer) -> None:
    (rid,) = _ids(1)
    server.reset()
    client = HttpClient("fault", server.urls, policy=FAST)
    (result,) = asyncio.run(_send_all(client, [_body(rid, {"mode": "status", "status": 503, "times": 2})]))
    assert result["attempt"] == 3
    assert sorted(server.stats()["by_port"].values()) == [1, 1, 1]


def test_max_in_flight_is_respected(server: FaultServer) -> None:
    server.reset()
    client = HttpClient("fault", [server.url], max_in_flight=5, policy=RetryPolicy(timeout=5.0))
    bodies = [_body(rid, {"mode": "ok", "service_time": 0.03}) for rid in _ids(40)]
    results = asyncio.run(_send_all(client, bodies))
    assert all(isinstance(r, dict) for r in results)
    most = server.stats()["max_concurrent"]
    assert 1 < most <= 5


def test_cache_answers_a_repeat_without_network(server: FaultServer, tmp_path) -> None:
    (rid,) = _ids(1)
    identity = {"kind": "openai", "model": "fault", "revision": "r1"}

    async def twice(cache: RequestCache, identity: dict[str, str]) -> tuple[HttpClient, list[Any]]:
        client = HttpClient("fault", [server.url], policy=FAST, cache=cache, identity=identity)
        try:
            return client, [await client.post_json(ROUTE, _body(rid)) for _ in range(2)]
        finally:
            await client.aclose()

    with RequestCache(tmp_path / "cache.sqlite") as cache:
        client, (first, second) = asyncio.run(twice(cache, identity))
        assert first == second and _is_answer(first, _body(rid))
        assert (client.stats.attempts, client.stats.cache_hits) == (1, 1)
    assert server.stats()["attempts"][rid] == 1
    # A re-run (a new client, the cache reopened) does no network work at all.
    with RequestCache(tmp_path / "cache.sqlite") as cache:
        client, _ = asyncio.run(twice(cache, identity))
        assert (client.stats.attempts, client.stats.cache_hits) == (0, 2)
        # Another model revision is another server: its answers are not reused.
        client, _ = asyncio.run(twice(cache, {**identity, "revision": "r2"}))
        assert (client.stats.attempts, client.stats.cache_hits) == (1, 1)
    assert server.stats()["attempts"][rid] == 2


def test_failures_are_not_cached(server: FaultServer, tmp_path) -> None:
    (rid,) = _ids(1)
    with RequestCache(tmp_path / "cache.sqlite") as cache:
        client = HttpClient("fault", [server.url], policy=FAST, cache=cache)
        (failure,) = asyncio.run(_send_all(client, [_body(rid, {"mode": "status", "status": 400})]))
        assert isinstance(failure, RequestFailed) and len(cache) == 0


# with_retries on its own, with scripted attempts (no network).

def _scripted(*outcomes: Any) -> tuple[list[int], Any]:
    calls: list[int] = []

    async def attempt() -> Any:
        calls.append(1)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return calls, attempt


def test_with_retries_retries_what_is_transient() -> None:
    calls, attempt = _scripted(HTTPStatusError(503, "busy"), asyncio.TimeoutError(),
                               aiohttp.ServerDisconnectedError(), MalformedResponse("b'<html>'"),
                               ConnectionResetError(104, "reset"), "answer")
    policy = RetryPolicy(max_attempts=6, base_delay=0.001)
    assert asyncio.run(with_retries("s", "/r", attempt, policy)) == "answer"
    assert len(calls) == 6


def test_with_retries_stops_at_max_attempts_with_a_one_line_error() -> None:
    calls, attempt = _scripted(*[HTTPStatusError(502, "bad\ngateway\n" + "x" * 1000)] * 3)
    with pytest.raises(RequestFailed) as failed:
        asyncio.run(with_retries("s", "/r", attempt, RetryPolicy(max_attempts=3, base_delay=0.001)))
    assert len(calls) == 3
    assert (failed.value.server, failed.value.route, failed.value.attempts, failed.value.status) == ("s", "/r", 3, 502)
    assert "\n" not in failed.value.error and len(failed.value.error) <= 300
    assert failed.value.to_dict()["attempts"] == 3


def test_with_retries_does_not_retry_mistakes_or_cancellation() -> None:
    calls, attempt = _scripted(ValueError("bad argument"), "never")
    with pytest.raises(RequestFailed) as failed:
        asyncio.run(with_retries("s", "/r", attempt, FAST))
    assert len(calls) == 1 and "ValueError: bad argument" in failed.value.error
    calls, attempt = _scripted(asyncio.CancelledError(), "never")
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(with_retries("s", "/r", attempt, FAST))
    assert len(calls) == 1


_INFO = aiohttp.RequestInfo(URL("http://127.0.0.1:1/v1/x"), "POST", {}, URL("http://127.0.0.1:1/v1/x"))


@pytest.mark.parametrize(("exc", "retryable", "status"), [
    (HTTPStatusError(429, "slow down", 2.0), True, 429),
    (HTTPStatusError(408, "request timeout"), True, 408),
    (HTTPStatusError(422, "invalid"), False, 422),
    (aiohttp.ClientResponseError(_INFO, (), status=400, message="Bad status line"), True, None),  # the parser's 400
    (aiohttp.ContentTypeError(_INFO, (), status=200, message="unexpected mimetype: text/html"), True, 200),
    (aiohttp.ContentTypeError(_INFO, (), status=404, message="unexpected mimetype: text/html"), False, 404),
    (aiohttp.TooManyRedirects(_INFO, (), status=302, message="Too many redirects"), False, None),
    (aiohttp.ServerFingerprintMismatch(b"a", b"b", "127.0.0.1", 443), False, None),
    (aiohttp.ClientPayloadError("Response payload is not completed"), True, None),
    (aiohttp.ClientOSError(111, "Connection refused"), True, None),
    (ValueError("a bug of the caller"), False, None),
], ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else None)
def test_classify(exc: BaseException, retryable: bool, status: int | None) -> None:
    got_retryable, _, got_status, message = classify_error(exc)
    assert (got_retryable, got_status) == (retryable, status) and message


@pytest.mark.parametrize("bad", [{"max_attempts": 0}, {"base_delay": -1.0}, {"max_delay": float("nan")},
                                 {"timeout": 0.0}, {"connect_timeout": -2.0}])
def test_retry_policy_rejects_bad_values(bad: dict[str, float]) -> None:
    (name,) = bad
    with pytest.raises(ValueError, match=name):
        RetryPolicy(**bad)


def test_client_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="base URL"):
        HttpClient("s", [])
    with pytest.raises(ValueError, match="max_in_flight"):
        HttpClient("s", ["http://127.0.0.1:1"], max_in_flight=0)
