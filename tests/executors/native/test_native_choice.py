"""Choosing x's input states by the lines they reach (calib/executors/native/guided.py).

The unit tests give the chooser hand-made pools (outputs and lines per state), where the right choice is
worked out by hand in the comments; the end-to-end test runs real C in the sandbox, where the pool's
order puts the states reaching x's rarest branch late.
"""

from __future__ import annotations

from calib.executors.native.c import parse_c
from calib.executors.native.guided import choose, choose_covering
from calib.executors.native.types import synthesize
from tests.executors.native.test_native import compare, needs


def _explored(outputs: list[str | None]) -> dict[int, tuple[bool, str]]:
    return {i: (out is not None, out if out is not None else "crash") for i, out in enumerate(outputs)}


def test_greedy_cover_takes_the_state_reaching_the_rare_line_first():
    # 6 valid states, all outputs distinct; lines: every state reaches {1, 2}; state 5 alone reaches {3, 4}
    explored = _explored(["a", "b", "c", "d", "e", "f"])
    reached = {i: frozenset({1, 2}) for i in range(5)} | {5: frozenset({1, 2, 3, 4})}
    # by outputs alone the first 3 in pool order; by coverage state 5 first (2 new lines), then no state
    # adds a line and the rest fill up by new outputs in pool order: 0 and 1
    assert choose(explored, 6, 3) == [0, 1, 2]
    assert choose_covering(explored, 6, 3, reached) == [0, 1, 5]


def test_ties_prefer_a_new_output_then_pool_order_and_invalid_states_are_never_covering():
    # state 0 is invalid (crash) though it reaches everything; states 1 and 2 add the same line 7, state 2
    # with a new output (1's output equals state 3's, taken first for line 9)
    explored = _explored([None, "x", "y", "x"])
    reached = {0: frozenset(range(20)), 1: frozenset({7}), 2: frozenset({7}), 3: frozenset({9, 10})}
    assert choose_covering(explored, 4, 2, reached) == [2, 3]
    # asking for more than the valid states: the invalid one comes last, as in choose
    assert choose_covering(explored, 4, 4, reached) == [0, 1, 2, 3]


# a floor at -100: of the seeded pool (seed 0) only states 17 and later are below it
FLOOR = """int f(int v) {
  int r = v;
  if (v < -100) {
    r = -100;
  }
  return r / 2;
}"""


@needs("c")
def test_a_branch_only_late_pool_states_reach_is_covered():
    sig = parse_c(FLOOR)
    pool = synthesize(sig, 30, 0)
    # the first 10 pool states (what a choice by outputs alone keeps, all outputs distinct) never take
    # the branch: check that the pool is such a pool, so that the test means something
    assert not [s for s in pool[:10] if s["v"] < -100] and [s for s in pool[10:] if s["v"] < -100]
    result = compare("c", FLOOR, [FLOOR])
    taken = [row.state["v"] for row in result.inputs if row.state["v"] < -100]
    # gcov's executable lines of f at -O0: 1 (entry), 2, 3, 4, 6 (5 and 7 are braces): 5 lines, all reached
    assert taken and result.coverage == 1.0 and result.conclusive and result.uncovered_lines == (), result.reason
