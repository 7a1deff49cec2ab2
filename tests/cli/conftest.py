"""Fixtures for the command-line tests: run ``calib`` in-process and read what a user would see."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from calib.cli import main
from tests.cli._helpers import Outcome


@pytest.fixture(autouse=True)
def _no_debug_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's CALIB_DEBUG=1 would turn every one-line error into a traceback.
    monkeypatch.delenv("CALIB_DEBUG", raising=False)


@pytest.fixture
def calib(capsys: pytest.CaptureFixture[str]) -> Callable[..., Outcome]:
    """Run ``calib ARGS...`` in-process through :func:`calib.cli.main` (it always exits)."""

    def run(*args: object) -> Outcome:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main([str(a) for a in args])
        captured = capsys.readouterr()
        code = exited.value.code
        return Outcome(code=0 if code is None else int(code), out=captured.out, err=captured.err)

    return run
