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


def test_special_methods_of_a_standin_called_by_name_are_logged_calls() -> None:
    # ``base.Filter.__iter__(self)`` (python3-html5lib's whitespace filter) raised "takes 1 positional
    # argument but 2 were given": every input invalid ("standin")
    LOG.reset()
    base = CalibStandIn("html5lib.filters.base.Filter")
    owner = type("Owner", (), {})()
    assert list(base.__iter__(owner)) == []  # a stand-in's iteration: empty in the default mode
    assert base.__len__(owner) == 0
    assert type(base.__getitem__(owner, "k")).__name__ == "CalibStandIn"
    base.__setitem__(owner, "k", 1)
    base.__setattr__(owner, "size", 3)  # the withheld base stores it: the object has it
    assert owner.size == 3
    assert base.__str__(owner) == "<html5lib.filters.base.Filter.__str__()>"
    assert standin_name(base.__getattr__(owner, "x")) == "html5lib.filters.base.Filter.__getattr__()"
    assert [e[1] for e in LOG.entries] == [f"html5lib.filters.base.Filter.{m}" for m in (
        "__iter__", "__len__", "__getitem__", "__setitem__", "__setattr__", "__str__", "__getattr__")]
    assert LOG.entries[3][2] == LOG.canon([owner, "k", 1])
    LOG.reset()
    base.size = 4  # Python's own calls are as before
    assert [e[:2] for e in LOG.entries] == [["setattr", "html5lib.filters.base.Filter.size"]]
    assert list(iter(base)) == [] and len(base) == 0 and str(base) == "<html5lib.filters.base.Filter>"


FILTER_CONTEXT = "from . import base\n\n\nclass Filter(base.Filter):\n    keep = frozenset(['pre'])\n\n"
FILTER = (
    "    def __iter__(self):\n"
    "        preserve = 0\n"
    "        for token in base.Filter.__iter__(self):\n"
    "            if token['type'] == 'StartTag' and token['name'] in self.keep:\n"
    "                preserve += 1\n"
    "            elif token['type'] == 'Characters' and not preserve:\n"
    "                token['data'] = ' '.join(token['data'].split())\n"
    "            yield token\n"
)


@needs_bwrap
def test_a_generator_over_its_withheld_bases_iteration_runs() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    given = asyncio.run(executor.compare(FILTER, [], context=FILTER_CONTEXT,
                                         inputs=[{"args": {}, "self": "New('Filter')"}]))
    (only,) = given.inputs
    assert (only.status, only.reason) == ("ok", "")  # before: invalid, "standin" (a TypeError)
    assert json.loads(only.output)["calls"][0][1].endswith("base.Filter.__iter__")  # (`from . import base`: "..base")
    searched = asyncio.run(executor.compare(FILTER, [], context=FILTER_CONTEXT))
    assert searched.valid_inputs == 10  # before: 0 (html5lib's own filter, with its five branches, is conclusive)
