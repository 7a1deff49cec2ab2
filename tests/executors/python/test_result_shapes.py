"""How x's result, its arguments' shapes and its instance are built, through the real sandbox.

Each test is a function whose lines the search could not reach (or whose output state did not say
what it did) before: x defined in a branch the module does not take, generators inside a returned
tuple, a returned decorator, a sentinel default, an instance whose constructor type-checks against a
withheld class, a ``Literal`` alias, ``*args`` of iterables. The references are Python's own
semantics (``itertools.accumulate``, list comprehensions), written out in each test.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness.values import decode

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def _compare(truth: str, candidates: list[str], context: str = ""):
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=2.0))
    return asyncio.run(executor.compare(truth, candidates, context=context))


def _outputs(result):
    return [(i.state, json.loads(i.output)) for i in result.inputs if i.valid]


def _generator(canonical: dict) -> list:
    """The items of a drained generator in an output state (``{"generator": [...]}``, canonical)."""
    [[key, items]] = canonical.items()
    assert key == "generator"
    return items["list"]


RUNNING_CONTEXT = (
    "EMPTY = object()\n"
    "try:\n"
    "    from itertools import accumulate\n\n"
    "    def running(seq, acc=EMPTY):\n"
    "        return accumulate(seq)\n\n"
    "except ImportError:\n"
)
RUNNING = (
    "    def running(seq, acc=EMPTY):\n"
    "        it = iter(seq)\n"
    "        if acc is EMPTY:\n"
    "            try:\n"
    "                last = next(it)\n"
    "            except StopIteration:\n"
    "                return\n"
    "            yield last\n"
    "        else:\n"
    "            last = acc\n"
    "        for x in it:\n"
    "            last = last + x\n"
    "            yield last\n"
)


def test_x_defined_in_a_branch_the_module_skips_is_what_runs_and_a_sentinel_default_is_an_input() -> None:
    # funcy's ``reductions``: ``from itertools import accumulate`` succeeds, so Python never runs the
    # ``except ImportError:`` branch that defines x; x must still be what is called and measured, and
    # ``acc=EMPTY`` (no literal can write that default) is reached by leaving the argument out.
    result = _compare(RUNNING, [RUNNING, RUNNING.replace("last = acc", "last = 0")], context=RUNNING_CONTEXT)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    defaulted = [(s, o) for s, o in _outputs(result) if s["args"].get("acc") == "StandIn('<default>')"
                 and "return" in o and all(isinstance(v, int) for v in decode(s["args"]["seq"]))]
    assert defaulted
    for state, out in defaulted:  # Python's itertools.accumulate is the reference for the default
        assert _generator(out["return"]) == list(itertools.accumulate(decode(state["args"]["seq"])))
    assert result.candidates[0].sim_func == 1.0
    assert result.candidates[1].sim_func is not None and result.candidates[1].sim_func < 1.0


SPLIT = (
    "def split_even(seq):\n"
    "    yes, no = deque(), deque()\n"
    "    splitter = (yes.append(v) if v % 2 == 0 else no.append(v) for v in seq)\n\n"
    "    def _split(q):\n"
    "        while True:\n"
    "            while q:\n"
    "                yield q.popleft()\n"
    "            try:\n"
    "                next(splitter)\n"
    "            except StopIteration:\n"
    "                return\n\n"
    "    return _split(yes), _split(no)\n"
)


def test_generators_in_a_returned_tuple_are_run_and_compared_by_their_items() -> None:
    # funcy's ``split``: two lazy generators; their items are the output (before, both were a repr)
    swapped = SPLIT.replace("return _split(yes), _split(no)", "return _split(no), _split(yes)")
    eager = SPLIT.replace("return _split(yes), _split(no)", "return list(_split(yes)), list(_split(no))")
    result = _compare(SPLIT, [SPLIT, swapped, eager], context="from collections import deque\n")
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    checked = 0
    for state, out in _outputs(result):
        seq = decode(state["args"]["seq"])
        if "return" not in out or not all(isinstance(v, int) for v in seq):
            continue
        evens, odds = (_generator(g) for g in out["return"]["tuple"])
        assert (evens, odds) == ([v for v in seq if v % 2 == 0], [v for v in seq if v % 2])
        checked += 1
    assert checked
    sims = [c.sim_func for c in result.candidates]
    assert sims[0] == 1.0 and sims[1] < 1.0 and sims[2] < 1.0  # order and laziness are behaviour


def test_a_returned_builtin_iterator_is_compared_by_its_items() -> None:
    # ``map`` objects have no attributes: by their repr alone these two would be equal
    truth = "def shout(words):\n    return map(lambda w: str(w) + '!', words)\n"
    result = _compare(truth, [truth, truth.replace("'!'", "'?'")])
    assert result.candidates[0].sim_func == 1.0
    assert result.candidates[1].sim_func is not None and result.candidates[1].sim_func < 1.0


COUNTED = (
    "def counted(limit):\n"
    "    def decorator(func):\n"
    "        calls = 0\n\n"
    "        def wrapper(*args, **kwargs):\n"
    "            nonlocal calls\n"
    "            calls += 1\n"
    "            if calls > limit:\n"
    "                return None\n"
    "            return func(*args, **kwargs)\n\n"
    "        def reset():\n"
    "            nonlocal calls\n"
    "            calls = 0\n\n"
    "        wrapper.reset = reset\n"
    "        return wrapper\n"
    "    return decorator\n"
)


def test_a_returned_decorator_is_applied_to_a_probe_function_and_called() -> None:
    # cachetools' ``cached``: x returns a closure; what it does when used is x's behaviour
    off_by_one = COUNTED.replace("calls > limit", "calls >= limit")
    result = _compare(COUNTED, [COUNTED, off_by_one])
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    limit_one = [out["probes"] for state, out in _outputs(result) if decode(state["args"]["limit"]) == 1]
    assert limit_one
    # the probe function answers with its arguments; with limit 1 the second call is refused
    calls = [outcome for label, outcome in limit_one[0] if label == "r(probe)(2)"]
    assert calls == [{"return": {"list": ["probe", {"list": [2]}, {"list": []}]}}, {"return": None}]
    assert ["r(probe).reset()", {"return": None}] in limit_one[0]
    assert result.candidates[0].sim_func == 1.0
    assert result.candidates[1].sim_func is not None and result.candidates[1].sim_func < 1.0


def test_arguments_are_built_in_the_input_stand_in_mode() -> None:
    # tomlkit's ``Array``: its constructor drops items that are ``isinstance(v, Null)``, a class of a
    # withheld module. A stand-in class says yes to everything in the ``true`` mode and no in the
    # ``false`` mode (docs/executors.md, "Input states"); the instance used to be built in the default
    # mode whatever the input said, so both inputs below gave the same bag
    context = (
        "from withheld_module import Null\n\n"
        "class Bag:\n"
        "    def __init__(self, items):\n"
        "        self.items = [v for v in items if not isinstance(v, Null)]\n\n"
    )
    truth = "def head(bag: Bag):\n    if not bag.items:\n        return None\n    return bag.items[0] * 2\n"
    states = [{"args": {"bag": "New('Bag', [3, 4])"}, "standins": mode} for mode in ("false", "true")]
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=2.0))
    result = asyncio.run(executor.compare(truth, [], context=context, inputs=states))
    assert [out.get("return") for _, out in _outputs(result)] == [6, None]  # 2 * 3, and the emptied bag


def test_a_literal_alias_of_the_module_gives_its_values() -> None:
    # arrow's ``TimeFrameLiteral``: an annotation naming ``Literal[...]`` bound in the module
    context = (
        "from typing import Literal\n"
        "Unit = Literal['s', 'm', 'h']\n"
        "FACTORS = {'s': 1, 'm': 60, 'h': 3600}\n"
    )
    truth = (
        "def to_seconds(value: int, unit: Unit) -> int:\n"
        "    factor = FACTORS[unit]\n"
        "    if factor > 60:\n"
        "        return value * factor\n"
        "    return value + factor\n"
    )
    result = _compare(truth, [], context=context)
    assert result.conclusive, result.reason
    assert {decode(s["args"]["unit"]) for s, o in _outputs(result) if "return" in o} >= {"h"}


def test_star_args_of_iterables() -> None:
    # more_itertools' ``nth_product``: every element of *args is iterated
    truth = (
        "def nth_pick(index, *args):\n"
        "    pools = [tuple(p) for p in reversed(args)]\n"
        "    c = 1\n"
        "    for p in pools:\n"
        "        c *= len(p)\n"
        "    if not 0 <= index < c:\n"
        "        raise IndexError\n"
        "    out = []\n"
        "    for pool in pools:\n"
        "        out.append(pool[index % len(pool)])\n"
        "        index //= len(pool)\n"
        "    return tuple(reversed(out))\n"
    )
    result = _compare(truth, [])
    assert result.conclusive, result.reason
    for state, out in _outputs(result):  # itertools.product is the reference
        if "return" in out:
            index, pools = decode(state["args"]["index"]), decode(state["args"]["args"])
            assert out["return"]["tuple"] == list(list(itertools.product(*pools))[index])


def test_a_dict_shaped_like_a_drained_generator_does_not_match_the_generator():
    truth = "def evens(n):\n    for i in range(n):\n        if i % 2 == 0:\n            yield i\n"
    # the generator's items under the key the harness names a drained generator by: a dict, not a generator
    lookalike = "def evens(n):\n    return {'generator': [i for i in range(n) if i % 2 == 0]}\n"
    same = "def evens(n):\n    yield from range(0, n, 2)\n"
    result = _compare(truth, [lookalike, same])
    assert result.conclusive, result.reason
    for state, out in _outputs(result):
        if "return" in out:
            assert _generator(out["return"]) == list(range(0, max(int(state["args"]["n"]), 0), 2))
    lookalike_result, same_result = result.candidates
    # the look-alike agrees exactly where both raise (an n that is not an integer), never on a return
    raised = [None if not i.valid else "exception" in json.loads(i.output) for i in result.inputs]
    assert list(lookalike_result.matches) == raised and False in raised
    assert same_result.sim_func == 1.0
