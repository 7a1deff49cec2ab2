"""A real local Ray cluster for the tests: ``ray start --head`` on 127.0.0.1 with 2 CPUs, once per test session.

The head runs as its own processes (GCS, raylet, workers), exactly as on a cluster's head node; the tests and
the ``calib`` subprocesses they start connect to it by address (``127.0.0.1:PORT``). Every port it opens is a
free one chosen here, and its temporary folder is the session's own, so that two test sessions on one machine
(or a developer's own cluster) do not meet. The cluster is stopped at the session's end (``ray stop`` of this
temporary folder's processes only).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["RayCluster", "ray_cluster", "start_cluster"]


def _free_ports(n: int, avoid: range) -> list[int]:
    """``n`` distinct free ports on 127.0.0.1, none in ``avoid`` (the workers' range: the kernel's ephemeral ports
    overlap it, and Ray refuses a port two components would share)."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in avoid and port not in ports:
            ports.append(port)
    return ports


@dataclass
class RayCluster:
    """A running local head: ``address`` to connect to, ``temp_dir`` its session folder, ``cpus`` it offers."""

    address: str
    temp_dir: Path
    cpus: int
    env: dict[str, str]

    def processes(self) -> dict[int, str]:
        """This head's processes (pid -> command line): those started with its temporary folder and their
        descendants (the raylet's workers and agents, whose titles no longer name the folder)."""
        # -ww: whole command lines (under pytest, readline sets COLUMNS=80 and ps would cut them there)
        out = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True,
                             check=True).stdout
        table = {}
        for line in out.splitlines():
            pid, ppid, *args = line.split(None, 2)
            table[int(pid)] = (int(ppid), args[0] if args else "")
        mine = {pid for pid, (_, args) in table.items() if str(self.temp_dir) in args}
        grew = True
        while grew:
            more = {pid for pid, (ppid, _) in table.items() if ppid in mine} - mine
            mine |= more
            grew = bool(more)
        return {pid: table[pid][1] for pid in sorted(mine)}

    def worker_pids(self) -> list[int]:
        """The pids of this head's worker processes running a task now (``ray::NAME`` titles, not idle ones)."""
        return [pid for pid, args in self.processes().items()
                if args.startswith("ray::") and not args.startswith(("ray::IDLE", "ray::DashboardAgent",
                                                                       "ray::RuntimeEnvAgent"))]

    def stop(self) -> None:
        """Stop this head's processes (those started with its temporary folder) and remove the folder."""
        mine = list(self.processes())
        for pid in mine:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3  # the GCS and raylet take longer: killed after
        while time.monotonic() < deadline and any(_alive(pid) for pid in mine):
            time.sleep(0.2)
        for pid in mine:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its parent's wait does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def start_cluster(cpus: int = 2, env: dict[str, str] | None = None) -> RayCluster:
    """``ray start --head`` on 127.0.0.1 with ``cpus`` CPUs and free ports; returns when it accepts drivers.

    ``env``: variables set (over this process's environment) for the head's processes and so for its workers,
    e.g. a ``PATH`` or ``PYTHONPATH`` that only this cluster's nodes see."""
    ray = shutil.which("ray")
    if ray is None:
        raise RuntimeError("the ray command is not on PATH: pip install 'calib[ray]' (scripts/test.sh does)")
    # a short folder: Ray's unix socket paths must fit in 107 bytes
    temp_dir = Path(tempfile.mkdtemp(prefix="rayc-", dir="/tmp"))
    env = {**os.environ, **(env or {}), "RAY_USAGE_STATS_ENABLED": "0"}
    worker_low = 20000 + (os.getpid() % 200) * 100
    port, node, objects, metrics, agent, agent_grpc, runtime = _free_ports(7, range(worker_low, worker_low + 100))
    cmd = [ray, "start", "--head", f"--num-cpus={cpus}", "--num-gpus=0", "--node-ip-address=127.0.0.1",
           f"--port={port}", "--include-dashboard=false", "--disable-usage-stats",
           f"--temp-dir={temp_dir}", "--object-store-memory=200000000",
           f"--node-manager-port={node}", f"--object-manager-port={objects}",
           f"--metrics-export-port={metrics}", f"--dashboard-agent-listen-port={agent}",
           f"--dashboard-agent-grpc-port={agent_grpc}", f"--runtime-env-agent-port={runtime}",
           f"--min-worker-port={worker_low}", f"--max-worker-port={worker_low + 99}"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    cluster = RayCluster(address=f"127.0.0.1:{port}", temp_dir=temp_dir, cpus=cpus, env=env)
    if done.returncode != 0:
        cluster.stop()
        raise RuntimeError(f"ray start failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return cluster


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """One local Ray head (2 CPUs on 127.0.0.1) for the whole test session, stopped at its end."""
    cluster = start_cluster(cpus=2)
    try:
        yield cluster
    finally:
        try:
            import ray

            if ray.is_initialized():
                ray.shutdown()
        finally:
            cluster.stop()
