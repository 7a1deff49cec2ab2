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


def test_a_walk_along_a_stand_in_keeps_its_name_within_the_bound_and_ends_by_the_repeat_rule() -> None:
    token = CalibStandIn("self.style")
    lengths = []
    with pytest.raises(standins.StandInLoop, match="repeating the log"):
        for _ in range(3000):  # ``ttype = ttype.parent`` in a loop that never finds its way out
            token = token.parent
            lengths.append(len(_name(token)))
    name = _name(token)
    # the uncut name would be "self.style" + 1000 x ".parent" = 7,010 characters
    assert max(lengths) == MAX_NAME + 1 == len(name)
    assert name.startswith("self.style.parent.parent") and name.endswith(".parent.parent")
    assert "\u2026" in name
    # each step made a new stand-in and logged nothing: the walk ends after REPEAT_LIMIT steps (it ran until the
    # input's timeout before: ``while cur: cur = cur.next``, each stand-in truthy)
    assert len(lengths) == REPEAT_LIMIT and LOG.ops == REPEAT_LIMIT + 1 and not LOG.entries


def test_reading_an_attribute_again_is_not_counted() -> None:
    token = CalibStandIn("self.flag")
    for _ in range(3 * REPEAT_LIMIT):  # ``for row in rows: if self.flag: ...``: the same stand-in each time
        assert token.enabled is token.enabled
    assert LOG.ops == 1


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
    # getitem entries repeat once the name stopped growing (past MAX_NAME: some fifty steps of two
    # operations), and the text became a stand-in; then REPEAT_LIMIT operations logged nothing new
    assert REPEAT_FROM == 0  # counted from the first operation
    grown = LOG.ops - REPEAT_LIMIT - 2
    assert 0 < grown < MAX_NAME, LOG.ops
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


# pint's BaseRegistry: ``__getattr__`` asks a withheld helper, then calls ``self.Unit(item)``, which the
# instance lacks too, so looking up any missing attribute recurses through stand-ins without end
LOOPING_CONTEXT = '''from .util import getattr_maybe_raise


class Registry:
    def __init__(self, case_sensitive=True):
        self.case_sensitive = case_sensitive

    def __getattr__(self, item):
        getattr_maybe_raise(self, item)
        return self.Unit(item)

'''
LOOKUP = '''    def lookup(self, name, default=None):
        if not self.case_sensitive:
            name = name.lower()
        if name in self._units:
            return self._units[name]
        if name in self._aliases:
            return self._aliases[name]
        for prefix in self._prefixes:
            if name.startswith(prefix) and name[len(prefix):] in self._symbols:
                return prefix
        if default is not None:
            return default
        return len(name) + len(self._suffixes)
'''


@needs_bwrap
def test_attributes_whose_lookup_loops_in_the_class_getattr_start_as_stand_ins() -> None:
    # before: building self asked hasattr(instance, "_units"), which ran __getattr__ into the stand-in
    # loop rule; the loop escaped the instance's construction and every input was ``standin_loop``
    # each run here costs ~20 CPU ms (the lookups loop through stand-ins), so the default 2 CPU s ended this
    # search by its budget, after ~97 runs, on a quiet machine and sooner on a loaded one (a CI run stopped it
    # before the line of the prefix loop was reached: coverage 0.75). With 8 s it ends on its own, at the same
    # 138 runs on a quiet machine and a loaded one, so what is asserted does not depend on the machine's load
    executor = SandboxExecutor(ExecutorConfig(seed=0, budget_seconds=8.0))
    try:
        result = asyncio.run(executor.compare(LOOKUP, [LOOKUP], context=LOOPING_CONTEXT))
    finally:
        executor.close()
    reasons = {r.reason for r in result.inputs if not r.valid}
    assert "standin_loop" not in reasons, result.reason
    assert result.conclusive, result.reason
    assert result.candidates[0].sim_func == 1.0
    # the loop's stand-in calls are no part of any output: only x's own
    assert not any("getattr_maybe_raise" in (r.output or "") for r in result.inputs if r.valid)


def test_a_looping_lookup_is_forgotten_and_leaves_the_budget_as_it_was() -> None:
    from calib.executors.sandbox.harness import calls  # noqa: PLC0415

    class Looping:
        def __getattr__(self, item):
            return CalibStandIn("util.helper")(self, item) and self.Unit(item)

    class Answering:
        def __getattr__(self, item):
            return item.upper()

    LOG.record("call", "before", (), {})
    assert calls._lacks(Looping(), "missing") is True
    assert LOG.ops == 1 and len(LOG.entries) == 1 and LOG.budget == standins.OPS_BUDGET
    assert calls._lacks(Answering(), "missing") is False  # a __getattr__ that answers: no stand-in
    assert calls._lacks(Looping.__new__(Looping), "__class__") is False


# a walk along a linked list of nodes (kconfiglib's ``_flatten`` and ``_finalize_choice`` walk ``node.next``):
# on a stand-in menu every ``cur.next`` is a new stand-in, each truthy, so the walk never ended
CHAIN = '''def describe_chain(menu):
    """The entries of a menu's linked list of nodes, and how the walk ended."""
    count = 0
    shown = []
    cur = menu.first
    while cur:
        if cur.kind is Separator:
            shown.append("-")
        elif cur.prompt:
            shown.append(cur.prompt)
        count += 1
        cur = cur.next
    if not count:
        return "empty"
    return count, shown
'''


@needs_bwrap
def test_a_walk_along_stand_in_nodes_is_a_stand_in_loop_and_the_search_goes_on(executor) -> None:
    # before: three inputs timed out, which spent the search's time budget after six runs
    # (valid_inputs 3 < 8, mostly timeout); now each such walk ends after REPEAT_LIMIT steps
    result = asyncio.run(executor.compare(CHAIN, [], context="from withheld.menus import Separator\n"))
    assert "timeout" not in {r.reason for r in result.inputs}
    assert result.conclusive, result.reason
    assert result.runs > 6
    walked = asyncio.run(executor.compare(CHAIN, [], context="from withheld.menus import Separator\n",
                                          inputs=[{"args": {"menu": "StandIn('menu')"}}]))
    assert [r.reason for r in walked.inputs] == ["standin_loop"]
