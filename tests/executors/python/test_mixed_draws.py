"""Draws of a mixed stand-in mode set one at a time (issue 24 §2: "stand-in answers chosen per call site to flip
uncovered branches").

In a ``mixedN`` mode every answer of a stand-in (what a call returns, its truth value, a comparison, a type check)
is a draw fixed by N and the draw's key. A branch that needs several stand-ins to answer in a particular way at once
(sievelib's ``enablefilter``: an ``==`` and two ``isinstance`` of withheld classes) waits for one N that draws them
all right. The search now also mutates a mixed input one draw at a time: ``mixedN~ID:V`` keeps N for every draw but
the one whose key has :func:`standins.draw_id` ID, which answers V.
"""

from __future__ import annotations

import ast
import asyncio
import random

from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import calls, hints, standins, synth
from calib.executors.sandbox.harness.pools import STANDINS
from calib.executors.sandbox.harness.record import Record


def _draws(mode: str, keys: list[str], n: int = 4) -> list[int]:
    standins.LOG.reset(calls.standin_default(mode))
    try:
        return [standins.LOG.draw(key, n) for key in keys]
    finally:
        standins.LOG.reset()


def test_a_forced_draw_answers_its_value_and_every_other_draw_keeps_the_variant() -> None:
    keys = [f"dep.lookup('k{i}')#1" for i in range(12)]
    plain = _draws("mixed7", keys)
    for i, key in enumerate(keys):
        value = (plain[i] + 1) % 4
        mode = standins.forcing("mixed7", key, value)
        assert standins.is_mixed(mode)
        got = _draws(mode, keys)
        assert got[i] == value
        assert got[:i] + got[i + 1:] == plain[:i] + plain[i + 1:]
    # the value is taken modulo the draw's range; the same key in another variant is forced the same way
    assert _draws(standins.forcing("mixed9", keys[0], 7), keys[:1], n=4) == [3]
    # the run records its draws, key -> (range, value), in the order they were made
    standins.LOG.reset(calls.standin_default(standins.forcing("mixed7", keys[1], 0)))
    standins.LOG.draw(keys[0], 4)
    standins.LOG.draw(keys[1], 4)
    assert standins.LOG.drawn == {keys[0]: (4, plain[0]), keys[1]: (4, 0)}
    standins.LOG.reset()
    assert standins.LOG.drawn == {} and standins.LOG.forced == {}


def test_modes_are_parsed_strictly_and_keep_at_most_forced_draws() -> None:
    mode = "mixed3"
    for i in range(standins.FORCED + 3):
        mode = standins.forcing(mode, f"key{i}", i % 12)
    head, *parts = mode.split("~")
    assert head == "mixed3" and len(parts) == standins.FORCED  # the oldest dropped
    assert parts[-1] == f"{standins.draw_id(f'key{standins.FORCED + 2}')}:{(standins.FORCED + 2) % 12}"
    assert standins.Mixed.parse(mode).variant == 3
    # setting a draw again replaces it, in last place
    again = standins.forcing(mode, f"key{standins.FORCED}", 5)
    assert again.split("~")[-1].endswith(":5") and len(again.split("~")) == standins.FORCED + 1
    for bad in ("mixed0", "mixed3~", "mixed3~xyz", "mixed3~0123456g:1", "mixed3~01234567:", "mixed3~01234567:123",
                "mixed3~01234567-1", "mixed" + "~01234567:1", "mixed3" + "~01234567:1" * (standins.FORCED + 1)):
        assert not standins.is_mixed(bad), bad
    assert standins.is_mixed("mixed3~01234567:1~89abcdef:11")


