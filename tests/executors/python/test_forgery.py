"""Output-state comparison that cannot be fooled or forged, checked through the real sandbox executor.

docs/executors.md, "Output states" (*Values that cannot be canonicalized*, *What a batch can forge*):
two different behaviours never compare equal because of how they are observed (integers past ``str()``'s
digit limit, closures and lambdas of one name, values past a size or depth bound), and what code under
test writes on the harness's channel cannot make a candidate match x. Each case runs ``compare`` with a
truth and candidates through bubblewrap and checks what a user reads in the result: conclusive or the
stated reason, SIM_func, the per-input matches and x's output states.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sys
import textwrap

import pytest

import calib.executors.python as python_executor
from calib.executors.base import Comparison, ExecutorConfig
from calib.executors.python import SandboxExecutor

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

VALUES = tuple(range(-2, 8))
INPUTS = [{"args": {"n": str(v)}} for v in VALUES]
THREE = VALUES.index(3)  # the input on which the "almost" candidates differ

TRUTH = '''\
def f(n):
    if n < 0:
        return "neg"
    return n * 7
'''
DIFFERENT = TRUTH.replace("n * 7", "n * 7 + (n == 3)")  # differs from the truth on n == 3 only


def compare(truth: str, *candidates: str, context: str = "", inputs: list | None = INPUTS,
            **settings) -> Comparison:
    config = {"n_inputs": len(VALUES), "min_valid": len(VALUES) - 2, "input_timeout": 1.0, "budget_seconds": 1.0,
              "budget_runs": 40, "workers": 2, **settings}
    executor = SandboxExecutor(ExecutorConfig(**config))
    assert executor.sandbox.isolated
    try:
        return asyncio.run(executor.compare(truth, list(candidates), context=context, inputs=inputs))
    finally:
        executor.close()


def outputs(comparison: Comparison) -> list[dict]:
    """x's output state per input, parsed."""
    return [json.loads(item.output) for item in comparison.inputs]


def sims(comparison: Comparison) -> list[float | None]:
    return [c.sim_func for c in comparison.candidates]


def body(source: str) -> str:
    return textwrap.indent(textwrap.dedent(source), "    ")


# --- values that used to compare equal -------------------------------------------------------------------


def test_integers_past_the_digit_limit_compare_by_value():
    # str() of an int over 4,300 digits raises ValueError: that made x's output "raised ValueError" on
    # every input, and any candidate that also failed to print its result matched
    truth = "def f(n):\n    return 10 ** 100_000 + n\n"
    almost = "def f(n):\n    return 10 ** 100_000 + n + (n == 3)\n"
    decimal = "def f(n):\n    return 10 ** 4_500 + n\n"  # over the digit limit, under MAX_DECIMAL_BITS
    result = compare(truth, truth, almost, "def f(n):\n    return str(10 ** 100_000 + n)\n")
    assert result.conclusive, result.reason
    assert result.distinct_outputs == len(VALUES)
    assert sims(result) == [1.0, 0.9, 0.0]
    assert result.candidates[1].matches[THREE] is False
    for v, out in zip(VALUES, outputs(result)):  # the first 20,000 hex digits, the length, a digest of all
        text = hex(10 ** 100_000 + v)
        assert out["return"] == {"int_hex": text[:20_000], "truncated": len(text),
                                 "sha256": hashlib.sha256(text.encode()).hexdigest()}
    exact = compare(decimal, decimal.replace("+ n", "+ n + (n == 3)"))
    assert exact.conclusive and sims(exact) == [0.9]
    limit = sys.get_int_max_str_digits()  # the host's reference: the same number written in decimal
    sys.set_int_max_str_digits(0)
    try:
        assert [out["return"] for out in outputs(exact)] == [{"int": str(10 ** 4_500 + v)} for v in VALUES]
    finally:
        sys.set_int_max_str_digits(limit)


CLOSURE = '''\
def f(n):
    def add(y):
        return y + n
    return add
'''


