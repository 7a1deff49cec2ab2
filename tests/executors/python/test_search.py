"""The input search and the determinism it rests on, through the real sandbox."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def _compare(truth: str, candidates: list[str], context: str = "", **config: object):
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=2.0, **config))  # type: ignore[arg-type]
    return asyncio.run(executor.compare(truth, candidates, context=context))


def test_string_hash_order_is_the_same_in_every_batch() -> None:
    # Set iteration order of strings depends on the hash seed; x's explore and replay batches and the
    # candidate's batch must agree, or every input would be "nondeterministic".
    truth = "def f(words):\n    return list(set(words))\n"
    result = _compare(truth, [truth])
    assert [i.reason for i in result.inputs if not i.valid] == []
    assert result.candidates[0].sim_func == 1.0


def test_the_search_reaches_branches_guarded_by_mined_constants() -> None:
    truth = (
        "def grade(score):\n"
        "    if score >= 90:\n        return 'A'\n"
        "    if score >= 75:\n        return 'B'\n"
        "    if score == 13:\n        return 'unlucky'\n"
        "    return 'C'\n"
    )
    result = _compare(truth, [truth.replace(">= 75", "> 75")])
    assert result.conclusive and result.coverage == 1.0
    # the boundary 75 comes from the mined literals (74, 75, 76), so the off-by-one candidate is caught
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 1.0


def test_same_seed_same_inputs_and_another_seed_may_differ() -> None:
    truth = "def f(n, text):\n    if n > 3:\n        return text * 2\n    return text[:n]\n"
    first, second = _compare(truth, []), _compare(truth, [])
    assert [i.state for i in first.inputs] == [i.state for i in second.inputs]


def test_methods_take_self_attributes_as_inputs_and_context_class_instances() -> None:
    context = (
        "class Box:\n"
        "    def __init__(self):\n        self.items = []\n"
        "    def add(self, item):\n        self.items.append(item)\n\n"
    )
    truth = (
        "    def merge(self, other):\n"
        "        if not isinstance(other, Box):\n            return NotImplemented\n"
        "        total = 0\n"
        "        for price, qty in self.items:\n            total += price * qty\n"
        "        return total + len(other.items)\n"
    )
    result = _compare(truth, [truth.replace("price * qty", "price + qty")], context=context)
    assert result.conclusive, result.reason
    assert any("New('Box'" in str(i.state) for i in result.inputs)
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 1.0


def test_mocked_dependency_failures_are_input_states() -> None:
    context = "import requests\n"
    truth = (
        "def fetch(url):\n"
        "    try:\n        resp = requests.get(url, timeout=5)\n"
        "    except Exception:\n        return None\n"
        "    if resp is None:\n        return 'empty'\n"
        "    return resp.json()\n"
    )
    result = _compare(truth, [truth.replace("return None", "return 0")], context=context)
    assert result.conclusive, result.reason
    assert {i.state.get("standins") for i in result.inputs} >= {"raise"}
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 1.0


def _given(truth: str, inputs: list[dict], context: str = ""):
    executor = SandboxExecutor(ExecutorConfig(n_inputs=len(inputs), min_valid=1, min_distinct=1))
    return asyncio.run(executor.compare(truth, [truth], context=context, inputs=inputs))


def test_small_file_descriptors_do_not_reach_the_harness() -> None:
    # open(3) used to be the harness's result channel: writing there killed the batch
    truth = "def f(n):\n    with open(n, 'wb') as h:\n        h.write(b'x')\n    return n\n"
    result = _given(truth, [{"args": {"n": str(fd)}} for fd in (3, 4, 5)] + [{"args": {"n": "'a.txt'"}}])
    assert [i.reason for i in result.inputs] == ["", "", "", ""]
    assert [i.status for i in result.inputs] == ["raised", "raised", "raised", "ok"]  # EBADF: its own OSError
    assert result.candidates[0].sim_func == 1.0


def test_a_contextmanager_function_runs_its_body() -> None:
    context = "import contextlib\n"
    truth = ("@contextlib.contextmanager\ndef opened(path, mode='r'):\n    if not path:\n"
             "        raise ValueError('no path')\n    print('enter', path, mode)\n    yield path.upper()\n"
             "    print('exit')\n")
    result = _compare(truth, [truth.replace("path.upper()", "path.lower()")], context=context)
    assert result.conclusive and result.coverage == 1.0, result.reason
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 1.0


def test_slots_are_instance_state_in_explore_and_replay_alike() -> None:
    context = ("class C:\n    __slots__ = ('base', 'owner')\n\n"
               "    def __init__(self, owner):\n        self.owner = owner\n\n")
    truth = ("    def span(self, year, month):\n        if month > 2:\n            return self.base + year\n"
             "        return (self.base, month)\n")
    result = _compare(truth, [truth], context=context)
    assert result.conclusive, result.reason
    assert not [i for i in result.inputs if i.reason == "nondeterministic"]


def test_file_times_are_frozen_so_dating_a_written_file_is_deterministic() -> None:
    context = "import os\n"
    truth = ("def stamp(name, text):\n    with open(name + '.txt', 'w') as fh:\n        fh.write(text)\n"
             "    return os.path.getmtime(name + '.txt'), len(text)\n")
    result = _compare(truth, [truth], context=context)
    assert not [i for i in result.inputs if i.reason == "nondeterministic"], result.reason
    assert result.candidates[0].sim_func == 1.0


def test_imports_inside_x_of_missing_modules_are_stand_ins_but_library_probes_are_not() -> None:
    truth = ("def total(items, scale=2):\n    import numpy as np\n    from .models import Item\n"
             "    import subprocess as sp\n    if not items:\n        return Item(0)\n"
             "    out = [x * scale for x in items]\n    return np.sum(out), len(out), sp.__name__\n")
    result = _compare(truth, [truth.replace("x * scale", "x + scale")])
    assert result.conclusive, result.reason
    outputs = [i.output for i in result.inputs]
    assert any('"numpy.sum"' in o for o in outputs) and any('"models.Item"' in o for o in outputs)
    # subprocess is real here: its own probe for the Windows-only msvcrt still fails as it should
    assert all('"subprocess"' in o for o in outputs if '"return":{"tuple"' in o)
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 1.0


def test_module_state_left_by_one_run_does_not_reach_the_next() -> None:
    # The search builds x's module once and restores it before each run (harness/reuse.py); a dict of
    # the module that x fills is not restored. Python's reference: a fresh module per input (what the
    # replay runs) never has the key, so x never returns "again" and never covers that line; the search
    # must report that, not what its own earlier runs left in ``_seen``.
    context = "_seen = {}\n\n"
    truth = (
        "def label(key, n):\n"
        "    if key in _seen:\n"
        "        return 'again'\n"
        "    _seen[key] = n\n"
        "    if n > 3:\n"
        "        return 'big'\n"
        "    return 'small'\n"
    )
    result = _compare(truth, [], context=context)
    assert [i.reason for i in result.inputs if not i.valid] == []
    assert all("again" not in (i.output or "") for i in result.inputs)
    assert 3 in result.uncovered_lines  # ``return 'again'``, line 3 of the function
    assert result.coverage == 5 / 6


def test_the_search_stops_once_every_line_is_reached_and_the_outputs_all_differ() -> None:
    # docs/executors.md, "Stopping rule": with every statement of x reached and N = 10 chosen inputs
    # that all give different outputs, nothing is left to find. ``a + b`` on the walk's first inputs
    # (each a different pair) gives 10 different outputs within about 15 runs; walking the pools to
    # their end, as the search did before the rule held during the walk too, took 66.
    result = _compare("def add(a, b):\n    return a + b\n", [])
    assert result.conclusive and result.coverage == 1.0 and result.distinct_outputs == 10
    assert result.runs < 30


def test_the_harness_walk_finds_every_node_ast_walk_finds_but_contexts_and_operators() -> None:
    # scaffold.walk replaces ast.walk where every batch walks its whole module (the stand-in names);
    # the reference is ast.walk itself, on a large real module of the standard library.
    import ast
    import inspect
    import tokenize

    from calib.executors.sandbox.harness import scaffold

    tree = ast.parse(inspect.getsource(tokenize) + inspect.getsource(ast))
    leaves = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
    expected = {id(node) for node in ast.walk(tree) if not isinstance(node, leaves)}
    found = [id(node) for node in scaffold.walk(tree)]
    assert len(found) == len(set(found)) and set(found) == expected


def test_an_int_no_input_text_can_hold_is_not_tried() -> None:
    # ``n >= 1 << 20000``: the comparison's input-to-state rewrite proposes n = 1 << 20000, whose 6,021 digits
    # pass Python's limit on converting an int to text (``sys.get_int_max_str_digits()``, 4,300). Encoding that
    # input raised ValueError and ended the exploring process (exit status 1, "crashed" after every restart:
    # bitstring's ``Bits._setuint``, comparing with ``1 << length``); now no input holds such a value.
    truth = (
        "def size_class(n):\n"
        "    if n >= 1 << 20000:\n"
        "        return 'astronomical'\n"
        "    if n > 100:\n"
        "        return 'big'\n"
        "    return 'small'\n"
    )
    result = _compare(truth, [truth.replace("> 100", ">= 100")])
    assert result.conclusive, result.reason
    assert result.coverage == 0.8 and result.uncovered_lines == (3,)  # ``return 'astronomical'`` alone
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 1.0
