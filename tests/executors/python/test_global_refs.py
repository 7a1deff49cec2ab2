"""Module-level objects as input values (issue 24 §2): ``Global('EOF')`` is the object the name ``EOF``
holds in the input's build of x's module. The search takes the names x compares its inputs with (``data
is EOF``, ``value is _SKIP``, ``tokens.error is DocoptExit``) from x's body (:mod:`.globalrefs`), so the
branches they guard are reached, and every candidate gets its own build's object on replay."""

from __future__ import annotations

import ast
import asyncio
import json
import random
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import globalrefs, hints, synth
from calib.executors.sandbox.harness.placeholders import materialize
from calib.executors.sandbox.harness.standins import CalibStandIn, is_standin, standin_name
from calib.executors.sandbox.harness.values import Global, Obj, decode, encode

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

SENTINEL_CONTEXT = "_SKIP = object()\nLIMIT = 3\n\n"
PICK = (
    "def pick(value, items):\n"
    "    if value is _SKIP:\n"
    "        kept = [i for i in items if i is not _SKIP]\n"
    "        count = len(kept)\n"
    "        return ('skipped', count)\n"
    "    if value in items:\n"
    "        return 'found'\n"
    "    return 'missing'\n"
)
# a candidate that takes the sentinel for an ordinary value
PICK_WRONG = PICK.replace("if value is _SKIP:", "if value is None:")

EOF_CONTEXT = (
    "from .constants import EOF\n"  # a withheld module: EOF is a stand-in, no literal writes it
    "\n"
    "\n"
    "class Tokenizer:\n"
    "    def __init__(self, stream):\n"
    "        self.stream = stream\n"
    "        self.queue = []\n"
    "\n"
)
STATE = (
    "    def state(self):\n"
    "        data = self.stream.char()\n"
    "        if data == '<':\n"
    "            self.queue.append('tag')\n"
    "            return 1\n"
    "        elif data is EOF:\n"
    "            self.queue.append('eof')\n"
    "            self.queue.append('end')\n"
    "            return 2\n"
    "        self.queue.append(data)\n"
    "        return 3\n"
)


def test_a_global_round_trips_through_the_input_text() -> None:
    assert encode(Global("EOF")) == "Global('EOF')"
    assert decode("Global('_MISSING')") == Global("_MISSING")
    value = decode("Obj(error=Global('DocoptExit'), items=[Global('A'), 1])")
    assert value.error == Global("DocoptExit") and value.items == [Global("A"), 1]
    assert decode(encode(value)).items == [Global("A"), 1]
    assert {Global("A"), Global("A")} == {Global("A")}  # hashable: it can be a set item or a key


@pytest.mark.parametrize("text", ["Global('a b')", "Global(1)", "Global('a', 'b')", "Global(name='a')", "Global()"])
def test_a_global_that_names_no_identifier_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="Global"):
        decode(text)


def test_globals_are_looked_up_in_the_build_also_inside_objects_and_scripts() -> None:
    eof = object()
    ns = {"EOF": eof}
    value = decode("Obj(error=Global('EOF'), move=StandIn('move', [Global('EOF'), 1]))")
    made = materialize(value, ns)
    assert made.error is eof
    assert made.move() is eof and made.move() == 1  # the stand-in's calls answer its script in order
    assert materialize(decode("[Global('EOF'), (Global('EOF'),)]"), ns) == [eof, (eof,)]
    missing = materialize(Global("GONE"), ns)  # a name the build lacks: a stand-in of that name
    assert is_standin(missing) and standin_name(missing) == "GONE"


