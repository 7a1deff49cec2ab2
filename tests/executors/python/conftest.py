"""Fixtures shared by the Python executor's tests."""

from __future__ import annotations

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor


@pytest.fixture(scope="module")
def executor():
    """A sandbox executor at seed 0, one per test module."""
    ex = SandboxExecutor(ExecutorConfig(seed=0))
    yield ex
    ex.close()
