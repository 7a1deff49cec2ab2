"""Textual near-duplicates: shingles, MinHash signatures against datasketch, the LSH index, exact Jaccard.

Every Jaccard value is checked against an independent computation: Python sets of token 5-gram tuples
(``_true_jaccard``), which never see a hash.
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import os
import random
import re
import subprocess
import sys

import datasketch
import numpy as np
import polars as pl
import pytest

from calib._exceptions import InvalidParameterError
from calib.dedup.minhash import (
    TEXTUAL_DUPLICATES_SCHEMA,
    MinHasher,
    TextualIndex,
    code_tokens,
    jaccard,
    lsh_params,
    shingle_hash,
    shingle_hash32,
    shingles,
    textual_duplicates,
)

THRESHOLD = 0.4


def _shingle_set(text: str, size: int = 5) -> set[tuple[str, ...]]:
    tokens = re.findall(r"\w+|[^\w\s]", text)
    if not tokens:
        return set()
    if len(tokens) < size:
        return {tuple(tokens)}
    return {tuple(tokens[i:i + size]) for i in range(len(tokens) - size + 1)}


def _true_jaccard(a: str, b: str) -> float:
    sa, sb = _shingle_set(a), _shingle_set(b)
    union = len(sa | sb)
    return len(sa & sb) / union if union else 0.0


BASE = {
    "moving_average": '''
def moving_average(values, window):
    """Simple moving average of a list of floats."""
    if window <= 0:
        raise ValueError("window must be positive")
    result = []
    total = 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        if i + 1 >= window:
            result.append(total / window)
    return result
''',
    "parse_config": '''
def parse_config(path):
    settings = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if "=" not in line:
                raise SyntaxError(f"{path}:{number}: expected key = value")
            key, _, value = line.partition("=")
            settings[key.strip()] = value.strip()
    return settings
''',
    "binary_search": '''
def binary_search(items, target):
    low, high = 0, len(items) - 1
    while low <= high:
        middle = (low + high) // 2
        if items[middle] == target:
            return middle
        if items[middle] < target:
            low = middle + 1
        else:
            high = middle - 1
    return -1
''',
    "flatten": '''
def flatten(nested, depth=None):
    out = []
    stack = [(iter(nested), 0)]
    while stack:
        iterator, level = stack[-1]
        for item in iterator:
            if isinstance(item, (list, tuple)) and (depth is None or level < depth):
                stack.append((iter(item), level + 1))
                break
            out.append(item)
        else:
            stack.pop()
    return out
''',
    "word_counts": '''
def word_counts(text, stopwords=frozenset()):
    counts = {}
    for raw in text.split():
        word = raw.strip(".,;:!?\\"'()").lower()
        if not word or word in stopwords:
            continue
        counts[word] = counts.get(word, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ranked[:20]
''',
    "retry": '''
def retry(func, attempts=3, delay=0.5, exceptions=(OSError,)):
    import time

    last = None
    for attempt in range(attempts):
        try:
            return func()
        except exceptions as exc:
            last = exc
            time.sleep(delay * (2 ** attempt))
    raise RuntimeError(f"gave up after {attempts} attempts") from last
''',
    "matrix_multiply": '''
def matrix_multiply(a, b):
    rows, inner, cols = len(a), len(b), len(b[0])
    if any(len(row) != inner for row in a):
        raise ValueError("shapes do not match")
    product = [[0] * cols for _ in range(rows)]
    for i in range(rows):
        for k in range(inner):
            aik = a[i][k]
            for j in range(cols):
                product[i][j] += aik * b[k][j]
    return product
''',
    "slugify": '''
def slugify(title, max_length=50):
    import re
    import unicodedata

    normalized = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", normalized).strip("-").lower()
    if len(slug) > max_length:
        slug = slug[:max_length].rsplit("-", 1)[0]
    return slug or "untitled"
''',
}

# One identifier renamed consistently (a local variable or parameter): a light Type-II clone.
RENAMES = {"moving_average": ("total", "running"), "parse_config": ("settings", "options"),
           "binary_search": ("target", "wanted"), "flatten": ("out", "flat"), "word_counts": ("counts", "tally"),
           "retry": ("last", "error"), "matrix_multiply": ("product", "result"), "slugify": ("slug", "name")}

UNRELATED = {
    "unrelated_fib": "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
    "unrelated_class": ("class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n"
                        "    def norm(self):\n        return (self.x ** 2 + self.y ** 2) ** 0.5\n"),
    "unrelated_io": ("def copy_file(src, dst, chunk=65536):\n"
                     "    with open(src, 'rb') as fin, open(dst, 'wb') as fout:\n"
                     "        while True:\n            block = fin.read(chunk)\n            if not block:\n"
                     "                break\n            fout.write(block)\n"),
}


def _renamed(text: str, old: str, new: str) -> str:
    return re.sub(rf"\b{old}\b", new, text)


def _reformatted(text: str) -> str:
    """Same tokens, other layout: comments added, blank lines removed, indentation widened, spaces moved."""
    lines = [line for line in text.strip("\n").splitlines() if line.strip()]
    out = ["# reformatted copy"]
    for number, line in enumerate(lines):
        stripped = line.lstrip(" ")
        indent = (len(line) - len(stripped)) * 2
        if number % 6 == 5:
            out.append(" " * indent + "# step")
        out.append(" " * indent + stripped.replace(", ", " ,  ").replace(" = ", "="))
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def planted() -> dict[str, str]:
    corpus = {}
    for name, text in BASE.items():
        corpus[name] = text
        corpus[f"{name}~renamed"] = _renamed(text, *RENAMES[name])
        corpus[f"{name}~reformatted"] = _reformatted(text)
    corpus.update(UNRELATED)
    return corpus


def test_planted_copies_are_found_with_their_partner_and_nothing_else(planted):
    index = TextualIndex(threshold=THRESHOLD)
    index.add(list(planted), list(planted.values()))
    found = index.query(list(planted.values()), exclude=list(planted))
    for (key, text), matches in zip(planted.items(), found):
        family = key.split("~")[0]
        expected = {other: _true_jaccard(text, other_text) for other, other_text in planted.items()
                    if other != key and _true_jaccard(text, other_text) >= THRESHOLD}
        assert dict(matches) == expected, key  # the same pairs and the exact same Jaccard values
        assert [m[1] for m in matches] == sorted((m[1] for m in matches), reverse=True)
        if key in UNRELATED:
            assert matches == []
            continue
        # The planting works: a copy is found with its original, the original with both copies, and no
        # function with another family's.
        assert {k.split("~")[0] for k in expected} == {family}, key
        partners = {family} if key != family else {f"{family}~renamed", f"{family}~reformatted"}
        assert partners <= set(expected), key


def test_reformatting_keeps_the_shingles_and_renaming_one_name_costs_some():
    for name, text in BASE.items():
        assert _true_jaccard(text, _reformatted(text)) > 0.7
        assert THRESHOLD <= _true_jaccard(text, _renamed(text, *RENAMES[name])) < 1.0


def test_exact_jaccard_equals_the_set_computation(planted):
    texts = list(planted.values())
    for a in texts:
        for b in texts:
            assert jaccard(shingles(a), shingles(b)) == _true_jaccard(a, b)


def test_shingles_are_the_hashed_token_ngrams():
    text = BASE["binary_search"]
    expected = np.array(sorted({shingle_hash(s) for s in _shingle_set(text)}), dtype=np.uint64)
    assert np.array_equal(shingles(text), expected)
    assert shingles(text).dtype == np.uint64
    assert np.array_equal(shingles(text, size=3), np.unique([shingle_hash(s) for s in _shingle_set(text, 3)]))
    assert code_tokens("x+=1") == ["x", "+", "=", "1"]


def test_shingle_hash_is_pinned():
    # A stored Redis index is only valid while these stay the same. Reference values from
    # python -c "from calib.dedup.minhash import shingle_hash; print(shingle_hash(('def','f','(',')',':')))"
    # at the commit that introduced calib.dedup.minhash.
    assert shingle_hash(("def", "f", "(", ")", ":")) == PINNED_DEF_F
    assert shingle_hash32(("def", "f", "(", ")", ":")) == (PINNED_DEF_F ^ (PINNED_DEF_F >> 32)) & 0xFFFFFFFF
    assert shingle_hash(("x",)) == PINNED_X


PINNED_DEF_F = 6276088905914568392
PINNED_X = 4238986185481651787


def test_short_functions_get_one_shingle_of_all_their_tokens():
    short = ["def f(): pass", "def g(): pass", "x = 1", "y = 2", "return a", "pass", "x = 1 ;"]
    for text in short:
        tokens = code_tokens(text)
        expected = [shingle_hash(tokens)] if len(tokens) < 5 else sorted({shingle_hash(s) for s in _shingle_set(text)})
        assert shingles(text).tolist() == sorted(expected)
    index = TextualIndex()
    index.add([f"s{i}" for i in range(len(short))], short)
    found = index.query(short, exclude=[f"s{i}" for i in range(len(short))])
    assert found == [[] for _ in short]  # different short functions do not collide
    assert index.query(["x = 1"]) == [[("s2", 1.0)]]
    assert _true_jaccard("def f(): pass", "def g(): pass") == 0.0


def test_an_empty_text_is_the_duplicate_of_nothing():
    assert shingles("").size == 0 and shingles("   \n\t").size == 0
    assert jaccard(shingles(""), shingles("")) == 0.0
    index = TextualIndex()
    index.add(["empty", "blank", "code"], ["", "  \n", BASE["retry"]])
    assert index.query(["", "\n", BASE["retry"]]) == [[], [], [("code", 1.0)]]
    assert index.candidates([""]) == [[]]
    signature = MinHasher().signatures([""])[0]
    assert np.array_equal(signature.hashvalues, datasketch.MinHash(128, 1).hashvalues)  # all 2^32 - 1


@pytest.mark.parametrize(("num_perm", "seed"), [(128, 1), (64, 7), (256, 123456)])
def test_signatures_equal_datasketch_minhash(planted, num_perm, seed):
    texts = [*planted.values(), "", "x = 1", "def f(): pass"]
    signatures = MinHasher(num_perm=num_perm, seed=seed).signatures(texts)
    for text, signature in zip(texts, signatures):
        reference = datasketch.MinHash(num_perm=num_perm, seed=seed, hashfunc=shingle_hash32)
        for shingle in sorted(_shingle_set(text)):
            reference.update(shingle)
        assert isinstance(signature, datasketch.LeanMinHash)
        assert signature.hashvalues.dtype == reference.hashvalues.dtype
        assert np.array_equal(signature.hashvalues, reference.hashvalues)
        assert signature.seed == seed and signature.scheme == reference.scheme
    assert signatures[0].jaccard(signatures[0]) == 1.0


def test_signatures_do_not_depend_on_the_batch(planted):
    texts = list(planted.values())
    hasher = MinHasher()
    together = hasher.hashvalues(texts)
    alone = np.vstack([hasher.hashvalues([t]) for t in texts])
    assert np.array_equal(together, alone)
    assert together.shape == (len(texts), 128) and together.dtype == np.uint32


def test_signatures_are_the_same_in_another_process():
    text = BASE["flatten"]
    script = ("import json, sys; from calib.dedup.minhash import MinHasher, shingles; t = sys.stdin.read(); "
              "print(json.dumps([MinHasher().hashvalues([t])[0].tolist(), shingles(t).tolist()]))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", script], input=text, capture_output=True, text=True, env=env,
                         check=True).stdout
    values, remote_shingles = json.loads(out)
    assert values == MinHasher().hashvalues([text])[0].tolist()
    assert remote_shingles == shingles(text).tolist()


@functools.cache
def _stdlib_functions() -> tuple[str, ...]:
    """Functions of 5+ lines from a fixed set of standard-library modules, in source order."""
    texts = []
    for name in ("textwrap", "json.decoder", "difflib", "argparse", "shlex", "fractions", "statistics", "heapq",
                 "calendar", "configparser", "gettext", "ipaddress", "pprint", "string", "tempfile",
                 "urllib.parse", "csv", "glob", "fnmatch", "base64", "dataclasses", "inspect"):
        source = open(importlib.import_module(name).__file__, encoding="utf-8").read()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno >= 4:
                texts.append(ast.get_source_segment(source, node))
    return tuple(dict.fromkeys(texts))


def test_lsh_candidates_hold_every_pair_above_0_6():
    rng = random.Random(0)
    bases = rng.sample(list(_stdlib_functions()), 400)
    variants = []
    for text in bases:
        rate = rng.uniform(0.0, 0.1)
        tokens = [f"z{rng.randrange(10**6)}" if rng.random() < rate else t for t in code_tokens(text)]
        variants.append(" ".join(tokens))
    keys = [f"b{i}" for i in range(len(bases))] + [f"v{i}" for i in range(len(variants))]
    index = TextualIndex(threshold=THRESHOLD)
    index.add(keys, bases + variants)
    candidates = index.candidates(variants, exclude=[f"v{i}" for i in range(len(variants))])
    truth = [_true_jaccard(b, v) for b, v in zip(bases, variants)]
    high = [i for i, j in enumerate(truth) if j >= 0.6]
    assert len(high) >= 200
    assert all(f"b{i}" in candidates[i] for i in high)
    # Between the threshold and 0.6 too: the bands are chosen for recall at the threshold.
    middle = [i for i, j in enumerate(truth) if THRESHOLD <= j < 0.6]
    assert len(middle) >= 50 and all(f"b{i}" in candidates[i] for i in middle)
    # Every verified answer is right, with the exact value.
    everything = dict(zip(keys, bases + variants))
    found = index.query(variants, exclude=[f"v{i}" for i in range(len(variants))])
    for i, matches in enumerate(found):
        for key, value in matches:
            assert value == _true_jaccard(variants[i], everything[key]) >= THRESHOLD
        assert (f"b{i}" in dict(matches)) == (truth[i] >= THRESHOLD)


def test_batched_candidates_equal_datasketch_query(planted):
    index = TextualIndex(threshold=THRESHOLD)
    index.add(list(planted), list(planted.values()))
    signatures = MinHasher().signatures(list(planted.values()))
    candidates = index.candidates(list(planted.values()))
    for signature, mine in zip(signatures, candidates):
        assert mine == sorted(index._lsh.query(signature))


def test_lsh_params_reach_the_recall_at_the_threshold():
    assert lsh_params(0.4, 128) == (64, 2)
    assert lsh_params(0.5, 128) == (42, 3)
    for threshold in (0.2, 0.3, 0.4, 0.5, 0.7, 0.9):
        bands, rows = lsh_params(threshold, 128)
        assert bands * rows <= 128
        assert 1 - (1 - threshold ** rows) ** bands >= 0.99
        bigger = 128 // (rows + 1)
        assert 1 - (1 - threshold ** (rows + 1)) ** bigger < 0.99  # the fewest candidates that reach it
    assert TextualIndex(0.4).bands == (64, 2)


def test_textual_duplicates_table(planted):
    keys, texts = list(planted), list(planted.values())
    table = textual_duplicates(keys, texts, keys[:6], texts[:6])
    assert table.schema == pl.Schema(TEXTUAL_DUPLICATES_SCHEMA)
    assert (table["query_id"] != table["corpus_id"]).all()
    expected = sorted(((q, c, _true_jaccard(planted[q], planted[c])) for q in keys[:6] for c in keys
                       if c != q and _true_jaccard(planted[q], planted[c]) >= THRESHOLD),
                      key=lambda r: (keys.index(r[0]), -r[2], r[1]))
    assert table.rows() == expected
    with_self = textual_duplicates(keys, texts, keys[:6], texts[:6], exclude_self=False)
    assert with_self.height == table.height + 6
    assert with_self.filter(pl.col("query_id") == pl.col("corpus_id"))["jaccard"].to_list() == [1.0] * 6
    empty = textual_duplicates(keys, texts, ["q"], [""])
    assert empty.height == 0 and empty.schema == pl.Schema(TEXTUAL_DUPLICATES_SCHEMA)


def test_search_reports_nothing_unverified_in_memory(planted):
    index = TextualIndex()
    index.add(list(planted), list(planted.values()))
    result = index.search([BASE["slugify"]])[0]
    assert result.unverified == ()
    assert [k for k, _ in result.matches] == ["slugify", "slugify~reformatted", "slugify~renamed"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"threshold": 0.0}, "threshold must be a number in (0, 1]"),
    ({"threshold": 1.5}, "threshold must be a number in (0, 1]"),
    ({"num_perm": 1}, "num_perm must be an integer >= 2"),
    ({"shingle_size": 0}, "shingle_size must be an integer >= 1"),
    ({"seed": -1}, "seed must be an integer in [0, 2^32)"),
    ({"storage": "mysql://x"}, "expected None (in memory) or 'redis://host:port/db'"),
    ({"prefix": ""}, "prefix must be a non-empty string"),
])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(InvalidParameterError, match=re.escape(message)):
        TextualIndex(**kwargs)


def test_bad_inputs_are_refused():
    index = TextualIndex()
    with pytest.raises(InvalidParameterError, match="same length"):
        index.add(["a", "b"], ["x"])
    with pytest.raises(InvalidParameterError, match=r"repeat within the batch: \['a'\]"):
        index.add(["a", "a"], ["x", "y"])
    index.add(["a"], ["x = 1"])
    with pytest.raises(InvalidParameterError, match=r"already in the index: \['a'\]"):
        index.add(["a"], ["y = 2"])
    with pytest.raises(InvalidParameterError, match="one entry per text"):
        index.query(["x"], exclude=["a", "b"])
    with pytest.raises(InvalidParameterError, match="size must be an integer >= 1"):
        shingles("x", size=0)


def test_public_names_are_sorted_and_importable():
    from calib.dedup import minhash

    assert minhash.__all__ == sorted(minhash.__all__)
    assert all(hasattr(minhash, name) for name in minhash.__all__)
