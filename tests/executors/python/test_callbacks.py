"""x's own functions handed to a stand-in (a withheld helper) are called after x, through the real sandbox.

sqlparse's ``group_as`` defines ``match``/``valid_prev``/``valid_next``/``post`` and passes them to the
withheld ``_group``: their lines are x's code that nothing runs unless the harness calls them, as the
dependency would, with stand-ins for its own objects (docs/executors.md, "Functions x hands to a
stand-in are called"). The references are Python's own semantics of the callbacks, written out here.
"""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness.values import decode
from tests.executors.python.test_result_shapes import _compare, _outputs

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


WIRE = (
    "def wire(events, scale):\n"
    "    def on_pair(first, second):\n"
    "        return [second, first, scale]\n"
    "\n"
    "    def on_rest(*items):\n"
    "        return ['rest', len(items)]\n"
    "\n"
    "    register(events, on_pair, done=on_rest)\n"
    "    return scale\n"
)


def test_callbacks_handed_to_a_withheld_helper_are_called_with_stand_ins_and_recorded() -> None:
    # ``register`` is withheld (a stand-in): without the probe the two nested functions never run.
    swapped = WIRE.replace("[second, first, scale]", "[first, second, scale]")
    result = _compare(WIRE, [WIRE, swapped])
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    outputs = _outputs(result)
    assert outputs
    for state, out in outputs:
        scale = out["return"]
        # on_pair(a, b) returns [b, a, scale]; on_rest(a) returns ['rest', len((a,))] == ['rest', 1]
        # each is called twice with the same arguments (a counter or a cache answers differently)
        pair = ["register:1(arg0, arg1)",
                {"return": {"list": [{"standin": "register:1.arg1"}, {"standin": "register:1.arg0"}, scale]}}]
        rest = ["register:done(arg0)", {"return": {"list": ["rest", 1]}}]
        assert out["probes"] == [pair, pair, rest, rest], state
    assert result.candidates[0].sim_func == 1.0
    # a candidate whose callback answers differently differs, though x's own return is the same
    assert result.candidates[1].sim_func is not None and result.candidates[1].sim_func < 1.0


CHECK_CONTEXT = "def helper(item):\n    return item\n\n"
CHECK = (
    "def check(value):\n"
    "    def validate(item):\n"
    "        return item.ok\n"
    "\n"
    "    hooks.add(validate)\n"
    "    hooks.add(helper)\n"
    "    if value < 0:\n"
    "        raise ValueError('negative')\n"
    "    return value\n"
)


def test_callbacks_run_when_x_raises_and_module_functions_are_not_x_s() -> None:
    result = _compare(CHECK, [CHECK], context=CHECK_CONTEXT)
    assert result.coverage == 1.0
    outputs = _outputs(result)
    raised = [out for state, out in outputs if out.get("exception") == "ValueError"]
    assert raised and len(raised) < len(outputs)
    for state, out in outputs:
        # validate(s) reads s.ok: a stand-in named after it; ``helper`` is the module's, not x's: not called
        assert out["probes"] == [["hooks.add:0(arg0)", {"return": {"standin": "hooks.add:0.arg0.ok"}}]] * 2, state
        value = decode(state["args"]["value"])
        if type(value) is int:
            assert (out.get("exception") == "ValueError") == (value < 0)


def test_an_attribute_read_under_except_attribute_error_is_left_missing() -> None:
    # configobj's ``Section._interpolate``: ``try: engine = self._interpolation_engine`` / ``except
    # AttributeError:`` picks the engine the first time. Pre-filled with a stand-in, the attribute was
    # always there and the handler never ran; an input's own ``self`` attributes still set it.
    context = (
        "class Section:\n"
        "    def __init__(self, main):\n"
        "        self.main = main\n"
        "    def has_engine(self):\n"
        "        return self._engine is not None\n"
    )
    truth = (
        "    def render(self, key):\n"
        "        try:\n"
        "            engine = self._engine\n"
        "        except AttributeError:\n"
        "            engine = self._engine = self.main.upper()\n"
        "        return engine + key\n"
    )
    given = [{"self": "New('Section', 'ab')", "args": {"key": "'!'"}},
             {"self": "New('Section', 'ab', _engine='x')", "args": {"key": "'!'"}}]
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=2.0))
    result = asyncio.run(executor.compare(truth, [], context=context, inputs=given))
    # Python: no _engine yet -> 'ab'.upper() + '!' == 'AB!' (and it is kept); set -> 'x' + '!'
    assert [out.get("return") for _, out in _outputs(result)] == ["AB!", "x!"]
    searched = _compare(truth, [], context=context)
    assert searched.coverage == 1.0


def _log_length(out: dict) -> int:
    """Stand-in log entries in an output state (those past the log's limit are one ``truncated`` row)."""
    calls = out.get("calls", [])
    if calls and calls[-1][0] == "truncated":
        return len(calls) - 1 + calls[-1][1]
    return len(calls)


def test_a_loop_repeating_stand_in_calls_ends_sooner_and_a_loop_over_data_does_not() -> None:
    # iniparse's ``_readfp``: ``while True: line = fp.readline()`` on a stand-in ``fp`` never ends; it
    # repeats the same log entries, so it ends after 1,000 repeating operations, counted from its first
    # (docs/executors.md), not at the 10,000-operation budget. ``dep.send(i)`` for 3,000 distinct ``i``
    # logs a new entry each time and runs to the end.
    endless = (
        "def read_all(fp):\n"
        "    count = 0\n"
        "    while True:\n"
        "        line = fp.readline()\n"
        "        if not line:\n"
        "            break\n"
        "        count += 1\n"
        "    return count\n"
    )
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=2.0))
    result = asyncio.run(executor.compare(endless, [], inputs=[{"args": {"fp": "StandIn('fp')"}}]))
    [row] = result.inputs
    assert (row.valid, row.reason) == (False, "standin_loop")
    # the first call (new), then 1,000 repeats: 1,001 logged (2,001 while the rule waited for the first
    # 1,000 operations), not 10,000
    assert _log_length(json.loads(row.output)) == 1001
    finite = "def send_all(dep):\n    for i in range(3000):\n        dep.send(i)\n    return 3000\n"
    result = asyncio.run(executor.compare(finite, [], inputs=[{"args": {"dep": "StandIn('dep')"}}]))
    [(state, out)] = _outputs(result)
    assert out["return"] == 3000 and _log_length(out) == 3000
