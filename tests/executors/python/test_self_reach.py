"""What a method's ``self`` can be, through the real sandbox (issue 24 §2, docs/executors.md "Object states").

Two ways the search used to miss branches of methods on code never tuned on:

- an attribute x asks ``hasattr(self, "name")`` about was pre-filled with a stand-in (another method of the
  class reads it), so x always took its "already there" branch (texttable's ``_compute_cols_width``);
- an attribute only the methods x calls read (``self.match(reMain)`` reading ``self.subject``) was never
  varied: x's own body does not name it (commonmark's ``InlineParser.parseString``).

The expected outputs are Python's own semantics of the code below, written out.
"""

from __future__ import annotations

import ast
import asyncio
import random
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import callees, hints, scaffold, synth
from calib.executors.sandbox.harness.fixups import guarded_reads
from calib.executors.sandbox.harness.standins import is_standin, standin_script
from calib.executors.sandbox.harness.values import Obj
from tests.executors.python.test_result_shapes import _compare, _outputs

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

TABLE = (
    "class Table:\n"
    "    def __init__(self, max_width=80):\n"
    "        self.max_width = max_width\n"
    "        self.rows = []\n"
    "\n"
    "    def draw(self):\n"
    "        return '+'.join('-' * w for w in self._width)\n"
    "\n"
)
WIDTHS = (
    "    def widths(self):\n"
    "        if hasattr(self, '_width'):\n"
    "            return self._width\n"
    "        widths = [len(str(cell)) for row in self.rows for cell in row]\n"
    "        if sum(widths) > self.max_width:\n"
    "            widths = [self.max_width // max(len(widths), 1)] * len(widths)\n"
    "        self._width = widths\n"
    "        return widths\n"
)


@needs_bwrap
def test_an_attribute_x_asks_hasattr_about_starts_missing() -> None:
    # ``draw`` reads self._width, so it used to be pre-filled with a stand-in: hasattr() was always true
    given = [{"self": "New('Table', 80, rows=[['ab', 'c']])"},
             {"self": "New('Table', 80, rows=[['ab', 'c']], _width=[9])"}]
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=2.0))
    result = asyncio.run(executor.compare(WIDTHS, [], context=TABLE, inputs=given))
    # Python: no _width yet -> [len('ab'), len('c')] == [2, 1]; given [9] -> returned as it is
    assert [out.get("return") for _, out in _outputs(result)] == [{"list": [2, 1]}, {"list": [9]}]
    searched = _compare(WIDTHS, [], context=TABLE)
    assert searched.conclusive, searched.reason
    assert searched.coverage == 1.0


def test_guarded_reads_name_hasattr_and_getattr_with_a_default_on_self_only() -> None:
    node = ast.parse(
        "def f(self, other):\n"
        "    a = hasattr(self, 'a') and getattr(self, 'b', None)\n"
        "    b = getattr(self, 'c') or hasattr(other, 'd')\n"
        "    try:\n"
        "        e = self.e\n"
        "    except AttributeError:\n"
        "        e = None\n"
    ).body[0]
    # getattr without a default raises when missing, like a plain read: not a guard
    assert guarded_reads(node) == frozenset({"a", "b", "e"})


PARSER = (
    "import re\n"
    "\n"
    "WORD = re.compile(r'^[a-z]+')\n"
    "\n"
    "class Inline:\n"
    "    def __init__(self, options):\n"
    "        self.options = options\n"
    "        self.subject = ''\n"
    "        self.pos = 0\n"
    "\n"
    "    def match(self, pattern):\n"
    "        m = pattern.search(self.subject[self.pos:])\n"
    "        if m is None:\n"
    "            return None\n"
    "        self.pos += m.end()\n"
    "        return m.group()\n"
    "\n"
)
PARSE_WORD = (
    "    def parse_word(self, out):\n"
    "        m = self.match(WORD)\n"
    "        if m:\n"
    "            if len(m) > 3:\n"
    "                out.append(m.upper())\n"
    "            else:\n"
    "                out.append(m)\n"
    "            return True\n"
    "        return False\n"
)


def _placed_hints(context: str, function: str) -> hints.Hints:
    placed = scaffold.place(context, function)
    info = hints.analyse(placed.node, skip_first=True)
    callees.add_callees(info, placed)
    return info


def test_self_attributes_the_methods_x_calls_read_become_self_parameters() -> None:
    info = _placed_hints(PARSER, PARSE_WORD)
    by_name = {p.name: p for p in info.self_params}
    # x reads only self.match; match reads self.subject (sliced: a text or a list) and self.pos
    assert {"subject", "pos"} <= set(by_name)
    assert "str" in by_name["subject"].types
    # a method defined after x is not in the context: nothing to describe, x's own reads only
    alone = _placed_hints(PARSER.replace("    def match(self, pattern):", "    def other(self, pattern):"), PARSE_WORD)
    assert {p.name for p in alone.self_params} == {"match"}


@needs_bwrap
def test_a_method_whose_branches_turn_on_what_its_callee_reads_is_conclusive() -> None:
    # the constructor leaves subject == '': without subject among the searched attributes, match()
    # never matches, no line after ``if m:`` runs and every output is ``False`` (coverage 3 of 7 lines)
    result = _compare(PARSE_WORD, [], context=PARSER)
    assert result.conclusive, result.reason
    assert result.coverage >= 0.8
    returns = {out.get("return") for _, out in _outputs(result)}
    assert {True, False} <= returns  # a word at self.pos, and none