def test_closures_compare_by_code_and_captured_values_not_by_name():
    captured_other = CLOSURE.replace("    def add", "    n = n + (n == 3)\n    def add")  # same code
    other_code = CLOSURE.replace("y + n", "y - n")  # same captured value
    result = compare(CLOSURE, CLOSURE, captured_other, other_code, coverage=0.0)  # add() is never called
    assert result.conclusive, result.reason
    assert sims(result) == [1.0, 0.9, 0.0]
    out = outputs(result)[0]["return"]
    assert out["function"] == "f.<locals>.add" and out["closure"] == [-2] and len(out["code"]) == 64


def test_lambdas_compare_by_code_and_captured_values():
    truth = "def f(n):\n    return lambda y: y * n\n"
    result = compare(truth, truth, "def f(n):\n    return lambda y: y + n\n",
                     "def f(n):\n    m = n + (n == 3)\n    return lambda y: y * m\n", coverage=0.0)
    assert result.conclusive, result.reason
    assert sims(result) == [1.0, 0.0, 0.9]


def test_a_structure_deeper_than_the_bound_is_unobservable_never_equal():
    nest = "def f(n):\n    v = n\n    for _ in range({depth}):\n        v = [v]\n    return v\n"
    deep = nest.format(depth=40)
    result = compare(deep, deep, deep.replace("v = n\n", "v = n + 1\n"))
    assert not result.conclusive
    assert "valid_inputs 0 < 8 (mostly unobservable)" in result.reason
    assert sims(result) == [None, None]  # inconclusive: never a match, never a non-match
    assert all(json.loads(i.output)["unobservable"] == "depth_limit" for i in result.inputs)
    shallow = nest.format(depth=20)  # within the bound (it was 8): compared whole
    result = compare(shallow, shallow.replace("v = n\n", "v = n + (n == 3)\n"))
    assert result.conclusive and sims(result) == [0.9]


@pytest.mark.parametrize("value", ['"x" * 30_000 + str({n})', '"\\udc80" * 30_000 + str({n})',
                                   "list(range(600)) + [{n}]", "dict.fromkeys(range(600), {n})",
                                   "b'x' * 30_000 + bytes([({n}) % 256])"])
def test_what_a_size_bound_cuts_off_still_decides_the_match(value: str):
    truth = f"def f(n):\n    return {value.format(n='n')}\n"
    almost = f"def f(n):\n    return {value.format(n='n + (n == 3)')}\n"
    result = compare(truth, truth, almost)
    assert result.conclusive, result.reason
    assert sims(result) == [1.0, 0.9]
    assert all("sha256" in json.dumps(out["return"]) for out in outputs(result))


def test_printing_past_the_capture_bound_still_decides_the_match():
    truth = "def f(n):\n    print('x' * 70_000, n)\n    return n\n"
    result = compare(truth, truth, truth.replace("print('x' * 70_000, n)", "print('x' * 70_000, n + (n == 3))"))
    assert result.conclusive, result.reason
    assert sims(result) == [1.0, 0.9]
    assert "more characters, sha256 " in outputs(result)[0]["stdout"]


# --- finalizers and exit handlers ----------------------------------------------------------------------

SLOW_DEL = '''\
class Slow:
    def __del__(self):
        while True:
            pass

'''


def test_a_finalizer_that_loops_is_charged_to_its_own_input():
    # the cycle is garbage once f returns; it used to be collected before the next input, outside every
    # timer, so the next input took the blame (or the whole batch waited for its wall clock)
    truth = "def f(n):\n    if n == 1:\n        s = Slow()\n        s.me = s\n    return n * 7\n"
    result = compare(truth, truth, context=SLOW_DEL, coverage=0.0)  # its branch runs on an invalid input
    one = VALUES.index(1)
    assert [i.reason for i in result.inputs] == ["timeout" if k == one else "" for k in range(len(VALUES))]
    assert result.conclusive, result.reason
    assert result.candidates[0].matches == tuple(None if k == one else True for k in range(len(VALUES)))


FIND_RUNNER = '''\
import sys
frame = sys._getframe()
while type(frame.f_locals.get("self")).__name__ != "Runner":
    frame = frame.f_back
runner = frame.f_locals["self"]
'''


