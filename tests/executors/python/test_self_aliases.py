"""A parameter that is one of ``self``'s attributes (issue 24 §2, nineteenth round).

``if node is self.head_node:`` holds only when the argument is the very object ``self`` holds: no literal writes
that. The search puts ``Arg('node')`` in the pool of ``self.head_node`` (:func:`calib.executors.sandbox.harness.
globalrefs.identities`), and the runner sets that attribute to the argument once ``self`` and the arguments are
built (:func:`calib.executors.sandbox.harness.placeholders.alias`), in x's runs and in every candidate's.
"""

from __future__ import annotations

import ast
import asyncio
import shutil
from types import SimpleNamespace

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness.globalrefs import identities
from calib.executors.sandbox.harness.placeholders import alias
from calib.executors.sandbox.harness.values import Arg, Obj, decode, encode

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

LINKED = (
    "class Node:\n"
    "    def __init__(self, value, previous_node=None, next_node=None):\n"
    "        self.value = value\n"
    "        self.previous_node = previous_node\n"
    "        self.next_node = next_node\n"
    "\n"
    "    def remove(self):\n"
    "        self.previous_node = self.next_node = None\n"
    "\n"
    "\n"
    "class LinkedList:\n"
    "    def __init__(self):\n"
    "        self.head_node = None\n"
    "        self.tail_node = None\n"
    "        self._size = 0\n"
)
# python-debian's ``LinkedList.remove_node``
REMOVE = (
    "    def remove_node(self, node):\n"
    "        if node is self.head_node:\n"
    "            self.head_node = node.next_node\n"
    "            if self.head_node is None:\n"
    "                self.tail_node = None\n"
    "        elif node is self.tail_node:\n"
    "            self.tail_node = node.previous_node\n"
    "            assert self.tail_node is not None\n"
    "        assert self._size > 0\n"
    "        self._size -= 1\n"
    "        node.remove()\n"
)


def test_an_argument_reference_is_an_input_value() -> None:
    assert encode(Obj(head=Arg("node"), kids=[Arg("node"), 1])) == "Obj(head=Arg('node'), kids=[Arg('node'), 1])"
    assert vars(decode("Obj(head=Arg('node'))")) == {"head": Arg("node")}
    with pytest.raises(ValueError, match="not an allowed constructor"):
        decode("Arg('not a name')")


def test_self_gets_the_argument_itself() -> None:
    instance, node = SimpleNamespace(head=None, kids=None, size=3), object()
    alias(instance, "New('LinkedList', head=Arg('node'), kids=[Arg('node'), 1], size=3)", ["node"], [node], {})
    assert instance.head is node
    assert instance.kids[0] is node and instance.kids[1] == 1
    assert instance.size == 3
    other = SimpleNamespace(head=None)
    alias(other, "Obj(head=Arg('missing'))", ["node"], [node], {})  # no such argument: left as built
    alias(other, "Obj(head=Arg('node'))", ["first"], [], {"node": node})  # given by keyword
    assert other.head is node


def test_the_comparisons_with_self_give_the_values() -> None:
    node = ast.parse(REMOVE.strip() + "\n").body[0]
    found = identities(node, ["node"], "self")
    assert found == {"head_node": [Arg("node")], "tail_node": [Arg("node")]}
    member = ast.parse("def f(self, item, n):\n    return item in self.items or n > self.size\n").body[0]
    assert identities(member, ["item", "n"], "self") == {"items": [[Arg("item")]]}  # not an order comparison
    assert identities(member, ["item", "n"], None) == {}  # a function: no self


@needs_bwrap
def test_the_branches_for_the_head_and_the_tail_are_reached() -> None:
    executor = SandboxExecutor(ExecutorConfig(seed=0))
    try:
        result = asyncio.run(executor.compare(REMOVE, [], context=LINKED))
    finally:
        executor.close()
    assert result.coverage >= 0.9, result.uncovered_lines  # 0.50 before: neither branch taken
    assert result.conclusive, result.reason
    assert any("Arg('node')" in item.state.get("self", "") for item in result.inputs if item.valid)
