"""Handlers, items and tables the search reaches (issue 24 §2, tenth round).

- stand-in mode ``raise_in_try``: a stand-in call fails only while x runs the body of one of its ``try``
  statements with handlers (counted by calls the probes put around those bodies), so the handler of
  ``try: field.deserialize(v) except ValidationError:`` is reached with ``is_collection(value)`` before
  it answering; the search asks for it on an input whose run called a stand-in inside such a body;
- a withheld exception class takes keyword arguments (``ValidationError(errors, valid_data=result)``) and
  answers an attribute it lacks with a stand-in (``error.messages``); x raising it is x's own exception;
- a failure re-raised by name (``except OSError as error: ...; raise error``) is passed on by x;
- ``isinstance(coll, defaultdict)`` (and ``OrderedDict``, ``deque``) asks for instances of that class;
- ``type(items) is _ComplementSet``: a class whose name starts with ``_`` is a class hint too;
- the items of a parameter a loop reads attributes of (``for t in terminals[:n]: t.name``) are objects
  with those attributes;
- a key of a module constant read by subscript (``_VALIDATORS[component]``) that the table lacks is
  rewritten by the search to the keys it has;
- an attribute of a module name compared with ``==`` (``self.os == OperatingSystem.LINUX``) is a value,
  ``Global('OperatingSystem.LINUX')``, mined from the tree as the search runs it.
Each sandboxed case's figure before these changes (b745535) is in its comment."""

from __future__ import annotations

import ast
import asyncio
import json
import random
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import cmplog, globalrefs, hints, placeholders, probes, synth
from calib.executors.sandbox.harness.standins import CalibStandIn, CalibStandInError
from calib.executors.sandbox.harness.values import Global, New, Obj, decode

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def _run(function: str, context: str = "", inputs: list[dict[str, object]] | None = None) -> object:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    return asyncio.run(executor.compare(function, [], context=context, inputs=inputs))


# ------------------------------------------------------------------ stand-ins failing inside try bodies
LOAD_CONTEXT = "from schemalib import utils\nfrom schemalib.exceptions import ValidationError\n\n\n"
LOAD = (
    "def load(value, field):\n"
    "    if not utils.is_collection(value):\n"
    "        raise ValueError('not a collection')\n"
    "    result, errors = [], {}\n"
    "    for idx, each in enumerate(value):\n"
    "        try:\n"
    "            result.append(field.deserialize(each))\n"
    "        except ValidationError as error:\n"
    "            if error.valid_data is not None:\n"
    "                result.append(error.valid_data)\n"
    "            errors[idx] = error.messages\n"
    "    if errors:\n"
    "        raise ValidationError(errors, valid_data=result)\n"
    "    return tuple(result)\n"
)
GIVEN = {"args": {"value": "[1, 2]", "field": "StandIn('field')"}}


def test_try_bodies_are_counted_whatever_way_they_are_left() -> None:
    source = (
        "def f(items, fail):\n"
        "    out = []\n"
        "    for v in items:\n"
        "        try:\n"
        "            if v == 0:\n"
        "                continue\n"
        "            if v == 1:\n"
        "                return out\n"
        "            if fail:\n"
        "                raise KeyError(v)\n"
        "            out.append(v)\n"
        "        except KeyError:\n"
        "            out.append(-v)\n"
        "    return out\n"
    )
    node = ast.parse(source).body[0]
    probes.instrument(node)
    probes.mark_tries(node)
    depth, most, lines = [0], [0], set()

    def step(n: int) -> None:
        depth[0] += n
        most[0] = max(most[0], depth[0])

    namespace = {probes.NAME: lines.add, probes.TRY: step}
    exec(compile(ast.Module(body=[node], type_ignores=[]), "<t>", "exec"), namespace)  # noqa: S102 - the test's own
    plain: dict[str, object] = {}
    exec(source, plain)  # noqa: S102 - the same function as written: the results must not change
    for items, fail in (([0, 2, 3], False), ([2, 1, 3], False), ([2, 3], True), ([], True)):
        assert namespace["f"](items, fail) == plain["f"](items, fail)  # type: ignore[operator]
        assert depth[0] == 0  # left by continue, return, a handled exception and the end of the body alike
    assert most[0] == 1 and 13 in lines  # the handler's line was reached (and probed as before)


