"""Band-table shards on the Hugging Face Hub (calib.dedup.hub_shards), read from a fake HF cache; nothing downloaded.

The cache is laid out as huggingface_hub writes it (``datasets--org--corpus/blobs/SHA256`` and the snapshot's
files linking to them, ``refs/main``), with ``HF_HUB_OFFLINE=1``. The corpus: standard-library functions, a
token-perturbed copy of some, the planted families of test_minhash (renamed and reformatted copies) and a blank
text, shuffled into two Parquet shards. Every result is compared with the same files given as local paths and
with the independent in-memory reference, ``textual_duplicates``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from calib._exceptions import InputError
from calib.dedup.bands import BandTable, build_band_table
from calib.dedup.minhash import code_tokens, textual_duplicates
from calib.dedup.shards import read_slice, slices
from tests.dedup.test_minhash import BASE, RENAMES, _reformatted, _renamed, _stdlib_functions

REPO = "org/corpus"
COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
ROOT = f"hf://datasets/{REPO}@{COMMIT}"
GLOB = f"{ROOT}/python/*.parquet"
FILES = ("python/train-0.parquet", "python/train-1.parquet")
BATCH = 16  # rows per slice: several slices per shard


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[str]]:
    rng = random.Random(3)
    texts = []
    for text in rng.sample(list(_stdlib_functions()), 24):
        texts.append(text)
        if rng.random() < 0.5:
            tokens = code_tokens(text)
            texts.append(" ".join(f"z{rng.randrange(10**6)}" if rng.random() < 0.1 else t for t in tokens))
    for name, text in BASE.items():
        texts += [text, _renamed(text, *RENAMES[name]), _reformatted(text)]
    texts += ["x = 1", "x = 1", ""]
    rng.shuffle(texts)
    return {"ids": [f"fn/{i:03d}" for i in range(len(texts))], "texts": texts}


@pytest.fixture(scope="module")
def reference(corpus) -> pl.DataFrame:
    table = textual_duplicates(corpus["ids"], corpus["texts"], corpus["ids"], corpus["texts"])
    assert 40 <= len(corpus["ids"]) <= 80 and table.height > 30 and table["jaccard"].min() < 0.8
    return table


def _snapshot(cache: Path) -> Path:
    return cache / "datasets--org--corpus" / "snapshots" / COMMIT


def _put(repo: Path, name: str, data: bytes) -> None:
    """A file of the snapshot as huggingface_hub stores it: the bytes in ``blobs/``, the snapshot's path a link."""
    blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    link = repo / "snapshots" / COMMIT / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(blob, link.parent))


@pytest.fixture
def hf_cache(corpus, tmp_path, monkeypatch) -> Path:
    """A cache holding one snapshot of ``org/corpus`` (two Parquet shards and a card), with the Hub switched off."""
    cache = tmp_path / "hf-cache"
    repo = cache / "datasets--org--corpus"
    half = len(corpus["ids"]) // 2
    for n, name in enumerate(FILES):
        part = slice(n * half, None if n else half)
        frame = pl.DataFrame({"id": corpus["ids"][part], "text": corpus["texts"][part]})
        frame.write_parquet(tmp_path / "frame.parquet")
        _put(repo, name, (tmp_path / "frame.parquet").read_bytes())
    _put(repo, "README.md", b"# corpus\n")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def _local_copies(cache: Path, folder: Path) -> list[Path]:
    folder.mkdir()
    paths = [folder / Path(name).name for name in FILES]
    for name, path in zip(FILES, paths, strict=True):
        shutil.copyfile(_snapshot(cache) / name, path)
    return paths


def _band_rows(table: BandTable) -> pl.DataFrame:
    return pl.read_parquet(table.path / "bands" / "*.parquet").sort("band", "key", "row")


def _ids(table: BandTable) -> pl.DataFrame:
    return pl.read_parquet(table.path / "ids" / "*.parquet").sort("row")


