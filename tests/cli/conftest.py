"""Fixtures for the command-line tests: run ``calib`` in-process and read what a user would see."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest

from tests.cli._helpers import Outcome, run_calib


@pytest.fixture(autouse=True)
def _no_debug_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's CALIB_DEBUG=1 would turn every one-line error into a traceback.
    monkeypatch.delenv("CALIB_DEBUG", raising=False)


@pytest.fixture
def calib(capsys: pytest.CaptureFixture[str]) -> Callable[..., Outcome]:
    """Run ``calib ARGS...`` in-process through :func:`calib.cli.main` (it always exits)."""
    return functools.partial(run_calib, capsys)