def test_mining_finds_where_each_name_is_compared() -> None:
    source = (
        "from .constants import EOF, Shift\n"
        "_MISSING = object()\n"
        "LIMIT = 100\n"
        "class Option: pass\n"
        "class P:\n"
        "    def m(self, value, tokens, *rest):\n"
        "        data = self.stream.char()\n"
        "        local = object()\n"
        "        if value is _MISSING or value == LIMIT or value is local or value is len:\n"
        "            return 1\n"
        "        if tokens.error is Option and self.action in (Shift, EOF):\n"
        "            return 2\n"
        "        if data is EOF or rest[0] is _MISSING:\n"
        "            return 3\n"
    )
    tree = ast.parse(source)
    node = tree.body[4].body[0]
    assert globalrefs.module_names(tree) == {"EOF", "Shift", "_MISSING", "Option", "P"}  # LIMIT is a literal
    params = ["value", "tokens", "rest"]
    assert globalrefs.self_name(node, params) == "self"
    refs = globalrefs.mine(node, tree, params, "self")
    assert refs == {("arg", "value"): ["_MISSING"], ("attr", "tokens", "error"): ["Option"],
                    ("self", "action"): ["Shift", "EOF"], ("answer",): ["EOF"], ("item", "rest"): ["_MISSING"]}


def test_the_names_go_into_the_pools_of_those_places() -> None:
    tree = ast.parse("from .constants import EOF\n_MISSING = object()\n"
                     "class T:\n"
                     "    def m(self, value, tokens):\n"
                     "        data = self.stream.char()\n"
                     "        if value is _MISSING or tokens.error is EOF or self.mode is EOF:\n"
                     "            return data is EOF\n")
    node = tree.body[2].body[0]
    info = hints.analyse(node, skip_first=True)
    hints.mine_module(tree, info)
    pools = synth.Pools(info, random.Random(0), owner="T")
    assert Global("_MISSING") in pools.by_param["value"][:3]
    objs = [v for v in pools.by_param["tokens"] if isinstance(v, Obj)]
    assert sum(getattr(o, "error", None) == Global("EOF") for o in objs) >= 2
    assert Global("EOF") in pools.by_param[synth.SELF_PREFIX + "mode"]
    scripts = [decode(encode(v)) for v in pools.by_param[synth.SELF_PREFIX + "stream"] if isinstance(v, Obj)]
    answers = [getattr(o, "char", None) for o in scripts]
    assert any(isinstance(a, CalibStandIn) and repr(Global("EOF")) in encode(a) for a in answers)


def test_a_function_without_such_comparisons_gets_the_same_pools() -> None:
    tree = ast.parse("LIMIT = 3\ndef f(value, items):\n    if value in items or value == LIMIT:\n        return 1\n")
    node = tree.body[1]
    info = hints.analyse(node, skip_first=False)
    hints.mine_module(tree, info)
    assert globalrefs.mine(node, tree, ["value", "items"], None) == {}
    pools = synth.Pools(info, random.Random(0))
    assert not any(isinstance(v, Global) for pool in pools.by_param.values() for v in pool)


@needs_bwrap
def test_a_sentinel_branch_is_reached_and_a_candidate_is_judged_on_it() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(PICK, [PICK, PICK_WRONG], context=SENTINEL_CONTEXT))
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    skipped = [i for i, item in enumerate(result.inputs) if decode(item.state["args"]["value"]) == Global("_SKIP")]
    assert skipped
    for i in skipped:
        output = json.loads(result.inputs[i].output)
        assert output["return"]["tuple"][0] == "skipped"
    same, wrong = result.candidates
    valid = [i for i, item in enumerate(result.inputs) if item.valid]
    assert all(same.matches[i] for i in valid)
    assert not any(wrong.matches[i] for i in skipped)  # the sentinel is its own build's object there too
    assert all(wrong.matches[i] for i in valid if i not in skipped)


@needs_bwrap
def test_what_a_withheld_dependency_answers_can_be_its_own_sentinel() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(STATE, [], context=EOF_CONTEXT))
    assert result.conclusive, result.reason  # (0.7 before: the three lines under ``data is EOF`` unreached)
    returns = {json.loads(item.output).get("return") for item in result.inputs if item.valid}
    assert 2 in returns  # ``data is EOF`` held: the stand-in's call answered the module's EOF
    assert any("Global('EOF')" in item.state.get("self", "") for item in result.inputs)


