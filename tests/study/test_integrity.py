"""Trustworthy runs: damaged tables and manifests are caught, and a study is reproducible bit for bit.

The first half runs the stage runner in-process over stages of the test's own (each counts how often
it ran), so every way a run directory can be damaged is tried quickly. The second half runs the tiny
organism's functional study as real ``python -m calib study`` subprocesses (see test_run.py): twice
under different ``PYTHONHASHSEED`` (every Parquet table must be the same bytes), then over a damaged
copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pytest

from calib.study.rundir import RunDir
from calib.study.runner import RunOptions, Stage, run_stages
from calib.study.spec import load_spec

TABLE_NAMES = ("samples", "generations", "executions", "similarities", "claims")


# --- the runner over stages of the test's own ---------------------------------------------------------


class _Toy:
    """Two table stages, ``first`` and ``second`` (reads first), and a spec setting ``scale``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ran: Counter[str] = Counter()
        self.scale = 1
        self.salt = 0  # changes the first stage's result without changing the spec (a server's answer)
        (root / "spec").mkdir(parents=True, exist_ok=True)
        from tests.study.test_run import _spec

        self.spec_path = root / "spec" / "tiny.toml"
        self.spec_path.write_text(_spec(root / "spec"))
        self.spec = load_spec(self.spec_path)

    def stages(self) -> list[Stage]:
        async def first(ctx):
            self.ran["first"] += 1
            return pl.DataFrame({"x": [i * self.scale + self.salt for i in range(1000)],
                                 "s": [f"row {i}" for i in range(1000)]})

        async def second(ctx):
            self.ran["second"] += 1
            return ctx.table("first").select(pl.col("x").sum().alias("total"))

        return [Stage("first", (), "first", "1", lambda spec, options: {"scale": self.scale}, first),
                Stage("second", ("first",), "second", "1", lambda spec, options: {}, second)]

    def run(self):
        return run_stages(self.stages(), self.spec, self.spec_path.read_text(), self.root / "run",
                          options=RunOptions(progress=False), resources=None)

    def table(self, name: str) -> Path:
        return self.root / "run" / "tables" / f"{name}.parquet"


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("calib study: warning: ")]


@pytest.fixture
def toy(tmp_path) -> _Toy:
    toy = _Toy(tmp_path)
    result = toy.run()
    assert result.ran == ["first", "second"] and result.warnings == []
    return toy


def test_an_intact_run_is_skipped_silently(toy, capsys):
    capsys.readouterr()
    result = toy.run()
    assert result.skipped == ["first", "second"] and toy.ran == {"first": 1, "second": 1}
    assert _warnings(capsys.readouterr().err) == []
    manifest = json.loads((toy.root / "run" / "manifest.json").read_text())
    assert set(manifest["checksums"]) == {"first", "second"}
    # The recorded hash is the file's sha256 (hashlib is the reference), and the table records its fingerprint.
    import hashlib

    import pyarrow.parquet as pq

    assert manifest["checksums"]["first"] == hashlib.sha256(toy.table("first").read_bytes()).hexdigest()
    footer = pq.read_metadata(toy.table("first")).metadata
    assert footer[b"calib.fingerprint"].decode() == manifest["stages"]["first"]["fingerprint"]


