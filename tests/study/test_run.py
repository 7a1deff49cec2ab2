"""``calib study`` end to end on the tiny model organism: tables, verdicts, resume after kill -9, re-runs.

Every run is a real ``python -m calib study`` subprocess (the organism's real models in the embedded
server, the real sandbox). The input search is bounded by runs, not seconds (``budget_seconds`` high),
so that two runs on a busy machine choose the same inputs and give equal tables.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from calib.study.tables import TABLES

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

TABLE_NAMES = ("samples", "generations", "executions", "similarities", "claims")


def _spec(cache_dir: Path, *, tau_text: float = 0.75, execute: str = "") -> str:
    return f"""[study]
name = "tiny"
seed = 0

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
limit = 12

[generation]
max_tokens = 300

[execute]
budget_seconds = 120.0
{execute}

[analyze]
tau_text = {tau_text}
"""


def _calib(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "calib", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=900, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})


@pytest.fixture(scope="module")
def workspace(organism_tiny, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("study")
    (root / "tiny.toml").write_text(_spec(organism_tiny.root.parent.parent))
    return root


@pytest.fixture(scope="module")
def finished(workspace: Path) -> Path:
    proc = _calib("study", "tiny.toml", "--run-dir", "a", "--quiet", "--jobs", "2", cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == f"report: {Path('a') / 'report' / 'report.html'}"
    return workspace / "a"


def _tables(run: Path) -> dict[str, pl.DataFrame]:
    return {name: pl.read_parquet(run / "tables" / f"{name}.parquet") for name in TABLE_NAMES}


def _events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines() if line.strip()]


def test_tables_have_their_schemas_and_the_organism_is_found_memorized(finished):
    tables = _tables(finished)
    for name, frame in tables.items():
        assert frame.schema == pl.Schema(TABLES[name]), name
    assert tables["samples"].height == 12
    assert tables["generations"].height == 24 and tables["executions"].height == 24
    claims = tables["claims"]
    members = claims.filter(pl.col("membership") == "member")
    controls = claims.filter(pl.col("membership") == "control")
    memorized = members.filter(pl.col("verdict").is_in(["textual", "functional"])).height
    assert memorized >= 1  # planted members are reproduced by the target only
    assert controls.filter(pl.col("verdict").is_in(["textual", "functional"])).height == 0
    # Every verdict follows from the scores and the thresholds (paper §3, conditions 1-3).
    for r in claims.filter(pl.col("verdict") == "textual").iter_rows(named=True):
        assert r["text_target"] >= 0.75 > r["text_reference"]
    for r in claims.filter(pl.col("verdict") == "functional").iter_rows(named=True):
        assert r["func_target"] >= 0.8 > r["func_reference"] and r["text_target"] < 0.75
    manifest = json.loads((finished / "manifest.json").read_text())
    assert manifest["counts"]["samples"] == 12 and set(manifest["servers"]) == {"target", "reference"}
    assert set(manifest["stages"]) == {"extract", "prompt", "generate", "execute", "measure", "analyze", "report"}
    assert manifest["finished_at"] >= manifest["started_at"]


def test_the_report_states_the_counterfactual_rates_of_the_claims(finished):
    summary = json.loads((finished / "report" / "summary.json").read_text())
    claims = pl.read_parquet(finished / "tables" / "claims.parquet")
    textual = summary["headline"]["textually_memorized"]
    assert textual["k"] == claims.filter(pl.col("verdict") == "textual").height and textual["n"] == 12
    assert summary["headline"]["functionally_memorized"]["k"] == claims.filter(pl.col("verdict") == "functional").height
    assert summary["headline"]["controls"]["textually_memorized"]["k"] == 0
    html = (finished / "report" / "report.html").read_text()
    assert "<svg" in html and "Clopper" in html


def test_a_finished_run_rerun_does_no_work(finished, workspace):
    before = len(_events(finished))
    proc = _calib("study", "tiny.toml", "--run-dir", "a", "--quiet", cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    assert "ran: none" in proc.stdout
    new = _events(finished)[before:]
    assert not [e for e in new if e["event"] in ("stage_start", "chunk")]
    assert [e["stage"] for e in new if e["event"] == "stage_skip"] == [
        "extract", "prompt", "generate", "execute", "measure", "analyze", "report"]


@pytest.mark.parametrize("stage", ["generate", "execute"])
def test_kill_9_mid_stage_then_resume_gives_the_uninterrupted_tables(finished, workspace, stage):
    run = workspace / f"killed-{stage}"
    proc = subprocess.Popen([sys.executable, "-m", "calib", "study", "tiny.toml", "--run-dir", run.name, "--stage",
                             "analyze", "--quiet", "--jobs", "2"], cwd=workspace, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if (run / "events.jsonl").exists() and any(
                    e["event"] == "chunk" and e.get("stage") == stage for e in _events(run)):
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    manifest = json.loads((run / "manifest.json").read_text())
    assert stage not in manifest.get("stages", {})  # killed before the stage finished
    done = _calib("study", "tiny.toml", "--run-dir", run.name, "--stage", "analyze", "--quiet", "--jobs", "2",
                  cwd=workspace)
    assert done.returncode == 0, done.stderr
    resumed = [e for e in _events(run) if e["event"] == "resume"]
    assert resumed and resumed[0]["stage"] == stage and resumed[0]["chunks_done"] >= 1
    for name, frame in _tables(run).items():
        assert frame.equals(_tables(finished)[name]), name


def test_changing_a_threshold_redoes_only_the_analysis(finished, workspace, organism_tiny):
    changed = workspace / "changed"
    shutil.copytree(finished, changed)
    (workspace / "loose.toml").write_text(_spec(organism_tiny.root.parent.parent, tau_text=0.5))
    proc = _calib("study", "loose.toml", "--run-dir", "changed", "--stage", "analyze", "--quiet", cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    assert "ran: analyze;" in proc.stdout and "generate" not in proc.stdout.split("ran:")[1].split(";")[0]
    claims = pl.read_parquet(changed / "tables" / "claims.parquet")
    assert claims["textual_target"].to_list() == (claims["text_target"] >= 0.5).to_list()


def test_candidates_only_where_x_is_conclusive_change_no_claim(finished, workspace, organism_tiny):
    """``[execute] candidates_when_inconclusive``: true (the default, written out) is the finished run's own
    fingerprint; false runs the execute stage again, runs no candidate of a sample whose x the search made
    inconclusive, and every claim, rate and x column stays the same (docs/study-spec.md)."""
    cache = organism_tiny.root.parent.parent
    (workspace / "written.toml").write_text(_spec(cache, execute="candidates_when_inconclusive = true"))
    proc = _calib("study", "written.toml", "--run-dir", "a", "--quiet", cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    assert "ran: none" in proc.stdout
    skipped = workspace / "skipped"
    shutil.copytree(finished, skipped)
    (workspace / "skip.toml").write_text(_spec(cache, execute="candidates_when_inconclusive = false"))
    proc = _calib("study", "skip.toml", "--run-dir", "skipped", "--quiet", "--jobs", "2", cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    assert "execute" in proc.stdout.split("ran:")[1].split(";")[0]
    before, after = _tables(finished), _tables(skipped)
    key = ["sample_id", "role"]
    old, new = before["executions"].sort(key), after["executions"].sort(key)
    inconclusive = old.filter(~pl.col("conclusive"))
    assert inconclusive.height > 0 and old.filter(pl.col("conclusive")).height > 0  # both kinds are in the sample
    # a conclusive sample's rows are the finished run's, row for row
    assert new.filter(pl.col("conclusive")).equals(old.filter(pl.col("conclusive")))
    # an inconclusive one: the same x columns, its candidates not compared (no matches), no SIM_func either way
    x_columns = ["sample_id", "role", "executor", "valid_inputs", "coverage", "distinct_outputs", "conclusive",
                 "reason"]
    assert new.filter(~pl.col("conclusive")).select(x_columns).equals(inconclusive.select(x_columns))
    assert new.filter(~pl.col("conclusive"))["matches"].list.len().to_list() == [0] * inconclusive.height
    assert inconclusive["sim_func"].null_count() == inconclusive.height
    assert new.filter(~pl.col("conclusive"))["sim_func"].null_count() == inconclusive.height
    assert after["claims"].equals(before["claims"])
    headline = [json.loads((run / "report" / "summary.json").read_text())["headline"] for run in (finished, skipped)]
    assert headline[0] == headline[1]
