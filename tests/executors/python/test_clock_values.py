"""Dates, times and durations as input values and in output states (issue 24 §2).

Calendar code (workalendar, convertdate, apscheduler, icalendar) takes ``date`` and ``datetime`` values. The
pools had none: ``isinstance(day, (date, datetime))`` named lowercase classes, which were neither builtin types
nor the file's classes, so workalendar's ``add_working_days`` ran every input into ``cleaned_date``'s
``raise`` (coverage 0.07 on the third package list's seeds 1-5). And a plain ``date`` in an output state (what
``datetime.date()`` returns) stopped the harness: the output was named by the ``datetime`` module's classes,
which the frozen clock replaces with subclasses that a plain ``date`` is not an instance of.
"""

from __future__ import annotations

import ast
import asyncio
import datetime
import json
import math
import random
import subprocess
import sys

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import callees, hints, scaffold, synth
from calib.executors.sandbox.harness.standins import CalibStandIn
from calib.executors.sandbox.harness.values import decode, encode
from tests.executors.sandbox.test_forkserver import needs_bwrap


def _compare(function: str, context: str) -> object:
    ex = SandboxExecutor(ExecutorConfig(seed=0))
    try:
        return asyncio.run(ex.compare(function, [], context=context))
    finally:
        ex.close()


@pytest.mark.parametrize("value, text", [
    (datetime.date(2024, 1, 15), "date(2024, 1, 15)"),
    (datetime.datetime(2024, 1, 15), "datetime(2024, 1, 15)"),
    (datetime.datetime(2024, 2, 29, 9, 5, 30, 250000), "datetime(2024, 2, 29, 9, 5, 30, 250000)"),
    (datetime.time(12, 30), "time(12, 30)"),
    (datetime.time(0), "time()"),
    (datetime.timedelta(0), "timedelta()"),
    (datetime.timedelta(days=-1, seconds=5), "timedelta(days=-1, seconds=5)"),
])
def test_clock_values_are_written_as_their_constructors_and_read_back(value: object, text: str) -> None:
    assert encode(value) == text
    assert decode(text) == value and type(decode(text)).__name__ == type(value).__name__


def test_a_clock_value_with_bad_fields_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="month must be in 1..12"):
        decode("date(2024, 13, 1)")
    with pytest.raises(ValueError, match="not an allowed constructor"):
        decode("date(2024.0, 1, 1)")  # integers only
    with pytest.raises(TypeError):  # an aware datetime has no such text: the input cannot hold it
        encode(datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc))


FROZEN = """
import datetime
from calib.executors.sandbox.harness import canon, env
from calib.executors.sandbox.harness.values import decode
env.freeze()  # what a batch does before any code runs: datetime.datetime and .date become subclasses
moment = datetime.datetime(2024, 1, 15, 3, 4)  # the frozen clock's class
assert canon.canonical(moment.date()) == {"date": "2024-01-15"}, "a plain date"
assert canon.canonical(moment) == {"datetime": "2024-01-15 03:04:00"}
assert canon.canonical(moment - moment) == {"timedelta": "0:00:00"}
assert decode("date(2024, 1, 15)") == moment.date()
assert isinstance(decode("datetime(2024, 1, 15)"), datetime.datetime), "the frozen class: x's isinstance holds"
"""


