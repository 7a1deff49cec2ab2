"""``[runner] kind = "ray"``: the tiny-organism functional study on a real local Ray cluster (tests/_ray.py).

Every run is a real ``python -m calib study`` subprocess against the session's Ray head (``ray start --head``,
2 CPUs on 127.0.0.1): the execute stage's chunks run as Ray tasks in the cluster's worker processes, each with
calib's sandbox. What a user checks: the tables equal the local runner's row for row; a Ray worker killed with
kill -9 mid-stage costs nothing (Ray runs its task again); a driver killed mid-stage resumes, on either runner,
from the chunks it kept; a cluster that cannot be reached is one line naming ``runner.address``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests.study.test_run import _spec as _study_spec

TABLE_NAMES = ("samples", "generations", "executions", "similarities", "claims")


def _spec(cache_dir: Path, runner: str = "") -> str:
    # tests/study/test_run.py's spec (12 organism samples; the input search bounded by runs, not seconds, so that
    # runs on a busy machine choose the same inputs and give equal tables), then the runner
    return _study_spec(cache_dir).replace('name = "tiny"', 'name = "tiny-ray"') + runner


def _ray(address: str, **extra: object) -> str:
    keys = "".join(f"{k} = {json.dumps(v)}\n" for k, v in extra.items())
    return f'\n[runner]\nkind = "ray"\naddress = "{address}"\n{keys}'


def _calib(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "calib", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=900, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})


def _tables(run: Path) -> dict[str, pl.DataFrame]:
    return {name: pl.read_parquet(run / "tables" / f"{name}.parquet") for name in TABLE_NAMES}


def _events(run: Path) -> list[dict]:
    path = run / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


@pytest.fixture(scope="module")
def workspace(organism_tiny, ray_cluster, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ray-study")
    cache = organism_tiny.root.parent.parent
    (root / "local.toml").write_text(_spec(cache))
    (root / "ray.toml").write_text(_spec(cache, _ray(ray_cluster.address)))
    # one task at a time, so that a worker can be caught running one and killed before the stage ends
    (root / "ray-slow.toml").write_text(_spec(cache, _ray(ray_cluster.address, max_in_flight=1)))
    (root / "ray-chunks.toml").write_text(_spec(cache, _ray(ray_cluster.address, chunk_size=5)))
    return root


@pytest.fixture(scope="module")
def local_run(workspace: Path) -> Path:
    proc = _calib("study", "local.toml", "--run-dir", "local", "--stage", "analyze", "--quiet", "--jobs", "2",
                  cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    return workspace / "local"


@pytest.fixture(scope="module")
def ray_run(workspace: Path) -> Path:
    proc = _calib("study", "ray.toml", "--run-dir", "ray", "--quiet", "--jobs", "2", cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    return workspace / "ray"


def test_the_ray_runner_gives_the_local_runners_tables_row_for_row(local_run, ray_run, ray_cluster):
    local, remote = _tables(local_run), _tables(ray_run)
    assert remote["executions"].height == 24  # 12 samples x (target, reference)
    assert remote["executions"]["conclusive"].any()  # something was really executed and compared
    for name in TABLE_NAMES:
        assert remote[name].equals(local[name]), name
    # every execute chunk ran in a Ray worker process (not the driver), and the report was written
    chunks = [e for e in _events(ray_run) if e["event"] == "chunk" and e.get("stage") == "execute"]
    assert chunks and all(e.get("node") and e.get("pid") for e in chunks)
    # ... on the runner's cluster (not on a Ray instance of the driver's own, which any Ray call made before
    # connecting would start)
    from calib.scale.cluster import check_cluster

    cluster_nodes = {node.node_id for node in check_cluster(ray_cluster.address, need_sandbox=False).nodes}
    assert {e["node"] for e in chunks} <= cluster_nodes
    drivers = {e.get("pid") for e in _events(local_run) if e["event"] == "chunk"}
    assert not drivers & {e["pid"] for e in chunks}
    # the measure stage's CPU-bound metrics (textual, structural) were scored in Ray tasks too
    remote = [e for e in _events(ray_run) if e["event"] == "remote_chunks" and e.get("stage") == "measure"]
    assert remote and all(w["pid"] not in drivers and w["node"] for e in remote for w in e["where"])
    assert (ray_run / "report" / "report.html").is_file()
    costs = [e for e in _events(ray_run) if e["event"] == "sample_cost"]
    assert len(costs) == 12  # the tasks' events came back to the run's events.jsonl


def test_a_chunk_size_of_the_users_gives_tasks_of_that_size_and_the_same_tables(local_run, workspace):
    proc = _calib("study", "ray-chunks.toml", "--run-dir", "chunks", "--stage", "analyze", "--quiet", "--jobs", "2",
                  cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    run = workspace / "chunks"
    for name in TABLE_NAMES:
        assert _tables(run)[name].equals(_tables(local_run)[name]), name
    # 12 samples in chunks of 5: three Ray tasks, of 5, 5 and 2 samples (each sample executed for 2 roles)
    executed = [e for e in _events(run) if e["event"] == "chunk" and e.get("stage") == "execute"]
    assert sorted((e["index"], e["rows"]) for e in executed) == [(0, 10), (1, 10), (2, 4)]
    assert all(e.get("pid") for e in executed)


def _start(workspace: Path, spec: str, run: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "calib", "study", spec, "--run-dir", run, "--stage", "analyze",
                             "--quiet", "--jobs", "2"], cwd=workspace, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})


def _wait_for(proc: subprocess.Popen, ready, seconds: float = 600) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if ready():
            return
        time.sleep(0.05)
    assert proc.poll() is None, f"the run ended before the moment to kill came: {proc.stderr.read()[-2000:]}"
    raise AssertionError("the moment to kill never came")


def test_a_ray_worker_killed_mid_stage_costs_nothing(local_run, workspace, ray_cluster):
    run = workspace / "worker-killed"
    proc = _start(workspace, "ray-slow.toml", run.name)
    killed: list[int] = []
    try:
        def running() -> bool:
            started = any(e["event"] == "stage_start" and e.get("stage") == "execute" for e in _events(run))
            busy = [pid for pid, args in ray_cluster.processes().items() if args.startswith("ray::calib:")]
            if started and busy:
                for pid in busy:
                    os.kill(pid, signal.SIGKILL)
                killed.extend(busy)
            return bool(killed)

        _wait_for(proc, running)
        _, stderr = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert proc.returncode == 0, stderr
    assert killed
    for name, frame in _tables(run).items():
        assert frame.equals(_tables(local_run)[name]), name


@pytest.mark.parametrize("resume_on", ["ray", "local"])
def test_a_driver_killed_mid_stage_resumes_on_either_runner(local_run, workspace, resume_on):
    run = workspace / f"driver-killed-{resume_on}"
    proc = _start(workspace, "ray-slow.toml", run.name)
    try:
        _wait_for(proc, lambda: any(e["event"] == "chunk" and e.get("stage") == "execute" for e in _events(run)))
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    manifest = json.loads((run / "manifest.json").read_text())
    assert "execute" not in manifest.get("stages", {})  # killed before the stage finished
    done = _calib("study", f"{resume_on}.toml", "--run-dir", run.name, "--stage", "analyze", "--quiet", "--jobs", "2",
                  cwd=workspace)
    assert done.returncode == 0, done.stderr
    resumed = [e for e in _events(run) if e["event"] == "resume"]
    assert resumed and resumed[0]["stage"] == "execute" and resumed[0]["chunks_done"] >= 1
    assert "generate" not in done.stdout.split("ran:")[1].split(";")[0]  # the runner is in no fingerprint
    for name, frame in _tables(run).items():
        assert frame.equals(_tables(local_run)[name]), name


def test_a_cluster_that_cannot_be_reached_is_one_line_naming_the_address(local_run, workspace, organism_tiny):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (workspace / "nowhere.toml").write_text(_spec(organism_tiny.root.parent.parent, _ray(f"127.0.0.1:{port}")))
    import shutil

    shutil.copytree(local_run, workspace / "nowhere", ignore=shutil.ignore_patterns("chunks"))
    manifest = json.loads((workspace / "nowhere" / "manifest.json").read_text())
    manifest["stages"].pop("execute")  # the execute stage is to run again: on the Ray runner, which fails
    (workspace / "nowhere" / "manifest.json").write_text(json.dumps(manifest))
    (workspace / "nowhere" / "tables" / "executions.parquet").unlink()
    proc = _calib("study", "nowhere.toml", "--run-dir", "nowhere", "--stage", "execute", "--quiet", cwd=workspace)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert f"runner.address = '127.0.0.1:{port}'" in last and "ray start --head" in last
    checked = _calib("check", "nowhere.toml", cwd=workspace)  # calib check says so before any run
    assert checked.returncode == 2 and f"runner ray at 127.0.0.1:{port}: 0 node(s)" in checked.stdout


def test_calib_check_says_what_the_cluster_offers(workspace, local_run, ray_cluster):
    proc = _calib("check", "ray.toml", "--json", cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    runner = json.loads(proc.stdout)["runner"]
    assert runner == {"kind": "ray", "address": ray_cluster.address, "nodes": 1, "cpus": 2.0, "problems": []}
    text = _calib("check", "ray.toml", cwd=workspace).stdout
    assert f"runner ray at {ray_cluster.address}: 1 node(s), 2 CPUs: ok" in text


def test_a_ray_runner_without_an_address_is_refused_by_calib_check(workspace, organism_tiny):
    spec = _spec(organism_tiny.root.parent.parent, '\n[runner]\nkind = "ray"\n')
    (workspace / "noaddress.toml").write_text(spec)
    proc = _calib("check", "noaddress.toml", cwd=workspace)
    assert proc.returncode != 0
    message = proc.stderr.strip().splitlines()[-1]
    assert "noaddress.toml" in message and "runner" in message and "address" in message


def failing_chunk(shared: str, chunk: list[int]) -> tuple[pl.DataFrame, list]:
    """A chunk's work in a Ray task: leaves a mark per chunk it ran, and fails on chunk [0]."""
    Path(shared, f"ran-{chunk[0]}").touch()
    if chunk == [0]:
        raise ValueError("this chunk fails")
    return pl.DataFrame({"item": chunk}), []


def test_a_failing_task_stops_the_stage_and_no_chunk_is_sent_after_it(ray_cluster, tmp_path):
    # the chunks still waiting for their turn send nothing: after the runner leaves the cluster, a Ray call would
    # start a Ray instance of the driver's own and run them there
    import asyncio

    from calib._exceptions import CalibError
    from calib.scale.runner import RayRunner, RemoteWork
    from calib.study.sections import RunnerSection

    runner = RayRunner(RunnerSection(kind="ray", address=ray_cluster.address, max_in_flight=1))
    done: list[int] = []
    try:
        with pytest.raises(CalibError, match=r"a Ray task failed on chunk 0: .*this chunk fails"):
            asyncio.run(runner.map(RemoteWork(failing_chunk, str(tmp_path), sandbox=False),
                                   [(i, [i]) for i in range(4)], lambda i, *_: done.append(i), lambda: False))
    finally:
        runner.close()
    time.sleep(2)  # long enough for a chunk sent after the failure to run
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ran-0"] and done == []
