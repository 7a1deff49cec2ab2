"""A method of a class with ``__slots__`` that calls methods defined after it in the file (issue 24 §2).

The file context ends where x starts, so the class as built lacks the methods written after x. ``self``
gets a stand-in for each attribute x reads that it lacks; with ``__slots__`` the instance has no room for
one (``AttributeError``), so x raised on every input at its first ``self._match(...)``: sqlglot's
``Parser._parse_*`` methods, coverage 0.1-0.2 on the second package list's seeds 21-25 (the fourteenth
round's tuning sample). A name the slots leave out can only be a class attribute: it is set on the class,
which every build makes anew (``classattrs.fill``).
"""

from __future__ import annotations

import asyncio

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import classattrs
from calib.executors.sandbox.harness.standins import CalibStandIn, is_standin
from tests.executors.sandbox.test_forkserver import needs_bwrap

CONTEXT = (
    "class Parser:\n"
    "    __slots__ = ('tokens', 'index')\n"
    "\n"
    "    def __init__(self, tokens=()):\n"
    "        self.tokens = list(tokens)\n"
    "        self.index = 0\n"
    "\n"
)
X = (
    "    def parse_switch(self):\n"
    "        self._advance()\n"
    "        if self._match('ON'):\n"
    "            state = True\n"
    "        elif self._match_text('OFF'):\n"
    "            state = False\n"
    "        else:\n"
    "            state = None\n"
    "        return {'state': state, 'at': self.index}\n"
)


class Slotted:
    __slots__ = ("a",)


class Plain:
    pass


def test_a_name_the_slots_leave_out_goes_on_the_class_and_a_slot_on_the_instance() -> None:
    class Fresh(Slotted):
        __slots__ = ()

    one = Fresh()
    classattrs.fill(one, "later", CalibStandIn("self.later"))  # not a slot: only the class can hold it
    assert "later" in vars(Fresh) and is_standin(one.later)
    classattrs.fill(one, "a", 5)  # a slot: the instance's own
    assert one.a == 5 and "a" in Slotted.__slots__
    plain = Plain()
    classattrs.fill(plain, "later", 1)  # an instance with a __dict__ keeps it there
    assert vars(plain) == {"later": 1} and not hasattr(Plain, "later")
    with pytest.raises(AttributeError):  # a name the class has (read-only here) is not overwritten
        classattrs.fill(Fresh(), "__slots__", 3)


@needs_bwrap
def test_a_slotted_method_calling_later_methods_is_conclusive() -> None:
    ex = SandboxExecutor(ExecutorConfig())
    try:
        result = asyncio.run(ex.compare(X, [X.replace("'OFF'", "'NO'")], context=CONTEXT))
    finally:
        ex.close()
    # before: AttributeError at line 2 on every input (the lines reached: 1 of 7)
    assert result.conclusive, result.reason
    assert result.coverage >= 0.8 and result.distinct_outputs >= 2
    assert {i.reason for i in result.inputs if not i.valid} <= {""}
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 1.0


# gpxpy's GPX: a slotted class whose constructor sets every slot to an empty value. The input's
# ``self.tracks`` was dropped as the class's own attribute (a slot is a descriptor on the class), so x saw
# ``[]`` on every input: ``GPX.get_duration`` had coverage 0.20 and one distinct output on the third package
# list's seeds 6-10 (the fifteenth round's tuning sample).
SLOTTED_CONTEXT = (
    "class GPX:\n"
    "    __slots__ = ('name', 'tracks')\n"
    "\n"
    "    def __init__(self):\n"
    "        self.name = None\n"
    "        self.tracks = []\n"
    "\n"
)
DURATION = (
    "    def get_duration(self):\n"
    "        if not self.tracks:\n"
    "            return 0\n"
    "        result = 0\n"
    "        for track in self.tracks:\n"
    "            if track is None:\n"
    "                return None\n"
    "            result += len(track)\n"
    "        return result\n"
)


def test_a_slot_is_instance_state_the_input_sets() -> None:
    namespace: dict = {}
    exec(SLOTTED_CONTEXT, namespace)  # noqa: S102 - the test's own class
    gpx = namespace["GPX"]
    assert classattrs.instance_default(gpx, "tracks")  # a __slots__ member: the instance's, not the class's
    from calib.executors.sandbox.harness.calls import set_attributes  # noqa: PLC0415

    built = set_attributes(gpx(), gpx, {"tracks": ["ab", "c"]})
    assert built.tracks == ["ab", "c"]


@needs_bwrap
def test_a_slotted_constructor_s_empty_values_do_not_hide_the_input() -> None:
    ex = SandboxExecutor(ExecutorConfig())
    try:
        result = asyncio.run(ex.compare(DURATION, [DURATION.replace("len(track)", "1")],
                                        context=SLOTTED_CONTEXT))
    finally:
        ex.close()
    assert result.conclusive and result.coverage >= 0.8, result.reason  # before: 0.20, one distinct output
    assert result.distinct_outputs >= 3
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 1.0
