"""A TextualIndex shared through a real redis-server on 127.0.0.1 by several processes.

Each test writes under its own prefix in one server started for this module (no persistence, a
temporary folder, killed at teardown). Other processes are ``python -c`` children that run
:data:`CHILD` on a JSON job.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from calib._exceptions import InvalidParameterError
from calib.dedup.minhash import TextualIndex, textual_duplicates
from tests.dedup.test_minhash import BASE, RENAMES, UNRELATED, _reformatted, _renamed, _stdlib_functions

REDIS_SERVER = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not on PATH (apt-get install "
                                "redis-server)")
redis = pytest.importorskip("redis", reason="the redis client is not installed (pip install redis)")

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import json, sys
from calib.dedup.minhash import TextualIndex
job = json.load(sys.stdin)
index = TextualIndex(storage=job["url"], prefix=job["prefix"])
if job.get("keys"):
    index.add(job["keys"], job["texts"])
if job.get("queries"):
    print(json.dumps(index.query(job["queries"], exclude=job.get("exclude"), corpus_texts=job.get("corpus"))))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("redis")
    port = _free_port()
    process = subprocess.Popen([REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", str(folder)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {port} did not answer PING") from None
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        client.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _client(url: str):
    return redis.Redis.from_url(url)


def _child(job: dict) -> list:
    out = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(job), capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout) if out.stdout.strip() else []


@pytest.fixture(scope="module")
def corpus() -> dict[str, str]:
    texts = {}
    for name, text in BASE.items():
        texts[name] = text
        texts[f"{name}~renamed"] = _renamed(text, *RENAMES[name])
        texts[f"{name}~reformatted"] = _reformatted(text)
    texts.update(UNRELATED)
    for number, text in enumerate(_stdlib_functions()[:300]):
        texts[f"stdlib{number}"] = text
    return texts


def _as_tuples(found: list) -> list[list[tuple[str, float]]]:
    return [[(key, value) for key, value in matches] for matches in found]


def test_keys_written_by_another_process_are_found_here(redis_url, corpus):
    prefix = f"t-{uuid.uuid4().hex}"
    keys, texts = list(corpus), list(corpus.values())
    _child({"url": redis_url, "prefix": prefix, "keys": keys, "texts": texts})
    memory = TextualIndex()
    memory.add(keys, texts)
    expected = memory.query(texts, exclude=keys)
    assert sum(map(len, expected)) >= 2 * 3 * len(BASE)  # the planted families are there to be found

    reader = TextualIndex(storage=redis_url, prefix=prefix)
    assert reader.query(texts, exclude=keys, corpus_texts=corpus) == expected
    assert reader.candidates(texts, exclude=keys) == memory.candidates(texts, exclude=keys)
    # Without the texts this process cannot verify: nothing is counted, the candidates are reported.
    blind = reader.search(texts, exclude=keys)
    assert all(result.matches == () for result in blind)
    assert [list(result.unverified) for result in blind] == memory.candidates(texts, exclude=keys)
    reader.clear()


def test_keys_added_here_are_found_by_another_process(redis_url, corpus):
    prefix = f"t-{uuid.uuid4().hex}"
    keys, texts = list(corpus), list(corpus.values())
    half = len(keys) // 2
    writer = TextualIndex(storage=redis_url, prefix=prefix)
    writer.add(keys[:half], texts[:half])
    _child({"url": redis_url, "prefix": prefix, "keys": keys[half:], "texts": texts[half:]})
    found = _child({"url": redis_url, "prefix": prefix, "queries": texts, "exclude": keys, "corpus": corpus})
    memory = TextualIndex()
    memory.add(keys, texts)
    assert _as_tuples(found) == memory.query(texts, exclude=keys)
    # This process holds the shingles of its own half and is given the texts of the other.
    assert writer.query(texts, exclude=keys, corpus_texts=corpus) == memory.query(texts, exclude=keys)
    with pytest.raises(InvalidParameterError, match="already in the index"):
        writer.add([keys[-1]], ["x = 1"])  # added by the other process
    writer.clear()


def test_other_settings_under_the_same_prefix_are_refused(redis_url):
    prefix = f"t-{uuid.uuid4().hex}"
    index = TextualIndex(storage=redis_url, prefix=prefix)
    with pytest.raises(InvalidParameterError, match=f"prefix='{prefix}' on .* holds an index with settings"):
        TextualIndex(threshold=0.5, storage=redis_url, prefix=prefix)
    TextualIndex(storage=redis_url, prefix=prefix)  # the same settings attach
    index.clear()
    TextualIndex(threshold=0.5, storage=redis_url, prefix=prefix).clear()  # once cleared, free again


def test_clear_deletes_the_prefix_and_only_it(redis_url, corpus):
    client = _client(redis_url)
    before = client.dbsize()
    keys, texts = list(corpus)[:40], list(corpus.values())[:40]
    first = TextualIndex(storage=redis_url, prefix="calib")
    second = TextualIndex(storage=redis_url, prefix="calib_other")
    first.add(keys, texts)
    second.add(keys, texts)
    during = client.dbsize()
    first.clear()
    assert before < client.dbsize() < during
    assert second.query(texts[:1], corpus_texts=corpus)[0][0] == (keys[0], 1.0)
    second.clear()
    assert client.dbsize() == before
    assert first.query(texts[:1]) == [[]]


def test_textual_duplicates_over_redis_equal_memory_and_leave_nothing(redis_url, corpus):
    client = _client(redis_url)
    before = client.dbsize()
    keys, texts = list(corpus), list(corpus.values())
    shared = textual_duplicates(keys, texts, keys[:30], texts[:30], storage=redis_url)
    assert shared.equals(textual_duplicates(keys, texts, keys[:30], texts[:30]))
    assert shared.height > 0
    assert client.dbsize() == before


def test_an_unreachable_server_is_reported():
    with pytest.raises(InvalidParameterError, match="Redis does not answer"):
        TextualIndex(storage=f"redis://127.0.0.1:{_free_port()}/0")
