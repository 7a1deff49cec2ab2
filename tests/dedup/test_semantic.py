"""Semantic near-duplicates (calib/dedup/semantic.py): the searches against a brute-force reference,
exclusions, faiss (exact range search and HNSW), the offline model on a planted corpus, and calib's
embedded server.

The offline model (all-MiniLM-L6-v2) loads once per process (a few seconds); nothing reaches the network.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import warnings

import numpy as np
import polars as pl
import pytest
from scipy.spatial.distance import cdist

from calib._exceptions import InvalidParameterError
from calib.dedup.semantic import (
    PAIRS_SCHEMA,
    Embeddings,
    FaissUnavailable,
    embed_texts,
    semantic_duplicates,
    semantic_pairs,
)
from calib.servers.base import CapabilityError, ServerError


# ------------------------------------------------------------------------------------------------ reference
def clustered(rng: np.random.Generator, n: int, d: int, centers: np.ndarray, noise: float,
              dtype=np.float64) -> np.ndarray:
    """Vectors near random centres (many pairs near any threshold), not normalised."""
    picks = centers[rng.integers(0, len(centers), n)]
    scale = rng.uniform(0.5, 3.0, (n, 1))  # semantic_pairs normalises each row itself
    return ((picks + noise * rng.standard_normal((n, d))) * scale).astype(dtype)


def reference_cosines(q: np.ndarray, c: np.ndarray) -> np.ndarray:
    """All n x m cosines by brute force, with the module's float64 formula (normalise, multiply, sum)."""
    u = np.asarray(q, np.float64) / np.linalg.norm(np.asarray(q, np.float64), axis=1, keepdims=True)
    v = np.asarray(c, np.float64) / np.linalg.norm(np.asarray(c, np.float64), axis=1, keepdims=True)
    return (u[:, None, :] * v[None, :, :]).sum(axis=-1)


def reference_pairs(full: np.ndarray, q_ids, c_ids, threshold, exclude=frozenset(), exclude_self=True) -> list:
    rows = [(i, j, float(min(full[i, j], 1.0))) for i, j in zip(*np.nonzero(full >= threshold))
            if (q_ids[i], c_ids[j]) not in exclude and not (exclude_self and q_ids[i] == c_ids[j])]
    rows.sort(key=lambda r: (r[0], -r[2], r[1]))
    return [(q_ids[i], c_ids[j], cos) for i, j, cos in rows]


def as_rows(frame: pl.DataFrame) -> list:
    assert frame.schema == pl.Schema(PAIRS_SCHEMA)
    return list(frame.iter_rows())


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    d = 24
    centers = rng.standard_normal((6, d))
    q = clustered(rng, 37, d, centers, 0.35, np.float32)
    c = clustered(rng, 53, d, centers, 0.35, np.float64)
    q_ids = [f"q{i}" for i in range(len(q))]
    c_ids = [f"c{i}" for i in range(len(c))]
    full = reference_cosines(q, c)
    # The reference formula agrees with scipy's cosine distance.
    assert np.allclose(full, 1.0 - cdist(q.astype(np.float64), c, "cosine"), atol=1e-12)
    return q, c, q_ids, c_ids, full


# ------------------------------------------------------------------------------------------------ exact search
@pytest.mark.parametrize("block", [1, 4, 16, 53, 4096])
@pytest.mark.parametrize("threshold", [-1.0, 0.5, 0.9, 0.97, 1.0])
def test_exact_search_equals_brute_force(data, block, threshold):
    q, c, q_ids, c_ids, full = data
    got = semantic_pairs(q, c, threshold=threshold, query_ids=q_ids, corpus_ids=c_ids, block=block, index="exact")
    expected = reference_pairs(full, q_ids, c_ids, threshold)
    assert as_rows(got) == expected  # the same pairs, order and float64 cosines, bit for bit
    if threshold == 0.9:
        assert 50 < len(expected) < full.size / 2  # the data put pairs on both sides of the threshold


