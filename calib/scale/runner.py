"""The Ray runner: a stage's chunks as Ray tasks, their tables back to the driver (docs/scale.md).

A stage that maps over samples with no server to ask gives :meth:`calib.study.runner.StageContext.chunked` a
:class:`RemoteWork`: a module-level function ``fn(shared, chunk) -> (table, events)`` and what every chunk
shares (the spec, the candidates). With the local runner the stage's own coroutine does the work; with the Ray
runner each chunk not yet done becomes a task ``fn(shared, chunk)`` of ``cpus_per_task`` CPUs on the cluster,
and the driver writes each table that comes back as the same Parquet chunk file the local runner writes, and
the events into events.jsonl. Resume, the stage's table and the report are therefore the same on both.

The cluster is checked once, at the first chunk (so a finished study run again connects to nothing): every
node must run calib's sandbox (bubblewrap) and the driver's calib version (:func:`calib.scale.cluster.check_cluster`);
a node that cannot is refused with the remedy before any task is sent. A task whose worker dies (a killed
process, a lost node) is run again by Ray up to ``max_retries`` times; an exception raised in a task is a bug
of calib or of the cluster, not of a sample (the stage's function records each sample's own failures in its
table), and stops the stage with its message: the chunks already written are kept for the next run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from calib._exceptions import CalibError

__all__ = ["RayRunner", "RemoteWork", "run_call", "runner_for"]


@dataclass(frozen=True)
class RemoteWork:
    """What a stage's chunk needs to run anywhere: ``fn(shared, chunk) -> (table, events)``, a function a Ray
    worker can import (module level: pickled by name), and ``shared``, sent to the cluster once per stage.

    ``events``: ``(name, fields)`` pairs the driver writes to events.jsonl as the stage's events.
    ``sandbox``: the function runs untrusted code, so every node must run calib's sandbox.
    """

    fn: Callable[[Any, list[Any]], tuple[pl.DataFrame, list[tuple[str, dict[str, Any]]]]]
    shared: Any
    sandbox: bool = True


def run_call(fn: Callable[..., Any], *call: Any) -> tuple[Any, dict[str, Any]]:
    """The body of every Ray task calib sends: ``fn(*call)``, and where it ran (node id, host, process id).

    The call's values are the task's own arguments, so that Ray gives the function an object put in its store
    (a stage's ``shared``) as the value, not as its reference."""
    import os
    import socket

    import ray

    return fn(*call), {"node": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
                       "pid": os.getpid()}


def runner_for(section: Any) -> RayRunner | None:
    """The Ray runner of ``[runner] kind = "ray"`` (it connects at its first chunk), else None: the local one."""
    return RayRunner(section) if section is not None and section.kind == "ray" else None


class RayRunner:
    """Chunks of a stage as tasks on the Ray cluster of ``section`` (a :class:`~calib.study.sections.RunnerSection`)."""

    kind = "ray"

    def __init__(self, section: Any) -> None:
        self.section = section
        self._connected: bool | None = None
        self._checked: set[bool] = set()
        self.cluster: Any = None  # the ClusterReport of the check at the first chunk
        self.where: list[dict[str, Any]] = []  # where each starmap call ran

    def _start(self, sandbox: bool) -> None:
        from calib.scale.connect import connect

        if self._connected is None:
            self._connected = connect(self.section.address)
        if sandbox not in self._checked and True not in self._checked:  # a sandbox check covers the rest
            from calib.scale.cluster import check_cluster

            report = check_cluster(self.section.address, need_sandbox=sandbox)
            if not report.ok:
                raise CalibError(f"runner.address = {self.section.address!r}: the Ray cluster cannot run this "
                                 f"study: {'; '.join(report.problems)} (`calib cluster check ADDRESS` shows it)")
            self.cluster = report
            self._checked.add(sandbox)

    def ready(self, sandbox: bool = False) -> str:
        """Connect and check the cluster as the first chunk does (``sandbox``: its nodes must run calib's sandbox);
        the cluster's address, for a stage whose work goes there another way (the dedup stage's band-table search)."""
        self._start(sandbox)
        return self.section.address

    def _task(self, fn: Callable[..., Any]) -> Any:
        """:func:`run_call` as a Ray task of ``cpus_per_task`` CPUs, retried ``max_retries`` times when its worker
        dies (never when it raises), named ``calib:FUNCTION`` (the worker's process title while it runs)."""
        import ray

        return ray.remote(run_call).options(num_cpus=self.section.cpus_per_task, max_retries=self.section.max_retries,
                                            retry_exceptions=False, name=f"calib:{getattr(fn, '__qualname__', 'call')}")

    def _in_flight(self) -> int:
        if self.section.max_in_flight is not None:
            return self.section.max_in_flight
        import ray

        cpus = int(ray.cluster_resources().get("CPU", 1))
        return max(1, 2 * cpus // self.section.cpus_per_task)

    async def map(self, work: RemoteWork, chunks: Sequence[tuple[int, list[Any]]],
                  done: Callable[[int, pl.DataFrame, list[tuple[str, dict[str, Any]]], dict[str, Any]], None],
                  stop: Callable[[], bool]) -> None:
        """Run ``work`` on each ``(index, chunk)``; ``done(index, table, events, where)`` as each comes back
        (``where``: the task's node id, host and process id, for the chunk's event).

        No new task is sent once ``stop()`` says so (a ``[budget]`` cap); those in flight finish and are kept. Nor
        once a chunk has failed: the stage stops with that error, and a chunk still waiting for its turn must not
        call Ray after the runner has left the cluster (Ray would start a local instance of its own for it).
        """
        if not chunks:
            return
        await asyncio.to_thread(self._start, work.sandbox)
        import ray
        from ray.exceptions import RayTaskError, WorkerCrashedError

        shared = ray.put(work.shared)
        task = self._task(work.fn)
        gate = asyncio.Semaphore(self._in_flight())
        failed: list[int] = []  # chunks whose task failed: no task is sent after one

        async def one(index: int, chunk: list[Any]) -> None:
            async with gate:
                if failed or stop():
                    return
                ref = task.remote(work.fn, shared, chunk)
                try:
                    (table, events), where = await asyncio.wrap_future(ref.future())
                except BaseException as exc:
                    failed.append(index)
                    if isinstance(exc, RayTaskError):
                        cause = exc.as_instanceof_cause() if hasattr(exc, "as_instanceof_cause") else exc
                        first = " ".join(str(cause).split())[-400:]
                        raise CalibError(f"a Ray task failed on chunk {index}: {first}") from None
                    if isinstance(exc, WorkerCrashedError):
                        raise CalibError(f"the Ray worker running chunk {index} died {self.section.max_retries + 1} "
                                         "times (raise runner.max_retries, or look at the nodes' memory); the "
                                         "chunks done are kept: run calib study again to resume") from None
                    raise
                done(index, table, events, where)

        await asyncio.gather(*(one(i, c) for i, c in chunks))

    def starmap(self, fn: Callable[..., Any], calls: list[tuple[Any, ...]]) -> list[Any]:
        """``fn(*call)`` for each call, as Ray tasks on the cluster (at most ``max_in_flight`` at once), in order.

        For work that runs no untrusted code (the measure stage's CPU-bound metrics: a
        :data:`calib.metrics.run.ChunkPool`); where each ran is added to :attr:`where`.
        """
        if not calls:
            return []
        self._start(False)
        import ray

        task = self._task(fn)
        limit, refs, results = self._in_flight(), [], []
        for call in calls:
            if len(refs) - len(results) >= limit:
                results.append(ray.get(refs[len(results)]))
            refs.append(task.remote(fn, *call))
        results.extend(ray.get(refs[len(results):]))
        self.where.extend(w for _, w in results)
        return [r for r, _ in results]

    def close(self) -> None:
        """Leave the cluster (when this runner connected this process)."""
        from calib.scale.connect import disconnect

        if self._connected:
            disconnect(True)
        self._connected = None
        self._checked.clear()
