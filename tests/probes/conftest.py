"""Fixtures of the probes tests: a bubblewrap sandbox to run tasks' tests in."""

from __future__ import annotations

import shutil

import pytest

from calib.executors.sandbox import Sandbox, SandboxUnavailable


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    """calib's sandbox; the test is skipped (saying why) where bubblewrap is missing or cannot run."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed; CI installs it (apt-get install bubblewrap)")
    try:
        return Sandbox()
    except SandboxUnavailable as exc:
        pytest.skip(f"bubblewrap cannot create its namespaces here: {exc}")
