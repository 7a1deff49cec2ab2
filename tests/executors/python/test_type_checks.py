"""``isinstance`` checks as comparison feedback (issue 24 §2, eighteenth round): while x is explored,
``isinstance(v, bytes)`` is recorded (:func:`calib.executors.sandbox.harness.cmplog.isa`); a text, bytes or number
that is not of the builtin type asked for is kept with that type's name, and the search writes the value as
that type (:func:`calib.executors.sandbox.harness.redqueen.replacements`), also inside an item of a list."""

from __future__ import annotations

import ast
import asyncio
import json
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import cmplog
from calib.executors.sandbox.harness.redqueen import replacements

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# h2's ``is_informational_response``: only a header name given as bytes takes the first branch
INFORMATIONAL = (
    "def is_informational(headers):\n"
    "    for n, v in headers:\n"
    "        if isinstance(n, bytes):\n"
    "            sigil = b':'\n"
    "            status = b':status'\n"
    "            start = b'1'\n"
    "        else:\n"
    "            sigil = ':'\n"
    "            status = ':status'\n"
    "            start = '1'\n"
    "        if not n.startswith(sigil):\n"
    "            return False\n"
    "        if n != status:\n"
    "            continue\n"
    "        return v.startswith(start)\n"
)


def test_the_recorder_keeps_a_value_of_another_builtin_type() -> None:
    cmplog.take_pairs()
    assert cmplog.isa(":status", bytes) is False
    assert cmplog.isa(b"x", (str, bytes)) is True  # held: nothing kept
    assert cmplog.isa(7, (str, float)) is False
    assert cmplog.isa(object(), bytes) is False  # not a text, bytes or number: nothing kept
    assert cmplog.isa(True, str) is False  # a bool: nothing kept (the search does not rewrite truth values)
    assert cmplog.take_pairs() == [("isa", ":status", "bytes"), ("isa", 7, "str"), ("isa", 7, "float")]


def test_isinstance_is_rewritten_unless_x_binds_the_name() -> None:
    node = ast.parse(INFORMATIONAL).body[0]
    cmplog.instrument(node, None)
    calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "isa"]
    assert len(calls) == 1
    shadowed = ast.parse("def f(x, isinstance):\n    return isinstance(x, bytes)\n").body[0]
    cmplog.instrument(shadowed, None)
    assert not any(isinstance(n, ast.Attribute) and n.attr == "isa" for n in ast.walk(shadowed))


def test_the_search_writes_the_value_as_the_type_asked_for() -> None:
    values = {"headers": [(":status", "100"), ("x", "1")], "n": "12", "f": 3}
    pairs = [("isa", ":status", "bytes"), ("isa", "12", "int"), ("isa", 3, "float"), ("isa", 3, "str")]
    news = replacements(values, pairs)
    assert {"headers": [(b":status", "100"), ("x", "1")], "n": "12", "f": 3} in news  # inside the list's item
    assert {"headers": values["headers"], "n": 12, "f": 3} in news
    assert {"headers": values["headers"], "n": "12", "f": 3.0} in news
    assert {"headers": values["headers"], "n": "12", "f": "3"} in news


@needs_bwrap
def test_a_branch_for_bytes_items_is_reached() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(INFORMATIONAL, [], context=""))
    assert result.coverage == 1.0, result.uncovered_lines  # (0.77 before: the bytes branch unreached)
    assert result.conclusive, result.reason
    # a header name of bytes among the chosen inputs (since the nineteenth round a number can be written as bytes
    # too: ``b'1'`` takes the branch as ``b':status'`` does)
    assert any("(b'" in item.state["args"]["headers"] for item in result.inputs if item.valid)
    returns = {json.dumps(json.loads(item.output).get("return")) for item in result.inputs if item.valid}
    assert len(returns) >= 2


# stdnum's ``_validate_other`` (Singapore's UEN): fixed fields read by slices of a text the search first has short
VALIDATE = (
    "def validate(number):\n"
    "    if number[0] not in ('R', 'S', 'T'):\n"
    "        raise ValueError('component')\n"
    "    if number[3:5] not in ('LP', 'LL', 'FC'):\n"
    "        raise ValueError('entity type')\n"
    "    return number[3:5]\n"
)


def test_a_slice_past_the_end_of_a_short_text_is_kept_for_the_comparison_after_it() -> None:
    cmplog.take_pairs()
    part = cmplog.cut("R", 3, 5)
    assert part == ""
    assert cmplog.compare(part, ("LP", "LL"), "NotIn") is True
    pairs = cmplog.take_pairs()
    assert ("at", "R", (3, "LP")) in pairs and ("at", "R", (3, "LL")) in pairs
    news = replacements({"number": "R"}, pairs)
    assert {"number": "R  LP"} in news  # padded to reach the slice, then the value compared there
    # a slice the text does reach but that is empty (``s[2:2]``) is not kept
    assert cmplog.cut("Rabc", 2, 2) == "" and cmplog.compare("", "LP", "Eq") is False
    assert not [p for p in cmplog.take_pairs() if p[0] == "at"]


@needs_bwrap
def test_fixed_fields_of_a_short_text_are_reached() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(VALIDATE, [], context=""))
    assert result.coverage == 1.0, result.uncovered_lines
    assert result.conclusive, result.reason
