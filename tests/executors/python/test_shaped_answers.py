"""Stand-in answers shaped as the data x takes apart (issue 24 §2: "a dependency's particular answer").

In a ``mixedN`` mode a withheld dependency's call answers a stand-in, ``None``, ``False``, ``True``, ``0``, ``1``,
``""``, ``[]`` or raises. Code that loads data through a withheld library and then takes it apart
(``table = yamlish.load(f)`` then ``for old, new in table.items(): old.split(".")``) never ran its loop on any of
those. Now a run notes where x used a call's stand-in answer as data (a dict's method, a text's, a list's, an item,
iteration: ``standins.CallLog.wants``), and the search retries that input at once with the call's draw set to each
shaped answer of that kind (``standins._SHAPED_RETURNS``; a variant never draws one by itself).
"""

from __future__ import annotations

import asyncio

from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import calls, standins

SHAPED = standins._SHAPED_RETURNS
KINDS = standins._SHAPED_KINDS


def _answer(mode: str, use: str) -> tuple[object, dict[str, set[int]]]:
    """``d = dep.load(path)`` then one use of ``d``, in ``mode``: (d, what the run wants for that call)."""
    standins.LOG.reset(calls.standin_default(mode))
    try:
        d = standins.CalibStandIn("dep").load("path")
        if standins.is_standin(d):
            try:
                {"items": lambda: d.items(), "key": lambda: d["name"], "index": lambda: d[0],
                 "loop": lambda: [v for v in d], "split": lambda: d.split("."), "len": lambda: len(d)}[use]()
            except standins.CalibStandInError:
                pass  # the use's own answer (``d.items()`` drawn to raise): what counts is that d was used
        return d, {k: set(v) for k, v in standins.LOG.wants.items()}
    finally:
        standins.LOG.reset()


def _standin_variant() -> str:
    """A mixed variant whose draw for ``dep.load('path')`` answers a stand-in."""
    return next(f"mixed{n}" for n in range(1, 500) if standins.is_standin(_answer(f"mixed{n}", "len")[0]))


def test_a_use_of_a_calls_answer_asks_for_the_data_of_its_kind() -> None:
    mode = _standin_variant()
    key = "dep.load('path')#1"  # the draw of the first call of dep.load given 'path' (standins.mixed_return)
    for use, kind in (("items", "dict"), ("key", "dict"), ("index", "list"), ("loop", "list"), ("split", "str")):
        assert _answer(mode, use)[1] == {key: set(KINDS[kind])}, use
    assert _answer(mode, "len")[1] == {}  # a length fits any container: no kind asked for
    # outside the mixed modes nothing is noted
    assert _answer("standin", "items")[1] == {} and _answer("items", "items")[1] == {}


def test_a_set_draw_answers_shaped_data_afresh_and_a_variant_never_draws_one() -> None:
    mode = _standin_variant()
    key = "dep.load('path')#1"
    for i, make in enumerate(SHAPED):
        forced = standins.forcing(mode, key, standins.SHAPED_FROM + i)
        assert standins.is_mixed(forced)
        first, _ = _answer(forced, "len")
        assert first == make() and type(first) is type(make())
        if isinstance(first, dict | list):
            first.clear()  # x mutating the answer of one input leaves the next its own
            assert _answer(forced, "len")[0] == make() != first or not make()
    plain = {repr(v) for v in standins._MIXED_RETURNS if v is not standins._STANDIN_DEFAULT
             and v is not standins.RAISE}
    for n in range(1, 400):
        try:
            answer, _ = _answer(f"mixed{n}", "len")
        except standins.CalibStandInError:
            continue  # the RAISE answer
        assert standins.is_standin(answer) or repr(answer) in plain, (n, answer)


ALIASES = '''def load_aliases(path):
    try:
        with open(path) as f:
            table = yamlish.load(f)
    except OSError:
        return {}
    aliases = {}
    for old, new in table.items():
        old_module = ".".join(old.split(".")[:-1])
        new_module = ".".join(new.split(".")[:-1])
        if old_module != new_module:
            moved = new.split(".")[-1]
            aliases.setdefault(old_module, {})[moved] = new_module
    return aliases
'''


def test_data_loaded_through_a_withheld_library_is_taken_apart(executor: SandboxExecutor) -> None:
    result = asyncio.run(executor.compare(ALIASES, [ALIASES], context="import yamlish\n"))
    # before, no input reached the last lines of the loop's body (two modules that differ need real texts)
    assert result.conclusive, (result.reason, result.coverage, result.uncovered_lines)
    assert result.coverage == 1.0
    assert any("~" in (i.state.get("standins") or "") for i in result.inputs), [i.state for i in result.inputs]
    # x itself as the candidate replays every input to the same output: the set draw is part of the input
    assert all(result.candidates[0].matches)


def test_a_shaped_answer_replays_in_the_sandbox(executor: SandboxExecutor) -> None:
    key = "yamlish.load(TextIOWrapper)#1"  # the draw of yamlish.load's first answer, given an open file
    modes = [standins.forcing("mixed5", key, standins.SHAPED_FROM + i) for i in range(len(SHAPED))]
    inputs = [{"args": {"path": "'a.yaml'"}, "files": {"a.yaml": "x: 1\n"}, "standins": mode} for mode in modes]
    result = asyncio.run(executor.compare(ALIASES, [ALIASES], context="import yamlish\n", inputs=inputs))
    outputs = {SHAPED[i]().__repr__(): inp.output for i, inp in enumerate(result.inputs)}
    assert '"return":{"dict":[["a",{"dict":[["d","c"]]}]]}' in outputs["{'a.b': 'c.d'}"], outputs
    assert '"exception":"AttributeError"' in outputs["{'name': 'a', 'value': 1}"]  # (1).split(".")
    assert '"exception":"AttributeError"' in outputs["['a', 'b']"]  # a list has no items()
    assert all(result.candidates[0].matches)
