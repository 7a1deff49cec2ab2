"""What makes more real functions conclusive without an LLM (issue 6, condition (b) of
``benchmarks/conclusive.py``): stand-ins that answer differently per call, scripted stand-in returns,
input-to-state replacement, unpacking and subclassing stand-ins, and the hints behind them.

The end-to-end tests run the real sandbox; the units below them run the harness's pure pieces on the host.
"""

from __future__ import annotations

import ast
import asyncio
import json
import shutil
import warnings

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import cmplog, hints, scaffold, standins, synth
from calib.executors.sandbox.harness.calls import standin_default
from calib.executors.sandbox.harness.standins import LOG, CalibStandIn, CalibStandInWarning, standin_for
from calib.executors.sandbox.harness.values import Obj, decode, encode

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def _compare(truth: str, candidates: list[str], context: str = "", inputs=None, **config: object):
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0, **config))  # type: ignore[arg-type]
    return asyncio.run(executor.compare(truth, candidates, context=context, inputs=inputs))


# --- end to end ---------------------------------------------------------------------------------------


@needs_bwrap
def test_a_dependency_that_answers_differently_per_call_site_covers_both_branches() -> None:
    # ``is_multi_byte(name)`` must be falsy while ``lookup(name)`` returns something iterable: no single
    # stand-in mode does both (``false`` makes every call False); a mixed mode draws per call.
    context = "from charset.utils import is_multi_byte, lookup\n"
    truth = (
        "def decode_range(name):\n"
        "    if is_multi_byte(name):\n"
        "        raise OSError('multi-byte')\n"
        "    decoder = lookup(name)\n"
        "    if decoder is None:\n"
        "        return None\n"
        "    seen = []\n"
        "    for ch in decoder.chars():\n"
        "        seen.append(ch)\n"
        "    return seen\n"
    )
    result = _compare(truth, [truth.replace("is None", "== 0")], context=context)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    modes = {i.state.get("standins") for i in result.inputs}
    assert any(synth.STANDIN_MODES.__contains__(m) and str(m).startswith("mixed") for m in modes)
    # the candidate tells ``None`` from other falsy answers apart differently: caught on some input
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 1.0


@needs_bwrap
def test_mixed_inputs_replay_identically_and_round_trip_through_the_inputs_list() -> None:
    context = "import requests\n"
    truth = (
        "def status(url):\n"
        "    resp = requests.get(url)\n"
        "    if not resp:\n"
        "        return 'empty'\n"
        "    if resp.ok:\n"
        "        return resp.json()\n"
        "    return resp.status_code\n"
    )
    given = [{"args": {"url": repr(u)}, "standins": f"mixed{k}"} for k in (3, 17, 4242) for u in ("a", "b")]
    first = _compare(truth, [truth], context=context, inputs=given, n_inputs=6, min_valid=1)
    second = _compare(truth, [truth], context=context, inputs=given, n_inputs=6, min_valid=1)
    assert [(i.status, i.reason) for i in first.inputs] == [(i.status, i.reason) for i in second.inputs]
    assert [i.output for i in first.inputs] == [i.output for i in second.inputs]
    assert sum(i.valid for i in first.inputs) >= 4  # an unhandled failing call is a stand-in failure, invalid
    # the dependency answered differently (a falsy response, one that is ok, one that is not)
    assert len({json.dumps(json.loads(i.output).get("return")) for i in first.inputs if i.valid}) >= 2
    assert list(first.candidates[0].matches) == [True if i.valid else None for i in first.inputs]


@needs_bwrap
def test_a_stand_in_method_scripted_with_mined_values_reaches_the_branches_on_what_it_returns() -> None:
    context = "class Scanner:\n    def __init__(self):\n        self.pos = 0\n"
    truth = (
        "    def scan(self):\n"
        "        ch = self.peek()\n"
        "        if ch in '-_':\n"
        "            return 'separator'\n"
        "        if ch == '#':\n"
        "            return 'comment'\n"
        "        if '0' <= ch <= '9':\n"
        "            return 'digit'\n"
        "        return 'other'\n"
    )
    result = _compare(truth, [truth.replace("'comment'", "'remark'")], context=context)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    returns = {json.loads(i.output).get("return") for i in result.inputs if i.valid}
    assert {"separator", "comment", "digit"} <= returns
    assert any("StandIn('peek', [" in str(i.state.get("self")) for i in result.inputs)
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 1.0


