"""A candidate with x's own source (the verbatim reproduction a memorization audit looks for) and
repeated candidates share one replay batch: the same code on the same states in a fresh process.

Counted by the jobs the executor sends to its sandbox: compare(x, [x, x', x]) runs the search, x's
replay and x' (three batches, not five; two since x's explore batch replays x itself, job key
``then_replay``: calib/executors/sandbox/harness/handover.py), and every candidate still gets its own
result row.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox import SandboxRun

X = '''def grade(score, curve=0):
    total = score + curve
    if total >= 90:
        return "A"
    if total >= 80:
        return "B"
    return "C" if total >= 70 else "F"
'''
MUTANT = X.replace(">= 80", "> 80")
INPUTS = [{"args": {"score": str(s), "curve": str(c)}} for s, c in
          [(95, 0), (85, 0), (80, 0), (75, 0), (60, 0), (79, 1), (89, 1), (50, 30), (10, 0), (70, 0)]]


class Counting(SandboxExecutor):
    """The sandbox executor, counting the jobs it sends by mode and function source."""

    def __init__(self, config: ExecutorConfig) -> None:
        super().__init__(config)
        self.jobs: list[tuple[str, str]] = []

    async def _run(self, job: dict[str, Any], wall: float) -> SandboxRun:
        self.jobs.append((job["mode"], job["function"]))
        return await super()._run(job, wall)


def _compare(candidates: list[str], *, then_replay: bool = True) -> tuple[Any, list[tuple[str, str]]]:
    ex = Counting(ExecutorConfig(seed=0, workers=2))
    ex._then_replay = then_replay
    try:
        return asyncio.run(ex.compare(X, candidates, inputs=INPUTS)), ex.jobs
    finally:
        ex.close()


@pytest.mark.parametrize("then_replay", [True, False], ids=["replayed-in-the-explore-batch", "own-batch"])
def test_a_verbatim_candidate_uses_xs_replay(then_replay: bool) -> None:
    cmp, jobs = _compare([X, MUTANT, X], then_replay=then_replay)
    assert cmp.conclusive
    own = [] if then_replay else [("replay", X)]
    assert sorted(jobs) == sorted([("explore", X), *own, ("replay", MUTANT)])
    verbatim, mutant, again = cmp.candidates
    assert verbatim.sim_func == again.sim_func == 1.0
    assert verbatim.outcome == again.outcome == "ran"
    # x's outputs, input by input (the replay that made them valid)
    assert list(verbatim.outputs) == [r.output for r in cmp.inputs]
    # the mutant differs exactly where score + curve == 80 (grade B against C): (80, 0), (79, 1), (50, 30)
    assert list(mutant.matches) == [True, True, False, True, True, False, True, False, True, True]
    assert mutant.sim_func == 0.7


def test_equal_candidates_run_once_and_a_reformatted_one_runs_on_its_own() -> None:
    spaced = X.replace("total = score + curve", "total = (score + curve)  # same")
    cmp, jobs = _compare([MUTANT, spaced, MUTANT])
    replays = [f for mode, f in jobs if mode == "replay"]
    assert sorted(replays) == sorted([MUTANT, spaced])  # the mutant once, the reformatted copy (x: in its explore)
    first, reformatted, second = cmp.candidates
    assert first.matches == second.matches and first.outputs == second.outputs
    assert reformatted.sim_func == 1.0  # it ran in its own batch and matched everywhere
    assert all(json.loads(o)["return"] in ("A", "B", "C", "F") for o in reformatted.outputs if o)


METHOD_CONTEXT = "class Grader:\n    bonus = 0\n\n"
# a method whose docstring holds a blank line: re-indenting the candidate would indent that line too
METHOD = '''    def grade(self, score):
        """The letter for a score.

        Scores of 90 and more are an A.
        """
        if score + self.bonus >= 90:
            return "A", self.grade.__doc__.count("\\n\\n")
        return "B", 0
'''


def test_a_verbatim_method_runs_as_xs_own_text_and_shares_xs_replay() -> None:
    ex = Counting(ExecutorConfig(seed=0, workers=2))
    states = [{"args": {"score": str(s)}, "self": "Obj(bonus=0)"} for s in (95, 50, 90, 89, 100, 10, 91, 0)]
    try:
        cmp = asyncio.run(ex.compare(METHOD, [METHOD], context=METHOD_CONTEXT, inputs=states))
    finally:
        ex.close()
    assert ex.jobs == [("explore", METHOD)]  # no batch of its own: before, the re-indented copy had one
    (verbatim,) = cmp.candidates
    assert [json.loads(r.output)["return"] for r in cmp.inputs][:2] == [{"tuple": ["A", 1]}, {"tuple": ["B", 0]}]
    assert verbatim.sim_func == 1.0 and list(verbatim.outputs) == [r.output for r in cmp.inputs]
