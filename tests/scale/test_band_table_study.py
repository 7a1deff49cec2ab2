"""``[dedup] source = "bands"``: a functional study's dedup stage searching a band table (``calib dedup bands``).

The tiny organism's training corpus is written as two JSONL shards and turned into a band table with the CLI; the
study's dedup stage then searches it with Polars on the driver (local runner) and with Ray Data on the session's
Ray head (``[runner] kind = "ray"``). A user checks that both give the pairs the in-memory index gives on the same
corpus (``[dedup] source = "organism"``, textual pairs only), row for row, with each duplicate's text read back
from its shard, and that a table built with other settings than the spec's is refused in one line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from calib.study.tables import DUPLICATES_TABLE_SCHEMA

pytest.importorskip("ray")


def _spec(cache_dir: Path, dedup: str, runner: str = "") -> str:
    return f"""[study]
name = "bands"

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.target]
kind = "embedded"
model_dir = "organism:target"

[servers.reference]
kind = "embedded"
model_dir = "organism:reference"

[models]
target = "target"
reference = "reference"

[data]
source = "organism"

[dedup]
{dedup}
{runner}"""


def _calib(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "calib", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=900, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})


def _events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def workspace(organism_tiny, ray_cluster, tmp_path_factory) -> Path:
    from calib.organism.build import training_corpus

    root = tmp_path_factory.mktemp("band-study")
    corpus = training_corpus(organism_tiny)
    (root / "corpus").mkdir()
    half = len(corpus) // 2
    for k, part in enumerate((corpus[:half], corpus[half:])):
        (root / "corpus" / f"part-{k}.jsonl").write_text(
            "".join(json.dumps({"id": doc_id, "text": text}) + "\n" for doc_id, text, _ in part))
    # the CLI's defaults are [dedup]'s (Jaccard 0.4, 128 permutations, 5-token shingles) and its seed 1 is the
    # study's index seed (study.seed + 1), so the table answers as the stage's in-memory index would
    built = _calib("dedup", "bands", "corpus", "--out", "table", "--batch-rows", "500", "--json", cwd=root)
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["functions"] == len(corpus)
    cache = organism_tiny.root.parent.parent
    (root / "index.toml").write_text(_spec(cache, 'source = "organism"\nsemantic = false'))
    (root / "bands.toml").write_text(_spec(cache, 'source = "bands"\npaths = ["table"]'))
    (root / "bands-ray.toml").write_text(_spec(cache, 'source = "bands"\npaths = ["table"]',
                                               f'[runner]\nkind = "ray"\naddress = "{ray_cluster.address}"\n'))
    (root / "other.toml").write_text(_spec(cache, 'source = "bands"\npaths = ["table"]\njaccard = 0.5'))
    return root


def _run(workspace: Path, spec: str) -> Path:
    proc = _calib("study", spec, "--run-dir", spec.removesuffix(".toml"), "--stage", "dedup", "--quiet",
                  cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    return workspace / spec.removesuffix(".toml")


def test_the_band_table_gives_the_in_memory_indexs_pairs_on_either_runner(workspace):
    index, local, remote = (_run(workspace, s) for s in ("index.toml", "bands.toml", "bands-ray.toml"))
    tables = {run.name: pl.read_parquet(run / "tables" / "duplicates.parquet") for run in (index, local, remote)}
    bands = tables["bands"]
    assert bands.schema == pl.Schema(DUPLICATES_TABLE_SCHEMA)
    assert bands.height >= 10 and (bands["kind"] == "textual").all()  # the organism's planted families
    assert tables["bands-ray"].equals(bands)  # Ray Data on the cluster: the same table, row for row
    # the same pairs, Jaccard values and texts as the organism's in-memory index (its copies counts aside: the
    # shards hold each distinct document once)
    same = ["sample_id", "corpus_id", "kind", "similarity", "corpus_text"]
    assert bands.select(same).equals(tables["index"].select(same))
    assert (bands["copies"] == 1).all()
    # each duplicate's source is its shard and row there, holding that text
    shards = {p.resolve(): p.read_text().splitlines() for p in (workspace / "corpus").glob("*.jsonl")}
    for source, corpus_id, text in bands.select("corpus_source", "corpus_id", "corpus_text").iter_rows():
        path, _, row = source.rpartition("#row=")
        line = json.loads(shards[Path(path)][int(row)])
        assert line["id"] == corpus_id and line["text"][:2000] == text
    engines = {run.name: [e for e in _events(run) if e["event"] == "dedup_corpus"] for run in (local, remote)}
    assert [e["engine"] for e in engines["bands"]] == ["polars"]
    assert [e["engine"] for e in engines["bands-ray"]] == ["ray"]
    assert engines["bands"][0]["documents"] == sum(len(v) for v in shards.values())


def test_a_rerun_skips_the_stage_and_a_rebuilt_table_runs_it_again(workspace):
    run = _run(workspace, "bands.toml")
    before = len(_events(run))
    again = _run(workspace, "bands.toml")
    assert [e["stage"] for e in _events(again)[before:] if e["event"] == "stage_skip"] == ["extract", "prompt",
                                                                                           "dedup"]
    # the same folder built again (other slices): the manifest is part of the stage's fingerprint
    shutil.rmtree(workspace / "table")
    built = _calib("dedup", "bands", "corpus", "--out", "table", "--batch-rows", "300", cwd=workspace)
    assert built.returncode == 0, built.stderr
    before = len(_events(run))
    pairs = pl.read_parquet(run / "tables" / "duplicates.parquet")
    again = _run(workspace, "bands.toml")
    new = _events(again)[before:]
    assert [e["stage"] for e in new if e["event"] == "stage_skip"] == ["extract", "prompt"]
    assert any(e["event"] == "stage_start" and e["stage"] == "dedup" for e in new)
    assert pl.read_parquet(run / "tables" / "duplicates.parquet").equals(pairs)


def test_a_table_built_with_other_settings_than_the_spec_is_refused_in_one_line(workspace):
    proc = _calib("study", "other.toml", "--run-dir", "other", "--stage", "dedup", "--quiet", cwd=workspace)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "dedup.jaccard = 0.5 but the band table was built with --jaccard 0.4" in last, proc.stderr
    assert "build the table again with --jaccard 0.5" in last and "Traceback" not in proc.stderr
    # calib check says so before any run
    checked = _calib("check", "other.toml", "--no-probe", cwd=workspace)
    assert checked.returncode == 2, (checked.stdout, checked.stderr)
    assert "dedup.jaccard = 0.5 but the band table was built with --jaccard 0.4" in checked.stderr
    assert _calib("check", "bands.toml", "--no-probe", cwd=workspace).returncode == 0


@pytest.mark.parametrize(("dedup", "message"), [
    ('source = "bands"\npaths = ["a", "b"]', "source = 'bands' takes one path"),
    ('source = "bands"\npaths = ["a"]\nsemantic = true', "finds textual near-duplicates only"),
    ('source = "bands"\npaths = ["a"]\nredis_url = "redis://127.0.0.1:6379"', "remove redis_url"),
])
def test_a_bands_source_with_keys_it_cannot_honour_is_a_spec_error(tmp_path, dedup, message):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "s.toml").write_text(_spec(tmp_path / "cache", dedup))
    proc = _calib("check", "s.toml", cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in proc.stderr and "Traceback" not in proc.stderr