@needs_bwrap
def test_unpacking_a_dependency_gives_as_many_items_as_the_code_asks_for() -> None:
    context = "from urllib3.util import parse_url\n"
    truth = (
        "def host_of(url):\n"
        "    scheme, auth, host, *rest = parse_url(url)\n"
        "    if auth:\n"
        "        return host\n"
        "    return scheme\n"
    )
    result = _compare(truth, [], context=context)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert all('"exception"' not in (i.output or "") for i in result.inputs if i.status == "ok")


@needs_bwrap
def test_a_class_whose_base_is_withheld_gets_a_base_that_takes_super_calls() -> None:
    context = "from .transports import Transport\n\nclass Selector(Transport):\n"
    truth = (
        "    def __init__(self, loop, sock, extra=None):\n"
        "        super().__init__(extra, loop)\n"
        "        self._extra['socket'] = sock\n"
        "        self._sock = sock\n"
        "        if super().is_closing():\n"
        "            self._sock = None\n"
    )
    result = _compare(truth, [truth.replace("(extra, loop)", "(loop, extra)")], context=context)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert all('Transport.__init__"' in (i.output or "") for i in result.inputs if i.valid)
    # the arguments of the super call are part of the call log: the swapped candidate matches only
    # where loop and extra happen to be equal
    assert result.candidates[0].sim_func is not None and result.candidates[0].sim_func < 0.5


@needs_bwrap
def test_an_initialiser_calling_a_method_defined_after_it_logs_the_call() -> None:
    context = "class Calendar:\n"
    truth = (
        "    def __init__(self, fileobj):\n"
        "        self._vtz = {}\n"
        "        if isinstance(fileobj, str):\n"
        "            self._s = fileobj\n"
        "        else:\n"
        "            self._s = repr(fileobj)\n"
        "        self._parse_rfc(self._s)\n"
    )
    result = _compare(truth, [], context=context)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert all('"self._parse_rfc"' in (i.output or "") for i in result.inputs if i.valid)


@needs_bwrap
def test_a_helper_method_reading_attributes_the_constructor_did_not_set_runs() -> None:
    context = (
        "class Scanner:\n"
        "    def __init__(self, text):\n"
        "        self.text = text\n"
        "    def remove_possible_simple_key(self):\n"
        "        if self.flow_level in self.possible_simple_keys:\n"
        "            del self.possible_simple_keys[self.flow_level]\n"
    )
    truth = (
        "    def fetch_entry(self):\n"
        "        self.allow_simple_key = True\n"
        "        self.remove_possible_simple_key()\n"
        "        if self.text.startswith('-'):\n"
        "            return 'entry'\n"
        "        return 'plain'\n"
    )
    result = _compare(truth, [], context=context)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0


@needs_bwrap
def test_a_warning_category_of_a_withheld_module_is_a_warning_and_every_input_shows_it() -> None:
    context = "from tqdm.std import TqdmExperimentalWarning\nimport warnings\n"
    truth = (
        "def start(total):\n"
        "    warnings.warn('GUI is experimental', TqdmExperimentalWarning, stacklevel=2)\n"
        "    if total > 3:\n"
        "        return 'big'\n"
        "    return 'small'\n"
    )
    given = [{"args": {"total": "5"}}, {"args": {"total": "1"}}, {"args": {"total": "5"}}]
    result = _compare(truth, [], context=context, inputs=given, n_inputs=3, min_valid=3)
    assert [i.status for i in result.inputs] == ["ok"] * 3, [i.reason for i in result.inputs]
    # a warning shown on the first input is shown again on the third (the registry is per input)
    assert result.inputs[0].output == result.inputs[2].output
    assert "GUI is experimental" in result.inputs[2].output


@needs_bwrap
def test_input_to_state_replacement_puts_what_x_compared_with_into_the_input() -> None:
    # the key is only known at run time (built, then compared), and it must be followed by a colon:
    # neither the literals nor the compared value itself ("qzjx" has no colon) reach the branch; the
    # replacement of the field x compared ("abc:x" -> "qzjx:x") does
    context = "PREFIX = ''.join(chr(c) for c in (113, 122, 106))\n"
    truth = (
        "def route(line):\n"
        "    head, sep, rest = line.partition(':')\n"
        "    if not sep:\n"
        "        return 'no field'\n"
        "    if head == PREFIX + 'x':\n"
        "        return 'special ' + rest\n"
        "    return 'plain'\n"
    )
    result = _compare(truth, [], context=context)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert any("qzjx" in str(i.state["args"]["line"]) for i in result.inputs if i.valid)


# --- units: the pieces on the host ----------------------------------------------------------------------


