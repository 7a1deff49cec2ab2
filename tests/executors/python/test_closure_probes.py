"""A closure x returns is called with arguments the search chooses (issue 24 §2, ninth round).

x that builds and returns a function (a validator factory, a parser factory) has most of its lines in
that function, which only the harness's probe calls run. They used to pass the number 2 to each
parameter; now the first call's arguments are part of the input state (key ``probe``), drawn like
parameters from what the closure's body does with them (:func:`returned.closure_params`), and replayed
identically for every candidate. A parameter used as a class (``isinstance(data, schema)``,
``inspect.isclass(schema)``) takes classes (``Global('int')``), and a withheld ``wraps(func)`` is
``functools.wraps``."""

from __future__ import annotations

import ast
import asyncio
import json
import random
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor, _state_problem
from calib.executors.sandbox.harness import globalrefs, hints, returned, synth
from calib.executors.sandbox.harness.placeholders import lookup
from calib.executors.sandbox.harness.values import Global, decode

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

FACTORY = (
    "def make_validator(kind):\n"
    "    label = 'list of %s' % kind\n"
    "\n"
    "    def validate(path, data):\n"
    "        if not isinstance(data, list):\n"
    "            raise TypeError('expected a %s at %s' % (label, path))\n"
    "        if not data:\n"
    "            return []\n"
    "        out = []\n"
    "        for i, item in enumerate(data):\n"
    "            out.append((path, i, item))\n"
    "        return out\n"
    "\n"
    "    return validate\n"
)
# a candidate whose closure answers None for an empty list
FACTORY_WRONG = FACTORY.replace("return []", "return None")


def _closure_on_host(kind: object, path: object, data: object) -> object:
    """The factory run here (our own code, not sampled): what the probe calls must report."""
    namespace: dict[str, object] = {}
    exec(compile(FACTORY, "<factory>", "exec"), namespace)  # noqa: S102 - the test's own source
    validate = namespace["make_validator"](kind)  # type: ignore[operator]
    try:
        return ["return", validate(path, data)]  # type: ignore[operator]
    except TypeError:
        return ["exception"]


def test_the_closure_x_returns_names_the_probe_parameters() -> None:
    node = ast.parse(FACTORY).body[0]
    params = returned.closure_params(node)
    assert [p.name for p in params] == ["path", "data"]
    assert "list" in params[1].types  # ``for i, item in enumerate(data)``
    decorator = ast.parse("def cached(cache):\n    def decorator(func):\n        return func\n    return decorator\n")
    assert returned.closure_params(decorator.body[0]) == []  # a decorator keeps the probe function
    plain = ast.parse("def f(a):\n    def helper(b):\n        return b\n    return helper(a)\n")
    assert returned.closure_params(plain.body[0]) == []  # a helper x calls, not a closure it returns


def test_the_search_draws_probe_arguments_and_the_host_checks_them() -> None:
    node = ast.parse(FACTORY).body[0]
    info = hints.analyse(node, skip_first=False)
    hints.mine_module(ast.parse(FACTORY), info)
    pools = synth.Pools(info, random.Random(0))
    assert pools.probe_names == ["probe:0", "probe:1"]
    records = synth.search(pools, lambda state: synth.Record(state=state, valid=True, status="ok", output="x",
                                                             lines=frozenset()),
                           executable=frozenset({1}), n=10, min_valid=8, coverage=0.8, min_distinct=2,
                           budget_runs=30, budget_seconds=5.0, avoid=set())
    probes = [r.state["probe"] for r in records]
    assert all(len(p) == 2 and all(isinstance(t, str) for t in p) for p in probes)
    assert any(isinstance(decode(p[1]), list) and decode(p[1]) for p in probes)
    assert _state_problem({"args": {}, "probe": ["1", "[2]"]}) == ""
    assert "probe must be a list" in _state_problem({"args": {}, "probe": "1"})
    assert "probe must be a list" in _state_problem({"args": {}, "probe": ["1"] * 4})