@pytest.mark.parametrize("damage", ["truncated", "one byte changed", "emptied", "deleted"])
def test_a_damaged_table_reruns_its_stage_with_one_warning(toy, capsys, damage):
    path = toy.table("first")
    original = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(original[: len(original) // 2])
    elif damage == "one byte changed":
        middle = len(original) // 2
        path.write_bytes(original[:middle] + bytes([original[middle] ^ 0xFF]) + original[middle + 1:])
        assert pl.read_parquet_schema(path)  # the footer still reads: only the checksum can tell
    elif damage == "emptied":
        path.write_bytes(b"")
    else:
        path.unlink()
    capsys.readouterr()
    result = toy.run()
    assert result.ran == ["first"] and result.skipped == ["second"]  # the same content: second stays valid
    [warning] = _warnings(capsys.readouterr().err)
    assert str(path) in warning and warning.endswith("running the first stage again")
    assert ("it is missing" in warning) == (damage == "deleted")
    assert path.read_bytes() == original
    assert result.warnings == [warning.removeprefix("calib study: warning: ")]


def test_a_rebuilt_table_with_other_content_reruns_the_stages_that_read_it(toy):
    toy.table("first").write_bytes(b"")
    toy.salt = 1
    result = toy.run()
    assert result.ran == ["first", "second"]
    assert pl.read_parquet(toy.table("second"))["total"].item() == sum(range(1000)) + 1000


def test_a_table_without_a_recorded_checksum_is_checked_by_its_parquet_footer(toy, capsys):
    manifest_path = toy.root / "run" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["checksums"]  # a run directory written before checksums were recorded
    manifest_path.write_text(json.dumps(manifest))
    assert toy.run().skipped == ["first", "second"]
    toy.table("second").write_bytes(toy.table("second").read_bytes()[:-10])
    capsys.readouterr()
    result = toy.run()
    assert result.ran == ["second"]
    [warning] = _warnings(capsys.readouterr().err)
    assert "second.parquet: it is not a readable Parquet file" in warning


@pytest.mark.parametrize("garbage", [b"{\"stages\": {\"first\"", b"\x00\xff binary", b"[1, 2]", b"{\"stages\": []}"])
def test_a_garbage_manifest_keeps_the_intact_tables(toy, capsys, garbage):
    manifest_path = toy.root / "run" / "manifest.json"
    tables = {name: toy.table(name).read_bytes() for name in ("first", "second")}
    manifest_path.write_bytes(garbage)
    capsys.readouterr()
    result = toy.run()
    [warning] = _warnings(capsys.readouterr().err)
    assert str(manifest_path) in warning and "kept as manifest.json.damaged" in warning
    assert result.skipped == ["first", "second"] and toy.ran == {"first": 1, "second": 1}  # nothing recomputed
    assert (toy.root / "run" / "manifest.json.damaged").read_bytes() == garbage
    manifest = json.loads(manifest_path.read_text())
    assert set(manifest["stages"]) == {"first", "second"} and manifest["stages"]["first"]["rows"] == 1000
    assert {name: toy.table(name).read_bytes() for name in tables} == tables
    assert toy.run().skipped == ["first", "second"]  # and the rebuilt manifest is a normal one


def test_a_garbage_manifest_and_a_truncated_table_rerun_that_stage_only(toy, capsys):
    (toy.root / "run" / "manifest.json").write_text("not json")
    toy.table("first").write_bytes(toy.table("first").read_bytes()[:100])
    capsys.readouterr()
    result = toy.run()
    assert result.ran == ["first"] and result.skipped == ["second"]
    assert len(_warnings(capsys.readouterr().err)) == 1  # the manifest's; the table had no record to differ from


def test_a_garbage_manifest_does_not_adopt_tables_of_another_spec(toy):
    (toy.root / "run" / "manifest.json").write_text("not json")
    toy.scale = 2  # the spec changed: the tables on disk were computed under other settings
    result = toy.run()
    assert result.ran == ["first", "second"]
    assert pl.read_parquet(toy.table("second"))["total"].item() == 2 * sum(range(1000))


# --- the functional study: reproducible across hash seeds, repaired when damaged -------------------

_LOOPS = ("def f(xs, k):\n    total = 0\n    best = None\n    for x in xs:\n        if x > k:\n"
          "            total = total + x * k\n            best = x\n        else:\n            total = total - x\n"
          "    while total > 100:\n        total = total // 2 + best\n    return total, best\n")


def corpus_spec(model_dir: Path, corpus: Path) -> str:
    """A functional study of ``corpus`` (Python files) with the tiny random-weight model as both models."""
    server = f'kind = "embedded"\nmodel_dir = "{model_dir}"\n'
    return (f'[study]\nname = "corpus"\n\n[servers.target]\n{server}\n[servers.reference]\n{server}\n'
            f'[models]\ntarget = "target"\nreference = "reference"\n\n'
            f'[data]\nsource = "corpus"\npaths = ["{corpus}"]\nmin_lines = 2\n\n'
            f'[prompt]\nmax_context_tokens = 40\n\n[generation]\nmax_tokens = 24\n\n'
            f'[execute]\nbudget_seconds = 120.0\n')


def _calib(*args: str, cwd: Path, hashseed: str = "0") -> subprocess.CompletedProcess:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "PYTHONHASHSEED": hashseed}
    return subprocess.run([sys.executable, "-m", "calib", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=1200, env=env)


def _parquet(run: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((run / "tables").glob("*.parquet"))}


@pytest.fixture(scope="module", params=["organism", "corpus"])
def two_runs(request, tmp_path_factory) -> Path:
    """The study run as ``a`` (PYTHONHASHSEED=1) and ``b`` (PYTHONHASHSEED=2): the tiny organism's
    (its members are reproduced, so candidates parse, run and score), and a corpus study on the tiny
    random-weight model (a different extraction path; no training needed)."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed")
    root = tmp_path_factory.mktemp(f"integrity-{request.param}")
    if request.param == "organism":
        from tests.study.test_run import _spec

        organism = request.getfixturevalue("organism_tiny")
        text = _spec(organism.root.parent.parent).replace("limit = 12", "limit = 6")
    else:
        from tests.study.functional.test_corpus_study import CODE

        (root / "corpus").mkdir()
        (root / "corpus" / "mod.py").write_text(CODE + "\n\n" + _LOOPS)
        text = corpus_spec(request.getfixturevalue("tiny_model_dir"), root / "corpus")
    (root / "study.toml").write_text(text)

    def study(name: str, seed: str) -> subprocess.CompletedProcess:
        return _calib("study", "study.toml", "--run-dir", name, "--quiet", "--jobs", "2", cwd=root, hashseed=seed)

    # the two runs side by side: separate interpreters and run directories, nothing shared but the read-only inputs
    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(study, ("a", "b"), ("1", "2")))
    for proc in done:
        assert proc.returncode == 0, proc.stderr
    return root


def test_two_runs_under_different_hash_seeds_write_byte_identical_tables(two_runs):
    a, b = _parquet(two_runs / "a"), _parquet(two_runs / "b")
    assert set(TABLE_NAMES) <= {name.removesuffix(".parquet") for name in a}
    assert list(a) == list(b)
    for name in a:
        assert a[name] == b[name], name  # byte for byte: Parquet metadata included
    similarities = pl.read_parquet(two_runs / "a" / "tables" / "similarities.parquet")
    assert similarities.filter(pl.col("metric") == "codebleu_dataflow")["value"].is_not_null().any()
    manifests = [json.loads((two_runs / run / "manifest.json").read_text()) for run in ("a", "b")]
    assert manifests[0]["checksums"] == manifests[1]["checksums"]


def test_a_truncated_table_and_a_garbage_manifest_are_repaired_not_called_up_to_date(two_runs):
    run = two_runs / "damaged"
    shutil.copytree(two_runs / "a", run)
    generations = run / "tables" / "generations.parquet"
    generations.write_bytes(generations.read_bytes()[:-200])
    (run / "manifest.json").write_bytes(b"\x00garbage")
    proc = _calib("study", "study.toml", "--run-dir", "damaged", "--quiet", "--jobs", "2", cwd=two_runs)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    warnings = _warnings(proc.stderr)
    assert len(warnings) == 1 and f"{Path('damaged') / 'manifest.json'} is not valid JSON" in warnings[0], proc.stderr
    ran = proc.stdout.split("ran: ")[1].split(";")[0].split(", ")
    assert ran == ["generate", "report"], proc.stdout  # the intact tables are kept, not recomputed
    assert _parquet(run) == _parquet(two_runs / "a")
    report = _calib("report", "damaged", cwd=two_runs)
    assert report.returncode == 0, report.stderr
    assert RunDir(run).read_manifest()[1] is None  # the manifest is whole again
