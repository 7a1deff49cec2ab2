"""Comparison feedback on whole values and ``key = value`` files (issue 24 §2, twenty-fourth round).

- an input's ``None`` or empty container compared with a number or text (``match["turns"] == 1`` on ``[]``,
  ``opts["count"] > 3`` on ``None``): the search puts that number or text in its place;
- ``len()`` of a number (``len(match["base_token"])`` on ``2``): the search tries the number's text;
- a number or text looked for in an input's empty container (``mark in blobs["used"]`` on ``set()``): put there;
- a file whose lines x (or a function of its module it calls) splits on ``=`` or ``:`` gets ``key = value``
  lines of the keys x reads or tests for (``if "quotes" in config``).

Each end-to-end function is one the search could not make conclusive before (the coverage it reached is in its
comment), built after a function of the tuning sample; the references are Python's own evaluation of the values.
"""

from __future__ import annotations

import ast
import asyncio
import random
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import cmplog, hints, inputs, pools, synth

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def _instrumented(source: str, context: str = "") -> dict:
    """The module ``context + source`` with the comparisons of its last function recorded (as in a search)."""
    tree = ast.parse(context + source)
    cmplog.instrument(tree.body[-1], tree)
    namespace: dict = {cmplog.NAME: cmplog.compare}
    exec(compile(tree, "<t>", "exec"), namespace)  # noqa: S102
    cmplog.take_pairs()
    return namespace


def _compare(truth: str, context: str = ""):
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=4.0))
    try:
        return asyncio.run(executor.compare(truth, [truth], context=context))
    finally:
        executor.close()


FEEDBACK = """\
def feedback(match):
    if match["pattern"] == "spatial":
        if match["turns"] == 1:
            return "straight row"
        return "short pattern"
    if match["pattern"] == "repeat":
        if len(match["token"]) == 1:
            return "one character repeated"
        return "a word repeated"
    if match["rank"] > 3:
        return "rare"
    return "common"
"""


def test_an_empty_list_compared_with_a_number_gets_the_number() -> None:
    f = _instrumented(FEEDBACK)["feedback"]
    given = {"pattern": "spatial", "turns": [], "token": 2, "rank": None}
    assert f(given) == "short pattern"
    pairs = cmplog.take_pairs()
    assert ("whole", "list", 1) in pairs
    made = synth.replacements({"match": given}, pairs)
    assert {"match": {**given, "turns": 1}} in made
    assert f({**given, "turns": 1}) == "straight row"  # what Python does with the rewritten input


def test_none_ordered_against_a_number_gets_the_number_and_its_neighbours() -> None:
    f = _instrumented(FEEDBACK)["feedback"]
    given = {"pattern": "other", "turns": [], "token": 2, "rank": None}
    with pytest.raises(TypeError):  # ``None > 3``
        f(given)
    pairs = cmplog.take_pairs()
    assert ("whole_order", None, 3) in pairs
    made = synth.replacements({"match": given}, pairs)
    assert [m["match"]["rank"] for m in made if m["match"]["rank"] is not None] == [3]  # inside a dict: the first
    g = _instrumented("def g(rank):\n    return 'rare' if rank > 3 else 'common'\n")["g"]
    with pytest.raises(TypeError):
        g(None)
    ranks = [m["rank"] for m in synth.replacements({"rank": None}, cmplog.take_pairs())]
    assert ranks == [3, 4, 2]
    assert [g(r) for r in ranks] == ["common", "rare", "common"]


def test_len_of_a_number_tries_its_text() -> None:
    f = _instrumented(FEEDBACK)["feedback"]
    given = {"pattern": "repeat", "turns": [], "token": 2, "rank": None}
    with pytest.raises(TypeError):  # ``len(2)``: the recorder re-raises what Python raised
        f(given)
    pairs = cmplog.take_pairs()
    assert ("as_text", 2, "str") in pairs
    assert {"match": {**given, "token": "2"}} in synth.replacements({"match": given}, pairs)
    assert f({**given, "token": "2"}) == "one character repeated"


def test_a_value_looked_for_in_an_empty_container_is_put_there() -> None:
    # fastimport's ``_track_blob``: ``mark in self.blobs['used']`` on an empty set took only the last branch
    f = _instrumented(
        "def track(blobs, counts, mark):\n"
        "    if mark in counts:\n"
        "        counts[mark] += 1\n"
        "        return 'counted'\n"
        "    if mark in blobs['used']:\n"
        "        return 'used'\n"
        "    if mark in blobs['new']:\n"
        "        return 'new'\n"
        "    return 'unknown'\n")["track"]
    given = {"blobs": {"used": set(), "new": []}, "counts": {}, "mark": 3}
    assert f(**given) == "unknown"
    pairs = cmplog.take_pairs()
    assert {("member", "dict", 3), ("member", "set", 3), ("member", "list", 3)} <= set(pairs)
    made = synth.replacements(given, pairs)
    assert {**given, "counts": {3: 1}} in made
    assert {**given, "blobs": {"used": {3}, "new": []}} in made
    assert {**given, "blobs": {"used": set(), "new": [3]}} in made
    assert sorted(f(**m) for m in made) == ["counted", "new", "used"]  # each branch, as Python takes it
    assert synth.replacements({"items": [1]}, [("member", "list", 3)]) == []  # a filled one: its items are tried