@needs_bwrap
def test_a_returned_closure_is_reached_through_its_probe_arguments() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(FACTORY, [FACTORY, FACTORY_WRONG]))
    # (before: coverage 0.45, every probe call validate(2, 2) raising TypeError)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    checked = 0
    for item in result.inputs:
        if not item.valid:
            continue
        path, data = (decode(t) for t in item.state["probe"])
        expected = _closure_on_host(decode(item.state["args"]["kind"]), path, data)
        label, outcome = json.loads(item.output)["probes"][0]
        assert label == "r(" + ", ".join(item.state["probe"]) + ")"
        if expected[0] == "exception":
            assert outcome == {"exception": "TypeError"}
        else:
            assert outcome["return"] == {"list": [{"tuple": list(t)} for t in expected[1]]}
            checked += 1
    assert checked >= 3
    same, wrong = result.candidates
    assert all(same.matches[i] for i, item in enumerate(result.inputs) if item.valid)
    # the returned closure's code is part of x's output (docs/executors.md, "Returned closures"): a
    # candidate whose closure differs matches nowhere, also where the probes would agree
    assert not any(wrong.matches[i] for i, item in enumerate(result.inputs) if item.valid)


SCALAR_CONTEXT = "import inspect\n\n"
SCALAR = (
    "def compile_scalar(schema):\n"
    "    if inspect.isclass(schema):\n"
    "        def validate_instance(path, data):\n"
    "            if isinstance(data, schema):\n"
    "                return data\n"
    "            raise ValueError('expected %s' % schema.__name__)\n"
    "        return validate_instance\n"
    "    if callable(schema):\n"
    "        return schema\n"
    "    return None\n"
)


def test_a_parameter_used_as_a_class_takes_builtin_and_file_classes() -> None:
    node = ast.parse(SCALAR).body[0]
    info = hints.analyse(node, skip_first=False)
    globalrefs.class_hints(info)
    assert "class" in info.params[0].types
    pools = synth.Pools(info, random.Random(0))
    assert all(g in pools.by_param["schema"] for g in (Global("int"), Global("str"), Global("list")))
    assert lookup(Global("int"), {}) is int
    assert lookup(Global("Item"), {"Item": dict}) is dict  # the build's own name first
    assert not isinstance(lookup(Global("open"), {}), type(open))  # builtins: classes only


@needs_bwrap
def test_a_class_parameter_reaches_the_class_branch() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(SCALAR, [], context=SCALAR_CONTEXT))
    assert result.conclusive, result.reason  # (before: 0.44, no input was a class)
    classes = [item for item in result.inputs if item.valid and item.state["args"]["schema"].startswith("Global(")]
    assert classes
    # ``isinstance(data, schema)`` held for some probe call: the closure handed data back
    assert any("return" in json.loads(item.output)["probes"][0][1] for item in classes)


WRAPS_CONTEXT = "from .decorators import wraps\n\n"  # a withheld package's re-export of functools.wraps
IGNORE = (
    "def ignore(errors, default=None):\n"
    "    def decorator(func):\n"
    "        @wraps(func)\n"
    "        def wrapper(*args, **kwargs):\n"
    "            try:\n"
    "                return func(*args, **kwargs)\n"
    "            except errors:\n"
    "                return default\n"
    "        return wrapper\n"
    "    return decorator\n"
)


@needs_bwrap
def test_a_withheld_wraps_hands_back_the_wrapper() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(IGNORE, [], context=WRAPS_CONTEXT))
    assert result.conclusive, result.reason  # (before: 0.57, the decorator returned the probe function)
    probes = [json.loads(item.output)["probes"] for item in result.inputs if item.valid]
    # decorator(probe) is the wrapper, and calling it calls the probe function with its arguments (before:
    # wraps(func) handed func back, so decorator(probe) was probe(wrapper) and the wrapper never ran)
    called = {"return": {"list": ["probe", {"list": [2]}, {"list": []}]}}
    assert all(["r(probe)(2)", called] in p for p in probes)