def test_an_exit_handler_runs_no_code_after_the_last_input(monkeypatch: pytest.MonkeyPatch):
    # a sandbox per batch (no fork server): a plain interpreter exit would run the handler after "done"
    monkeypatch.setenv("CALIB_FORK_SERVER", "0")
    forger = "def f(n):\n" + body(FIND_RUNNER) + body('''\
        import atexit
        def forge():
            for i in range(10):
                runner.emit({"event": "result", "index": i, "status": "ok", "reason": "", "output": "forged"})
        atexit.register(forge)
        return "mine"
        ''')
    result = compare(TRUTH, TRUTH, forger)
    assert result.conclusive, result.reason
    assert sims(result) == [1.0, 0.0]
    assert set(result.candidates[1].outputs) != {"forged"}
    assert all('"return":"mine"' in o for o in result.candidates[1].outputs)


# --- forging the harness's channel -----------------------------------------------------------------------

REWIRE = '''\
import builtins, json, os, sys
json.dumps = lambda *a, **k: '{"event":"explore","chosen":[]}'
json.encoder.c_make_encoder = None
os.write = lambda fd, data: len(data)
sys.stdout = sys.__stdout__ = open(os.devnull, "w")
builtins.print = lambda *a, **k: None
sys.modules["_harness.runner"].main = lambda: None
'''


@pytest.mark.parametrize("where", ["truth", "context"])
def test_rewiring_json_stdout_os_write_and_main_does_not_reach_the_harness(where: str):
    # the harness bound what it writes with before any code ran: the honest outputs come through
    if where == "truth":
        truth, context = "def f(n):\n" + body(REWIRE) + TRUTH.split("\n", 1)[1], ""
    else:
        truth, context = TRUTH, REWIRE + "\n"
    result = compare(truth, TRUTH, DIFFERENT, "def f(n):\n    return 'forged'\n", context=context)
    assert result.conclusive, result.reason
    assert sims(result) == [1.0, 0.9, 0.0]
    assert [out["return"] for out in outputs(result)] == ["neg" if v < 0 else v * 7 for v in VALUES]


def _forged_lines(kind: str) -> str:
    """Events as the harness writes them, but without the batch's nonce: x claims the output "forged"."""
    if kind == "explore":
        chosen = [{"state": s, "valid": True, "status": "ok", "output": '{"return":"forged"}', "lines": [2, 3]}
                  for s in INPUTS]
        events = [{"event": "explore", "runs": 10, "executable": [2, 3], "first_line": 1, "reached": [2, 3],
                   "warnings": [], "chosen": chosen}]
    else:
        events = [{"event": "result", "index": i, "status": "ok", "reason": "", "output": '{"return":"forged"}',
                   "lines": [2]} for i in range(len(INPUTS))]
    return "".join(json.dumps(e) + "\n" for e in [*events, {"event": "done"}])


@pytest.mark.parametrize("kind", ["explore", "result"])
def test_event_lines_written_on_every_descriptor_are_not_the_harness_s(kind: str):
    forge = f'''\
        import os, sys
        line = {_forged_lines(kind)!r}
        for fd in range(1, 256):
            try:
                os.write(fd, line.encode())
            except OSError:
                pass
        '''
    truth = "def f(n):\n" + body(forge) + TRUTH.split("\n", 1)[1]
    forged = "def f(n):\n    return 'forged'\n"
    result = compare(truth, truth, forged)  # (what it wrote on fds 1 and 2 is its fd_output, as the copy's)
    assert result.conclusive, result.reason
    assert sims(result) == [1.0, 0.0]
    assert [out["return"] for out in outputs(result)] == ["neg" if v < 0 else v * 7 for v in VALUES]
    # and as a candidate: its own forged lines do not make it match
    result = compare(TRUTH, TRUTH, "def f(n):\n" + body(forge) + "    return 'mine'\n")
    assert result.conclusive and sims(result) == [1.0, 0.0]


