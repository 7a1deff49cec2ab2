"""Helpers for the command-line tests: what one run left behind, and numbers in a human summary."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class Outcome:
    """What one ``calib`` run left behind: its exit code and its stdout and stderr text."""

    code: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        """The whole of stdout as exactly one JSON object (NaN and Infinity are rejected)."""
        assert self.code == 0, self.err
        assert self.err == ""
        assert self.out.endswith("\n") and self.out.count("\n") == 1, self.out

        def reject(name: str) -> None:
            raise AssertionError(f"stdout holds {name}, which is not JSON: {self.out}")

        data = json.loads(self.out, parse_constant=reject)
        assert isinstance(data, dict)
        return data

    def one_line_error(self) -> str:
        """Assert a usage/input failure as users see it: exit 2, nothing on stdout, one stderr line."""
        assert self.code == 2, (self.code, self.out, self.err)
        assert self.out == ""
        assert self.err.endswith("\n") and self.err.count("\n") == 1, self.err
        assert "Traceback" not in self.err
        return self.err.strip()


def run_calib(capsys: pytest.CaptureFixture[str], *args: object) -> Outcome:
    """Run ``calib ARGS...`` in-process through :func:`calib.cli.main` (it always exits)."""
    from calib.cli import main  # noqa: PLC0415 - the helpers' other users need no CLI

    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main([str(a) for a in args])
    captured = capsys.readouterr()
    code = exited.value.code
    return Outcome(code=0 if code is None else int(code), out=captured.out, err=captured.err)


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?%?")


def numbers_in(text: str) -> list[float]:
    """Every number written in ``text``; ``12.5%`` reads as 0.125."""
    values = []
    for token in _NUMBER.findall(text):
        values.append(float(token[:-1]) / 100 if token.endswith("%") else float(token))
    return values


def mentions(text: str, value: float, rel: float = 1e-3) -> bool:
    """Whether ``text`` writes ``value`` to about four significant digits (as a number or a percentage)."""
    return any(x == pytest.approx(value, rel=rel, abs=0 if value else 1e-12) for x in numbers_in(text))