ALIAS_CONTEXT = (
    "import sys\n"
    "if sys.version_info[0] >= 3:\n"
    "    unicode_type = str\n"
    "    bytes_type = bytes\n"
    "else:\n"
    "    unicode_type = unicode\n"  # noqa: F821 - never runs
    "    bytes_type = str\n"
    "\n"
)
TO_TEXT = (
    "def to_text(obj):\n"
    "    if isinstance(obj, unicode_type):\n"
    "        return obj\n"
    "    elif isinstance(obj, bytes_type):\n"
    "        try:\n"
    "            return unicode_type(obj, 'utf-8')\n"
    "        except UnicodeDecodeError as error:\n"
    "            sys.stderr.write('cannot decode %r: %s' % (obj, error))\n"
    "            return unicode_type(obj, 'utf-8', 'replace')\n"
    "    else:\n"
    "        return unicode_type(obj)\n"
)


def test_module_names_of_builtin_types_are_hints() -> None:
    extra = "from six import string_types as strs, text_type\nLIMIT = 3\npair = (str, bytes)\n"
    tree = ast.parse(ALIAS_CONTEXT + extra)
    assert globalrefs.type_aliases(tree) == {"unicode_type": ["str"], "bytes_type": ["bytes"], "strs": ["str"],
                                             "text_type": ["str"], "pair": ["str", "bytes"]}
    # the first binding wins (the ``if`` branch that runs on Python 3)
    node = ast.parse(TO_TEXT).body[0]
    info = hints.analyse(node, skip_first=False)
    hints.mine_module(ast.parse(ALIAS_CONTEXT + TO_TEXT), info)
    assert "bytes" not in info.params[0].types
    pools = synth.Pools(info, random.Random(0))
    assert {"str", "bytes"} <= set(info.params[0].types)
    assert b"\x00\xff" in pools.by_param["obj"]  # not UTF-8: the handler's input


@needs_bwrap
def test_an_isinstance_check_through_a_type_alias_reaches_its_branch() -> None:
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(TO_TEXT, [], context=ALIAS_CONTEXT))
    assert result.conclusive, result.reason
    assert result.coverage == 1.0  # (0.75 before: no bytes, so never the ``except UnicodeDecodeError``)
    replaced = [json.loads(i.output) for i in result.inputs if decode(i.state["args"]["obj"]) == b"\x00\xff"]
    assert replaced and replaced[0]["return"] == "\x00\ufffd" and "cannot decode" in replaced[0]["stderr"]


CONVERT_CONTEXT = "from .colors import sRGBColor, convert\n\n"  # withheld: both are stand-ins
TO_RGB = (
    "def to_rgb(color, target):\n"
    "    values = convert(color)\n"
    "    if target == sRGBColor:\n"
    "        out = []\n"
    "        for v in values:\n"
    "            if v <= 0.5:\n"
    "                out.append(v * 2)\n"
    "            else:\n"
    "                out.append(v)\n"
    "        return out\n"
    "    return [target, values]\n"
)


def test_a_name_the_search_records_a_comparison_with_is_mined_too() -> None:
    # as the search runs x, ``target == sRGBColor`` is a recorded comparison (:mod:`.cmplog`); the recorder
    # notes plain values only, and sRGBColor (a class of a withheld module, a stand-in) is none
    from calib.executors.sandbox.harness import cmplog

    tree = ast.parse(CONVERT_CONTEXT + TO_RGB)
    node = tree.body[1]
    cmplog.instrument(node, tree)
    assert any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == cmplog.NAME for n in ast.walk(node))
    assert globalrefs.mine(node, tree, ["color", "target"], None) == {("arg", "target"): ["sRGBColor"]}
    # a name the build bound to a text or a number (``af == AF_INET``) is left to the recorder, which notes it
    assert globalrefs.mine(node, tree, ["color", "target"], None, frozenset({"sRGBColor"})) == {}


@needs_bwrap
def test_a_parameter_compared_with_a_withheld_class_reaches_that_branch() -> None:
    # colormath's ``XYZ_to_RGB``: ``if target_rgb == sRGBColor:`` (0.79 before: its branch unreached)
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    result = asyncio.run(executor.compare(TO_RGB, [], context=CONVERT_CONTEXT))
    assert result.conclusive, result.reason
    assert result.coverage == 1.0, result.uncovered_lines
    assert any(decode(item.state["args"]["target"]) == Global("sRGBColor") for item in result.inputs if item.valid)
