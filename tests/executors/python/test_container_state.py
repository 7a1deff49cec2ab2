"""A subclass of list, tuple or dict carries attributes besides its items (a parsed file that is a list of
hunks with its own ``source_file``, a dict with a ``path``): they are part of its output state, as an
ordinary object's attributes are. Before, two such values with equal items and different attributes
were the same output (an initialiser that set only attributes gave one output for every input)."""

from __future__ import annotations

import asyncio
import json

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import canon


class Hunks(list):
    pass


class Table(dict):
    pass


def _with(cls: type, items, **attrs):  # noqa: ANN001, ANN202
    value = cls(items)
    for name, attr in attrs.items():
        setattr(value, name, attr)
    return value


def test_the_attributes_of_a_container_subclass_are_its_state() -> None:
    a = canon.canonical(_with(Hunks, [1, 2], source="a.txt"))
    b = canon.canonical(_with(Hunks, [1, 2], source="b.txt"))
    assert a != b
    assert a["list"] == [1, 2] and a["state"] == [["source", "a.txt"]]
    t = canon.canonical(_with(Table, {"k": 1}, path="/x", mode=3))
    assert t["dict"] == [["k", 1]] and t["state"] == [["mode", 3], ["path", "/x"]]
    # the language's own containers and subclasses without attributes are as before
    assert canon.canonical([1, 2]) == {"list": [1, 2]}
    assert "state" not in canon.canonical(Hunks([1]))


CONTEXT = "class PatchedFile(list):\n    def __init__(self, source='', target=''):\n        super().__init__()\n"
X = '''    def set_names(self, source, target):
        self.source_file = source.strip()
        if target:
            self.target_file = target
        else:
            self.target_file = self.source_file
'''
WRONG = X.replace("self.target_file = self.source_file", "self.target_file = source")


def test_an_initialiser_that_sets_only_attributes_is_told_apart_by_them() -> None:
    ex = SandboxExecutor(ExecutorConfig(seed=0, workers=2))
    inputs = [{"args": {"source": repr(s), "target": repr(t)}} for s, t in
              [("a", "b"), (" a ", ""), ("x", ""), ("p ", "q"), ("", ""), ("m", "n"), (" z", ""), ("k", "k"),
               ("u ", ""), ("v", "w")]]
    try:
        cmp = asyncio.run(ex.compare(X, [X, WRONG], context=CONTEXT, inputs=inputs))
    finally:
        ex.close()
    assert cmp.conclusive, cmp.reason
    assert cmp.distinct_outputs == 10
    first = json.loads(cmp.inputs[0].output)["self"]
    assert first["list"] == [] and ["source_file", "a"] in first["state"]
    same, wrong = cmp.candidates
    assert same.sim_func == 1.0
    # ``source`` with spaces and no target: the wrong copy keeps the spaces in target_file
    assert list(wrong.matches) == [True, False, True, True, True, True, False, True, False, True]
