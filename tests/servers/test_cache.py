"""The request cache: stable keys, round trips, WAL, threads, kill -9, and no secrets on disk."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calib.servers._http import HttpClient, RetryPolicy
from calib.servers.base import RequestFailed
from calib.servers.cache import RequestCache, cache_key
from tests.servers.faultserver import FaultServer, answer_text

ROOT = Path(__file__).resolve().parents[2]

IDENTITY = {"kind": "openai", "model": "gpt2-tiny", "revision": "abc123", "base_urls": ["http://127.0.0.1:8000"]}
BODY = {"model": "gpt2-tiny", "prompt": "The quick brown fox", "max_tokens": 8, "temperature": 0.0, "logprobs": 5}


# Keys.

def test_key_is_the_sha256_of_the_canonical_json() -> None:
    # Written out by hand: sorted keys, no spaces. A change here silently invalidates every cache.
    canonical = '{"body":{"a":1,"b":[1,2]},"identity":{"model":"m"},"route":"POST /v1/completions"}'
    expected = hashlib.sha256(canonical.encode()).hexdigest()
    assert cache_key({"model": "m"}, "POST /v1/completions", {"b": [1, 2], "a": 1}) == expected


def test_same_request_same_key_and_any_difference_another() -> None:
    key = cache_key(IDENTITY, "POST /v1/completions", BODY)
    assert len(key) == 64 and int(key, 16) >= 0
    assert cache_key(dict(IDENTITY), "POST /v1/completions", json.loads(json.dumps(BODY))) == key
    different = [
        cache_key({**IDENTITY, "revision": "def456"}, "POST /v1/completions", BODY),
        cache_key({**IDENTITY, "model": "gpt2-other"}, "POST /v1/completions", BODY),
        cache_key(IDENTITY, "POST /v1/chat/completions", BODY),
        cache_key(IDENTITY, "GET /v1/completions", BODY),
        cache_key(IDENTITY, "POST /v1/completions", {**BODY, "prompt": "The quick brown fox "}),
        cache_key(IDENTITY, "POST /v1/completions", {**BODY, "temperature": 0.7}),
        cache_key(IDENTITY, "POST /v1/completions", {**BODY, "seed": 1}),
    ]
    assert len({key, *different}) == len(different) + 1


def test_key_ignores_dict_order_at_every_depth() -> None:
    a = {"identity": 1, "body": {"x": [1, {"p": 1, "q": 2}], "y": None}}
    b = {"body": {"y": None, "x": [1, {"q": 2, "p": 1}]}, "identity": 1}
    assert cache_key({"m": 1, "n": 2}, "r", a) == cache_key({"n": 2, "m": 1}, "r", b)
    assert cache_key({}, "r", [1, 2]) != cache_key({}, "r", [2, 1])  # list order is meaning, not noise


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


def _reordered(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _reordered(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_reordered(v, rng) for v in value]
    return value


@settings(max_examples=200, derandomize=True, deadline=None)
@given(identity=st.dictionaries(st.text(max_size=6), _json, max_size=4), body=_json, seed=st.integers(0, 2**32))
def test_key_is_independent_of_insertion_order(identity: dict[str, Any], body: Any, seed: int) -> None:
    rng = random.Random(seed)
    reordered = cache_key(_reordered(identity, rng), "POST /x", _reordered(body, rng))
    assert cache_key(identity, "POST /x", body) == reordered


# Storage.

def test_put_get_round_trip(tmp_path: Path) -> None:
    response = {"choices": [{"text": "naïve café ✓", "logprobs": {"token_logprobs": [-0.1, -2e-300, -745.5]}}],
                "token": "\ud83d",  # half of an emoji split across two tokens: a lone surrogate
                "usage": {"total_tokens": 3}, "empty": [], "none": None}
    with RequestCache(tmp_path / "c.sqlite") as cache:
        key = cache_key(IDENTITY, "POST /v1/completions", BODY)
        assert cache.get(key) is None and cache.misses == 1
        cache.put(key, "POST /v1/completions", response)
        assert cache.get(key) == response and cache.hits == 1
        cache.put(key, "POST /v1/completions", {"replaced": True})
        assert cache.get(key) == {"replaced": True} and len(cache) == 1


def test_rows_persist_across_reopen_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "c.sqlite"  # the parent folder is created
    with RequestCache(path) as cache:
        for i in range(50):
            cache.put(cache_key(IDENTITY, "r", {"i": i}), "r", {"i": i})
    with closing(sqlite3.connect(path)) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with RequestCache(path) as cache:
        assert len(cache) == 50
        assert all(cache.get(cache_key(IDENTITY, "r", {"i": i})) == {"i": i} for i in range(50))


def test_one_cache_shared_by_threads(tmp_path: Path) -> None:
    errors: list[BaseException] = []

    def work(cache: RequestCache, thread: int) -> None:
        try:
            for i in range(150):
                key = cache_key({"thread": thread}, "r", {"i": i})
                cache.put(key, "r", {"thread": thread, "i": i})
                assert cache.get(key) == {"thread": thread, "i": i}
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    with RequestCache(tmp_path / "c.sqlite") as cache:
        threads = [threading.Thread(target=work, args=(cache, t)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors and len(cache) == 8 * 150
        assert cache.hits == 8 * 150


def test_many_connections_to_one_file(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    RequestCache(path).close()
    errors: list[BaseException] = []

    def work(thread: int) -> None:
        try:
            with RequestCache(path) as cache:  # its own connection: SQLite's locking, not ours
                for i in range(100):
                    cache.put(cache_key({"thread": thread}, "r", {"i": i}), "r", {"thread": thread, "i": i})
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    with RequestCache(path) as cache:
        assert len(cache) == 4 * 100


_WRITER = """
import hashlib, sys, time
from calib.servers.cache import RequestCache, cache_key
cache = RequestCache(sys.argv[1])
deadline = time.monotonic() + 30  # bounded even if nobody kills it
for i in range(10**6):
    payload = f"{i}:" * (1 + (i * 7919) % 2000)  # up to ~14 KB: a row spans several pages
    cache.put(cache_key({"writer": 1}, "POST /x", {"i": i}), "POST /x",
              {"i": i, "payload": payload, "sha": hashlib.sha256(payload.encode()).hexdigest()})
    if i == 20:
        print("writing", flush=True)
    if time.monotonic() > deadline:
        break