def test_replacements_rewrite_the_input_value_a_comparison_was_made_on() -> None:
    values = {"url": "abc:rest", "n": 4, "opts": {"mode": "r"}, "obj": Obj(kind="x")}
    found = synth.replacements(values, [("eq", "abc", "data")])
    assert {"url": "data:rest", "n": 4, "opts": {"mode": "r"}, "obj": values["obj"]} in found
    # a dict key and an object attribute are rewritten too; numbers on a boundary get its neighbours
    assert any(r["opts"] == {"verbose": "r"} for r in synth.replacements(values, [("eq", "verbose", "mode")]))
    assert any(vars(r["obj"]) == {"kind": "y"} for r in synth.replacements(values, [("eq", "x", "y")]))
    ns = [r["n"] for r in synth.replacements(values, [("order", 4, 100)])]
    assert ns == [100, 101, 99]
    # prefixes and needles go into the text
    assert {"url": "http://abc:rest"} in [{"url": r["url"]} for r in synth.replacements(
        values, [("prefix", "abc:rest", "http://")])]
    # a value nobody compared stays as it is
    assert synth.replacements(values, [("eq", "zzz", "data")]) == []


def test_each_comparison_gets_its_turn_before_one_fills_the_limit() -> None:
    # ``while i < len(text): c = text[i]; if c == enter: ... elif c == exit: ...`` on ("expecting end", 0, 0): the
    # loop's first comparison ``0 < 13`` matches both zeros; before, its three rewrites of each (13, 14, 12) and the
    # text's took the 8 places, and ``exit = "e"``, which makes the ``elif`` branch run, was never queued
    values = {"text": "expecting end", "enter": 0, "exit": 0}
    pairs = [("order", 0, 13), ("len_order", "expecting end", 0), ("eq", "e", 0), ("order", 1, 13),
             ("len_order", "expecting end", 1), ("eq", "x", 0)]
    found = synth.replacements(values, pairs)
    changed = [{k: v for k, v in r.items() if v != values[k]} for r in found]
    assert len(found) == 8 and {"exit": "e"} in changed and {"enter": "e"} in changed
    assert changed[:2] == [{"enter": 13}, {"exit": 13}]  # each value's first rewrite, in the order of comparisons
    every = [{k: v for k, v in r.items() if v != values[k]} for r in synth.replacements(values, pairs, limit=100)]
    assert every.index({"exit": 12}) > every.index({"exit": "e"})  # a value's other rewrites after the first ones


def test_replacements_rewrite_what_a_scripted_stand_in_returns() -> None:
    values = {"self.peek": CalibStandIn("peek", ["Z", None])}
    found = synth.replacements(values, [("eq", "0", "Z")])
    assert encode(found[0]["self.peek"]) == "StandIn('peek', ['0', None])"


def test_the_comparison_recorder_notes_pairs_without_changing_what_the_code_does() -> None:
    source = (
        "def f(ch, d, s):\n"
        "    calls = []\n"
        "    def peek():\n"
        "        calls.append(1)\n"
        "        return ch\n"
        "    ok = '0' <= peek() <= '9'\n"
        "    key = d.get('mode')\n"
        "    return ok, key, s.startswith('http'), 3 < len(calls) < 9, len(calls)\n"
    )
    plain: dict = {}
    exec(compile(source, "<t>", "exec"), plain)  # noqa: S102 - the test's own code
    tree = ast.parse(source)
    cmplog.instrument(tree.body[0])
    recorded: dict = {cmplog.NAME: cmplog.compare}
    exec(compile(tree, "<t>", "exec"), recorded)  # noqa: S102
    cmplog.take_pairs()
    for args in (("5", {"m": 1}, "ftp://x"), ("a", {}, "http://y")):
        assert recorded["f"](*args) == plain["f"](*args)
    pairs = cmplog.take_pairs()
    assert ("eq", "0", "5") in pairs and ("eq", "5", "9") in pairs and ("eq", "0", "a") in pairs
    assert ("eq", "mode", "m") in pairs and ("prefix", "ftp://x", "http") in pairs
    # the recorder never raises where the code would not: mixed-type operands are simply skipped
    assert recorded["f"]("5", {1: 2, "x": b"y"}, "s")[1] is None


def test_a_failing_comparison_in_the_recorder_fails_as_python_would() -> None:
    with pytest.raises(TypeError):
        cmplog.compare("a", 1, "Lt")
    with pytest.raises(TypeError):
        cmplog.compare(1, 2, "In")


