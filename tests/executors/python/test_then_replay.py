"""x's replay in x's own explore batch (job key ``then_replay``: calib/executors/sandbox/harness/handover.py).

The exploring batch forks once it has analysed the scaffold and before any of its code runs; the child
replays x's chosen states as a replay batch of its own would. What a user relies on, checked here on
real sandboxed batches:

- the comparison is the same as with x's replay in a batch of its own (inputs, validity, output
  states, candidates' matches), with one batch fewer;
- the replay is still a fresh process: x that keeps state in a module between runs is still
  ``nondeterministic``; x that signals itself (``os.kill(os.getpid(), ...)``) does so in both processes
  (each loads the seccomp program naming its own pid); neither process can fork;
- a batch killed by the wall clock while x's replay runs leaves no process behind, and the inputs the
  replay did not report are replayed in a batch of their own.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from typing import Any

import pytest

from calib.executors.base import Comparison, ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox import SandboxRun
from tests.executors.python.test_shared_replays import X as GRADE
from tests.executors.python.test_throughput_pipeline import _descendants

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


class Counting(SandboxExecutor):
    """The sandbox executor, counting its jobs by mode (and whether an explore job replays x)."""

    def __init__(self, config: ExecutorConfig, *, then_replay: bool) -> None:
        super().__init__(config)
        self._then_replay = then_replay
        self.jobs: list[str] = []

    async def _run(self, job: dict[str, Any], wall: float) -> SandboxRun:
        self.jobs.append(job["mode"] + ("+replay" if job.get("then_replay") else ""))
        return await super()._run(job, wall)


def _compare(x: str, candidates: list[str], *, then_replay: bool, context: str = "",
             inputs: list[dict[str, Any]] | None = None, **config: Any) -> tuple[Comparison, list[str]]:
    ex = Counting(ExecutorConfig(seed=0, workers=1, **config), then_replay=then_replay)
    try:
        return asyncio.run(ex.compare(x, candidates, context=context, inputs=inputs)), ex.jobs
    finally:
        ex.close()


def _seen(cmp: Comparison) -> list[Any]:
    """What a user reads of a comparison: each input's state, validity and output, each candidate's matches."""
    return [cmp.conclusive, cmp.reason, cmp.valid_inputs, cmp.coverage, cmp.distinct_outputs,
            [(i.state, i.valid, i.status, i.reason, i.output) for i in cmp.inputs],
            [(c.matches, c.sim_func, c.outcome, c.outputs) for c in cmp.candidates]]


ACCOUNT = '''class Account:
    def __init__(self, owner, balance=0):
        self.owner = owner
        self.balance = balance

'''
SAMPLES = [  # (context, x, a near-copy): a search over plain values, a method with self, a file x reads
    ("LIMIT = 3\n", GRADE, ">= 80", "> 80"),
    (ACCOUNT, '''    def withdraw(self, amount):
        if amount <= 0:
            raise ValueError("amount must be positive")
        if amount > self.balance:
            return False
        self.balance -= amount
        return True
''', "amount > self.balance", "amount >= self.balance"),
    ("import os\n", '''def load(path):
    with open(path) as fh:
        return [line.split("=", 1) for line in fh.read().splitlines() if "=" in line]
''', '"=" in line', '"=" in line.strip()'),
]


@pytest.mark.parametrize("context, x, old, new", SAMPLES, ids=["plain", "method", "file"])
def test_the_comparison_is_the_same_with_one_batch_fewer(context: str, x: str, old: str, new: str) -> None:
    near = x.replace(old, new)
    merged, merged_jobs = _compare(x, [x, near], then_replay=True, context=context)
    alone, alone_jobs = _compare(x, [x, near], then_replay=False, context=context)
    assert merged.conclusive, merged.reason
    assert _seen(merged) == _seen(alone)
    assert sorted(merged_jobs) == ["explore+replay", "replay"]  # x's search and replay, the near-copy
    assert sorted(alone_jobs) == ["explore", "replay", "replay"]
    assert merged.candidates[0].sim_func == 1.0


def test_x_that_keeps_state_in_a_module_between_runs_is_still_nondeterministic() -> None:
    # the search's runs share one process; the replay is a fresh one (forked before any of x ran)
    x = '''def count(n):
    import json
    json._calls = getattr(json, "_calls", 0) + 1
    return n + json._calls
'''
    given = [{"args": {"n": str(n)}} for n in range(10)]
    searched = []
    for then_replay in (True, False):
        # given inputs: run in order in the explore batch (calls 1..10) and in the replay (1..10 again)
        cmp, _ = _compare(x, [], then_replay=then_replay, inputs=given)
        assert [i.valid for i in cmp.inputs] == [True] * 10, then_replay
        cmp, _ = _compare(x, [], then_replay=then_replay)  # searched: many runs before the chosen ones
        assert not cmp.conclusive and "mostly nondeterministic" in cmp.reason, then_replay
        assert sum(i.reason == "nondeterministic" for i in cmp.inputs) >= 8
        searched.append(_seen(cmp))
    assert searched[0] == searched[1]


def test_x_signals_itself_and_cannot_fork_in_both_processes() -> None:
    x = '''def f(n):
    import os
    import signal
    hits = []
    signal.signal(signal.SIGUSR1, lambda *args: hits.append(1))
    os.kill(os.getpid(), signal.SIGUSR1)
    import gc
    gc.unfreeze()  # the harness's audit hook refuses os.fork first: disarmed (as test_hostile.py's DISARM)
    for hook in [o for o in gc.get_objects() if getattr(o, "__qualname__", "").endswith("<locals>._audit")]:
        for cell in hook.__closure__ or ():
            cell.cell_contents = frozenset()
    try:
        os.fork()
        forked = "forked"
    except OSError as exc:
        forked = type(exc).__name__
    return [n * 2 + len(hits), forked]
'''
    given = [{"args": {"n": str(n)}} for n in range(10)]
    merged, jobs = _compare(x, [x], then_replay=True, inputs=given)
    assert jobs == ["explore+replay"]  # x's replay in its explore batch, shared by the verbatim candidate
    assert [i.reason for i in merged.inputs] == [""] * 10  # the replay gave the explore's outputs
    returns = [json.loads(o)["return"] for o in merged.candidates[0].outputs]
    assert returns == [{"list": [2 * n + 1, "PermissionError"]} for n in range(10)]  # the kernel's EPERM
    assert _seen(merged) == _seen(_compare(x, [x], then_replay=False, inputs=given)[0])


def test_a_batch_killed_while_x_is_replayed_leaves_no_process_behind() -> None:
    # input 0 is invalid (skipped by the replay); input 1 loops, catching the per-input alarm, only in a
    # process where input 0 did not run first: in x's replay, never while exploring
    x = '''def f(n):
    import json
    seen = getattr(json, "_calib_seen", False)
    json._calib_seen = True
    if n == 0:
        raise RecursionError("an invalid input")
    while not seen:
        try:
            while True:
                pass
        except BaseException:
            pass
    return n
'''
    given = [{"args": {"n": "0"}}, {"args": {"n": "1"}}]
    ex = Counting(ExecutorConfig(seed=0, workers=1, input_timeout=0.5), then_replay=True)
    try:
        asyncio.run(ex.compare("def g(n):\n    return n\n", [], inputs=given))  # the fork server is up
        before = _descendants()
        cmp = asyncio.run(ex.compare(x, [], inputs=given))
        left = _descendants() - before
    finally:
        ex.close()
    # x's replay did not report input 1: it was replayed in a batch of its own, which the wall clock ended too
    assert ex.jobs[1:] == ["explore+replay", "replay"]
    assert [i.reason for i in cmp.inputs] == ["recursion", "nondeterministic"]
    assert left == set()  # the replaying child died with its parent, the server reaped it
