"""A dependency failure that x handles and passes on is x's behaviour (issue 24 §2): with stand-ins in
mode ``raise`` (every call of a withheld dependency fails), ``except OSError: LOG.append(path); raise``
makes the input valid, its output the exception, so the handler's lines count for coverage. A failure
that only goes past x (no handler of x ran) leaves the input invalid (``standin``), as before."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

CONTEXT = "from withheld import reader\nLOG = []\n"
HANDLES = (
    "def load(path):\n"
    "    try:\n"
    "        data = reader.read(path)\n"
    "    except OSError:\n"
    "        LOG.append(path)\n"
    "        raise\n"
    "    if not data:\n"
    "        return None\n"
    "    return data\n"
)
PASSES = "def load(path):\n    data = reader.read(path)\n    return data or None\n"
# the handler runs, but the failure that leaves x comes from a call outside the try
AFTER = (
    "def load(path):\n"
    "    try:\n"
    "        reader.open(path)\n"
    "    except OSError:\n"
    "        LOG.append(path)\n"
    "    return reader.read(path)\n"
)
FAILING = [{"args": {"path": "'a.txt'"}, "standins": "raise"}]


def _compare(x: str, inputs=None):
    executor = SandboxExecutor(ExecutorConfig(seed=0, workers=1, budget_seconds=2.0))
    return asyncio.run(executor.compare(x, [], context=CONTEXT, inputs=inputs))


@needs_bwrap
def test_a_failure_x_handles_and_passes_on_is_a_valid_input() -> None:
    (item,) = _compare(HANDLES, FAILING).inputs
    assert (item.valid, item.status) == (True, "raised")
    output = json.loads(item.output)
    assert output["exception"].endswith("CalibStandInError")
    assert output["calls"] == [["call", "withheld.reader.read", {"list": ["a.txt"]}, {"dict": []}]]


@needs_bwrap
@pytest.mark.parametrize("x", [PASSES, AFTER], ids=["no handler", "handler before"])
def test_a_failure_that_only_goes_past_x_stays_invalid(x: str) -> None:
    (item,) = _compare(x, FAILING).inputs
    assert (item.valid, item.reason) == (False, "standin")


@needs_bwrap
def test_the_search_covers_the_handler_and_the_sample_is_conclusive() -> None:
    result = _compare(HANDLES)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0  # before, `LOG.append(path)` and `raise` were reached only by invalid inputs
    assert any(i.valid and i.status == "raised" for i in result.inputs)
