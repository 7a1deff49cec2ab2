"""Hub corpora: resolved from a fake HF cache laid out as huggingface_hub writes it; nothing is downloaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calib._exceptions import InputError, InvalidParameterError
from calib.data.hub import HubCorpus, iter_hub_documents, resolve_files
from calib.data.sources import CorpusSpec

REPO = "org/code-corpus"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hf_cache(tmp_path, monkeypatch) -> Path:
    """A cache holding one snapshot of ``org/code-corpus``, with the Hub switched off."""
    cache = tmp_path / "hf-cache"
    repo = cache / "datasets--org--code-corpus"
    snapshot = repo / "snapshots" / COMMIT
    (snapshot / "python").mkdir(parents=True)
    (snapshot / "python" / "train-0.jsonl").write_text(
        "".join(json.dumps({"content": f"def f{i}():\n    return {i}\n", "path": f"m{i}.py"}) + "\n" for i in range(3))
    )
    (snapshot / "python" / "train-1.jsonl").write_text(json.dumps({"content": "x = 1\n"}) + "\n")
    (snapshot / "README.md").write_text("# card\n")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def test_files_resolve_from_the_cache_offline(hf_cache):
    corpus = HubCorpus(REPO, COMMIT, files=("python/train-0.jsonl",))
    ((name, local),) = resolve_files(corpus)
    assert name == "python/train-0.jsonl"
    assert local == hf_cache / "datasets--org--code-corpus" / "snapshots" / COMMIT / "python" / "train-0.jsonl"
    docs = list(iter_hub_documents(corpus))
    assert [d.source for d in docs] == [f"hf:{REPO}@{COMMIT}/python/train-0.jsonl#row={i}" for i in (1, 2, 3)]
    assert docs[1].text == "def f1():\n    return 1\n" and docs[1].path == "m1.py"


def test_patterns_select_files_of_the_snapshot(hf_cache):
    corpus = HubCorpus(REPO, COMMIT, allow_patterns=("python/*.jsonl",))
    assert [name for name, _ in resolve_files(corpus)] == ["python/train-0.jsonl", "python/train-1.jsonl"]
    docs = list(iter_hub_documents(corpus, CorpusSpec(chunk_rows=2)))
    assert len(docs) == 4 and docs[-1].source == f"hf:{REPO}@{COMMIT}/python/train-1.jsonl#row=1"


def test_missing_file_offline_says_what_and_how_to_fetch(hf_cache):
    corpus = HubCorpus(REPO, COMMIT, files=("python/train-9.jsonl",))
    with pytest.raises(InputError) as info:
        resolve_files(corpus)
    message = str(info.value)
    assert f"hf:{REPO}@{COMMIT}: python/train-9.jsonl is not in the Hugging Face cache ({hf_cache})" in message
    assert "HF_HUB_OFFLINE=1" in message
    assert f"hf download {REPO} python/train-9.jsonl --repo-type dataset --revision {COMMIT}" in message
    assert "huggingface-cli download" in message and "\n" not in message


def test_missing_revision_offline(hf_cache):
    other = "f" * 40
    with pytest.raises(InputError, match=f"hf:{REPO}@{other}: files matching python/\\*.jsonl is not in the"):
        resolve_files(HubCorpus(REPO, other, allow_patterns=("python/*.jsonl",)))


def test_revision_must_be_pinned():
    with pytest.raises(InvalidParameterError, match="revision must be a commit hash"):
        HubCorpus(REPO, "main", files=("a.jsonl",))
    with pytest.raises(InvalidParameterError, match="exactly one of files or allow_patterns"):
        HubCorpus(REPO, COMMIT)
