"""Object states built by the class's own mutators (issue 24 §2): a method's ``self`` is constructed and
then has some of the class's own methods called on it (``New('Tally', 3, __calls__=[['record', 'a', 2]])``),
so a method that only does something on a filled object (a cache's ``__getitem__``, a multi-dict's
``sortedvalues``) is explored; the calls are part of the input state and the replay makes them again.

The end-to-end tests run the real sandbox; the units below them run the harness's pure pieces on the host.
"""

from __future__ import annotations

import ast
import asyncio
import json
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import mutators
from calib.executors.sandbox.harness.calls import make_instance
from calib.executors.sandbox.harness.standins import is_standin
from calib.executors.sandbox.harness.values import New, Obj, decode, encode

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# A dict subclass: its items can only be put in through its own methods (no attribute of the instance
# holds them), so without mutator calls every ``self`` is empty and ``summary`` returns None.
CONTEXT = (
    "class Tally(dict):\n"
    "    def __init__(self, limit=3):\n"
    "        super().__init__()\n"
    "        self.limit = limit\n"
    "\n"
    "    def record(self, key, amount):\n"
    "        self[key] = self.get(key, 0) + amount\n"
    "\n"
)
SUMMARY = (
    "    def summary(self, key):\n"
    "        if not self:\n"
    "            return None\n"
    "        total = sum(self.values())\n"
    "        if key not in self:\n"
    "            return ['missing', total]\n"
    "        share = self[key] * 100 // total if total else 0\n"
    "        if share > 50:\n"
    "            return ['major', share]\n"
    "        return ['minor', share]\n"
)


def _compare(truth: str, context: str, inputs=None, **config: object):
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0, **config))  # type: ignore[arg-type]
    return asyncio.run(executor.compare(truth, [], context=context, inputs=inputs))


def _host_tally() -> type:
    """The same class, run on the host as the independent reference (it is this test's own code)."""
    namespace: dict[str, object] = {}
    exec(CONTEXT + SUMMARY, namespace)  # noqa: S102 - the test's own class, not code under audit
    return namespace["Tally"]  # type: ignore[return-value]


def _rebuilt(cls: object, spec: New) -> object:
    """The input's ``self`` made on the host as the harness makes it: the constructor, the calls, the attributes."""
    obj = cls(*spec.args)  # type: ignore[operator]
    mutators.apply(obj, spec.attrs.get(mutators.CALLS))
    for name, value in spec.attrs.items():
        if name != mutators.CALLS:
            setattr(obj, name, value)
    return obj


def _canonical(value: object) -> object:
    """The output state's form of the plain values ``summary`` returns (docs/executors.md, "Output states")."""
    return {"list": [_canonical(v) for v in value]} if isinstance(value, list) else value


@needs_bwrap
def test_a_method_of_a_filled_object_is_conclusive_and_the_replay_rebuilds_it() -> None:
    result = _compare(SUMMARY, CONTEXT)
    assert result.conclusive, result.reason
    assert result.coverage >= 0.8
    assert all(i.valid for i in result.inputs), [i.reason for i in result.inputs]  # replayed identically
    specs = [decode(i.state["self"]) for i in result.inputs]
    assert all(isinstance(s, New) and s.cls == "Tally" for s in specs)
    called = [s.attrs.get(mutators.CALLS) for s in specs]
    assert any(called), "no input state filled the tally through its own method"
    assert {c[0] for calls in called if calls for c in calls} == {"record"}  # summary itself is no mutator
    # each output is what the same calls and the same call of summary give on the host
    tally = _host_tally()
    checked = 0
    for item, spec in zip(result.inputs, specs):
        output = json.loads(item.output)
        if "return" not in output:
            continue
        obj = tally(*spec.args)
        for name, *args in spec.attrs.get(mutators.CALLS) or []:
            try:
                getattr(obj, name)(*args)
            except Exception:  # noqa: BLE001, S112 - skipped in the sandbox too
                continue
        assert output["return"] == _canonical(obj.summary(*[decode(v) for v in item.state["args"].values()]))
        checked += 1
    assert checked >= 8