@needs_bwrap
def test_a_stand_in_fails_only_inside_a_try_body() -> None:
    inside = _run(LOAD, LOAD_CONTEXT, [{**GIVEN, "standins": "raise_in_try"}, {**GIVEN, "standins": "raise"}])
    per_site, everywhere = inside.inputs
    calls = [entry[1] for entry in json.loads(per_site.output)["calls"]]
    # is_collection answered (outside every try body); both deserialize calls failed into the handler,
    # and x raised its own ValidationError with the handler's stand-in messages
    assert calls == ["schemalib.utils.is_collection", "field.deserialize", "field.deserialize"]
    # (before: an unknown mode, whose stand-ins answered None: is_collection's None raised ValueError)
    assert per_site.valid and per_site.status == "raised"
    assert json.loads(per_site.output)["exception"].endswith("CalibStandInError")
    # mode raise: is_collection fails before any of x's handlers: a failure that only went past x
    assert not everywhere.valid and everywhere.reason == "standin", everywhere


@needs_bwrap
def test_the_search_reaches_a_handler_of_a_dependency_failure() -> None:
    result = _run(LOAD, LOAD_CONTEXT)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0  # (before: 0.67, the handler and the final raise never ran)
    assert any(i.state.get("standins") == "raise_in_try" for i in result.inputs if i.valid)


def test_a_withheld_exception_class_takes_keywords_and_answers_missing_attributes() -> None:
    error = CalibStandInError({0: "bad"}, valid_data=[1])
    assert error.args == ({0: "bad"},) and error.valid_data == [1]
    assert isinstance(error.messages, CalibStandIn)
    with pytest.raises(AttributeError):
        error.__wrapped__  # noqa: B018 - dunders are not stand-ins


# ------------------------------------------------------------------ a failure re-raised by name
REFETCH = (
    "def fetch(client, key, seen):\n"
    "    try:\n"
    "        value = client.get(key)\n"
    "    except OSError as error:\n"
    "        seen.append(key)\n"
    "        raise error\n"
    "    return value\n"
)


@needs_bwrap
def test_a_failure_re_raised_by_name_is_passed_on_by_x() -> None:
    given = [{"args": {"client": "StandIn('client')", "key": "'k'", "seen": "[]"}, "standins": "raise"}]
    result = _run(REFETCH, "", given)
    item = result.inputs[0]
    assert item.valid and item.status == "raised"  # (before: invalid "standin", the raise line hid the try)
    assert json.loads(item.output)["args"]["list"][0]["list"][2] == {"list": ["k"]}  # the handler ran


# ------------------------------------------------------------------ classes asked for by isinstance / type
FACTORY_CONTEXT = "from collections import OrderedDict, defaultdict\n\n\n"
FACTORY = (
    "def factory(coll):\n"
    "    if isinstance(coll, defaultdict):\n"
    "        return ('defaultdict', coll.default_factory)\n"
    "    if isinstance(coll, OrderedDict):\n"
    "        return ('ordered', list(coll))\n"
    "    if isinstance(coll, dict):\n"
    "        return ('dict', len(coll))\n"
    "    return ('other', type(coll).__name__)\n"
)


def test_isinstance_with_a_dict_subclass_asks_for_its_instances() -> None:
    tree = ast.parse(FACTORY_CONTEXT + FACTORY)
    info = hints.analyse(tree.body[-1], skip_first=False)
    assert info.params[0].classes == ["defaultdict", "OrderedDict"] and "dict" in info.params[0].types
    made = [v for v in synth.Pools(info, random.Random(0)).by_param["coll"] if isinstance(v, New)]
    assert New("defaultdict") in made and New("OrderedDict", {"a": 1, "b": 2}) in made


@needs_bwrap
def test_instances_of_dict_subclasses_reach_their_branches() -> None:
    result = _run(FACTORY, FACTORY_CONTEXT)
    assert result.conclusive, result.reason  # (before: 0.71, no defaultdict and no OrderedDict)
    kinds = {json.loads(i.output)["return"]["tuple"][0] for i in result.inputs if i.valid}
    assert {"defaultdict", "ordered", "dict", "other"} <= kinds


