"""Object state the search reaches and the comparison sees (issue 24 §2): ``other`` of x's own class as
a copy of the input's ``self`` (``__eq__``, ``__cmp__`` compare field by field, and only equal prefixes
reach the later fields); a class-level ``None`` that instances override (``contentparams = None`` in the
class, set by a mixin) as ``self`` state the search varies, where a class constant stays context; and an
exception's own attributes as part of its canonical form."""

from __future__ import annotations

import asyncio
import json
import random
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import canon, synth
from calib.executors.sandbox.harness.values import New, decode

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

ENTRY = (
    "class Entry:\n"
    "    def __init__(self, name='', rank=0, note='', tag=''):\n"
    "        self.name = name\n"
    "        self.rank = rank\n"
    "        self.note = note\n"
    "        self.tag = tag\n"
    "\n"
)
CMP = (
    "    def __cmp__(self, other):\n"
    "        if self.name > other.name:\n"
    "            return 1\n"
    "        if self.name < other.name:\n"
    "            return -1\n"
    "        if self.rank > other.rank:\n"
    "            return 1\n"
    "        if self.rank < other.rank:\n"
    "            return -1\n"
    "        if self.note > other.note:\n"
    "            return 1\n"
    "        if self.note < other.note:\n"
    "            return -1\n"
    "        if self.tag > other.tag:\n"
    "            return 1\n"
    "        if self.tag < other.tag:\n"
    "            return -1\n"
    "        return 0\n"
)

PARSER = (
    "class Parser(object):\n"
    "    contentparams = None\n"  # set per instance by a mixin of another file
    "    LIMIT = 3\n"
    "\n"
)
DECODE = (
    "    def decode(self, data):\n"
    "        data = data.replace('&#60;', '&lt;')\n"
    "        if not self.contentparams.get('type', 'xml').endswith('xml'):\n"
    "            data = data.replace('&lt;', '<')\n"
    "            data = data.replace('&gt;', '>')\n"
    "            data = data.replace('&amp;', '&')\n"
    "        return data[:self.LIMIT * 10]\n"
)


def _cmp_on_host(state: dict[str, str]) -> object:
    namespace: dict[str, object] = {}
    exec(ENTRY + CMP, namespace)  # noqa: S102 - the test's own class, the independent reference

    def build(spec: object) -> object:
        if not isinstance(spec, New):  # Obj(name=..., ...): the object itself
            return spec
        made = namespace["Entry"](*spec.args)  # type: ignore[operator]
        for name, value in spec.attrs.items():
            setattr(made, name, value)
        return made

    try:
        return build(decode(state["self"])).__cmp__(build(decode(state["args"]["other"])))  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - ``'1' > 0``, an ``other`` without the attribute
        return type(exc).__name__


def test_other_of_a_method_starts_with_a_copy_of_self() -> None:
    import ast

    from calib.executors.sandbox.harness import hints

    tree = ast.parse(ENTRY + CMP)
    node = tree.body[0].body[1]
    info = hints.analyse(node, skip_first=True)
    hints.mine_module(tree, info)
    pools = synth.Pools(info, random.Random(0), owner="Entry", init=[])
    assert pools.by_param["other"][1] is synth.TWIN
    plain = synth.Pools(hints.analyse(ast.parse("def f(other):\n    return other.name\n").body[0], skip_first=False),
                        random.Random(0))
    assert all(v is not synth.TWIN for v in plain.by_param["other"])  # a function, not a method: no self to copy
    # (by identity: ``in`` compares with ``==``, and a stand-in's ``==`` answers as the last stand-in mode set says)


@needs_bwrap
def test_a_field_by_field_cmp_is_conclusive_with_copies_of_self() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(CMP, [], context=ENTRY))
    assert result.conclusive, result.reason  # (0.76 before: the later fields' lines unreached)
    returns, twins = set(), 0
    for item in result.inputs:
        if not item.valid or item.state["args"]["other"].startswith("StandIn("):  # answers no host can give
            continue
        output = json.loads(item.output)
        assert output.get("return", output.get("exception")) == _cmp_on_host(item.state)
        returns.add(output.get("return"))
        twins += isinstance(decode(item.state["args"]["other"]), New)
    assert {-1, 0, 1} <= returns and twins


@needs_bwrap
def test_a_class_level_none_is_state_the_search_varies_and_a_constant_is_not() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(DECODE, [], context=PARSER))
    assert result.conclusive, result.reason  # (0.5 before: ``None.get`` raised on every input)
    assert result.coverage == 1.0
    selves = [decode(item.state["self"]) for item in result.inputs if item.state.get("self")]
    assert any(isinstance(getattr(s, "contentparams", None), dict) for s in selves)
    assert not any(hasattr(s, "LIMIT") for s in selves)  # a class constant stays the context's


ERRORS = (
    "class ParseError(Exception):\n"
    "    pass\n"
    "\n"
    "\n"
    "class UnexpectedToken(ParseError):\n"
)
ERROR_INIT = (
    "    def __init__(self, token, expected, state=None):\n"
    "        super(UnexpectedToken, self).__init__()\n"
    "        self.line = getattr(token, 'line', '?')\n"
    "        self.token = token\n"
    "        self.expected = expected\n"
    "        self.state = state\n"
)


def test_an_exception_carries_its_own_attributes() -> None:
    class Unexpected(Exception):
        def __init__(self, token: object) -> None:
            super().__init__()
            self.token = token

    first, second = canon.canonical(Unexpected("a")), canon.canonical(Unexpected("b"))
    assert first == {"exception": canon._qualname(Unexpected), "args": {"tuple": []}, "state": [["token", "a"]]}
    assert canon.dumps(first) != canon.dumps(second)  # equal before: type and arguments only
    assert canon.canonical(ValueError("x")) == {"exception": "ValueError", "args": {"tuple": ["x"]}}


@needs_bwrap
def test_an_exception_classes_initialiser_is_conclusive_and_judged_by_its_attributes() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    wrong = ERROR_INIT.replace("self.expected = expected", "self.expected = token")
    result = asyncio.run(executor.compare(ERROR_INIT, [ERROR_INIT, wrong], context=ERRORS))
    assert result.conclusive, result.reason  # (1 distinct output before: every input left "the same" exception)
    same, other = result.candidates
    valid = [i for i, item in enumerate(result.inputs) if item.valid]
    assert all(same.matches[i] for i in valid)
    differ = [i for i in valid if result.inputs[i].state["args"]["token"] != result.inputs[i].state["args"]["expected"]]
    assert differ and not any(other.matches[i] for i in differ)
