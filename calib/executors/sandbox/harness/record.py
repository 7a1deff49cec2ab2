"""One execution of x while inputs are chosen: the search's, or a given input's (a plain class: the
harness imports no ``dataclasses``, whose import costs milliseconds per batch)."""

from __future__ import annotations

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any


class Record:
    """One execution of x: its encoded input state, whether it counts, its status and output state."""

    __slots__ = ("lines", "output", "state", "status", "valid", "values")

    def __init__(self, state: dict[str, Any], valid: bool, status: str, output: str,
                 lines: frozenset[int] = frozenset(), values: dict[str, Any] | None = None) -> None:
        self.state = state  # the encoded input state
        self.valid = valid
        self.status = status
        self.output = output  # canonical JSON of the output state
        self.lines = lines
        self.values = values  # the search's values behind ``state`` (pools' names)

    def __repr__(self) -> str:
        return f"Record(valid={self.valid!r}, status={self.status!r}, output={self.output[:60]!r})"