SET_CONTEXT = (
    "class _Complement:\n"
    "    def __init__(self, included=None, excluded=None):\n"
    "        self.included, self.excluded = included, excluded\n"
    "\n"
    "\n"
)
DISCARD = (
    "def split(items):\n"
    "    if type(items) in (set, frozenset):\n"
    "        return ('plain', len(items))\n"
    "    elif type(items) is _Complement:\n"
    "        return ('complement', items.included is None)\n"
    "    return ('other', len(list(items)))\n"
)


def test_a_private_class_of_the_file_is_a_class_hint() -> None:
    info = hints.analyse(ast.parse(SET_CONTEXT + DISCARD).body[-1], skip_first=False)
    assert info.params[0].classes == ["_Complement"]  # (before: [], a name starting with "_" was no class)


@needs_bwrap
def test_a_private_class_instance_reaches_its_branch() -> None:
    result = _run(DISCARD, SET_CONTEXT)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0  # (before: 0.8, never a _Complement: its line unreached)
    assert any('"complement"' in i.output for i in result.inputs if i.valid)


# ------------------------------------------------------------------ items read by attribute
PATTERNS = (
    "def build(terminals, max_size):\n"
    "    groups = []\n"
    "    while terminals:\n"
    "        pattern = '|'.join('(?P<%s>%s)' % (t.name, t.pattern.upper()) for t in terminals[:max_size])\n"
    "        if len(pattern) > 40:\n"
    "            groups.append('long')\n"
    "        else:\n"
    "            groups.append(pattern)\n"
    "        terminals = terminals[max_size:]\n"
    "    return groups\n"
)


def test_items_read_by_attribute_are_objects_with_those_attributes() -> None:
    info = hints.analyse(ast.parse(PATTERNS).body[0], skip_first=False)
    item = info.params[0].item
    assert item is not None and item.attrs == ["name", "pattern"] and item.children["pattern"].called == ["upper"]
    pool = synth.Pools(info, random.Random(0)).by_param["terminals"]
    first = pool[0]
    assert isinstance(first, list) and first and isinstance(first[0], Obj)
    assert {"name", "pattern"} <= set(vars(first[0]))


@needs_bwrap
def test_a_loop_over_objects_with_attributes_runs() -> None:
    result = _run(PATTERNS)
    assert result.conclusive, result.reason  # (before: 0.5, the items were numbers and texts)
    assert result.coverage == 1.0


# ------------------------------------------------------------------ keys of a module constant
TABLE_CONTEXT = (
    "_NAMES = 'scheme path query'.split()\n"
    "_VALIDATORS = dict(zip(_NAMES, (str.isalpha, str.isascii, str.isprintable)))\n"
    "\n"
    "\n"
)
CHECK = (
    "def check(component, value):\n"
    "    try:\n"
    "        validator = _VALIDATORS[component]\n"
    "    except KeyError:\n"
    "        return 'unknown'\n"
    "    if not validator(value):\n"
    "        return 'invalid'\n"
    "    return 'valid'\n"
)


def test_a_missing_key_of_a_constant_table_is_noted_against_its_keys() -> None:
    node = ast.parse(CHECK).body[0]
    cmplog.instrument(node, ast.parse(TABLE_CONTEXT + CHECK))
    assert "__calib_cmp__.item(_VALIDATORS, component)" in ast.unparse(node)
    cmplog.take(), cmplog.take_pairs()
    with pytest.raises(KeyError):
        cmplog.item({"scheme": 1, "path": 2}, "host")
    assert "host" in cmplog.take()
    assert {("eq", "host", "scheme"), ("eq", "host", "path")} <= set(cmplog.take_pairs())


@needs_bwrap
def test_the_search_finds_the_keys_of_a_constant_table() -> None:
    result = _run(CHECK, TABLE_CONTEXT)
    assert result.conclusive, result.reason  # (before: 0.5, no key of the table)
    outputs = {json.loads(i.output).get("return") for i in result.inputs if i.valid}
    assert {"unknown", "invalid", "valid"} <= outputs


