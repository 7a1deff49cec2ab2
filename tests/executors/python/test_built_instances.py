"""Instances of the file's classes are built from what their constructor takes (issue 24 §2, thirty-fourth round).

dbf's ``Date.__lt__(self, other)`` asks ``isinstance(other, Date)`` and then ``if other:``. The pools built
``other`` as ``Date()`` (the null date, false), ``Date({'a': 1, 'b': 2})``, ``Date([1, 2, 3])``, ``Date('abc')``
and ``Date(3)``: every one but the first raises in ``Date.__new__``, which takes a ``datetime.date``, a text or a
``Date``. Now the constructor's first parameter is read as a parameter of x is (:func:`hints.analyse`), and one
instance is built from the first value of each plain type its body says (:meth:`pools.Pools._built`):
``Date('')`` and ``Date(date(2024, 1, 15))``. dbf's ``Date.__ne__``, ``DateTime.__ge__``, ``__le__`` and
``__ne__`` were inconclusive at coverage 0.57 on the tuning sample; they are conclusive now."""

from __future__ import annotations

import ast
import asyncio
import random
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import hints, pools
from calib.executors.sandbox.harness.values import encode

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# in the style of dbf 0.96's Date: a null-capable date whose constructor takes a date, a text or numbers
CONTEXT = (
    "import datetime\n"
    "\n"
    "\n"
    "class Day:\n"
    "    __slots__ = ['_date']\n"
    "\n"
    "    def __new__(cls, year=None, month=0, day=0):\n"
    "        nd = object.__new__(cls)\n"
    "        if year is None:\n"
    "            nd._date = None\n"
    "        elif isinstance(year, str):\n"
    "            nd._date = datetime.datetime.strptime(year, '%Y-%m-%d').date()\n"
    "        elif isinstance(year, datetime.date):\n"
    "            nd._date = year\n"
    "        else:\n"
    "            nd._date = datetime.date(year, month, day)\n"
    "        return nd\n"
    "\n"
    "    def __bool__(self):\n"
    "        return self._date is not None\n"
    "\n"
)
X = (
    "    def __ne__(self, other):\n"
    "        if self:\n"
    "            if isinstance(other, datetime.date):\n"
    "                return self._date != other\n"
    "            elif isinstance(other, Day):\n"
    "                if other:\n"
    "                    return self._date != other._date\n"
    "                return True\n"
    "        else:\n"
    "            if isinstance(other, datetime.date):\n"
    "                return True\n"
    "            elif isinstance(other, Day):\n"
    "                if other:\n"
    "                    return True\n"
    "                return False\n"
    "        return NotImplemented\n"
)


def test_an_instance_is_built_from_each_type_its_constructor_takes() -> None:
    tree = ast.parse(CONTEXT + "\n".join(line[4:] for line in X.splitlines()))
    method = tree.body[-1]
    info = hints.analyse(method, skip_first=True)
    info.tree = tree
    made = pools.Pools(info, random.Random(0))
    # year: None, a text, a date (isinstance checks), numbers: a text and a date, in the order the body says
    assert [encode(v) for v in made._built("Day")] == ["New('Day', '')", "New('Day', date(2024, 1, 15))"]
    other = [encode(v) for v in made.by_param["other"]]
    assert "New('Day', date(2024, 1, 15))" in other[:8]  # among the first values the search tries
    assert made._built("Missing") == []  # a class the file does not define: nothing built


@needs_bwrap
def test_the_other_instance_branches_are_reached() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    try:
        result = asyncio.run(executor.compare(X, [], context=CONTEXT))
    finally:
        executor.close()
    assert result.conclusive, result.reason
    # before: coverage 0.86, lines 7 and 14 never ran: no Day that is true was built for other
    assert result.coverage == 1.0
    assert result.uncovered_lines == ()