def _search(seed: int, flips: bool) -> list[Record]:
    """``synth.search`` on a function whose lines 6, 7 and 8-10 need one, two and three stand-in answers right
    (each 1 in 4 per variant): all three in one fresh variant is 1 in 64."""
    node = ast.parse("def f(a):\n    return a\n").body[0]
    info = hints.analyse(node, skip_first=False)

    def run(state: dict) -> Record:
        standins.LOG.reset(calls.standin_default(state.get("standins")))
        lines = set(range(1, 6))
        if standins.LOG.mixed is not None and standins.LOG.draw("dep.ready()#1", 4) == 0:
            lines.add(6)
            if standins.LOG.draw("dep.kind()#1", 4) == 0:
                lines.add(7)
                if standins.LOG.draw("dep.size()#1", 4) == 0:
                    lines |= {8, 9, 10}
        record = Record(state=state, valid=True, status="ok", output=f"{sorted(lines)} {state['args']['a']}",
                        lines=frozenset(lines))
        record.drawn = standins.LOG.drawn if flips else {}
        standins.LOG.reset()
        return record

    pools = synth.Pools(info, random.Random(seed))
    pools.by_param["a"] = list(range(20))
    pools.by_param[STANDINS] = ["standin", "none", "mixed1", "mixed2"]
    rng = pools.rng
    pools.fresh = lambda name: f"mixed{rng.randint(15, 99999)}" if name == STANDINS else rng.randint(100, 10**6)
    return synth.search(pools, run, executable=frozenset(range(1, 11)), n=10, min_valid=8, coverage=0.8,
                        min_distinct=2, budget_runs=200, budget_seconds=1000.0, avoid=set())


def test_the_search_sets_draws_one_at_a_time_to_reach_a_branch_three_answers_guard() -> None:
    seeds = range(20)
    reached = [any(8 in r.lines for r in _search(seed, flips=True)) for seed in seeds]
    fresh_only = [any(8 in r.lines for r in _search(seed, flips=False)) for seed in seeds]
    # fresh variants alone: 0 of these 20 seeds (each 1 in 64); one draw at a time from a kept input: 11
    assert sum(fresh_only) <= 3
    assert sum(reached) >= 8
    forced = [r for r in _search(0, flips=True) if "~" in r.state.get("standins", "")]
    assert forced and all(standins.is_mixed(r.state["standins"]) for r in forced)


CHECK = '''def check(name):
    if dep.ready(name):
        return "ready " + name
    return "waiting"
'''


def test_a_forced_mode_replays_in_the_sandbox(executor: SandboxExecutor) -> None:
    key = "dep.ready('a')#1"  # the key of the draw of dep.ready's first answer given 'a' (standins.mixed_return)
    truthy = next(i for i, v in enumerate(standins._MIXED_RETURNS) if v is True)
    falsy = next(i for i, v in enumerate(standins._MIXED_RETURNS) if v is None)
    modes = [standins.forcing("mixed5", key, v) for v in (truthy, falsy)]
    modes += [standins.forcing("mixed5", "dep.ready('b')#1", truthy), "mixed5"]  # a draw x never makes; none set
    inputs = [{"args": {"name": "'a'"}, "standins": mode} for mode in modes]
    result = asyncio.run(executor.compare(CHECK, [CHECK], context="import dep\n", inputs=inputs))
    outputs = [i.output for i in result.inputs]
    assert all(i.valid for i in result.inputs), [i.status for i in result.inputs]
    assert '"return":"ready a"' in outputs[0] and '"return":"waiting"' in outputs[1]
    assert outputs[2] == outputs[3]  # setting another draw leaves this one to N
    # the candidate (x itself) replays every input to the same output: the forced draw is part of the input
    assert result.candidates[0].matches == (True, True, True, True)


ARCHIVE = '''def archive(key):
    if lookup(key) is not None or exists(key) is not True:
        return "skipped"
    saved = [save(key, part) for part in range(30)]
    return len(saved)
'''


def test_an_input_a_failing_answer_made_invalid_is_run_again_with_that_call_answering(
        executor: SandboxExecutor) -> None:
    # Two answers must agree (lookup None, exists True): only a mixed mode or its set draws give that. Then 30 calls,
    # each failing in 1 of 12 draws (standins.RAISE_DRAW): nearly every such input ended invalid ("standin"), so it
    # was never kept and the lines past the guard never counted (before: coverage 0.50 on executor seeds 0-2).
    # Now the input is run again with the call that failed answering a stand-in, until none fails (knack's
    # ``_add_parameter_help``: ``show_in_help()`` true, then the help entry's call failed; list 4, seeds 31-35)
    result = asyncio.run(executor.compare(ARCHIVE, [], context="from store.backend import exists, lookup, save\n"))
    assert result.conclusive and result.coverage == 1.0, result.reason
    mended = [i for i in result.inputs if i.valid and '"return":30' in i.output]
    assert mended and all(standins.is_mixed(i.state["standins"]) and "~" in i.state["standins"] for i in mended)
