"""The search's bookkeeping, made faster, chooses exactly what the plain definitions choose.

- ``synth.select`` is asked after nearly every run; once the chosen inputs cover every line it no longer
  computes line differences, and records of equal lines, output and status are weighed once per group
  (a search repeats its outputs: the cases below draw from a few line sets and outputs too). Reference:
  the greedy rule as written before (the first record, in order, with the greatest (new lines, new
  output, ran without raising)).
- ``trees.last_class`` (every batch of a method) visits statements only. Reference: the last class of
  that name in :func:`ast.walk`'s order.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from calib.executors.sandbox.harness import synth
from calib.executors.sandbox.harness.record import Record
from calib.executors.sandbox.harness.trees import last_class


def _reference_select(records: list[Record], n: int) -> list[Record]:
    pool = [r for r in records if r.valid]
    chosen: list[Record] = []
    covered: set[int] = set()
    outputs: set[str] = set()
    while pool and len(chosen) < n:
        best = max(pool, key=lambda r: (len(r.lines - covered), r.output not in outputs, r.status == "ok"))
        pool.remove(best)
        chosen.append(best)
        covered |= best.lines
        outputs.add(best.output)
    return chosen


@pytest.mark.parametrize("seed", range(4))
def test_select_chooses_what_the_greedy_rule_chooses(seed: int) -> None:
    rng = random.Random(seed)
    for case in range(400):
        lines = rng.randint(1, 30)

        def drawn(lines: int = lines) -> frozenset[int]:
            return frozenset(rng.sample(range(lines), rng.randint(0, lines)))

        palette = [drawn() for _ in range(rng.randint(1, 4))]  # every other case: a few line sets repeated
        records = [Record(state={"i": i}, valid=rng.random() < 0.8, status=rng.choice(["ok", "ok", "raised"]),
                          output=str(rng.randint(0, rng.randint(1, 15 if case % 2 else 3))),
                          lines=drawn() if case % 2 else rng.choice(palette))
                   for i in range(rng.randint(0, 120))]
        n = rng.choice([1, 3, 10, 12])
        assert [r.state for r in synth.select(records, n)] == [r.state for r in _reference_select(records, n)]


TRICKY = """
class A: pass
try:
    class A:
        v = 1
except ValueError:
    class A:
        v = 2
else:
    if flag:
        class A:
            v = 3
finally:
    pass
match y:
    case 1:
        class A:
            v = 4
def f():
    class A:
        v = 5
"""


def _reference_last(tree: ast.AST, name: str) -> ast.ClassDef | None:
    return ([n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name] or [None])[-1]


def test_last_class_is_the_last_in_ast_walk_order() -> None:
    tree = ast.parse(TRICKY)
    assert last_class(tree, "A") is _reference_last(tree, "A")
    assert last_class(tree, "B") is None
    # and on real modules: the standard library's own sources with many classes
    import argparse
    import email.message
    import json.decoder

    for module in (argparse, email.message, json.decoder):
        tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        assert names
        for name in names:
            assert last_class(tree, name) is _reference_last(tree, name)