def test_hub_shards_give_the_table_and_pairs_of_the_same_files_given_locally(hf_cache, corpus, reference, tmp_path):
    hub = build_band_table([GLOB], tmp_path / "hub", batch_rows=BATCH)
    local = build_band_table(_local_copies(hf_cache, tmp_path / "local"), tmp_path / "loc", batch_rows=BATCH)
    assert _band_rows(hub).equals(_band_rows(local)) and _band_rows(hub).height > 64 * 40
    assert _ids(hub).equals(_ids(local)) and _ids(hub)["id"].to_list() == corpus["ids"]
    found = hub.search(corpus["ids"], corpus["texts"])
    assert found.rows() == local.search(corpus["ids"], corpus["texts"]).rows() == reference.rows()
    manifest = json.loads((hub.path / "manifest.json").read_text())
    assert [s["hub"] for s in manifest["shards"]] == [f"{ROOT}/{name}" for name in FILES]
    assert [s["path"] for s in manifest["shards"]] == [str(_snapshot(hf_cache) / name) for name in FILES]
    assert [s["bytes"] for s in manifest["shards"]] == [(_snapshot(hf_cache) / n).stat().st_size for n in FILES]
    assert [s.hub for s in local.shards] == [None, None]
    # the same shards named file by file, or as the repository's folder
    for name, args in (("files", [f"{ROOT}/{name}" for name in FILES]), ("folder", [f"{ROOT}/python"])):
        other = build_band_table(args, tmp_path / name, batch_rows=BATCH)
        assert _band_rows(other).equals(_band_rows(hub)) and other.shards == hub.shards


def test_a_manifest_without_hub_origins_still_loads(hf_cache, corpus, reference, tmp_path):
    built = build_band_table(_local_copies(hf_cache, tmp_path / "local"), tmp_path / "t", batch_rows=BATCH)
    manifest = json.loads((built.path / "manifest.json").read_text())
    for shard in manifest["shards"]:
        del shard["hub"]  # as a table written before Hub shards
    (built.path / "manifest.json").write_text(json.dumps(manifest))
    old = BandTable(built.path)
    assert old.shards == built.shards and old.search(corpus["ids"], corpus["texts"]).rows() == reference.rows()


@pytest.mark.parametrize("arg, message", [
    (f"hf://datasets/{REPO}/python/*.parquet",
     "no revision: pin the commit (40 hex digits) as hf://datasets/org/corpus@COMMIT/...; find it on the "
     "repository's History page"),
    (f"hf://datasets/{REPO}@main/python/*.parquet", "revision 'main': pin the commit (40 hex digits)"),
    (f"hf://datasets/{REPO}@{COMMIT[:12]}/python/*.parquet", f"revision '{COMMIT[:12]}': pin the commit"),
    (f"hf://models/{REPO}@{COMMIT}/python/*.parquet",
     "only dataset repositories are read: give hf://datasets/OWNER/NAME@COMMIT/PATTERN"),
    (f"{ROOT}/", "no file: name a file, glob or folder of the repository after the commit"),
])
def test_an_unpinned_or_malformed_hub_path_is_a_one_line_error(hf_cache, tmp_path, arg, message):
    with pytest.raises(InputError) as raised:
        build_band_table([arg], tmp_path / "t")
    text = str(raised.value)
    assert text.startswith(f"{arg}: {message}") and "\n" not in text
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("pattern, message", [
    ("rust/*.parquet", "hf:org/corpus@{commit}: no files matching rust/*.parquet in the cached snapshot {snapshot}; "
                       "run once online (unset HF_HUB_OFFLINE) or fetch it with `hf download org/corpus --include "
                       "'rust/*.parquet' --repo-type dataset --revision {commit}`"),
    ("python/train-9.parquet", "hf:org/corpus@{commit}: python/train-9.parquet is not in the Hugging Face cache "
                               "({cache}) and HF_HUB_OFFLINE=1; run once online (unset HF_HUB_OFFLINE) or fetch it "
                               "with `hf download org/corpus python/train-9.parquet --repo-type dataset --revision "
                               "{commit}`"),
    ("docs", "hf:org/corpus@{commit}: no files matching docs docs/* in the cached snapshot"),
    ("README.md", "{root}/README.md: no .parquet or .jsonl file at this commit (only README.md); name a shard, a "
                  "glob or a folder of shards of the repository"),
])
def test_hub_files_that_match_nothing_or_are_not_cached_are_one_line_errors(hf_cache, tmp_path, pattern, message):
    with pytest.raises(InputError) as raised:
        build_band_table([f"{ROOT}/{pattern}"], tmp_path / "t")
    text = str(raised.value)
    expected = message.format(commit=COMMIT, snapshot=_snapshot(hf_cache), cache=hf_cache, root=ROOT)
    assert text.startswith(expected) and "\n" not in text
    assert not (tmp_path / "t").exists()