def test_thresholds_at_exact_boundary_values(data):
    q, c, q_ids, c_ids, full = data
    values = np.sort(full.ravel())
    for value in [values[len(values) // 2], values[int(len(values) * 0.9)], values[-5], values[-1]]:
        value = float(value)
        i, j = (int(x[0]) for x in np.nonzero(full == value))
        for block in (3, 4096):
            at = semantic_pairs(q, c, threshold=value, query_ids=q_ids, corpus_ids=c_ids, block=block, index="exact")
            assert (q_ids[i], c_ids[j], min(value, 1.0)) in as_rows(at)  # >= includes the boundary pair
            assert as_rows(at) == reference_pairs(full, q_ids, c_ids, value)
            above = float(np.nextafter(value, 2.0))
            if above <= 1.0:
                beyond = semantic_pairs(q, c, threshold=above, query_ids=q_ids, corpus_ids=c_ids, block=block)
                assert (q_ids[i], c_ids[j]) not in {r[:2] for r in as_rows(beyond)}
                assert as_rows(beyond) == reference_pairs(full, q_ids, c_ids, above)


def test_listed_pairs_and_self_pairs_are_excluded(data):
    q, c, q_ids, _, _ = data
    # The corpus searched against itself: shared ids, so every vector is its own self pair at cosine 1.
    ids = [f"f{i}" for i in range(len(c))]
    full = reference_cosines(c, c)
    with_self = semantic_pairs(c, c, threshold=0.9, query_ids=ids, corpus_ids=ids, exclude_self=False, block=7)
    assert as_rows(with_self) == reference_pairs(full, ids, ids, 0.9, exclude_self=False)
    assert {(i, i) for i in ids} <= {r[:2] for r in as_rows(with_self)}
    plain = semantic_pairs(c, c, threshold=0.9, query_ids=ids, corpus_ids=ids, block=7)
    assert as_rows(plain) == reference_pairs(full, ids, ids, 0.9)
    assert not [r for r in as_rows(plain) if r[0] == r[1]]

    listed = {r[:2] for r in as_rows(plain)[::3]}  # a third of the pairs are "textual duplicates"
    assert listed
    expected = reference_pairs(full, ids, ids, 0.9, exclude=listed)
    noise = {("f0", "nowhere"), ("nobody", "f1")}  # unknown ids are ignored
    assert as_rows(semantic_pairs(c, c, query_ids=ids, corpus_ids=ids, exclude=listed | noise, block=5)) == expected
    frame = pl.DataFrame(sorted(listed), schema=["query_id", "corpus_id"], orient="row")
    assert as_rows(semantic_pairs(c, c, query_ids=ids, corpus_ids=ids, exclude=frame)) == expected
    # Exclusion is directional: (a, b) leaves (b, a) in.
    a, b = next(p for p in sorted(listed) if (p[1], p[0]) not in listed)
    assert (b, a) in {r[:2] for r in expected}

    # Integer ids are read as their str; ids that differ between the sides are never self pairs.
    numeric = semantic_pairs(q, q, threshold=0.9, query_ids=range(len(q)), corpus_ids=range(len(q)))
    assert as_rows(numeric) == reference_pairs(reference_cosines(q, q), [str(i) for i in range(len(q))],
                                               [str(i) for i in range(len(q))], 0.9)
    distinct = semantic_pairs(q, q, threshold=0.9, query_ids=q_ids, corpus_ids=[f"x{i}" for i in range(len(q))])
    assert len(distinct) == len(numeric) + len(q)


def test_embeddings_empty_sides_and_bad_parameters(data):
    q, c, q_ids, c_ids, full = data
    wrapped = Embeddings(q, "m", [False] * len(q))
    assert as_rows(semantic_pairs(wrapped, c, query_ids=q_ids, corpus_ids=c_ids)) == \
        reference_pairs(full, q_ids, c_ids, 0.9)
    empty = semantic_pairs(np.zeros((0, 0)), c, query_ids=[], corpus_ids=c_ids)
    assert empty.is_empty() and empty.schema == pl.Schema(PAIRS_SCHEMA)
    assert semantic_pairs(q, c[:0], query_ids=q_ids, corpus_ids=[]).is_empty()
    assert semantic_pairs(q, c, threshold=1.0, query_ids=q_ids, corpus_ids=c_ids).is_empty()

    def call(**kw):
        args = {"query_ids": q_ids, "corpus_ids": c_ids, **kw}
        return semantic_pairs(args.pop("qv", q), args.pop("cv", c), **args)

    for kw, message in [({"threshold": 1.5}, "threshold must be a number in"),
                        ({"threshold": float("nan")}, "threshold must be a number in"),
                        ({"block": 0}, "block must be an integer >= 1"),
                        ({"k": 0}, "k must be an integer >= 1"),
                        ({"index": "annoy"}, "index must be one of auto, exact, faiss, hnsw"),
                        ({"cv": c[:, :5]}, "query vectors have 24 dimensions, corpus vectors 5"),
                        ({"cv": c[0]}, "corpus_vectors must be a 2-d numeric array"),
                        ({"corpus_ids": c_ids[:-1]}, "52 corpus_ids for 53 vectors"),
                        ({"query_ids": ["a"] * len(q)}, "query_ids must be unique; 'a' appears more than once"),
                        ({"cv": np.vstack([c[:-1], np.zeros((1, 24))])}, "corpus vector 'c52' is zero"),
                        ({"qv": np.vstack([q[:-1], np.full((1, 24), np.nan)])}, "query vector 'q36' is zero or holds"),
                        ({"exclude": {("q1",)}}, "not a \\(query_id, corpus_id\\) pair"),
                        ({"exclude": pl.DataFrame({"query_id": ["q1"]})}, "exclude lacks column")]:
        with pytest.raises(InvalidParameterError, match=message):
            call(**kw)


# ------------------------------------------------------------------------------------------------ faiss
def test_faiss_range_search_and_hnsw_give_the_exact_pairs(data):
    pytest.importorskip("faiss")
    q, c, q_ids, c_ids, full = data
    for threshold in (0.5, 0.9, float(np.sort(full.ravel())[-20])):
        expected = reference_pairs(full, q_ids, c_ids, threshold)
        for block in (5, 4096):
            flat = semantic_pairs(q, c, threshold=threshold, query_ids=q_ids, corpus_ids=c_ids, block=block,
                                  index="faiss")
            assert as_rows(flat) == expected
            # HNSW with k covering the whole corpus (efSearch >= 2k) finds everything on a set this small.
            hnsw = semantic_pairs(q, c, threshold=threshold, query_ids=q_ids, corpus_ids=c_ids, block=block,
                                  index="hnsw", k=len(c))
            assert as_rows(hnsw) == expected
    # Self-join: the self pair takes one of the k+1 searched slots and is dropped.
    ids = [f"f{i}" for i in range(len(c))]
    selfjoin = semantic_pairs(c, c, threshold=0.5, query_ids=ids, corpus_ids=ids, index="hnsw", k=len(c) - 1)
    assert as_rows(selfjoin) == reference_pairs(reference_cosines(c, c), ids, ids, 0.5)


def test_auto_turns_to_hnsw_above_the_size_and_hnsw_keeps_k_per_query(data):
    pytest.importorskip("faiss")
    q, c, q_ids, c_ids, full = data
    exact = as_rows(semantic_pairs(q, c, threshold=0.5, query_ids=q_ids, corpus_ids=c_ids))
    # Below the size auto is exact; above, it is HNSW, which keeps at most k pairs per query (documented).
    assert as_rows(semantic_pairs(q, c, threshold=0.5, query_ids=q_ids, corpus_ids=c_ids, k=2)) == exact
    approx = as_rows(semantic_pairs(q, c, threshold=0.5, query_ids=q_ids, corpus_ids=c_ids, k=2,
                                    approximate_above=len(c) - 1))
    per_query = {qid: [r for r in exact if r[0] == qid] for qid in q_ids}
    assert max(len(v) for v in per_query.values()) > 2
    assert set(approx) <= set(exact)
    for qid, rows in per_query.items():
        assert [r for r in approx if r[0] == qid] == rows[:2]  # the 2 nearest on a set this small


def test_without_faiss_the_error_names_the_install(data, monkeypatch):
    q, c, q_ids, c_ids, full = data
    monkeypatch.setitem(sys.modules, "faiss", None)  # as if not installed
    for index in ("faiss", "hnsw"):
        with pytest.raises(FaissUnavailable, match="pip install faiss-cpu") as caught:
            semantic_pairs(q, c, query_ids=q_ids, corpus_ids=c_ids, index=index)
        assert isinstance(caught.value, ImportError) and "\n" not in str(caught.value)
    with pytest.warns(RuntimeWarning, match="faiss is not installed; searching exactly"):
        auto = semantic_pairs(q, c, query_ids=q_ids, corpus_ids=c_ids, approximate_above=10)
    assert as_rows(auto) == reference_pairs(full, q_ids, c_ids, 0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        semantic_pairs(q, c, query_ids=q_ids, corpus_ids=c_ids)  # below the size: no faiss needed, no warning


# ------------------------------------------------------------------------------------------------ offline model
# Same behaviour, different code: a loop, a comprehension or generator, a builtin or library call, and
# renamed variables (each group keeps its function's name, as a reimplementation under the same API would).
PLANTED = {
    "even_squares": [
        "def sum_even_squares(numbers):\n    total = 0\n    for n in numbers:\n        if n % 2 == 0:\n"
        "            total += n * n\n    return total\n",
        "def sum_even_squares(numbers):\n    return sum([n * n for n in numbers if n % 2 == 0])\n",
        "def sum_even_squares(values):\n    return sum(v ** 2 for v in values if v % 2 == 0)\n",
    ],
    "reverse_words": [
        "def reverse_words(sentence):\n    words = sentence.split()\n    out = []\n"
        "    for i in range(len(words) - 1, -1, -1):\n        out.append(words[i])\n    return ' '.join(out)\n",
        "def reverse_words(sentence):\n    return ' '.join(reversed(sentence.split()))\n",
        "def reverse_words(text):\n    return ' '.join(text.split()[::-1])\n",
    ],
    "count_vowels": [
        "def count_vowels(text):\n    count = 0\n    for ch in text.lower():\n        if ch in 'aeiou':\n"
        "            count += 1\n    return count\n",
        "def count_vowels(text):\n    return sum(1 for ch in text.lower() if ch in 'aeiou')\n",
        "def count_vowels(s):\n    return len([c for c in s.lower() if c in 'aeiou'])\n",
    ],
    "flatten": [
        "def flatten(nested):\n    result = []\n    for sub in nested:\n        for item in sub:\n"
        "            result.append(item)\n    return result\n",
        "def flatten(nested):\n    return [item for sub in nested for item in sub]\n",
        "def flatten(lists):\n    import itertools\n    return list(itertools.chain.from_iterable(lists))\n",
    ],
    "factorial": [
        "def factorial(n):\n    result = 1\n    for i in range(2, n + 1):\n        result *= i\n    return result\n",
        "def factorial(n):\n    import math\n    return math.prod(range(1, n + 1))\n",
        "def factorial(k):\n    return 1 if k <= 1 else k * factorial(k - 1)\n",
    ],
    "word_counts": [
        "def word_counts(text):\n    counts = {}\n    for word in text.split():\n"
        "        counts[word] = counts.get(word, 0) + 1\n    return counts\n",
        "def word_counts(text):\n    from collections import Counter\n    return dict(Counter(text.split()))\n",
        "def word_counts(doc):\n    counts = {}\n    for w in doc.split():\n        if w in counts:\n"
        "            counts[w] += 1\n        else:\n            counts[w] = 1\n    return counts\n",
    ],
}
UNRELATED = [
    "class Node:\n    def __init__(self, left=None):\n        self.left = left\n        self.seen = {}\n",
    "def read_config(path):\n    with open(path) as fh:\n        return json.load(fh)\n",
    "async def fetch(session, url):\n    async with session.get(url) as resp:\n        resp.raise_for_status()\n"
    "        return await resp.text()\n",
    "def parse_date(value):\n    return datetime.strptime(value, '%Y-%m-%d').date()\n",
    "def connect(host, port):\n    sock = socket.socket()\n    sock.connect((host, port))\n    return sock\n",
    "def is_prime(n):\n    if n < 2:\n        return False\n"
    "    return all(n % d for d in range(2, int(n ** 0.5) + 1))\n",
]
# all-MiniLM-L6-v2 is a general-text model: measured, the planted pairs score 0.70-0.97 and the unrelated
# pairs at most 0.65, so this test uses 0.675 (the paper's 0.9, meant for a code embedding model, would
# keep only about half of the planted pairs with this one).
PLANTED_THRESHOLD = 0.675


def test_planted_rewrites_are_semantic_duplicates_with_the_offline_model():
    ids = [f"{group}/{i}" for group, texts in PLANTED.items() for i in range(len(texts))]
    ids += [f"unrelated/{i}" for i in range(len(UNRELATED))]
    texts = [t for group in PLANTED.values() for t in group] + UNRELATED
    everything = semantic_duplicates(ids, texts, ids, texts, threshold=-1.0)
    group = {i: i.split("/")[0] for i in ids}
    cos = {(a, b): v for a, b, v in everything.iter_rows()}
    same = sorted(v for (a, b), v in cos.items() if group[a] == group[b] and group[a] != "unrelated")
    other = sorted(v for (a, b), v in cos.items() if group[a] != group[b] or group[a] == "unrelated")
    assert len(cos) == len(ids) * (len(ids) - 1)  # every ordered pair but the self pairs
    assert cos[("flatten/0", "flatten/1")] == cos[("flatten/1", "flatten/0")]
    measured = (f"planted pairs: {[round(v, 3) for v in same[::2]]}; unrelated pairs, highest: "
                f"{[round(v, 3) for v in other[::-2][:6]]}")
    assert other[-1] < PLANTED_THRESHOLD - 0.02 < PLANTED_THRESHOLD + 0.02 < same[0], measured

    found = semantic_duplicates(ids, texts, ids, texts, threshold=PLANTED_THRESHOLD)
    expected = {(a, b) for a, b in itertools.permutations(ids, 2) if group[a] == group[b] != "unrelated"}
    assert {r[:2] for r in found.iter_rows()} == expected, measured
    assert found["cosine"].min() >= PLANTED_THRESHOLD
    # The paper's 0.9 with this general-text model keeps only the closest rewrites.
    strict = semantic_duplicates(ids, texts, ids, texts, threshold=0.9)
    assert 0 < len(strict) < len(expected)
    # Listed textual duplicates are left out; a query side against a different corpus side works the same.
    listed = {("flatten/0", "flatten/1"), ("factorial/2", "factorial/0")}
    assert {r[:2] for r in semantic_duplicates(ids, texts, ids, texts, threshold=PLANTED_THRESHOLD,
                                               exclude=listed).iter_rows()} == expected - listed
    queries = ["flatten/2", "count_vowels/0"]
    corpus = [i for i in ids if i not in queries]
    split = semantic_duplicates(queries, [texts[ids.index(i)] for i in queries], corpus,
                                [texts[ids.index(i)] for i in corpus], threshold=PLANTED_THRESHOLD, index="exact")
    assert {r[:2] for r in split.iter_rows()} == {(a, b) for a, b in expected if a in queries}


def test_embed_texts_offline_model():
    from calib.metrics.embedding import fallback_model

    model = fallback_model()
    long = PLANTED["flatten"][0] + "".join(f"x{i} = compute({i}, rate={i * 3})\n" for i in range(200))
    texts = [PLANTED["factorial"][0], "", long, PLANTED["factorial"][0]]
    got = asyncio.run(embed_texts(texts, batch_size=2))
    assert got.model == "sentence-transformers/all-MiniLM-L6-v2"
    assert got.vectors.dtype == np.float32 and got.vectors.shape == (4, 384)
    assert np.allclose(np.linalg.norm(got.vectors.astype(np.float64), axis=1), 1.0, atol=1e-6)
    assert got.truncated == [False, False, True, False]
    direct = model.encode(texts, convert_to_numpy=True)
    direct = direct / np.linalg.norm(direct, axis=1, keepdims=True)
    assert np.allclose(got.vectors, direct, atol=1e-5)  # the empty text is embedded as it is
    # A repeated text is embedded again; padded in another batch it may differ in the last float32 digits.
    assert np.allclose(got.vectors[0], got.vectors[3], atol=1e-5)
    none = asyncio.run(embed_texts([]))
    assert none.vectors.shape == (0, 0) and none.truncated == []
    with pytest.raises(InvalidParameterError, match="batch_size must be an integer >= 1"):
        asyncio.run(embed_texts(["a"], batch_size=0))
    with pytest.raises(InvalidParameterError, match="text #1 is a int"):
        asyncio.run(embed_texts(["a", 3]))
    with pytest.raises(InvalidParameterError, match="cannot embed"):
        asyncio.run(embed_texts(["a"], server=object()))


# ------------------------------------------------------------------------------------------------ a server
class Counting:
    """Delegates to a real server and records what each ``embed`` request carried."""

    def __init__(self, inner, vectors=None):
        self.inner = inner
        self.calls: list[list[str]] = []
        self.vectors = vectors

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def embed(self, texts):
        self.calls.append(list(texts))
        out = await self.inner.embed(texts)
        return out if self.vectors is None else self.vectors(out)


def test_embed_texts_with_calib_embedded_server(tiny_model_dir):
    from calib.servers.embedded.kind import EmbeddedServer

    texts = [f"def f{i}(x):\n    return x * {i}\n" for i in range(7)] + ["def f0(x):\n    return x * 0\n"]

    async def go():
        server = EmbeddedServer("t", tiny_model_dir)
        try:
            one_by_one = np.array([(await server.embed([t]))[0] for t in texts])
            counting = Counting(server)
            got = await embed_texts(texts, server=counting, batch_size=3)
            serial = Counting(server)
            in_order = await embed_texts(texts, server=serial, batch_size=3, concurrency=1)
            scaled = await embed_texts(texts[:2], server=Counting(server, lambda out: [[3 * x for x in v]
                                                                                    for v in out]))
            short = Counting(server, lambda out: out[:-1])
            with pytest.raises(ServerError, match="returned 2 vectors for 3 texts"):
                await embed_texts(texts, server=short, batch_size=3, concurrency=1)
            zero = Counting(server, lambda out: [[0.0] * len(v) for v in out])
            with pytest.raises(ServerError, match="server 't' returned for text #0 a zero or non-finite vector"):
                await embed_texts(texts[:1], server=zero)
            with pytest.raises(InvalidParameterError, match="empty input"):
                await embed_texts(["a", ""], server=server)
            return one_by_one, counting, got, serial, in_order, scaled, short
        finally:
            await server.aclose()

    one_by_one, counting, got, serial, in_order, scaled, short = asyncio.run(go())
    chunks = [texts[0:3], texts[3:6], texts[6:8]]
    assert sorted(counting.calls) == sorted(chunks)  # batched: three requests of at most 3 texts
    assert serial.calls == chunks  # one at a time, in order
    assert short.calls == chunks[:1]  # the first failure stops the rest
    assert got.model == f"embedded:{tiny_model_dir}" and got.truncated == [False] * len(texts)
    expected = one_by_one / np.linalg.norm(one_by_one, axis=1, keepdims=True)
    for result in (got, in_order):
        assert result.vectors.dtype == np.float32 and result.vectors.shape == one_by_one.shape
        assert np.allclose(result.vectors, expected, atol=1e-5)  # the server's own vectors, in text order
        assert np.allclose(np.linalg.norm(result.vectors.astype(np.float64), axis=1), 1.0, atol=1e-6)
    assert np.allclose(scaled.vectors, expected[:2], atol=1e-5)  # unnormalised answers are normalised

    # semantic_duplicates embeds each distinct text once, on the server.
    counting = Counting(EmbeddedServer("t", tiny_model_dir))
    try:
        ids = [f"f{i}" for i in range(len(texts))]
        found = semantic_duplicates(ids, texts, ids, texts, threshold=0.999, server=counting, index="exact")
    finally:
        asyncio.run(counting.inner.aclose())
    assert sorted(t for call in counting.calls for t in call) == sorted(set(texts))
    assert {r[:2] for r in found.iter_rows()} >= {("f0", "f7"), ("f7", "f0")}


def test_a_server_without_embeddings_is_refused():
    from calib.servers.base import Capabilities

    class NoEmbed:
        name = "plain"

        async def capabilities(self):
            return Capabilities(kind="openai", name="plain", model="m", embeddings=False)

        async def embed(self, texts):  # pragma: no cover - never reached
            raise AssertionError

    with pytest.raises(CapabilityError, match="lacks embeddings"):
        asyncio.run(embed_texts(["a"], server=NoEmbed()))


def test_semantic_duplicates_refuses_a_running_loop():
    async def inside():
        semantic_duplicates(["a"], ["x"], ["b"], ["y"])

    with pytest.raises(RuntimeError, match="cannot run inside an event loop"):
        asyncio.run(inside())
