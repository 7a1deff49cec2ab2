"""Slices as input values (issue 24 §2): a ``__getitem__`` that answers an index and a slice differently
(``isinstance(idx, slice)``) gets slices from the search, and ``slice(...)`` is a value an input state
(and an ``--inputs`` file) may hold, decoded without ``eval`` like the other values."""

from __future__ import annotations

import ast
import asyncio
import json
import random
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import hints, synth
from calib.executors.sandbox.harness.values import New, decode, encode

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

CONTEXT = (
    "class Words:\n"
    "    def __init__(self, value=0x0123456789ab, count=6):\n"
    "        self.value = value\n"
    "        self.count = count\n"
    "\n"
    "    def words(self):\n"
    "        return [(self.value >> (8 * i)) & 0xff for i in reversed(range(self.count))]\n"
    "\n"
)
GETITEM = (
    "    def __getitem__(self, idx):\n"
    "        if isinstance(idx, int):\n"
    "            if not -self.count <= idx <= self.count - 1:\n"
    "                raise IndexError('index out of range')\n"
    "            return self.words()[idx]\n"
    "        elif isinstance(idx, slice):\n"
    "            words = self.words()\n"
    "            return [words[i] for i in range(*idx.indices(len(words)))]\n"
    "        raise TypeError('unsupported type %r' % (idx,))\n"
)


def test_slices_round_trip_through_the_input_text() -> None:
    for value in (slice(1, None), slice(None, None, -1), slice(0, 10, 2), slice(3)):
        text = encode(value)
        assert decode(text) == value and eval(text) == value  # noqa: S307 - our own literal, the reference
    assert encode(slice(2, -1)) == "slice(2, -1, None)"


@pytest.mark.parametrize("text", ["slice('a', 2)", "slice(1, 2, 3, 4)", "slice()", "slice(start=1)"])
def test_a_slice_of_anything_but_integers_and_none_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="slice"):
        decode(text)


def test_an_isinstance_check_against_slice_gives_the_parameter_slices() -> None:
    tree = ast.parse("class Words:\n" + GETITEM)
    node = tree.body[0].body[0]
    info = hints.analyse(node, skip_first=True)
    assert "slice" in info.params[0].types
    pool = synth.Pools(info, random.Random(0)).by_param["idx"]
    slices = [v for v in pool if isinstance(v, slice)]  # (unhashable before Python 3.12)
    assert slice(0, 2) in slices and slice(None, None, -1) in slices


@needs_bwrap
def test_a_getitem_with_a_slice_branch_is_conclusive_and_replayed_exactly() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(GETITEM, [], context=CONTEXT))
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    given = [decode(i.state["args"]["idx"]) for i in result.inputs]
    assert any(isinstance(v, slice) for v in given)
    namespace: dict[str, object] = {}
    exec(CONTEXT + GETITEM, namespace)  # noqa: S102 - the test's own class, the independent reference
    checked = 0
    for item, idx in zip(result.inputs, given):
        spec = decode(item.state["self"])
        output = json.loads(item.output)
        if not isinstance(spec, New) or "return" not in output or not isinstance(idx, slice):
            continue
        words = namespace["Words"](*spec.args)  # type: ignore[operator]
        for name, value in spec.attrs.items():
            setattr(words, name, value)
        assert output["return"] == {"list": words[idx]}
        checked += 1
    assert checked >= 1