def test_mixed_modes_are_deterministic_and_valid_input_modes() -> None:
    assert "mixed7" in synth.STANDIN_MODES and "mixed123456" in synth.STANDIN_MODES
    assert "mixed0" not in synth.STANDIN_MODES and "mixedx" not in synth.STANDIN_MODES
    assert "standin" in synth.STANDIN_MODES and "bogus" not in synth.STANDIN_MODES

    def answers(mode: str) -> list[str]:
        LOG.reset(standin_default(mode))
        dep = CalibStandIn("dep")
        out = []
        for arg in range(12):
            try:
                out.append(repr(dep(arg)))
            except standins.CalibStandInError:
                out.append("raised")
        out.append(repr(bool(CalibStandIn("flag"))))
        return out

    try:
        assert answers("mixed5") == answers("mixed5")
        assert answers("mixed5") != answers("mixed6")
        kinds = {a for mode in ("mixed1", "mixed2", "mixed3", "mixed4") for a in answers(mode)}
        assert {"None", "False", "raised", "<dep()>"} <= kinds
    finally:
        LOG.reset()


def test_scripted_stand_ins_return_their_values_then_the_modes_default() -> None:
    peek = decode("StandIn('peek', ['a', 3, None])")
    LOG.reset()
    assert [peek(), peek(1), peek(), repr(peek())] == ["a", 3, None, "<peek()>"]
    assert [e[1] for e in LOG.entries] == ["peek"] * 4
    assert encode(decode("StandIn('peek', ['a', [1]])")) == "StandIn('peek', ['a', [1]])"
    LOG.reset()


def test_unpacking_and_iterating_a_stand_in() -> None:
    LOG.reset()
    dep = CalibStandIn("dep")
    a, b, c = dep
    first, *middle, last = dep
    assert [repr(a), repr(c), middle] == ["<dep[0]>", "<dep[2]>", []]
    assert list(dep) == []  # iterating in a loop: empty in the default mode


def test_exception_and_warning_names_of_withheld_modules() -> None:
    assert standin_for("tqdm.TqdmExperimentalWarning") is CalibStandInWarning
    assert issubclass(CalibStandInWarning, Warning) and issubclass(CalibStandInWarning, standins.CalibStandInError)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.warn("x", standin_for("pkg.FooWarning"), stacklevel=1)
    assert len(seen) == 1


def test_hints_from_hasattr_mapping_lookups_and_path_division() -> None:
    source = (
        "def f(data, options, folder, mod):\n"
        "    if hasattr(data, 'read'):\n"
        "        data = data.read()\n"
        "    if 'strict' in options or options.get('verbose'):\n"
        "        pass\n"
        "    readme = folder / 'README.md'\n"
        "    return mod.__name__\n"
    )
    found = {p.name: p for p in hints.analyse(ast.parse(source).body[0], skip_first=False).params}
    assert "object" in found["data"].types and "read" in found["data"].attrs
    assert {"strict", "verbose"} <= set(found["options"].keys)
    assert "pathobj" in found["folder"].types
    assert "__name__" in found["mod"].attrs


def test_the_scaffold_collects_super_names_and_class_reads() -> None:
    source = (
        "class A(Base):\n"
        "    def helper(self):\n"
        "        return self.ready and self.count\n"
        "    def run(self):\n"
        "        super().feed(1)\n"
        "        return self.helper()\n"
    )
    placed = scaffold.place(source, "def later(x):\n    return x\n")
    assert scaffold.super_names(placed.tree) == {"feed"}
    scaffold.Module(placed, module_name="m")
    from calib.executors.sandbox.harness.calls import class_reads

    cls = type("A", (), {})
    assert {"ready", "count"} <= set(class_reads(cls))


def test_an_inputs_file_accepts_every_mixed_mode_and_scripted_stand_ins(tmp_path) -> None:
    from calib._exceptions import InputError
    from calib.cli.compare import load_inputs

    path = tmp_path / "inputs.json"
    path.write_text(json.dumps([{"args": {"n": 1}, "standins": "mixed4242",
                                 "self": "Obj(peek=StandIn('peek', ['0', None]))"}]))
    (state,) = load_inputs(path)
    assert state["standins"] == "mixed4242" and "StandIn('peek', ['0', None])" in state["self"]
    path.write_text(json.dumps([{"args": {"n": 1}, "standins": "mixed42~0a1b2c3d:11"}]))  # a draw set (the search's)
    assert load_inputs(path)[0]["standins"] == "mixed42~0a1b2c3d:11"
    for bad in ("mixed0", "mixed42~0a1b2c3d", "mixed42~0A1B2C3D:1"):
        path.write_text(json.dumps([{"args": {"n": 1}, "standins": bad}]))
        with pytest.raises(InputError, match=r"standins must be one of standin, .*, mixedN, mixedN~ID:V \(up to 8 "
                                             r"draws set; docs/executors.md, Input states\) or nthN \(N >= 1\), "
                                             rf"got '{bad}'"):
            load_inputs(path)