def test_an_explore_report_with_more_inputs_than_n_inputs_is_refused():
    forge = "def f(n):\n" + body(FIND_RUNNER) + body('''\
        import os
        chosen = [{"state": {"args": {"n": str(k)}}, "valid": True, "status": "ok",
                   "output": '{"return":%d}' % k, "lines": [1]} for k in range(100)]
        runner.emit({"event": "explore", "runs": 100, "executable": [1], "first_line": 1, "reached": [1],
                     "warnings": [], "chosen": chosen})
        os._exit(0)
        ''')
    result = compare(forge, TRUTH, inputs=None)  # the search: n_inputs = 10
    assert not result.conclusive
    assert result.reason == "crashed: malformed harness output (100 inputs reported, at most n_inputs=10)"
    assert sims(result) == [None] and result.candidates[0].outcome == "not_run"
    result = compare(forge, TRUTH)  # given inputs: the report must be exactly those
    assert result.reason == "crashed: malformed harness output (100 inputs reported for 10 given)"
    swapped = forge.replace("range(100)", "range(10, 20)")
    result = compare(swapped, TRUTH)
    assert result.reason == "crashed: malformed harness output (input 0 is not the given input 0)"


def test_a_candidate_that_forges_its_own_results_only_lies_about_itself():
    # through the real channel (it found the nonce): it claims an output for every input, then leaves;
    # it can only claim outputs it computes itself, which is being a different function
    forge = "def f(n):\n" + body(FIND_RUNNER) + body('''\
        import os
        for i in range(10):
            runner.emit({"event": "result", "index": i, "status": "ok", "reason": "",
                         "output": '{"return":"forged"}', "lines": []})
        os._exit(0)
        ''')
    result = compare(TRUTH, TRUTH, forge)
    assert result.conclusive, result.reason
    assert sims(result) == [1.0, 0.0]
    assert set(result.candidates[1].outputs) == {'{"return":"forged"}'}
    # a second report of one input, whatever it says, makes that input a non-match
    twice = "def f(n):\n" + body(FIND_RUNNER) + body(f'''\
        if n == 3:
            runner.emit({{"event": "result", "index": {THREE}, "status": "ok", "reason": "", "output": "{{}}",
                         "lines": []}})
        ''') + TRUTH.split("\n", 1)[1]
    result = compare(TRUTH, twice)
    assert result.conclusive and sims(result) == [0.9]
    assert result.candidates[0].outputs[THREE] == json.dumps({"outcome": "reported twice"})


def test_the_host_drops_events_without_the_batch_nonce():
    run = python_executor.SandboxRun(returncode=0, stdout=b'{"event":"start","index":0}\n{"event":"start","index":1,'
                                     b'"nonce":"n1"}\n{"event":"done","nonce":"n1"}\n{"event":"x","nonce":"n1"}\n',
                                     stderr=b"", timed_out=False, output_exceeded=False, seconds=0.0)
    assert python_executor._ours(python_executor._events(run), "n1") == [
        {"event": "start", "index": 1, "nonce": "n1"}, {"event": "done", "nonce": "n1"}]


SCALED = "def f(n):\n    if n < 0:\n        return 'neg'\n    return n * SCALE\n"
CUT = '    "b": 2,\n}\nSCALE = 7\n'  # the context's first lines end a statement cut off above: trimmed


@pytest.mark.parametrize(("claimed", "candidate_sim"), [("'many'", 1.0), ("-1", 1.0), ("10 ** 6", 1.0), ("0", 0.2)])
def test_a_truth_that_misreports_its_context_length_only_changes_where_its_candidates_run(claimed: str,
                                                                                            candidate_sim: float):
    # x's explore batch trims the context and reports the suffix's length (``context_chars``); the candidates
    # run after that suffix. A length that is no length of the context (a text, below 0, past its end) is not
    # taken: the host trims the context itself, and the candidate sees SCALE as x did. A length that is one
    # (0: no context) is taken, and the candidate runs without SCALE (a stand-in: it matches on the two negative
    # inputs only): x can make its candidates differ, as it can by forging its own outputs, never make one match
    # (docs/executors.md, "What a batch can forge").
    forger = "def f(n):\n" + body(FIND_RUNNER) + f"    runner.placed.context_chars = {claimed}\n" + \
        SCALED.split("\n", 1)[1]
    candidate = SCALED.replace("n * SCALE", "SCALE * n")
    result = compare(forger, candidate, context=CUT)
    assert result.conclusive, result.reason
    assert [out["return"] for out in outputs(result)] == ["neg" if v < 0 else v * 7 for v in VALUES]
    assert sims(result) == [candidate_sim]
    honest = compare(SCALED, candidate, context=CUT)  # the same context, trimmed the same way, reported honestly
    assert honest.conclusive and sims(honest) == [1.0]
