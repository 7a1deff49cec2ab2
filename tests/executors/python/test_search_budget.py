"""The search's budgets: its time budget is CPU time of the exploring process, not wall-clock time, and its
run budget grows once for a search near the coverage criterion that still progresses.

On a busy machine (other sandboxes, a CI run on two cores) a wall-clock budget ended searches sooner, so
the same function, context and seed chose other inputs there. ``synth.spent`` counts the process's CPU
time, and wall-clock time only past ``WALL_FACTOR`` times the budget (a search whose runs mostly wait).
"""

from __future__ import annotations

import ast
import random
import time
from collections.abc import Callable

from calib.executors.sandbox.harness import hints, synth
from calib.executors.sandbox.harness.record import Record


def test_waiting_counts_a_quarter_and_cpu_counts_whole() -> None:
    start = synth.clock()
    time.sleep(0.4)  # no CPU: only the wall-clock floor, 0.4 s / WALL_FACTOR, is spent
    share = synth.spent(start, 1.0)
    assert synth.WALL_FACTOR == 4
    assert 0.1 <= share < 0.4  # a wall-clock budget would have spent 0.4 of it already
    start = synth.clock()
    cpu0 = time.process_time()
    while time.process_time() - cpu0 < 0.3:  # 0.3 s of CPU, however long that takes on this machine
        pass
    assert synth.spent(start, 1.0) >= 0.3
    assert synth.spent(start, 0.1) >= 3.0  # the share of a smaller budget: three times over



def _search(lines_at: Callable[[int], frozenset[int]], budget_runs: int = 200) -> list[Record]:
    """``synth.search`` on a one-parameter function whose k-th run reaches ``lines_at(k)`` of lines 1-10 and
    gives an output of its own (each run is progress: a new output), with no time limit in reach."""
    node = ast.parse("def f(n):\n    return n\n").body[0]
    info = hints.analyse(node, skip_first=False)
    count = [0]

    def run(state: dict) -> Record:
        count[0] += 1
        return Record(state=state, valid=True, status="ok", output=str(count[0]), lines=lines_at(count[0]))

    pools = synth.Pools(info, random.Random(0))
    pools.by_param["n"] = list(range(20))  # a short walk, as real pools give
    fresh = iter(range(100, 10**6))
    pools.fresh = lambda name: next(fresh)  # and a new value whenever the search draws one afresh
    return synth.search(pools, run, executable=frozenset(range(1, 11)), n=10, min_valid=8, coverage=0.8,
                        min_distinct=2, budget_runs=budget_runs, budget_seconds=1000.0, avoid=set())


def _lines(upto: int, *later: tuple[int, int]) -> Callable[[int], frozenset[int]]:
    """Lines 1..upto from the first run, and each (line, run) of ``later`` from that run on."""
    return lambda k: frozenset(range(1, upto + 1)) | {line for line, at in later if k >= at}


def _share(records: list[Record]) -> float:
    return len(frozenset().union(*(r.lines for r in synth.select(records, 10)))) / 10


def test_a_search_near_the_coverage_criterion_that_still_progresses_gets_more_runs() -> None:
    # 6 of 10 lines at once (C - NEAR = 0.6), line 7 at run 230, line 8 at run 260: past 200 runs only
    # because of the extension, which ends with the criterion met (then every output differs: it stops)
    assert (synth.NEAR, synth.EXTEND) == (0.2, 2)
    records = _search(_lines(6, (7, 230), (8, 260)))
    assert 260 <= len(records) < synth.EXTEND * 200
    assert _share(records) == 0.8
    # never more than EXTEND times the budget, even while progressing (here it ends sooner, having drawn
    # every value of the small pool: repeated inputs are not run), but for the splice runs appended to a
    # search that ends short of the criteria (test_search_splice.py)
    endless = _search(_lines(7, (8, 5000)))
    assert 200 < len(endless) <= synth.EXTEND * 200 + synth.SPLICE_RUNS
    assert _share(endless) == 0.7


def test_a_search_far_from_the_coverage_criterion_ends_at_its_run_budget() -> None:
    # 5 of 10 lines (0.5 < C - NEAR): the budget of 200 runs is the end, progress or not
    records = _search(_lines(5, (6, 230)))
    assert len(records) == 200
    assert _share(records) == 0.5