def test_a_node_without_the_cached_file_reads_it_from_its_own_hf_cache(hf_cache, corpus, reference, tmp_path,
                                                                       monkeypatch):
    table = build_band_table([GLOB], tmp_path / "t", batch_rows=BATCH)
    theirs = tmp_path / "node-cache"
    shutil.copytree(hf_cache, theirs, symlinks=True)
    shutil.rmtree(hf_cache)  # the path the table names is not on this "node"; its own cache holds the snapshot
    monkeypatch.setenv("HF_HUB_CACHE", str(theirs))
    second = table.shards[1]
    task = next(t for t in slices(table.shards, BATCH) if t["path"] == second.path and t["offset"] == BATCH)
    assert not Path(task["path"]).exists() and task["hub"] == f"{ROOT}/{FILES[1]}"
    ids, texts = read_slice(task)
    at = second.first_row + BATCH
    assert (ids, texts) == (corpus["ids"][at:at + task["length"]], corpus["texts"][at:at + task["length"]])
    # pinned by its commit, a Hub shard gone from the cache has not changed; a local file gone has
    assert [s.changed() for s in table.shards] == [None, None]
    assert dataclasses.replace(second, hub=None).changed() == "it is gone"
    assert table.search(corpus["ids"], corpus["texts"]).rows() == reference.rows()
    # a cached copy of another size is refused, by the search and by a worker
    cached = _snapshot(theirs) / FILES[1]
    cached.resolve().write_bytes(cached.read_bytes() + b"\0")
    assert dataclasses.replace(second, path=str(cached)).changed() == \
        f"the cached copy of {task['hub']} has {second.bytes + 1} bytes, not {second.bytes}; remove it from the HF " \
        "cache to fetch it again"
    with pytest.raises(InputError, match=re.escape(f"{task['hub']}: {second.bytes + 1} bytes in the HF cache, "
                                                   f"{second.bytes} when the band table was built; remove the file")):
        read_slice(task)
    # not in this node's cache either, and offline: what is missing and how to fetch it
    shutil.rmtree(theirs)
    with pytest.raises(InputError) as raised:
        table.search(corpus["ids"], corpus["texts"])
    text = str(raised.value)
    assert text.startswith(f"hf:{REPO}@{COMMIT}: python/train-") and "is not in the Hugging Face cache" in text
    assert f"--repo-type dataset --revision {COMMIT}`" in text and "\n" not in text


def test_ray_workers_read_hub_shards_from_their_own_hf_cache(hf_cache, corpus, reference, tmp_path):
    from tests._ray import start_cluster

    theirs = tmp_path / "node-cache"
    shutil.copytree(hf_cache, theirs, symlinks=True)
    cluster = start_cluster(cpus=2, env={"HF_HUB_CACHE": str(theirs), "HF_HUB_OFFLINE": "1"})
    try:
        built = build_band_table([GLOB], tmp_path / "ray", batch_rows=BATCH, ray_address=cluster.address)
        here = build_band_table([GLOB], tmp_path / "polars", batch_rows=BATCH)
        assert built.manifest["engine"] == "ray" and _band_rows(built).equals(_band_rows(here))
        assert [s.hub for s in built.shards] == [f"{ROOT}/{name}" for name in FILES]
        shutil.rmtree(hf_cache)  # the driver's cache is gone: the workers read the files from theirs
        found = built.search(corpus["ids"], corpus["texts"], ray_address=cluster.address)
        assert found.rows() == reference.rows()
        with pytest.raises(InputError, match="is not in the Hugging Face cache .* and HF_HUB_OFFLINE=1"):
            built.search(corpus["ids"], corpus["texts"])  # in this process, offline, without the files
    finally:
        cluster.stop()


def test_calib_dedup_bands_reads_hub_shards(hf_cache, tmp_path, capsys):
    from tests.cli._helpers import run_calib

    built = run_calib(capsys, "dedup", "bands", GLOB, "--out", tmp_path / "hub", "--batch-rows", BATCH,
                      "--json").json()
    local = build_band_table(_local_copies(hf_cache, tmp_path / "local"), tmp_path / "loc", batch_rows=BATCH)
    assert built["shards"] == 2 and built["functions"] == local.functions
    assert _band_rows(BandTable(tmp_path / "hub")).equals(_band_rows(local))
    unpinned = f"hf://datasets/{REPO}@main/python/*.parquet"
    error = run_calib(capsys, "dedup", "bands", unpinned, "--out", tmp_path / "u").one_line_error()
    assert error.startswith(f"calib: error: {unpinned}: revision 'main': pin the commit (40 hex digits)")
    assert "hf://datasets/OWNER/NAME@COMMIT/PATTERN" in run_calib(capsys, "dedup", "bands", "--help").out
