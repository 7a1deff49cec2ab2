"""The results of x's and the candidates' replays, as their batches report them (host side).

A replay reports a ``start`` and a ``result`` event for each input it runs, in order; x's replay may
come in x's own explore batch, after its ``explore`` event (job key ``then_replay``,
:mod:`calib.executors.sandbox.harness.handover`), and what it did not report there is replayed in a
batch of its own. Every event is checked for its shape: the batch runs untrusted code, which can write
on its channel (docs/executors.md, *What a batch can forge*).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Replay", "index", "take_results"]


@dataclass
class Replay:
    """One variant's replay: an output state per input index, and the lines each reached."""

    outputs: dict[int, str] = field(default_factory=dict)  # canonical output state per input index
    lines: dict[int, Any] = field(default_factory=dict)  # the lines each input reached (as reported)
    error: str = ""

    def differs(self, chosen: list[dict[str, Any]]) -> bool:
        """Whether x's replay (a fresh process) of a valid input gave another output or lines than its explore."""
        return not self.error and any(item["valid"] and (self.outputs.get(i), self.lines.get(i)) != (
            item["output"], item["lines"]) for i, item in enumerate(chosen))


def index(value: Any, size: int) -> int | None:
    """``value`` if it is an index of a list of ``size`` items, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < size else None


def take_results(events: list[dict[str, Any]], size: int, done: set[int], result: Replay) -> tuple[int | None, bool]:
    """Add one batch's results to ``result`` (not those of the inputs ``done``); the input the batch started
    and did not finish (None if none), and whether it reported an error (``result.error`` says which)."""
    started: int | None = None
    seen: set[int] = set()  # indices this batch reported
    for event in events:
        kind = event.get("event")
        if kind == "error":
            result.error = f"unparsable: {event.get('message', '')}"
            return started, True
        if kind == "start":
            started = index(event.get("index"), size)
        elif kind == "result":
            at = index(event.get("index"), size)
            output = event.get("output")
            if at is None or not isinstance(output, str) or at in done:
                continue  # forged or torn: the input counts as not finished
            if at in seen or at in result.outputs:  # the harness reports an input once
                result.outputs[at] = json.dumps({"outcome": "reported twice"})
                continue
            seen.add(at)
            result.outputs[at] = output
            result.lines[at] = event.get("lines")
            started = None
    return started, False
