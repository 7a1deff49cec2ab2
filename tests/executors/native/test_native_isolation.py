"""One process per input (calib/executors/sandbox/harness/each.py): nothing of one input reaches the next.

Each test runs real C code in the sandbox (and once without it). The expected outputs are what the
function computes on a fresh process, written next to each source; under the old shared process the
static counter would have given input k the value x + k + 1 instead.
"""

from __future__ import annotations

import asyncio
import json
import warnings

from calib.executors.base import ExecutorConfig
from calib.executors.native import NativeExecutor
from tests.executors.native.test_native import compare, needs

# a static counter: on a fresh process every call is the first, so f(x) = x + 1 on every input
COUNTER = """int f(int x) {
  static int calls = 0;
  calls++;
  return x + calls;
}"""
# a file in /tmp: a later input of the same process would see the earlier input's file (s = 1)
TMP_TRACE = """int f(int x) {
  FILE *p = fopen("/tmp/seen", "r");
  int s = p != 0;
  if (p) fclose(p);
  FILE *o = fopen("/tmp/seen", "w");
  if (o) fclose(o);
  return 2 * x + s;
}"""
# exit() on every third input: that input ends early, every other input still runs (in a process of its own)
EXITS = """int f(int x) {
  if (x % 3 == 0) exit(0);
  return x - 1;
}"""


def _returns(result) -> list[tuple[int, int]]:
    return [(row.state["x"], json.loads(row.output)["return"]) for row in result.inputs if row.valid]


@needs("c")
def test_static_state_does_not_leak_between_inputs():
    result = compare("c", COUNTER, [COUNTER, "int f(int x) { return x + 1; }"])
    assert result.valid_inputs == 10 and result.conclusive, result.reason
    assert all(got == x + 1 for x, got in _returns(result))  # never x + 2, x + 3, ...
    assert [c.sim_func for c in result.candidates] == [1.0, 1.0]


@needs("c")
def test_tmp_files_do_not_leak_between_inputs():
    result = compare("c", TMP_TRACE, [])
    assert result.valid_inputs == 10
    # the file of an earlier input is never seen (2 * x wraps to 32 bits: the build uses -fwrapv)
    assert all(got == (2 * x + 2**31) % 2**32 - 2**31 for x, got in _returns(result))


@needs("c")
def test_an_input_that_exits_costs_only_itself():
    result = compare("c", EXITS, [EXITS], inputs=[{"x": k} for k in range(7)])
    ended = [row for row in result.inputs if not row.valid]
    assert ended and all(row.state["x"] % 3 == 0 and row.reason == "exited early" for row in ended)
    ran = _returns(result)
    assert ran and all(x % 3 != 0 and got == x - 1 for x, got in ran)
    assert [row.state["x"] for row in ended] == [0, 3, 6] and [x for x, _ in ran] == [1, 2, 4, 5]


@needs("c")
def test_without_a_sandbox_inputs_still_get_a_process_each():
    config = ExecutorConfig(input_timeout=0.5, workers=2, unsafe_no_sandbox=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the documented no-sandbox warning
        result = asyncio.run(NativeExecutor(config, "c").compare(COUNTER, [COUNTER]))
    assert result.valid_inputs == 10 and all(got == x + 1 for x, got in _returns(result))
