"""A withheld base's constructor called by name (issue 24 §2, eleventh round).

``class SubstituteTextPattern(HtmlInlineProcessor)`` with ``HtmlInlineProcessor.__init__(self, pattern)`` in its
own constructor (python3-markdown's smarty extension) reaches the ``__init__`` of the stand-in that the module
name ``HtmlInlineProcessor`` is. That call used to construct the stand-in again, naming it after ``self``: the
next call of ``HtmlInlineProcessor(...)`` put an object where the log expects a name, and the output state could
not be written (the batch exited with status 1 on every input: "crashed: exit 1"). It is now a logged call of
the dependency's constructor, and the stand-in keeps its name."""

from __future__ import annotations

import asyncio
import copy
import json
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness.standins import LOG, CalibStandIn, standin_name

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

CONTEXT = (
    "from textlib.patterns import Processor\n\n\n"
    "class Replace(Processor):\n"
    "    def __init__(self, pattern, text):\n"
    "        Processor.__init__(self, pattern)\n"
    "        self.text = text\n\n\n"
)
X = (
    "def register(registry, pattern):\n"
    "    registry.add(Replace(pattern, '&hellip;'))\n"
    "    registry.add(Processor(pattern + '!', registry))\n"
    "    return len(pattern)\n"
)


def test_calling_a_standins_init_logs_a_call_and_keeps_its_name() -> None:
    LOG.reset()
    processor = CalibStandIn("textlib.patterns.Processor")
    owner = object()
    assert processor.__init__(owner, "ab") is None
    assert standin_name(processor) == "textlib.patterns.Processor"
    assert [entry[:2] for entry in LOG.entries] == [["call", "textlib.patterns.Processor.__init__"]]
    assert LOG.entries[0][2] == LOG.canon([owner, "ab"])
    LOG.reset()
    made = CalibStandIn("peek", ["a", "0"])  # constructing one logs nothing, and keeps its script
    assert LOG.entries == []
    assert made() == "a"
    assert made() == "0"
    assert standin_name(copy.copy(made)) == "peek"


@needs_bwrap
def test_a_class_calling_its_withheld_bases_init_by_name_runs() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    given = asyncio.run(executor.compare(X, [], context=CONTEXT,
                                         inputs=[{"args": {"registry": "StandIn('registry')", "pattern": "'ab'"}}]))
    (only,) = given.inputs
    assert (only.status, only.reason) == ("ok", "")  # before: invalid, "crashed (exit 1)"
    calls = json.loads(only.output)["calls"]
    assert [c[1] for c in calls] == ["textlib.patterns.Processor.__init__", "registry.add",
                                    "textlib.patterns.Processor", "registry.add"]
    assert calls[0][2]["list"][1] == "ab"
    assert calls[2][2]["list"] == ["ab!", {"standin": "registry"}]
    searched = asyncio.run(executor.compare(X, [], context=CONTEXT))
    assert searched.conclusive, searched.reason  # before: "crashed: exit 1", no valid input


DEEPCOPY_CONTEXT = "from copy import deepcopy\nfrom lexlib import TerminalDef\n\n\n"
DEEPCOPY = (
    "def copied(terminals, flags):\n"
    "    twins = deepcopy(terminals)\n"
    "    return [type(t).__name__ for t in twins], flags + 1\n"
)


@needs_bwrap
def test_copies_of_standins_are_standins_of_the_same_name() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(DEEPCOPY, [], context=DEEPCOPY_CONTEXT, inputs=[
        {"args": {"terminals": "[StandIn('lexlib.TerminalDef()'), 2]", "flags": "1"}}]))
    (only,) = result.inputs
    # before: copy rebuilt the stand-in from its slots through its own __setattr__, which raised
    # AttributeError: invalid (a stand-in's failure)
    assert (only.status, only.reason) == ("ok", "")
    assert json.loads(only.output)["return"] == {"tuple": [{"list": ["CalibStandIn", "int"]}, 2]}
