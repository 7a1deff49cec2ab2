"""What a batch does with its :class:`~.runner.Runner`: the ``explore`` and ``replay`` modes, and the
channel their events go out on (helpers of :func:`.runner.main`; inside the sandbox, stdlib only).

The channel writes one JSON line per event with the job's nonce, encoded and written with functions
bound when the harness was imported, before any code under test ran (docs/executors.md, *What a batch
can forge*: this keeps ordinary rewiring out, and is no boundary against code that targets it).
"""

from __future__ import annotations

import builtins
import json
import os
import types

from . import canon, hints, standins
from .classattrs import instance_default

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any, Protocol

    class Runner(Protocol):
        """What ``explore`` and ``replay`` use of :class:`.runner.Runner` (which imports this module)."""

        channel: Channel
        placed: Any
        params: Any
        module: Any
        seed: int
        init: Any
        executable: set[int]
        poisoned: bool

        def emit(self, event: dict[str, Any]) -> None: ...

        def run(self, state: Any) -> Any: ...

        def covered(self) -> list[int]: ...

#: The exit status of a batch that stopped after an input left threads running (the host restarts it
#: after that input: the threads would otherwise go on changing what later inputs see).
THREADS_EXIT = 86

_write = os.write  # bound now: code under test that replaces ``os.write`` does not reach the channel


class Channel:
    """The harness's events: one JSON line each, with the job's nonce, written straight to a descriptor."""

    def __init__(self, fd: int, nonce: str | None) -> None:
        self.fd = fd
        self.nonce = nonce

    def write(self, text: str) -> None:
        view = memoryview(text.encode("utf-8"))
        while view:
            view = view[_write(self.fd, view):]

    def flush(self) -> None:
        """Nothing to flush (each write goes to the descriptor); for code that treats this as a file."""

    def emit(self, event: dict[str, Any]) -> None:
        if self.nonce is not None:
            event["nonce"] = self.nonce
        self.write(canon.encode_event(event) + "\n")


def _stop_poisoned(runner: Runner) -> None:
    """End the process after an input that left threads running (the host restarts after it)."""
    runner.channel.flush()
    os._exit(THREADS_EXIT)


