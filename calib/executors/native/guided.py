"""Choosing x's input states from the pool (docs/native-executors.md, "Choosing inputs").

Without coverage per input (a language whose kit has no ``per_copy``, or given inputs) the choice is
:func:`choose`: the states x finishes on first, one per output not seen yet before repeats, in pool
order. With the lines each pool state reached in x's coverage build, :func:`choose_covering` first takes,
greedily, the state that reaches the most lines of x not reached yet (ties: a new output first, then pool
order) until no state adds a line, then fills up as :func:`choose` does. The pool and the criteria are
unchanged (nothing is loosened): the search only stops leaving reachable lines out when the pool has a
state reaching them.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["choose", "choose_covering"]


def choose(explored: Mapping[int, tuple[bool, str]], size: int, want: int, first: list[int] | None = None
           ) -> list[int]:
    """Indices of ``want`` pool states, in pool order: ``first`` (already chosen), then x's valid ones, one
    per new output before repeats, then invalid ones only if too few are valid (they make the sample
    inconclusive)."""
    valid = [i for i in range(size) if explored.get(i, (False, ""))[0]]
    picked: list[int] = list(first or [])
    seen: set[str] = {explored[i][1] for i in picked if i in explored}
    for i in valid:
        if explored[i][1] not in seen and len(picked) < want and i not in picked:
            seen.add(explored[i][1])
            picked.append(i)
    for i in [*valid, *range(size)]:
        if len(picked) >= want:
            break
        if i not in picked:
            picked.append(i)
    return sorted(picked)


def choose_covering(explored: Mapping[int, tuple[bool, str]], size: int, want: int,
                    reached: Mapping[int, frozenset[int]]) -> list[int]:
    """:func:`choose` after a greedy cover: while fewer than ``want`` are chosen, the valid state reaching
    the most lines of x not reached yet (``reached``: lines per pool index), ties broken by a new output,
    then pool order; stops when no valid state adds a line."""
    valid = [i for i in range(size) if explored.get(i, (False, ""))[0]]
    covered: set[int] = set()
    outputs: set[str] = set()
    picked: list[int] = []
    while len(picked) < want:
        best, gain = None, (0, False)
        for i in valid:
            if i in picked:
                continue
            score = (len(reached.get(i, frozenset()) - covered), explored[i][1] not in outputs)
            if score[0] > gain[0] or (score[0] == gain[0] > 0 and score[1] and not gain[1]):
                best, gain = i, score
        if best is None:
            break
        picked.append(best)
        covered |= reached.get(best, frozenset())
        outputs.add(explored[best][1])
    return choose(explored, size, want, picked)