@needs_bwrap
def test_without_the_calls_the_same_inputs_are_inconclusive() -> None:
    found = _compare(SUMMARY, CONTEXT)
    bare = []
    for item in found.inputs:
        spec = decode(item.state["self"])
        spec.attrs.pop(mutators.CALLS, None)
        bare.append({**item.state, "self": encode(spec)})
    result = _compare(SUMMARY, CONTEXT, inputs=bare)
    assert not result.conclusive
    assert result.coverage < 0.8 and result.distinct_outputs == 1  # an empty tally: always None


# --- units (host) -----------------------------------------------------------------------------------


def _method(source: str, cls: str, name: str) -> tuple[ast.Module, ast.FunctionDef]:
    tree = ast.parse(source)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name
                and any(n in c.body for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.name == cls))
    return tree, node


def test_mutators_are_the_methods_that_write_what_x_reads() -> None:
    source = (
        "class Base(dict):\n"
        "    def put(self, key, value):\n        super().__setitem__(key, value)\n"
        "class Proxy(Base):\n"
        "    def __init__(self):\n        self.proxy = None\n"
        "    def set_proxy(self, kind=None, addr=None):\n        self.proxy = (kind, addr)\n"
        "    def set_label(self, label):\n        self.label = label\n"  # x never reads it
        "    def reset(self):\n        self.proxy = None\n"  # no parameters: no state worth building
        "    def retry(self, where):\n        self.proxy = None\n        return self.connect(where)\n"  # runs x
        "    @contextlib.contextmanager\n    def scoped(self):\n        self.proxy = 1\n        yield\n"
        "    def scan(self, where):\n        with self.scoped():\n            return where\n"  # undoes it
        "    @property\n    def kind(self):\n        return self.proxy[0]\n"
        "    def connect(self, where):\n        if self.proxy and where in self:\n            return 1\n"
    )
    tree, x = _method(source, "Proxy", "connect")
    assert [m.name for m in mutators.find(tree, "Proxy", x)] == ["set_proxy", "put"]


def test_calls_are_made_in_order_and_a_failing_one_is_skipped() -> None:
    class Stack:
        def __init__(self) -> None:
            self.items: list[int] = []

        def push(self, value: int) -> None:
            if value < 0:
                raise ValueError(value)
            self.items.append(value)

    stack = mutators.apply(Stack(), [["push", 1], ["push", -1], ["missing"], "junk", ["push", 2]])
    assert stack.items == [1, 2]


def test_the_calls_round_trip_through_the_input_text() -> None:
    spec = New("Tally", 3, **{mutators.CALLS: [["record", "a", 2], ["record", "b", 1]]})
    text = encode(spec)
    assert text == "New('Tally', 3, __calls__=[['record', 'a', 2], ['record', 'b', 1]])"
    assert decode(text) == spec


def test_private_attributes_are_set_and_pre_filled_under_their_mangled_names() -> None:
    class Cache:
        def __init__(self) -> None:
            self.__links: dict[str, int] = {}

        def get(self, key: str) -> int:  # x: ``__getlink`` is defined after it in the file
            return self.__getlink(key) + self.__links[key]  # type: ignore[attr-defined]

    made = make_instance(Cache, Obj(**{"__links": {"a": 1}}), reads=["__getlink"])
    assert made._Cache__links == {"a": 1}  # as ``self.__links`` in the class body reads it
    assert is_standin(made._Cache__getlink)  # the missing method: a stand-in, under the name x looks up
    # a class whose code uses a private name as written (a class the scaffold rebuilt from its
    # functions compiled outside a class body) gets the attribute as written
    Rebuilt = type("Rebuilt", (), {"get": lambda self: self.__dict__["__links"]})
    assert make_instance(Rebuilt, Obj(**{"__links": {"b": 2}})).get() == {"b": 2}


# A list subclass whose items only its parser appends (unidiff's ``PatchedFile``): no method of the file
# stores them, so the instance's own ``append`` (list's) is the mutator.
PATCHED = (
    "class PatchedFile(list):\n"
    "    def __init__(self, source='', target=''):\n"
    "        super().__init__()\n"
    "        self.source_file = source\n"
    "        self.target_file = target\n"
    "        self.is_binary_file = False\n"
    "\n"
)
RENDER = (
    "    def render(self):\n"
    "        head = ''\n"
    "        if not self.is_binary_file and self:\n"
    "            head = '--- %s\\n+++ %s\\n' % (self.source_file, self.target_file)\n"
    "            head += '@@ %d @@\\n' % len(self)\n"
    "        body = ''.join(str(hunk) for hunk in self)\n"
    "        return head + body\n"
)


