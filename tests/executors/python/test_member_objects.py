"""An attribute the body checks against a class and reads attributes of is also built as an object with those
attributes (issue 24 §2, thirty-fourth round).

kconfiglib's menuconfig ``_value_str(node)`` starts with ``item = node.item``, asks ``isinstance(item, Choice)``
and reads ``item.orig_type``, ``item.assignable``, ``item.type`` ... The hints knew all of it, but the objects
built for ``node`` only ever held instances of ``Choice`` (the first values of ``item``'s own pool) or the names
x compares ``item`` with (``MENU``): its last five lines were never reached (coverage 0.71). Now two of the six
objects of ``node``'s pool hold an object with ``item``'s attributes (:meth:`pools.Pools._member`)."""

from __future__ import annotations

import ast
import asyncio
import random
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import hints, pools
from calib.executors.sandbox.harness.values import New, Obj

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# in the style of kconfiglib 14.1's menuconfig._value_str; the names come from a withheld module
CONTEXT = "from kconf import BOOL, COMMENT, HEX, INT, MENU, STRING, Choice\n"
VALUE_STR = (
    "def value_str(node):\n"
    "    item = node.item\n"
    "    if item in (MENU, COMMENT):\n"
    "        return ''\n"
    "    if item.orig_type in (STRING, INT, HEX):\n"
    "        return '({})'.format(item.str_value)\n"
    "    tri_val_str = (' ', 'M', '*')[item.tri_value]\n"
    "    if len(item.assignable) <= 1:\n"
    "        return '' if isinstance(item, Choice) else '-{}-'.format(tri_val_str)\n"
    "    if item.type == BOOL:\n"
    "        return '[{}]'.format(tri_val_str)\n"
    "    if item.assignable == (1, 2):\n"
    "        return '{{{}}}'.format(tri_val_str)\n"
    "    return '<{}>'.format(tri_val_str)\n"
)


def _pools() -> tuple[pools.Pools, hints.Param]:
    tree = ast.parse(CONTEXT + VALUE_STR)
    info = hints.analyse(tree.body[1], skip_first=False)
    info.tree = tree
    return pools.Pools(info, random.Random(0)), info.params[0]


def test_the_attribute_is_built_as_an_object_with_the_attributes_read() -> None:
    made, node = _pools()
    item = node.children["item"]
    assert item.classes == ["Choice"]
    assert set(item.attrs) >= {"orig_type", "str_value", "tri_value", "assignable", "type"}
    members = [made._member(node, "item", i) for i in range(6)]
    assert isinstance(members[0], New)  # an instance of the class the body checks first, as before
    for i in (2, 4):
        assert isinstance(members[i], Obj)
        assert set(vars(members[i])) == set(item.attrs)
    # the pool of node: objects holding such an item, beside those holding names x compares item with
    held = [vars(v)["item"] for v in made.by_param["node"] if isinstance(v, Obj)]
    assert any(isinstance(h, Obj) and vars(h)["assignable"] == (1, 2) for h in held)
    assert {str(h) for h in held} >= {"Global('MENU')", "Global('COMMENT')"}


@needs_bwrap
def test_the_branches_after_the_class_check_are_reached() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    try:
        result = asyncio.run(executor.compare(VALUE_STR, [], context=CONTEXT))
    finally:
        executor.close()
    # before: coverage 0.71, nothing after the class check returned: item was only ever Choice() or MENU
    assert result.conclusive, result.reason
    lines = VALUE_STR.splitlines()
    reached = {lines[n - 1].strip() for n in range(1, len(lines) + 1)} - {lines[n - 1].strip()
                                                                         for n in result.uncovered_lines}
    assert "return '{{{}}}'.format(tri_val_str)" in reached  # item.assignable == (1, 2), item.type not BOOL
