"""``calib cluster check`` and :func:`calib.scale.cluster.check_cluster` against real local Ray clusters.

The session's head (``ray_cluster``: 2 CPUs on 127.0.0.1) is a cluster calib can use. Each problem is made real
on a head of its own, started with an environment only its processes (and so its workers) see: a calib
distribution declaring another version ahead of the installed one on ``PYTHONPATH``, a ``bwrap`` on ``PATH``
that cannot create namespaces, a ``calib`` package without calib's modules. The driver's working folder goes
on every worker's ``sys.path`` first (Ray does that), so those tests drive from ``tmp_path``, not the checkout
(whose ``calib.egg-info`` and ``calib/`` would otherwise win on the workers).
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import calib
from calib._exceptions import InputError
from calib.cli import cli
from calib.scale import connect, disconnect
from calib.scale.cluster import check_cluster, require_sandbox
from tests._ray import RayCluster, start_cluster

ray = pytest.importorskip("ray")

MISSING = "no calib on this node (a stand-in)"
STAND_IN = "bwrap: No permissions to create a new namespace (a stand-in that cannot run)"


@pytest.fixture(autouse=True)
def _not_connected() -> Iterator[None]:
    """Every test starts (and leaves) this process unconnected: a check connects to the address it is given."""
    if ray.is_initialized():
        ray.shutdown()
    yield
    if ray.is_initialized():
        ray.shutdown()


def _calib(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CALIB_DEBUG"}
    return subprocess.run([sys.executable, "-m", "calib", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _pythonpath(*folders: Path) -> str:
    return os.pathsep.join([*map(str, folders), *filter(None, [os.environ.get("PYTHONPATH")])])


def _own_cluster(env: dict[str, str]) -> RayCluster:
    return start_cluster(cpus=2, env=env)


# --- a cluster calib can use ----------------------------------------------------------------------------------


def test_the_session_cluster_is_ready_one_node_two_cpus_this_calib_and_a_working_sandbox(ray_cluster):
    report = check_cluster(ray_cluster.address)
    assert report.ok and report.problems == []
    (node,) = report.nodes
    assert node.cpus == report.cpus == ray_cluster.cpus == 2
    assert node.answered and not node.late and node.error == ""
    assert node.calib_version == report.calib_version == calib.__version__
    assert node.python_version == report.python_version == platform.python_version()
    assert node.ray_version == report.ray_version == ray.__version__
    assert node.sandbox_ok and node.sandbox_error == ""
    assert node.bwrap is not None and Path(node.bwrap).name == "bwrap"
    assert node.hostname == socket.gethostname() and len(node.node_id) == 56
    assert not ray.is_initialized()  # it connected, so it disconnected

    assert require_sandbox(ray_cluster.address).ok
    # a process connected already keeps its connection
    connected = connect(ray_cluster.address)
    try:
        assert check_cluster(ray_cluster.address, need_sandbox=False).ok
        assert ray.is_initialized()
    finally:
        disconnect(connected)


def test_the_command_as_a_subprocess_prints_the_report_as_json(ray_cluster, tmp_path):
    done = _calib("cluster", "check", ray_cluster.address, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1
    report = json.loads(done.stdout)
    assert report["ok"] is True and report["problems"] == []
    assert report["address"] == ray_cluster.address and report["need_sandbox"] is True
    assert report["cpus"] == 2 and report["calib_version"] == calib.__version__
    (node,) = report["nodes"]
    assert node["cpus"] == 2 and node["calib_version"] == calib.__version__
    assert node["python_version"] == platform.python_version() and node["ray_version"] == ray.__version__
    assert node["sandbox_ok"] is True and node["answered"] is True and Path(node["bwrap"]).name == "bwrap"


def test_the_command_prints_a_line_per_node_and_ok(ray_cluster):
    result = CliRunner().invoke(cli, ["cluster", "check", ray_cluster.address])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"Ray cluster at {ray_cluster.address}: 1 node, 2 CPUs"
    assert lines[2].split() == ["node", "address", "host", "CPUs", "calib", "Python", "Ray", "bubblewrap", "sandbox"]
    row = lines[3].split()
    assert row[3:7] == ["2", calib.__version__, platform.python_version(), ray.__version__] and row[-1] == "ok"
    assert lines[-1] == f"ok: 1 node, 2 CPUs, calib {calib.__version__} on every node"


# --- problems, each on a cluster of its own -------------------------------------------------------------------


def test_a_node_with_another_calib_version_is_a_problem_naming_the_version_to_install(tmp_path, monkeypatch):
    site = tmp_path / "site"
    info = site / "calib-9.9.9.dist-info"  # what pip leaves for calib 9.9.9: the version calib.__version__ reads
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: calib\nVersion: 9.9.9\n")
    cluster = _own_cluster({"PYTHONPATH": _pythonpath(site)})
    try:
        monkeypatch.chdir(tmp_path)
        report = check_cluster(cluster.address)
    finally:
        cluster.stop()
    (node,) = report.nodes
    assert node.answered and node.calib_version == "9.9.9" != calib.__version__
    assert node.sandbox_ok  # the check itself ran: only the version is wrong
    (problem,) = report.problems
    assert not report.ok
    assert f"calib 9.9.9 there, {calib.__version__} on this driver" in problem
    assert problem.endswith(f"pip install calib=={calib.__version__} on node {node.address}")


def test_a_node_where_calibs_sandbox_cannot_run_is_a_problem_unless_not_required(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"  # first on the nodes' PATH: the bwrap calib's sandbox finds, and it fails
    fake.write_text(f"#!/bin/sh\necho '{STAND_IN}' >&2\nexit 1\n")
    fake.chmod(0o755)
    cluster = _own_cluster({"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    try:
        report = check_cluster(cluster.address)
        (node,) = report.nodes
        assert node.answered and node.calib_version == calib.__version__
        assert node.bwrap == str(fake) and not node.sandbox_ok
        assert STAND_IN in node.sandbox_error and "bubblewrap" in node.sandbox_error
        (problem,) = report.problems
        assert "calib's sandbox does not work there" in problem and STAND_IN in problem
        assert "--unsafe-no-sandbox" not in problem and "docs/executors.md" in problem

        with pytest.raises(InputError) as refused:
            require_sandbox(cluster.address)
        assert "not ready for calib" in str(refused.value) and STAND_IN in str(refused.value)
        assert "\n" not in str(refused.value)

        shown = CliRunner().invoke(cli, ["cluster", "check", cluster.address])
        assert shown.exit_code == 1, shown.output
        lines = shown.output.splitlines()
        assert lines[3].split()[-1] == "FAILED" and lines[-1] == f"problem: {problem}"

        relaxed = CliRunner().invoke(cli, ["cluster", "check", cluster.address, "--no-sandbox", "--json"])
        assert relaxed.exit_code == 0, relaxed.output
        found = json.loads(relaxed.output)
        assert found["ok"] is True and found["need_sandbox"] is False and found["problems"] == []
        assert found["nodes"][0]["sandbox_ok"] is False  # still reported
    finally:
        cluster.stop()


def test_a_node_where_calib_cannot_be_imported_is_a_problem(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "calib").mkdir(parents=True)  # a calib that cannot be imported: the task cannot load there
    (site / "calib" / "__init__.py").write_text(f"raise ImportError({MISSING!r})\n")
    cluster = _own_cluster({"PYTHONPATH": _pythonpath(site)})
    try:
        monkeypatch.chdir(tmp_path)
        report = check_cluster(cluster.address, timeout=60)
    finally:
        cluster.stop()
    (node,) = report.nodes
    assert not node.answered and not node.late and MISSING in node.error
    (problem,) = report.problems
    assert "the check task failed there" in problem
    assert problem.endswith(f"pip install calib=={calib.__version__} on node {node.address}")


def test_a_head_with_token_authentication_is_reached_with_this_machines_token_and_refused_without(tmp_path):
    # `ray start --head` turns Ray's token authentication on when a token exists (any local ray.init() writes
    # ~/.ray/auth_token), but ray.init(address=...) does not: calib turns it on for itself as the head did.
    token = tmp_path / "auth_token"
    token.write_text("0123456789abcdef0123456789abcdef")
    cluster = _own_cluster({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)})
    try:
        home = tmp_path / "home"  # no ~/.ray/auth_token of this machine's user
        home.mkdir()
        base = {k: v for k, v in os.environ.items()
                if k not in ("CALIB_DEBUG", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
        for env, code in (({"RAY_AUTH_TOKEN_PATH": str(token)}, 0), ({}, 2)):
            done = subprocess.run([sys.executable, "-m", "calib", "cluster", "check", cluster.address, "--no-sandbox",
                                   "--timeout", "60"], cwd=tmp_path, env={**base, "HOME": str(home), **env},
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == code, (env, done.stdout, done.stderr[-2000:])
            if code == 0:
                assert done.stdout.splitlines()[-1].startswith("ok: 1 node, 2 CPUs")
            else:
                last = done.stderr.strip().splitlines()[-1]
                assert last.startswith("calib: error: runner.address = ") and cluster.address in last
                assert "uses token authentication, give this machine its token" in last
    finally:
        cluster.stop()


def test_an_address_nobody_listens_at_is_one_line_naming_it_exit_2(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed: nothing listens there
    done = _calib("cluster", "check", f"127.0.0.1:{port}", cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == "" and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("calib: error: ") and f"127.0.0.1:{port}" in done.stderr
    assert "cannot connect to a Ray cluster there" in done.stderr


def test_other_problems_are_worded_with_their_remedy():
    """What a local head cannot show for real: no alive node, another Python or Ray on a node."""
    from calib.scale.cluster import ClusterReport, NodeFacts, _problems

    empty = ClusterReport(address="10.0.0.5:6379", nodes=[], problems=[], ray_version="2.60.0")
    (line,) = _problems(empty, 120)
    assert line.startswith("no alive node in the Ray cluster at 10.0.0.5:6379") and "ray start" in line
    node = NodeFacts(node_id="ab" * 28, address="10.0.0.6", hostname="gpu-1", cpus=32, calib_version=calib.__version__,
                     python_version="3.12.1", ray_version="2.9.0", bwrap="/usr/bin/bwrap", sandbox_ok=True,
                     answered=True)
    report = ClusterReport(address="10.0.0.5:6379", nodes=[node], problems=[], python_version="3.11.7",
                           ray_version="2.60.0")
    assert _problems(report, 120) == [
        f"node 10.0.0.6 ({'ab' * 6}): Python 3.12.1 there, 3.11.7 on this driver: run every node and the driver on "
        "Python 3.11",
        f"node 10.0.0.6 ({'ab' * 6}): Ray 2.9.0 there, 2.60.0 on this driver: pip install ray==2.60.0 on node "
        "10.0.0.6"]
    node.python_version = "3.11.9"  # another patch release of the same Python is fine
    node.ray_version = "2.60.0"
    assert _problems(report, 120) == []


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_is_a_usage_error(value):
    result = CliRunner().invoke(cli, ["cluster", "check", "127.0.0.1:1", "--timeout", value])
    assert result.exit_code == 2 and "--timeout" in result.output


def test_a_node_that_does_not_answer_in_time_is_a_problem(ray_cluster):
    report = check_cluster(ray_cluster.address, timeout=0.001)  # no worker starts and answers in a millisecond
    (node,) = report.nodes
    assert node.late and not node.answered and node.error == "did not answer within 0.001 s"
    (problem,) = report.problems
    assert "the check task did not answer within 0.001 s" in problem and "--timeout" in problem
    assert check_cluster(ray_cluster.address).ok  # the cancelled task left the cluster as it was