# ------------------------------------------------------------------ attributes of module names compared with ==
OS_CONTEXT = (
    "class OperatingSystem:\n"
    "    class _OS:\n"
    "        def __init__(self, name):\n"
    "            self.name = name\n"
    "    LINUX = _OS('Linux')\n"
    "    WINDOWS = _OS('Windows')\n"
    "\n"
    "\n"
    "class Platform:\n"
    "    def __init__(self, operating_system):\n"
    "        self.operating_system = operating_system\n"
    "\n"
)
FRAGMENT = (
    "    def fragment(self):\n"
    "        if self.operating_system == OperatingSystem.LINUX:\n"
    "            return '(%s)' % self.operating_system.name\n"
    "        elif self.operating_system == OperatingSystem.WINDOWS:\n"
    "            return '(%s NT)' % self.operating_system.name\n"
    "        return '()'\n"
)


def test_attributes_of_module_names_are_mined_from_the_tree_the_search_runs() -> None:
    tree = ast.parse(OS_CONTEXT + FRAGMENT)
    node = tree.body[-1].body[-1]
    cmplog.instrument(node, tree)  # what explore does before the pools are made: == becomes a recorder call
    assert "__calib_cmp__(self.operating_system, OperatingSystem.LINUX, 'Eq')" in ast.unparse(node)
    refs = globalrefs.mine(node, tree, [], "self")
    # (before: {}, the recorder's calls hid every == comparison from the mining)
    assert refs == {("self", "operating_system"): ["OperatingSystem.LINUX", "OperatingSystem.WINDOWS"]}
    assert decode("Global('OperatingSystem.LINUX')") == Global("OperatingSystem.LINUX")
    namespace: dict[str, object] = {}
    exec(OS_CONTEXT, namespace)  # noqa: S102 - the test's own context
    assert placeholders.lookup(Global("OperatingSystem.WINDOWS"), namespace).name == "Windows"
    assert isinstance(placeholders.lookup(Global("OperatingSystem.MACOS"), namespace), CalibStandIn)


@needs_bwrap
def test_an_attribute_of_a_module_class_reaches_its_branch() -> None:
    result = _run(FRAGMENT, OS_CONTEXT)
    assert result.conclusive, result.reason  # (before: 0.6, one output: never LINUX nor WINDOWS)
    returns = {json.loads(i.output).get("return") for i in result.inputs if i.valid}
    assert {"(Linux)", "(Windows NT)", "()"} <= returns


# ------------------------------------------------------------------ positions of unpacked items
BODY_CONTEXT = (
    "class Key:\n"
    "    def __init__(self, key):\n"
    "        self.key = key\n"
    "\n"
    "\n"
)
FLATTEN = (
    "def flatten(body):\n"
    "    out = {}\n"
    "    for k, v in body:\n"
    "        if k is None:\n"
    "            continue\n"
    "        if isinstance(v, (list, tuple)):\n"
    "            v = len(v)\n"
    "        out[k.key] = v\n"
    "    return out\n"
)


def test_each_position_of_unpacked_items_is_described_by_its_use() -> None:
    info = hints.analyse(ast.parse(FLATTEN).body[0], skip_first=False)
    key, value = info.params[0].item.parts
    assert key.attrs == ["key"] and "none" in key.types  # ``k is None``, ``k.key``
    assert {"list", "tuple"} <= set(value.types)
    rows = [v for v in synth.Pools(info, random.Random(0)).by_param["body"][:4] if isinstance(v, list)]
    assert rows and all(isinstance(row, tuple) and len(row) == 2 for seq in rows for row in seq)
    assert any(isinstance(row[0], Obj) and hasattr(row[0], "key") for seq in rows for row in seq)


@needs_bwrap
def test_unpacked_items_with_attributes_reach_every_line() -> None:
    result = _run(FLATTEN, BODY_CONTEXT)
    assert result.conclusive, result.reason  # (before: 0.75, the items were pairs of numbers and texts)
    assert result.coverage == 1.0