def test_whole_pairs_leave_filled_values_and_bools_alone() -> None:
    # a comparison between two primitives is an ``eq`` pair as before; a filled list is not replaced
    f = _instrumented("def f(a, b):\n    return a == 1, b == 'x', a == [1]\n")["f"]
    assert f([2], [3]) == (False, False, False)
    assert not any(kind.startswith("whole") for kind, _, _ in cmplog.take_pairs())
    assert synth.replacements({"flag": False, "items": [1]}, [("whole", "list", 1)]) == []
    assert synth.replacements({"flag": None}, [("whole", "list", 1)]) == []  # None is not an empty list


@needs_bwrap
def test_a_dict_parameter_whose_items_must_change_type_becomes_conclusive() -> None:
    # zxcvbn's ``get_match_feedback`` (tuning sample, coverage 0.79 before): ``match['turns'] == 1`` on the
    # pool's ``[]`` and ``len(match['base_token'])`` on its ``2`` stopped the search
    result = _compare(FEEDBACK)
    assert result.conclusive, result.reason
    outputs = {i.output for i in result.inputs if i.valid}
    assert any('"straight row"' in o for o in outputs) and any('"one character repeated"' in o for o in outputs)


CONFIG = """\
def get_config(config_file):
    config = {}
    if config_file:
        try:
            f = open(config_file)
        except OSError:
            return config
        for line in f.readlines():
            if line.strip():
                key, value = line.split("=", 1)
                config[key.strip()] = value.strip()
    return config
"""

RUN = """\
def run(source, quotes='"', indent=4, config_file=None):
    config = get_config(config_file)
    if "quotes" in config:
        quotes = config.pop("quotes")
    if "indent" in config:
        indent = int(config.pop("indent"))
    if "style" in config:
        return config["style"] + ":" + source
    if config:
        raise ValueError("unknown keys: " + ", ".join(sorted(config)))
    return quotes * 3 + " " * indent + source
"""


def test_lines_split_on_an_equals_sign_get_key_value_files_of_the_keys_x_tests() -> None:
    tree = ast.parse(CONFIG + RUN)
    u = inputs.scan(tree.body[-1], tree, {"source", "quotes", "indent", "config_file"})
    assert "pairs" in u.formats and u.separator == "="
    assert u.tested == ["quotes", "indent", "style"]
    text = inputs.content("input.txt", u, 0, ["alpha"], [7])
    # the helper's own parsing, run here on what the search writes (the reference is get_config itself)
    namespace: dict = {}
    exec(compile(ast.parse(CONFIG), "<t>", "exec"), namespace)  # noqa: S102
    import pathlib
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d, "input.txt")
        path.write_text(text)
        assert set(namespace["get_config"](str(path))) == {"quotes", "indent", "style"}
        path.write_text(inputs.content("input.txt", u, 2, ["alpha"], [7]))  # the first key missing
        assert len(fewer := set(namespace["get_config"](str(path)))) == 2 and fewer < {"quotes", "indent", "style"}
    assert inputs.content("input.txt", u, 3, ["alpha"], [7]) == ""
    # the search writes input.txt with those lines, for a path parameter (``config_file``)
    info = hints.analyse(tree.body[-1], skip_first=False)
    hints.mine_module(tree, info)
    p = pools.Pools(info, random.Random(0))
    written = dict(line.split(" = ") for line in p.by_param["file:input.txt"][0].splitlines())
    assert sorted(written) == ["indent", "quotes", "style"]
    assert not set(written.values()) & set(written)  # x's literals as values, not its key names


def test_a_split_without_an_opened_file_is_no_file_format() -> None:
    tree = ast.parse("def f(pair):\n    key, value = pair.split('=', 1)\n    return 'k' in pair, key\n")
    assert "pairs" not in inputs.scan(tree.body[-1], tree, {"pair"}).formats


@needs_bwrap
def test_a_runner_reading_a_key_value_configuration_becomes_conclusive() -> None:
    # pyment's ``run`` (tuning sample, coverage 0.76 before): its helper reads ``key = value`` lines, and the
    # three-line text files the search wrote made ``line.split("=", 1)`` fail
    result = _compare(RUN, context=CONFIG)
    assert result.conclusive, result.reason
    assert result.coverage >= 0.8
    assert any("=" in content for i in result.inputs for content in i.state.get("files", {}).values())
