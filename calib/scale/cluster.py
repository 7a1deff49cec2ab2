"""What a Ray cluster offers calib: ``calib cluster check ADDRESS`` and the Ray runner's check before a study.

:func:`check_cluster` connects (:func:`calib.scale.connect.connect`), lists the alive nodes and runs one small task
pinned to each (``num_cpus=0``, so it runs even while a study holds every CPU) that reports what calib would meet
there: calib's version (``calib.__version__`` as that node imports it), Python's and Ray's, and calib's own
sandbox, started the way the executors start it (:class:`calib.executors.sandbox.Sandbox`: bubblewrap found on
``PATH`` and probed) and given one trivial batch (``f(1)`` of ``def f(n): return n + 1``, which must return 2).
Every finding that would stop or falsify a study is a problem, one line each with its remedy; the report is ok
when there is none. See docs/scale.md and docs/cli.md (``calib cluster check``).
"""

from __future__ import annotations

import asyncio
import json
import math
import platform
import shutil
import socket
from dataclasses import asdict, dataclass, field
from typing import Any

from calib._exceptions import InputError, InvalidParameterError
from calib._version import __version__
from calib.scale.connect import connect, disconnect, import_ray

__all__ = ["ClusterReport", "NodeFacts", "check_cluster", "node_facts", "require_sandbox"]

#: The trivial batch every node's sandbox must run: the harness's replay of ``f`` on ``n = 1``.
_PROBE_FUNCTION = "def f(n):\n    return n + 1\n"
_PROBE_JOB = {"mode": "replay", "context": "", "function": _PROBE_FUNCTION, "seed": 0, "input_timeout": 10.0,
              "inputs": [{"args": {"n": "1"}}]}
_NO_SANDBOX_HINT = "docs/executors.md, 'Without bubblewrap'"


@dataclass
class NodeFacts:
    """What one node of the cluster offers, as its check task saw it (``answered`` False: it never reported;
    ``late``: not within the check's timeout; ``error``: why not)."""

    node_id: str
    address: str
    hostname: str
    cpus: float
    calib_version: str | None = None
    python_version: str | None = None
    ray_version: str | None = None
    bwrap: str | None = None
    sandbox_ok: bool = False
    sandbox_error: str = ""
    answered: bool = False
    late: bool = False
    error: str = ""

    @property
    def label(self) -> str:
        """How problems name the node: its address and the start of its Ray node id."""
        return f"{self.address} ({self.node_id[:12]})"


@dataclass
class ClusterReport:
    """The cluster at ``address``: its alive nodes, the driver's versions and the problems found (none: ``ok``)."""

    address: str
    nodes: list[NodeFacts]
    problems: list[str]
    calib_version: str = __version__
    python_version: str = field(default_factory=platform.python_version)
    ray_version: str = ""
    need_sandbox: bool = True

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def cpus(self) -> float:
        """The CPUs the alive nodes offer together."""
        return sum(n.cpus for n in self.nodes)

    def to_dict(self) -> dict[str, Any]:
        """The report as ``calib cluster check --json`` prints it (docs/cli.md)."""
        return {"address": self.address, "ok": self.ok, "nodes": [asdict(n) for n in self.nodes],
                "cpus": self.cpus, "calib_version": self.calib_version, "python_version": self.python_version,
                "ray_version": self.ray_version, "need_sandbox": self.need_sandbox, "problems": list(self.problems)}