def test_a_plain_date_is_an_output_under_the_frozen_clock() -> None:
    # in a process of its own: the frozen clock patches time, os.stat and os.getpid for good
    done = subprocess.run([sys.executable, "-c", FROZEN], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr  # before: StopIteration from canon.canonical(moment.date())


AS_OUTSIDE = """
import datetime
from calib.executors.sandbox.harness import env
moment = datetime.datetime(2024, 1, 15, 3, 4)
plain = (datetime.date.max, datetime.date.min, moment.date(), datetime.date(2024, 1, 15))
def relations():
    return ([isinstance(v, datetime.date) for v in plain], [isinstance(v, datetime.datetime) for v in plain],
            isinstance(moment, datetime.date), issubclass(datetime.datetime, datetime.date),
            issubclass(datetime.date, datetime.datetime), isinstance(datetime.date, type),
            isinstance(3, datetime.date), issubclass(bool, datetime.date))
before = relations()
env.freeze()
moment = datetime.datetime(2024, 1, 15, 3, 4)
plain = (datetime.date.max, datetime.date.min, moment.date(), datetime.date(2024, 1, 15))
assert type(plain[3]).__name__ == "date" and type(plain[3]) is not type(plain[2]), "the frozen class and a plain one"
assert relations() == before, (relations(), before)
"""


def test_isinstance_and_issubclass_hold_under_the_frozen_clock_as_outside() -> None:
    # before: a plain date (date.max, moment.date()) was no datetime.date in the sandbox, nor datetime a subclass of
    # it, so dbf's module-level ``Date.max = Date(datetime.date.max)`` raised a TypeError (list 4, seeds 31-35)
    done = subprocess.run([sys.executable, "-c", AS_OUTSIDE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


DAYS = (
    "import datetime\n"
    "\n"
    "class Day:\n"
    "    def __init__(self, value):\n"
    "        if isinstance(value, datetime.date):\n"
    "            self.value = value\n"
    "        else:\n"
    "            self.value = datetime.date(value, 1, 1)\n"
    "\n"
    "LAST = Day(datetime.date.max)\n"
    "\n"
)
UNTIL = "def until_last(year):\n    return (LAST.value - Day(year).value).days\n"


@needs_bwrap
def test_a_module_built_from_date_max_runs_as_outside(executor: SandboxExecutor) -> None:
    result = asyncio.run(executor.compare(UNTIL, [], context=DAYS, inputs=[{"args": {"year": "2000"}}]))
    assert not result.warnings  # before: "line 10: TypeError (LAST stand-ins)"
    (state,) = result.inputs
    assert state.valid and json.loads(state.output)["return"] == (datetime.date.max - datetime.date(2000, 1, 1)).days


@needs_bwrap
def test_a_function_returning_dates_is_conclusive() -> None:
    result = _compare("def shifted(days):\n    return (datetime.now() + timedelta(days=days)).date()\n",
                      "from datetime import datetime, timedelta\n")
    # before: one output only (every input that returned a date was lost to the harness's error)
    assert result.conclusive, result.reason
    assert any('"return":{"date":' in (i.output or "") for i in result.inputs if i.valid)


CONTEXT = (
    "from datetime import date, datetime, timedelta\n"
    "\n"
    "class UnsupportedDateType(Exception):\n"
    "    pass\n"
    "\n"
    "def cleaned_date(day):\n"
    "    if not isinstance(day, (date, datetime)):\n"
    "        raise UnsupportedDateType(day)\n"
    "    if isinstance(day, datetime):\n"
    "        day = day.date()\n"
    "    return day\n"
    "\n"
)
QUARTER = (
    "def quarter(day):\n"
    "    day = cleaned_date(day)\n"
    "    if day.month <= 3:\n"
    "        return 1\n"
    "    if day.month <= 6:\n"
    "        return 2\n"
    "    if day.month <= 9:\n"
    "        return 3\n"
    "    return 4\n"
)


def test_a_date_checked_by_a_file_helper_is_a_date_parameter() -> None:
    placed = scaffold.place(CONTEXT, QUARTER)
    info = hints.analyse(placed.node, skip_first=False)
    callees.add_forwarded(info, placed)
    assert {"date", "datetime"} <= set(info.params[0].types)  # before: ["object"] (``day.month``) only
    pools = synth.Pools(info, random.Random(0))
    assert {type(v).__name__ for v in pools.by_param["day"]} >= {"date", "datetime"}
    info = hints.analyse(ast.parse("def f(start_date, moment, gap):\n    return gap.total_seconds()\n").body[0],
                         skip_first=False)
    assert [p.types[:1] for p in info.params] == [[], [], ["timedelta"]]
    by_param = synth.Pools(info, random.Random(0)).by_param  # the first two by their names
    assert [type(by_param[n][0]).__name__ for n in ("start_date", "moment", "gap")] == ["date", "datetime",
                                                                                       "timedelta"]


@needs_bwrap
def test_a_date_only_a_helper_checks_reaches_every_quarter() -> None:
    result = _compare(QUARTER, CONTEXT)
    # before: coverage 0.25, every input an UnsupportedDateType
    assert result.conclusive and result.coverage == 1.0, result.reason
    returns = {i.output.split('"return":')[1][0] for i in result.inputs if i.valid and '"return":' in i.output}
    assert returns == {"1", "2", "3", "4"}


MAYAN = (
    "MONTHS = ['Pop', 'Wo', 'Sip', 'Sotz', 'Sek']\n"
    "\n"
    "def _count(day, month):\n"
    "    if day < 0 or day > 19:\n"
    "        raise ValueError('bad day')\n"
    "    return MONTHS.index(month) * 20 + day\n"
    "\n"
)
OFFSET = (
    "def offset(haab, start):\n"
    "    count = _count(*haab)\n"
    "    if count > start:\n"
    "        return count - start\n"
    "    return (count - start) % 100\n"
)


def test_a_parameter_unpacked_into_a_helper_is_a_tuple_of_its_parameters() -> None:
    placed = scaffold.place(MAYAN, OFFSET)
    info = hints.analyse(placed.node, skip_first=False)
    callees.add_forwarded(info, placed)
    hints.mine_module(placed.tree, info)  # MONTHS' texts, as a batch mines them
    haab = info.params[0]
    assert "tuple" in haab.types and "unpack2" in haab.element and len(haab.item.parts) == 2
    pools = synth.Pools(info, random.Random(0))
    pairs = [v for v in pools.by_param["haab"] if isinstance(v, tuple) and len(v) == 2]
    assert any(isinstance(d, int) and m in ("Pop", "Wo", "Sip", "Sotz", "Sek") for d, m in pairs)


@needs_bwrap
def test_a_parameter_unpacked_into_a_helper_reaches_past_it() -> None:
    result = _compare(OFFSET, MAYAN)
    # before: coverage 0.25 (``_count(*haab)`` raised TypeError for every value: none was a pair)
    assert result.conclusive and result.coverage == 1.0, result.reason


def test_a_stand_in_truncates_rounds_down_and_up_to_an_integer() -> None:
    # ``trunc(equinox.get_date()[2])`` (convertdate's gregorian_nawruz): math.trunc has no float fallback
    for op in (math.trunc, math.floor, math.ceil):
        assert op(CalibStandIn("equinox.get_date()[]")) == 0
