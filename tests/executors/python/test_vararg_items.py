"""``*args`` whose items x checks with ``isinstance`` (issue 24 §2): the pool of ``args`` holds items of each type.

Before, a ``*args`` pool held tuples of numbers and strings only, so ``for arg in args: if isinstance(arg,
dict):`` never took its branch (the holidays package's ``HolidayBase.update``: coverage 0.78 on the second
package list's seeds 16-20, the tuning sample of the thirteenth round).
"""

from __future__ import annotations

import ast
import asyncio
import random

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import hints, synth
from calib.executors.sandbox.harness.values import New
from tests.executors.sandbox.test_forkserver import needs_bwrap

CONTEXT = "class Entry:\n    def __init__(self, name='x'):\n        self.name = name\n\n\n"
UPDATE = (
    "def update(table, *args):\n"
    "    for arg in args:\n"
    "        if isinstance(arg, dict):\n"
    "            for key, value in list(arg.items()):\n"
    "                table[key] = value\n"
    "        elif isinstance(arg, Entry):\n"
    "            table[arg.name] = 'entry'\n"
    "        elif isinstance(arg, list):\n"
    "            for item in arg:\n"
    "                table[item] = 'holiday'\n"
    "        else:\n"
    "            table[arg] = 'holiday'\n"
    "    return sorted(table.items(), key=repr)\n"
)


def _args_pool(source: str) -> list[tuple]:
    node = ast.parse(source).body[0]
    info = hints.analyse(node, skip_first=False)
    return synth.Pools(info, random.Random(0)).by_param["args"]


def test_the_args_pool_holds_one_and_two_items_of_each_type_checked() -> None:
    pool = _args_pool(UPDATE)
    assert all(isinstance(v, tuple) for v in pool)
    with_dicts = [v for v in pool if v and all(isinstance(item, dict) for item in v)]
    assert {len(v) for v in with_dicts} == {1, 2}
    assert any(len(v) == 1 and isinstance(v[0], New) and v[0].cls == "Entry" for v in pool)
    assert any(v and all(isinstance(item, list) for item in v) for v in pool)
    # without an isinstance check on the items the pool is what it was
    plain = _args_pool("def total(*args):\n    return sum(len(a) for a in args)\n")
    assert not any(isinstance(item, dict | New) for v in plain for item in v)


@needs_bwrap
def test_a_function_checking_the_types_of_its_args_is_conclusive() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(UPDATE, [UPDATE.replace("'entry'", "'Entry'")], context=CONTEXT))
    assert result.conclusive, result.reason  # N=10, N_in=8, C=0.8, N_out=2 (unchanged)
    assert result.coverage == 1.0  # the dict and Entry branches too (0.73 before: neither was reached)
    assert any("{" in i.state["args"]["args"] for i in result.inputs)
    (candidate,) = result.candidates
    assert candidate.sim_func is not None and candidate.sim_func < 1.0  # the Entry branch's text differs
