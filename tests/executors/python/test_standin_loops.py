"""Loops that turn on stand-ins end at the same cost per step (issue 24 §3): a walk along a stand-in's
attributes and a text grown from stand-ins stay bounded, so the loop rules end them within a few
milliseconds instead of letting each step grow (pygments' ``_get_ttype_class`` on a stand-in token took
a third of a second per call, and timed out on replay)."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import standins
from calib.executors.sandbox.harness.standins import LOG, MAX_NAME, MAX_TEXT, REPEAT_FROM, REPEAT_LIMIT, CalibStandIn

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.fixture(autouse=True)
def _fresh_log():
    LOG.reset()
    yield
    LOG.reset()


def _name(value: object) -> str:
    return object.__getattribute__(value, "_calib_name")


def test_a_short_attribute_chain_keeps_its_whole_name() -> None:
    token = CalibStandIn("self.style")
    assert _name(token.parent.parent) == "self.style.parent.parent"
    assert _name(token.parent) != _name(token.parent.parent)


def test_a_walk_along_a_stand_in_keeps_its_name_within_the_bound() -> None:
    token = CalibStandIn("self.style")
    lengths = []
    for _ in range(3000):  # ``ttype = ttype.parent`` in a loop that never finds its way out
        token = token.parent
        lengths.append(len(_name(token)))
    name = _name(token)
    # the uncut name would be "self.style" + 3000 x ".parent" = 21,010 characters
    assert max(lengths) == MAX_NAME + 1 == len(name)
    assert name.startswith("self.style.parent.parent") and name.endswith(".parent.parent")
    assert "\u2026" in name


def test_a_text_grown_from_a_stand_in_turns_into_a_stand_in_past_the_bound() -> None:
    part = CalibStandIn("part")
    assert "<part>" + "x" * 10 == "<part>" + "x" * 10  # a short text stays a text (commonmark's patterns)
    assert part + "abc" == "<part>abc" and "abc" + part == "abc<part>"
    long = "x" * (MAX_TEXT + 1)
    assert isinstance(part + long, CalibStandIn) and isinstance(long + part, CalibStandIn)


def test_pygments_css_class_loop_on_a_stand_in_token_ends_by_the_repeat_rule() -> None:
    # pygments.formatters.html._get_ttype_class, as it runs on a stand-in token
    lookup: dict[object, str] = {}
    ttype: object = CalibStandIn("self.style")
    fname, aname, steps = lookup.get(ttype), "", 0
    with pytest.raises(standins.StandInLoop, match="repeating the log"):
        while fname is None:
            aname = ttype[-1] + aname  # type: ignore[index, operator]
            ttype = ttype.parent  # type: ignore[attr-defined]
            fname = lookup.get(ttype)
            steps += 1
    # ended by the rule for a loop that repeats itself (before the 10,000-operation budget): its
    # getitem entries repeat once the name stopped growing, and the text became a stand-in
    assert LOG.ops == REPEAT_FROM + REPEAT_LIMIT + 2
    assert isinstance(aname, CalibStandIn) and steps < LOG.budget // 2


@needs_bwrap
def test_the_css_class_loop_is_a_stand_in_loop_not_a_timeout_in_the_sandbox() -> None:
    context = "from withheld.token import STANDARD_TYPES\n"
    x = ("def css_class(ttype):\n"
         "    fname = STANDARD_TYPES.get(ttype)\n"
         "    if fname:\n"
         "        return fname\n"
         "    aname = ''\n"
         "    while fname is None:\n"
         "        aname = ttype[-1] + aname\n"
         "        ttype = ttype.parent\n"
         "        fname = STANDARD_TYPES.get(ttype)\n"
         "    return fname + aname\n")
    inputs = [{"args": {"ttype": "StandIn('token')"}, "standins": "none"} for _ in range(3)]
    # input_timeout 2 s: each call, before, grew the name and the text with every step, for about 0.3 s
    ex = SandboxExecutor(ExecutorConfig(seed=0, workers=1, input_timeout=2.0))
    result = asyncio.run(ex.compare(x, [], context=context, inputs=inputs))
    reasons = [r.reason for r in result.inputs]
    assert reasons == ["standin_loop"] * 3, reasons
    for r in result.inputs:  # the stand-in names in the call log stayed within the bound
        names = [entry[1] for entry in json.loads(r.output)["calls"] if entry[0] == "getitem"]
        assert names[:2] == ["token", "token.parent"] and max(map(len, names)) == MAX_NAME + 1
