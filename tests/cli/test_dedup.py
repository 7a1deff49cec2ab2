"""``calib dedup``: near-duplicates of audited functions in a corpus, as users run it.

The corpus holds a function x with a docstring, a reformatted copy (new line breaks and a comment), a
rewrite with every identifier renamed, and an unrelated function; the audited file holds x without
its docstring. Jaccard values are recomputed here from Python sets of the same code-token shingles.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

X = '''def moving_average(values, window):
    result = []
    total = 0.0
    for index, value in enumerate(values):
        total += value
        if index >= window:
            total -= values[index - window]
        if index >= window - 1:
            result.append(total / window)
    return result
'''

CORPUS = {
    "docstring.py": X.replace("):\n", '):\n    """Mean of each window of consecutive values."""\n', 1),
    "reformatted.py": X.replace("    total = 0.0\n", "    total = 0.0  # running sum\n\n").replace(
        "result.append(total / window)", "result.append(\n                total / window\n            )"),
    "renamed.py": X.replace("moving_average", "rolling_mean").replace("values", "xs").replace("window", "w")
    .replace("result", "out").replace("total", "acc").replace("index", "i").replace("value", "x"),
    "unrelated.py": '''def parse_header(line):
    key, _, value = line.partition(":")
    key = key.strip().lower()
    value = value.strip()
    if not key:
        raise ValueError("empty header name")
    return key, value
''',
}


def _shingles(text: str, k: int = 5) -> set[tuple[str, ...]]:
    tokens = re.findall(r"\w+|[^\w\s]", text)
    return {tuple(tokens[i:i + k]) for i in range(len(tokens) - k + 1)}


def _jaccard(a: str, b: str) -> float:
    sa, sb = _shingles(a), _shingles(b)
    return len(sa & sb) / len(sa | sb)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name, text in CORPUS.items():
        (folder / name).write_text(text)
    (tmp_path / "audit.py").write_text(X)
    return tmp_path


def test_textual_duplicates_are_found_with_their_exact_jaccard(calib, corpus):
    out = calib("dedup", corpus / "corpus", "--against", corpus / "audit.py", "--out", corpus / "pairs.parquet",
                "--counts", corpus / "counts.parquet", "--no-semantic", "--json").json()
    assert out["corpus_functions"] == 4 and out["samples"] == 1
    pairs = pl.read_parquet(corpus / "pairs.parquet")
    assert set(pairs["kind"]) == {"textual"}
    expected = {name: _jaccard(X, text) for name, text in CORPUS.items()}
    found = sorted(pairs["similarity"].to_list(), reverse=True)
    want = sorted((j for j in expected.values() if j >= 0.4), reverse=True)
    assert found == pytest.approx(want)  # docstring and reformatted copies; not renamed, not unrelated
    assert expected["renamed.py"] < 0.4 and expected["unrelated.py"] < 0.1 and len(want) == 2
    counts = pl.read_parquet(corpus / "counts.parquet")
    assert counts.rows() == [(pairs["sample_id"][0], 2, 0)]
    assert out["pairs"] == {"textual": 2, "semantic": 0}


def test_semantic_only_duplicates_exclude_the_textual_ones(calib, corpus):
    # all-MiniLM-L6-v2 offline: the renamed rewrite is semantically close, the unrelated function is not
    out = calib("dedup", corpus / "corpus", "--against", corpus / "audit.py", "--out", corpus / "pairs.parquet",
                "--cosine", "0.6", "--json").json()
    pairs = pl.read_parquet(corpus / "pairs.parquet")
    textual = set(pairs.filter(pl.col("kind") == "textual")["corpus_id"])
    semantic = set(pairs.filter(pl.col("kind") == "semantic")["corpus_id"])
    assert len(textual) == 2 and not (textual & semantic)
    assert out["pairs"]["semantic"] == len(semantic) >= 1
    assert pairs.filter(pl.col("kind") == "semantic")["similarity"].min() >= 0.6


def test_a_functions_table_works_as_corpus_and_as_samples(calib, corpus):
    assert calib("extract", corpus / "corpus", "--min-lines", "1", "--out", corpus / "corpus.parquet",
                 "--json").code == 0
    assert calib("extract", corpus / "audit.py", "--min-lines", "1", "--out", corpus / "audit.parquet",
                 "--json").code == 0
    out = calib("dedup", corpus / "corpus.parquet", "--against", corpus / "audit.parquet", "--out",
                corpus / "pairs.parquet", "--no-semantic", "--json").json()
    assert out["corpus_functions"] == 4 and out["pairs"]["textual"] == 2


@pytest.mark.parametrize("args, message", [
    (("nowhere", "--against", "audit.py"), "no such file or directory"),
    (("corpus", "--against", "audit.py", "--redis", "http://x"), "redis://"),
])
def test_bad_input_gives_one_line(calib, corpus, monkeypatch, args, message):
    monkeypatch.chdir(corpus)
    error = calib("dedup", *args, "--out", "p.parquet", "--no-semantic").one_line_error()
    assert message in error