def test_type_of_a_parameter_compared_with_builtin_types_names_those_types() -> None:
    # docopt's ``ChildPattern.match``: ``if type(self.value) in (int, list):`` then ``type(self.value) is int``
    node = ast.parse(
        "def match(self, left, right):\n"
        "    if type(self.value) in (int, list):\n"
        "        return 1\n"
        "    if type(left) is str or type(right) == dict or type(left) is Custom:\n"
        "        return 2\n"
    ).body[0]
    info = hints.analyse(node, skip_first=True)
    assert {p.name: p.types for p in info.params} == {"left": ["str"], "right": ["dict"]}
    assert {p.name: p.types for p in info.self_params} == {"value": ["int", "list"]}


def test_a_local_bound_to_a_parameter_s_attribute_describes_that_attribute() -> None:
    # commonmark's ``parseNewline``: ``lastc = block.last_child`` then ``lastc.t == 'text'``
    node = ast.parse(
        "def parse_newline(self, block):\n"
        "    '''Parse a newline. If it was preceded by two spaces, return a hard line break.'''\n"
        "    lastc = block.last_child\n"
        "    if lastc and lastc.t == 'text' and lastc.literal.endswith(' '):\n"
        "        return 1\n"
        "    items = self.items\n"
        "    items.append(lastc)\n"
        "    block = block.parent\n"  # a parameter rebound: not an alias of anything
        "    return block.depth\n"
    ).body[0]
    info = hints.analyse(node, skip_first=True)
    [block] = info.params
    last = block.children["last_child"]
    assert last.children["t"].types == ["str"] and last.children["literal"].types == ["str"]
    assert {p.name: p.types for p in info.self_params} == {"items": ["list"]}
    # the docstring is prose, not a literal the code compares: 'text' and ' ' are mined, it is not
    assert "text" in info.strings and " " in info.strings
    assert not any("newline" in s for s in info.strings)


PARSE_ATOM = (
    "def parse_atom(tokens):\n"
    "    token = tokens.current()\n"
    "    if token in '([':\n"
    "        tokens.move()\n"
    "        return 'group'\n"
    "    elif token.startswith('--'):\n"
    "        return 'long'\n"
    "    elif token.startswith('-') and token != '-':\n"
    "        return 'short'\n"
    "    return 'word'\n"
)


def test_what_a_call_returns_is_described_by_the_use_of_its_answer() -> None:
    # docopt's ``parse_atom``: ``token = tokens.current()`` then ``token in '(['`` and ``token.startswith``
    info = hints.analyse(ast.parse(PARSE_ATOM).body[0], skip_first=False)
    [tokens] = info.params
    assert tokens.children["current"].types == ["callable"]
    assert tokens.children["current"].result.types == ["str"]
    assert tokens.children["move"].result is None  # its answer is not kept
    pools = synth.Pools(info, random.Random(0))
    # the scripted answers of tokens.current() are texts mined from the body, never a number or a bool
    scripted = [obj.current for obj in pools.by_param["tokens"] if isinstance(obj, Obj)]
    answers = [a for s in scripted if is_standin(s) and standin_script(s) for a in standin_script(s)]
    assert answers and all(type(a) is str for a in answers)


@needs_bwrap
def test_a_dependency_s_answers_take_the_type_x_uses_them_as() -> None:
    # before, tokens.current() answered numbers and booleans as often as texts: ``token in '(['`` raised
    result = _compare(PARSE_ATOM, [])
    assert result.conclusive, result.reason
    returns = [out.get("return") for _, out in _outputs(result) if "exception" not in out]
    assert {"group", "long", "word"} <= set(returns)


# ------------------------------------------------------------------ special methods x runs without naming them
# textfsm's ``TextTable.Filter`` loops ``for row in self``: the class's ``__iter__``/``__next__`` walk
# ``self._table[1:]``, which x's body never names, so the constructor's empty table was every input's (twenty-ninth
# round: coverage 0.78, now conclusive)
LEDGER = (
    "class Ledger:\n"
    "    def __init__(self, owner='me'):\n"
    "        self.owner = owner\n"
    "        self._entries = []\n"
    "\n"
    "    def __iter__(self):\n"
    "        return iter(self._entries)\n"
    "\n"
    "    def __len__(self):\n"
    "        return self._count\n"
    "\n"
)
BALANCE = (
    "    def balance(self):\n"
    "        total = 0\n"
    "        for amount in self:\n"
    "            if amount > 10:\n"
    "                total += amount\n"
    "            else:\n"
    "                total -= 1\n"
    "        return total\n"
)


def test_the_special_methods_x_runs_on_self_are_named_in_the_order_of_use() -> None:
    node = ast.parse("def f(self, k, other):\n"
                     "    for r in self: pass\n"
                     "    n = len(self) + len(other)\n"
                     "    v = self[k]\n"
                     "    self[k] = [x for x in other]\n"
                     "    if k in self or k in other: pass\n"
                     "    del self[k]\n"
                     "    return sorted(self)\n").body[0]
    assert callees.protocol(node, "self") == ["__iter__", "__next__", "__len__", "__getitem__", "__setitem__",
                                              "__contains__", "__delitem__"]
    assert callees.protocol(node, "other") == ["__len__", "__iter__", "__next__", "__contains__"]
    # what their bodies read of self becomes the input's self: __iter__'s _entries, __len__'s _count
    info = _placed_hints(LEDGER, BALANCE)
    assert {"_entries"} <= {p.name for p in info.self_params}
    assert "_count" not in {p.name for p in info.self_params}  # balance never takes len(self)


@needs_bwrap
def test_a_method_looping_over_self_gets_the_items_its_iter_walks() -> None:
    # before: _entries stayed the constructor's [], the loop never ran (lines 3-7 of 8 but the for: coverage 0.5)
    result = _compare(BALANCE, [], context=LEDGER)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