def _one_line(text: str, limit: int = 500) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _sandbox_check() -> tuple[str | None, bool, str]:
    """(bwrap's path, whether calib's sandbox ran the trivial batch, why not) on this machine.

    The sandbox is the executors' own, never ``unsafe``: where bubblewrap does not work, :class:`Sandbox`
    refuses and its message (what a study would print on this node) is the reason."""
    from calib.executors.sandbox import Sandbox, SandboxUnavailable

    try:
        sandbox = Sandbox(fork_server=False)
    except SandboxUnavailable as exc:
        # calib's own reason and remedy, less its suggestion of --unsafe-no-sandbox (no cluster study offers it)
        why = _one_line(str(exc)).split(", or pass --unsafe-no-sandbox")[0]
        return shutil.which("bwrap"), False, why
    try:
        run = asyncio.run(sandbox.run(json.dumps(_PROBE_JOB).encode("utf-8"), wall_seconds=60))
    finally:
        sandbox.close()
    returned = None
    for line in run.stdout.decode("utf-8", "replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "result" and event.get("status") == "ok":
            try:
                returned = json.loads(event["output"]).get("return")
            except (KeyError, TypeError, ValueError, AttributeError):
                returned = None
    if returned == 2 and run.died is None:
        return sandbox.bwrap, True, ""
    why = run.died or f"f(1) returned {returned!r}, not 2"
    stderr = _one_line(run.stderr.decode("utf-8", "replace"), 300)
    if stderr:
        why += f"; stderr: {stderr}"
    return sandbox.bwrap, False, f"bubblewrap starts, but a trivial batch in calib's sandbox failed ({why})"


def node_facts() -> dict[str, Any]:
    """The check task's body, run on one node: calib's, Python's and Ray's versions there, and its sandbox.

    Versions are those this node's worker imports (``calib.__version__`` comes from the installed package's
    metadata). The sandbox is always tried; whether its failure is a problem is the driver's call."""
    import calib

    try:
        import ray

        ray_version: str | None = ray.__version__
    except ImportError:  # not in a Ray worker (a direct call)
        ray_version = None
    bwrap, ok, why = _sandbox_check()
    return {"hostname": socket.gethostname(), "calib_version": calib.__version__,
            "python_version": platform.python_version(), "ray_version": ray_version, "bwrap": bwrap,
            "sandbox_ok": ok, "sandbox_error": why}


def _problems(report: ClusterReport, timeout: float) -> list[str]:
    """One line per problem, each with its remedy."""
    if not report.nodes:
        return [f"no alive node in the Ray cluster at {report.address}: start one (`ray start --head`, then `ray "
                "start --address=HEAD:PORT` on each machine) or check `ray status` there"]
    out: list[str] = []
    want = report.calib_version
    driver_minor = ".".join(report.python_version.split(".")[:2])
    for node in report.nodes:
        if node.late:
            out.append(f"node {node.label}: the check task {node.error}; check that the node can start Ray workers "
                       "(`ray status`; the node's Ray logs) or allow more time (--timeout)")
            continue
        if not node.answered:
            out.append(f"node {node.label}: the check task {node.error}; install calib there: pip install "
                       f"calib=={want} on node {node.address}")
            continue
        if node.calib_version != want:
            out.append(f"node {node.label}: calib {node.calib_version} there, {want} on this driver: "
                       f"pip install calib=={want} on node {node.address}")
        minor = ".".join((node.python_version or "").split(".")[:2])
        if minor != driver_minor:
            out.append(f"node {node.label}: Python {node.python_version} there, {report.python_version} on this "
                       f"driver: run every node and the driver on Python {driver_minor}")
        if report.ray_version and node.ray_version != report.ray_version:
            out.append(f"node {node.label}: Ray {node.ray_version} there, {report.ray_version} on this driver: "
                       f"pip install ray=={report.ray_version} on node {node.address}")
        if report.need_sandbox and not node.sandbox_ok:
            out.append(f"node {node.label}: calib's sandbox does not work there: {node.sandbox_error} "
                       f"({_NO_SANDBOX_HINT})")
    return out


def _task_error(exc: BaseException) -> str:
    """What stopped a check task, on one line: the last line of what Ray reports, which is the exception raised
    on the node (``ImportError: ...`` when the task's module cannot be imported there), not the traceback."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return _one_line(lines[-1] if lines else type(exc).__name__, 300)


def check_cluster(address: str, *, need_sandbox: bool = True, timeout: float = 120.0) -> ClusterReport:
    """What the Ray cluster at ``address`` offers calib, and what stops it from running a study.

    Connects unless this process is connected already (then that connection is used, and kept), runs
    :func:`node_facts` on every alive node (one task each, pinned to the node, ``num_cpus=0``), waits at most
    ``timeout`` seconds for all of them, and disconnects when this call connected. ``need_sandbox``: a node
    whose calib sandbox cannot run untrusted code is a problem (False: it is only reported, as every node's
    sandbox is). An address that cannot be reached is an :class:`~calib.InputError` naming it."""
    if not (math.isfinite(timeout) and timeout > 0):
        raise InvalidParameterError(f"timeout = {timeout!r}: give a positive number of seconds")
    ray = import_ray()
    connected = connect(address)
    try:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        alive = [n for n in ray.nodes() if n.get("Alive")]
        nodes = [NodeFacts(node_id=str(n.get("NodeID", "")), address=str(n.get("NodeManagerAddress", "")),
                           hostname=str(n.get("NodeManagerHostname", "")),
                           cpus=float((n.get("Resources") or {}).get("CPU", 0.0))) for n in alive]
        task = ray.remote(node_facts)
        refs = [task.options(num_cpus=0, max_retries=0, name="calib-cluster-check",
                             scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False))
                .remote() for node in nodes]
        ready, late = ray.wait(refs, num_returns=len(refs), timeout=timeout) if refs else ([], [])
        done = {ref.hex() for ref in ready}
        for node, ref in zip(nodes, refs, strict=True):
            if ref.hex() not in done:
                node.late, node.error = True, f"did not answer within {timeout:g} s"
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - a task that ends while it is cancelled: nothing to stop
                    pass
                continue
            try:
                facts = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - whatever stopped the task on that node is its finding
                node.error = f"failed there ({_task_error(exc)})"
                continue
            node.answered = True
            for key, value in facts.items():
                setattr(node, key, value)
        report = ClusterReport(address=address, nodes=nodes, problems=[], ray_version=ray.__version__,
                               need_sandbox=need_sandbox)
        report.problems = _problems(report, timeout)
        return report
    finally:
        disconnect(connected)


def require_sandbox(address: str, *, timeout: float = 120.0) -> ClusterReport:
    """:func:`check_cluster` with the sandbox required; an :class:`~calib.InputError` listing the problems when
    the cluster is not ready for a study (the Ray runner's check before it sends any chunk)."""
    report = check_cluster(address, need_sandbox=True, timeout=timeout)
    if not report.ok:
        raise InputError(f"runner.address = {address!r}: the Ray cluster there is not ready for calib: "
                         + "; ".join(report.problems) + f" (`calib cluster check {address}` shows every node)")
    return report