@needs_bwrap
def test_a_method_of_a_list_subclass_is_explored_with_items_appended() -> None:
    result = _compare(RENDER, PATCHED)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    specs = [decode(i.state["self"]) for i in result.inputs]
    calls = [c for s in specs for c in (s.attrs.get(mutators.CALLS) or [])]
    assert calls and {c[0] for c in calls} == {"append"}
    namespace: dict[str, object] = {}
    exec(PATCHED + RENDER, namespace)  # noqa: S102 - the test's own class, the independent reference
    for item, spec in zip(result.inputs, specs):
        assert json.loads(item.output)["return"] == _rebuilt(namespace["PatchedFile"], spec).render()


def test_the_item_method_of_a_builtin_container_base() -> None:
    source = (
        "class Hunks(list):\n    pass\n"
        "class Patch(Hunks):\n    def render(self):\n        return len(self)\n"
        "class Table(dict):\n    def get_row(self, key):\n        return self[key]\n"
        "class Tags(set):\n    def count(self):\n        return len(self)\n"
        "class Cache(dict):\n    def put(self, key, value):\n        self[key] = value\n"
        "    def look(self, key):\n        return self[key]\n"
        "class Plain:\n    def size(self):\n        return len(self)\n"
    )
    tree = ast.parse(source)
    found = {}
    for owner, name in (("Patch", "render"), ("Table", "get_row"), ("Tags", "count"), ("Cache", "look"),
                        ("Plain", "size")):
        _, x = _method(source, owner, name)
        found[owner] = mutators.container_mutator(tree, owner, mutators.find(tree, owner, x))
    # a base the file defines is followed; a file mutator that stores items (Cache.put) is preferred
    assert found == {"Patch": "append", "Table": "__setitem__", "Tags": "add", "Cache": None, "Plain": None}


# A node whose ``add`` turns a child into a list of two when the name is there already (ofxparse's ``OfxData.add_tag``
# does this; written anew): ``collect``'s walk of such lists runs only on a node that had a name added twice.
NODES = (
    "class Node:\n"
    "    def __init__(self, tag):\n"
    "        self.children = {}\n"
    "        self.tag = tag\n"
    "\n"
    "    def add(self, name):\n"
    "        if name not in self.children:\n"
    "            self.children[name] = Node(name)\n"
    "        elif not isinstance(self.children[name], list):\n"
    "            self.children[name] = [self.children[name], Node(name)]\n"
    "        else:\n"
    "            self.children[name].append(Node(name))\n"
    "\n"
)
COLLECT = (
    "    def collect(self, name, found):\n"
    "        for child in self.children.values():\n"
    "            if isinstance(child, Node):\n"
    "                if child.tag == name:\n"
    "                    found.append(child.tag)\n"
    "            elif isinstance(child, list):\n"
    "                for each in child:\n"
    "                    if each.tag == name:\n"
    "                        found.append(each.tag + '*')\n"
    "        return found\n"
)


@needs_bwrap
def test_a_mutator_called_twice_with_the_same_arguments_is_an_input() -> None:
    # at 6e79801: coverage 0.89 (no list of calls repeated one: ``add`` never met a name already there, and the
    # append under the list walk was never reached)
    result = _compare(COLLECT, NODES)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    specs = [decode(i.state["self"]) for i in result.inputs]
    calls = [s.attrs.get(mutators.CALLS) or [] for s in specs]
    assert any(len(c) == 3 and c[0] == c[1] == c[2] for c in calls), calls
    namespace: dict[str, object] = {}
    exec(NODES + COLLECT, namespace)  # noqa: S102 - the test's own class, the independent reference
    for item, spec in zip(result.inputs, specs):
        output = json.loads(item.output)
        if "return" not in output:
            continue
        args = [decode(v) for v in item.state["args"].values()]
        assert output["return"] == _canonical(_rebuilt(namespace["Node"], spec).collect(*args))