def explore(runner: Runner, job: dict[str, Any]) -> list[Any]:
    """Choose x's input states (or run the given ones), report them in one ``explore`` event; the chosen records."""
    from .record import Record  # noqa: PLC0415 - replays never need it

    n = int(job.get("n_inputs", 10))
    seeds = job.get("inputs")
    placed = runner.placed

    pools: Any = None  # synth.Pools while searching
    unverified = False  # the chosen inputs come from runs on a reused build, not checked on fresh ones

    def run(state: dict[str, Any]) -> Any:  # a Record
        runner.emit({"event": "try", "key": repr(sorted(state.items()))})
        status, reason, out = runner.run(state)
        if runner.poisoned:
            _stop_poisoned(runner)
        if runner.reuse is not None:
            runner.reuse.settle()
        if pools is not None:
            pools.observe(cmplog.take())
        record = Record(state=state, valid=status != "invalid", status=reason if status == "invalid" else status,
                        output=canon.dumps(out), lines=runner.covered())
        record.in_try = standins.LOG.try_calls > 0
        record.handed = standins.LOG.handed > 0
        record.called = standins.LOG.called
        record.drawn = standins.LOG.drawn
        record.wants = standins.LOG.wants
        return record

    info = runner.params
    hints.mine_module(placed.tree, info)
    if seeds is not None:  # the user's inputs; one that took a batch down is reported, not rerun
        crashed = job.get("crashed") or {}
        records = []
        for state in seeds:
            why = crashed.get(repr(sorted(state.items()))) if isinstance(crashed, dict) else None
            if why is not None:
                records.append(Record(state=state, valid=False, status=f"crashed ({why})",
                                      output=json.dumps({"outcome": str(why)})))
            else:
                records.append(run(state))
        chosen = records
        runs = len(records)
    else:
        import random  # noqa: PLC0415

        from . import cmplog, synth  # noqa: PLC0415 - imported by main() before the clock was frozen

        # comparison feedback while searching (the chosen inputs are measured again, uninstrumented,
        # in the replay batch)
        rewritten = cmplog.instrument(placed.node, placed.tree)
        # the recorder is a builtin of this process, not a name of the module: x that reads its module's
        # ``globals()`` (dpkt's ``__load_protos`` hands them to a dependency) sees the same names as in the replay,
        # which has no recorder (as one of the module's names, every search run's output differed from the replay's)
        builtins.__dict__[cmplog.NAME] = cmplog.compare
        runner.module.recompile(rewritten)  # the statements holding them

        from .reuse import Reuse, verify  # noqa: PLC0415

        vary_standins = bool(runner.module.standin_names or runner.module.warnings or info.self_params
                             or info.bound_standins)
        budget_seconds = float(job.get("budget_seconds", 2.0))
        started = synth.clock()

        def search(seconds: float) -> list[Any]:
            nonlocal pools
            pools = synth.Pools(info, random.Random(runner.seed), vary_seed=synth.varies_seed(placed.source, info),
                                init=runner.init, owner=placed.classes[-1] if placed.classes else None,
                                vary_standins=vary_standins)
            return synth.search(
                pools, run, executable=runner.executable, n=n, min_valid=int(job.get("min_valid", 8)),
                coverage=float(job.get("coverage", 0.8)), min_distinct=int(job.get("min_distinct", 2)),
                budget_runs=int(job.get("budget_runs", 200)), budget_seconds=seconds,
                avoid=set(job.get("avoid", [])))

        # one build of the module for the whole search (job key reuse: false, a build per run); the
        # chosen inputs run again on fresh builds (what is reported), and if one differs the module keeps
        # state: search again, a build per run. With job key verify: false the host checks them instead,
        # in x's replay (a fresh process), and explores again with reuse off if one differs ("unverified")
        runner.reuse = Reuse(runner.module) if job.get("reuse", True) is not False else None
        records = search(budget_seconds)
        runs = len(records)
        reused = runner.reuse is not None and runner.reuse.usable
        runner.reuse = None
        chosen = synth.select(records, n)
        unverified = reused and job.get("verify", True) is False
        if reused and not unverified:
            chosen, kept = verify(chosen, run)
            if not kept:
                left = budget_seconds * (1 - synth.spent(started, budget_seconds))
                again = search(left) if left > 0 else []
                runs += len(again)
                keys = {repr(sorted(r.state.items())) for r in chosen}
                records = chosen + [r for r in again if repr(sorted(r.state.items())) not in keys]
                chosen = synth.select(records, n)
        if len(chosen) < n:  # pad with invalid inputs so the report shows what was tried
            chosen += [r for r in records if not r.valid][: n - len(chosen)]
    runner.emit({"event": "explore", "runs": runs, "walk_runs": pools.walk_runs if pools is not None else 0,
                 "executable": sorted(runner.executable),
                 "unverified": unverified,
                 "first_line": placed.first_line,
                 "context_chars": placed.context_chars,  # the suffix of the job's context x ran after (job key trim)
                 "reached": sorted(frozenset().union(*(r.lines for r in records if r.valid))),
                 "warnings": runner.module.warnings,
                 "chosen": [{"state": r.state, "valid": r.valid, "status": r.status, "output": r.output,
                             "lines": sorted(r.lines)} for r in chosen]})
    return chosen


def drop_class_attributes(runner: Runner, info: hints.Hints, ns: dict[str, Any]) -> None:
    """``self.x`` that the class itself defines (methods, properties, constants) is context, not input."""
    if not info.self_params or not runner.placed.classes:
        return
    try:
        owner: Any = ns[runner.placed.classes[0]]
        for name in runner.placed.classes[1:]:
            owner = getattr(owner, name)
    except BaseException:  # noqa: BLE001 - the search will report what goes wrong per input
        return
    if isinstance(owner, type):  # __slots__ members and defaults of instance state are not class attributes
        info.self_params = [p for p in info.self_params if not hasattr(owner, p.name)
                            or isinstance(getattr(owner, p.name, None), types.MemberDescriptorType)
                            or instance_default(owner, p.name)]


def replay(runner: Runner, job: dict[str, Any]) -> None:
    """Run the given input states in order: a ``start`` and a ``result`` event for each."""
    skip = set(job.get("skip", []))
    for index, state in enumerate(job["inputs"]):
        if index in skip:
            continue
        runner.emit({"event": "start", "index": index})
        status, reason, out = runner.run(state)
        runner.emit({"event": "result", "index": index, "status": status, "reason": reason,
                     "output": canon.dumps(out), "lines": sorted(runner.covered())})
        if runner.poisoned:
            _stop_poisoned(runner)