"""


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kill_9_leaves_only_complete_rows(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "c.sqlite"
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], cwd=ROOT, stdout=subprocess.PIPE)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == b"writing\n"
        threading.Event().wait(random.Random(seed).uniform(0.0, 0.5))  # a random moment mid-write
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.kill()
        writer.wait(timeout=30)
        writer.stdout.close()
    assert writer.returncode == -signal.SIGKILL

    # The killed writer left its write-ahead log behind: opening the file recovers from it.
    assert Path(f"{path}-wal").exists()
    with closing(sqlite3.connect(path)) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = raw.execute("SELECT key, route, response FROM responses").fetchall()
    seen = set()
    for key, route, text in rows:
        row = json.loads(text)  # every row decodes: none is partial
        assert hashlib.sha256(row["payload"].encode()).hexdigest() == row["sha"]
        assert (key, route) == (cache_key({"writer": 1}, "POST /x", {"i": row["i"]}), "POST /x")
        seen.add(row["i"])
    # Rows are committed one by one in order, so what survives is exactly the first n.
    assert len(rows) > 20 and seen == set(range(len(rows)))
    with RequestCache(path) as cache:  # and the cache opens and answers as usual
        assert len(cache) == len(rows)
        assert cache.get(cache_key({"writer": 1}, "POST /x", {"i": 0}))["i"] == 0


# Secrets.

def test_an_authorization_header_never_reaches_the_cache(tmp_path: Path) -> None:
    secret = f"sk-test-{uuid.uuid4().hex}"
    path = tmp_path / "c.sqlite"
    policy = RetryPolicy(max_attempts=2, base_delay=0.01, timeout=5.0)

    async def go(url: str, cache: RequestCache) -> tuple[list[Any], HttpClient]:
        client = HttpClient("secret-server", [url], headers={"Authorization": f"Bearer {secret}"}, policy=policy,
                            cache=cache, identity={"kind": "openai", "model": "fault"})
        bodies = [{"model": "fault", "prompt": f"p{i}", "request_id": f"{secret[-6:]}-{i}"} for i in range(20)]
        bodies.append({"model": "fault", "prompt": "x", "fault": {"mode": "status", "status": 401}})
        try:
            return await asyncio.gather(*(client.post_json("/v1/completions", b) for b in bodies),
                                        return_exceptions=True), client
        finally:
            await client.aclose()

    with FaultServer(service_time=0.001) as server:
        with RequestCache(path) as cache:
            results, client = asyncio.run(go(server.url, cache))
            assert server.stats()["with_authorization"] == 21  # the header was sent every time
            # Read the files while the connection is open, so the WAL still holds the rows.
            raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert answer_text("p7").encode() in raw  # the responses are there ...
    assert secret.encode() not in raw and b"Bearer" not in raw  # ... the secret is not
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())  # after close (checkpointed into the db)
    assert answer_text("p7").encode() in raw and secret.encode() not in raw
    failure = results[-1]
    assert isinstance(failure, RequestFailed) and failure.status == 401
    assert secret not in json.dumps(failure.to_dict()) and secret not in str(failure)
    assert secret not in repr(client.stats)
