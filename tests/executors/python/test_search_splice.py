"""Splice runs (issue 24 §2): a search that would end short of the criteria, within ``NEAR`` of the coverage
criterion, runs ``SPLICE_RUNS`` more, once, where half the inputs take one or two values of another kept input.

Some branches need two values at once, each of which some kept input found apart (wikitrans'
``TexiEnvNode.format`` wants items ``[Obj(subtype=0)]`` together with ``envtype == 'defn'``); redrawing one
value at a time from the pools rarely puts them together. The runs are appended where the search ends, so a
search that meets the criteria runs exactly as it ran without them (splicing drawn all along, in the twenty-
eighth round, won searches and lost others that find their last lines late: docs/executors.md).
"""

from __future__ import annotations

import ast
import random

import pytest

from calib.executors.sandbox.harness import hints, synth
from calib.executors.sandbox.harness.record import Record
from calib.executors.sandbox.harness.values import decode

SEEDS = range(10)


def _search(seed: int, pool: int = 60) -> list[Record]:
    """``synth.search`` on ``f(a, b)`` of ten lines: lines 1-5 always, line 6 where ``a == 3``, line 7 where
    ``b == 5``, lines 8-10 only where both hold (coverage 0.7 without them, within NEAR of C = 0.8)."""
    node = ast.parse("def f(a, b):\n    return a, b\n").body[0]
    info = hints.analyse(node, skip_first=False)

    def run(state: dict) -> Record:
        a, b = decode(state["args"]["a"]), decode(state["args"]["b"])
        lines = set(range(1, 6)) | ({6} if a == 3 else set()) | ({7} if b == 5 else set())
        if a == 3 and b == 5:
            lines |= {8, 9, 10}
        return Record(state=state, valid=True, status="ok", output=f"{sorted(lines)} {a % 3}",
                      lines=frozenset(lines))

    pools = synth.Pools(info, random.Random(seed))
    pools.by_param["a"] = pools.by_param["b"] = list(range(pool))  # each special value 1 in `pool` draws
    fresh = iter(range(1000, 10**6))
    pools.fresh = lambda name: next(fresh)  # never a special value
    return synth.search(pools, run, executable=frozenset(range(1, 11)), n=10, min_valid=8, coverage=0.8,
                        min_distinct=2, budget_runs=200, budget_seconds=1000.0, avoid=set())


def _both(records: list[Record]) -> bool:
    return any(8 in r.lines for r in records)


def test_splice_runs_put_together_two_values_found_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    assert synth.SPLICE_RUNS == 60
    spliced = [_search(seed) for seed in SEEDS]
    monkeypatch.setattr(synth, "SPLICE_RUNS", 0)
    plain = [_search(seed) for seed in SEEDS]
    # without splice runs the pools rarely draw a == 3 into an input that has b == 5 (2 of these 10 seeds)
    assert sum(map(_both, plain)) <= 3
    assert sum(map(_both, spliced)) >= 8
    for with_, without in zip(spliced, plain, strict=True):
        # appended: every run of the plain search is run first, in the same order with the same states
        assert [r.state for r in with_[:len(without)]] == [r.state for r in without]
        if _both(without):  # the criteria met without them: not one run more
            assert len(with_) == len(without)
        elif _both(with_):  # met by the splice runs: then the stopping rule's 20 runs of patience
            assert len(without) < len(with_) <= len(without) + 60 + 20
        else:  # never met: SPLICE_RUNS more
            assert len(with_) == len(without) + 60


def test_a_search_far_from_the_criterion_gets_no_splice_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # lines 6 and 7 never reached (a pool without 3 and 5): 0.5 < C - NEAR, the search ends as it did
    far = _search(0, pool=3)
    monkeypatch.setattr(synth, "SPLICE_RUNS", 0)
    assert [r.state for r in _search(0, pool=3)] == [r.state for r in far]
    assert max(len(r.lines) for r in far) == 5
