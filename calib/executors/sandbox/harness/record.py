"""One execution of x while inputs are chosen: the search's, or a given input's (a plain class: the
harness imports no ``dataclasses``, whose import costs milliseconds per batch), and the choice of the
N inputs among them (:func:`select`)."""

from __future__ import annotations

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any


class Record:
    """One execution of x: its encoded input state, whether it counts, its status and output state."""

    __slots__ = (
        "called", "drawn", "handed", "in_try", "lines", "output", "state", "status", "valid", "values", "wants")

    def __init__(self, state: dict[str, Any], valid: bool, status: str, output: str,
                 lines: frozenset[int] = frozenset(), values: dict[str, Any] | None = None) -> None:
        self.state = state  # the encoded input state
        self.valid = valid
        self.status = status
        self.output = output  # canonical JSON of the output state
        self.lines = lines
        self.values = values  # the search's values behind ``state`` (pools' names)
        self.in_try = False  # a stand-in was called inside one of x's ``try`` bodies (standins.LOG.try_calls)
        self.handed = False  # a stand-in was called with a plain value first (standins.LOG.handed)
        self.called = 0  # calls of stand-ins (standins.LOG.called)
        self.drawn: dict[str, tuple[int, int]] = {}  # a mixed mode's draws: key -> (range, value) (standins.LOG.drawn)
        self.wants: dict[str, set[int]] = {}  # draws whose answer x used as data: key -> shaped answers (LOG.wants)

    def __repr__(self) -> str:
        return f"Record(valid={self.valid!r}, status={self.status!r}, output={self.output[:60]!r})"


def select(records: list[Record], n: int) -> list[Record]:
    """Choose up to n inputs: greedy on new lines covered, then new outputs, returns before raises (the
    first record in order with the greatest key). Records of equal lines, output and status have equal
    keys: each such group is weighed once, by its first record left (searches repeat their outputs)."""
    groups: dict[tuple[Any, ...], list[tuple[int, Record]]] = {}
    for i, r in enumerate(records):
        if r.valid:
            groups.setdefault((r.lines, r.output, r.status), []).append((i, r))
    live = list(groups.values())
    chosen: list[Record] = []
    covered: set[int] = set()
    outputs: set[str] = set()
    union = frozenset().union(*(key[0] for key in groups))
    while live and len(chosen) < n and not covered >= union:
        best = max(live, key=lambda g: (len(g[0][1].lines - covered), g[0][1].output not in outputs,
                                        g[0][1].status == "ok", -g[0][0]))
        chosen.append(r := _take(live, best))
        covered |= r.lines
        outputs.add(r.output)
    # every line covered (the search asks this after nearly every run): no record adds lines, so the key
    # is (a new output, ran without raising)
    while live and len(chosen) < n:
        best = min(live, key=lambda g: ((g[0][1].output in outputs) * 2 + (g[0][1].status != "ok"), g[0][0]))
        chosen.append(r := _take(live, best))
        outputs.add(r.output)
    return chosen


def _take(live: list[list[tuple[int, Record]]], group: list[tuple[int, Record]]) -> Record:
    """The first record of ``group``, which leaves ``live`` when that was its last."""
    record = group.pop(0)[1]
    if not group:
        live.remove(group)  # the only empty list in live
    return record
