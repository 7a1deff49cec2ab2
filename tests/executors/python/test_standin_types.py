"""Stand-ins used as types (``isinstance(s, six.string_types)``), as base classes and as paths, through the
real sandbox (docs/executors.md, "Stand-ins"): type checks answer by the input's stand-in mode, the same
way for x and for every candidate, so the search reaches both branches of a check on a withheld type."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness.calls import standin_default
from calib.executors.sandbox.harness.standins import LOG, CalibStandIn

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def _compare(truth: str, candidates: list[str], context: str = "", inputs=None, **config: object):
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0, **config))  # type: ignore[arg-type]
    return asyncio.run(executor.compare(truth, candidates, context=context, inputs=inputs))


def _returns(result) -> list:
    return [json.loads(i.output) for i in result.inputs if i.valid]


# isodate's parse_duration guards its argument with six's string_types (isodate 0.6.1, isoduration.py); six itself
# now has its Python 3 meaning in the sandbox (harness/compat.py, tests/executors/python/test_six_compat.py), so the
# withheld string type here is a project's own compatibility module's, as many packages keep one
SIX_CONTEXT = "from .compat import string_types\n"
SIX_TRUTH = (
    "def shout(text):\n"
    "    if not isinstance(text, string_types):\n"
    "        raise TypeError('Expecting a string %r' % (text,))\n"
    "    if text.startswith('!'):\n"
    "        return text.upper()\n"
    "    return '-'.join(text.split())\n"
)


@needs_bwrap
def test_a_guard_on_a_withheld_string_type_lets_strings_through_and_is_conclusive() -> None:
    result = _compare(SIX_TRUTH, [], context=SIX_CONTEXT)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    outs = _returns(result)
    # both branches of the guard: some input raised the guard's TypeError, some got past it
    assert any(o.get("exception") == "TypeError" for o in outs)
    assert any(isinstance(o.get("return"), str) for o in outs)


@needs_bwrap
def test_type_checks_answer_by_mode_the_same_for_x_and_a_candidate_in_every_run() -> None:
    given = [{"args": {"text": "'a b'"}, "standins": mode}
             for mode in ("standin", "true", "false", *(f"mixed{k}" for k in range(1, 9)))]
    candidate = SIX_TRUTH.replace("text", "s")  # the same function, its parameter renamed
    first = _compare(SIX_TRUTH, [candidate], context=SIX_CONTEXT, inputs=given, n_inputs=len(given), min_valid=1)
    second = _compare(SIX_TRUTH, [candidate], context=SIX_CONTEXT, inputs=given, n_inputs=len(given), min_valid=1)
    outs = [json.loads(i.output) for i in first.inputs]
    assert [i.output for i in first.inputs] == [i.output for i in second.inputs]  # another process, same answers
    assert list(first.candidates[0].matches) == [True] * len(given)
    by_mode = dict(zip([g["standins"] for g in given], outs))
    assert by_mode["true"].get("return") == "a-b"
    assert by_mode["standin"].get("exception") == "TypeError" and by_mode["false"].get("exception") == "TypeError"
    mixed = [by_mode[f"mixed{k}"].get("return") == "a-b" for k in range(1, 9)]
    assert True in mixed and False in mixed  # drawn per mode: some mixed inputs pass the guard, some do not


def test_the_mode_table_of_type_checks() -> None:
    # the table of docs/executors.md ("Stand-ins"): ``true`` accepts everything, the other plain modes
    # nothing; a stand-in reached through the type, or an instance of a class built on it, always is one
    string_types, base = CalibStandIn("six.string_types"), CalibStandIn("pkg.Base")

    class Plugin(base):  # type: ignore[misc,valid-type]
        pass

    try:
        for mode, expected in (("standin", [False] * 4), ("zero", [False] * 4), ("false", [False] * 4),
                               ("true", [True] * 4)):
            LOG.reset(standin_default(mode))
            got = [isinstance("s", string_types), isinstance(None, string_types),
                   isinstance(CalibStandIn("other"), string_types), issubclass(str, string_types)]
            assert got == expected, mode
            assert isinstance(CalibStandIn("six.string_types()"), string_types)
            assert isinstance(Plugin(), base) and issubclass(Plugin, base)
    finally:
        LOG.reset()


@needs_bwrap
def test_super_calls_on_a_withheld_base_answer_by_mode() -> None:
    # textdistance's TextLibrary.check_conditions (textdistance 4.5.0, libraries.py), its base withheld
    context = "from .base import LibraryBase\n\nclass TextLibrary(LibraryBase):\n"
    truth = (
        "    def check_conditions(self, obj, *sequences):\n"
        "        if not super().check_conditions(obj, *sequences):\n"
        "            return False\n"
        "        if len(sequences) != 2:\n"
        "            return False\n"
        "        for seq in sequences:\n"
        "            if type(seq) is not str:\n"
        "                return False\n"
        "        return True\n"
    )
    result = _compare(truth, [], context=context)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert {o.get("return") for o in _returns(result)} == {True, False}
    assert all('"base.LibraryBase.check_conditions"' in i.output for i in result.inputs if i.valid)


@needs_bwrap
def test_a_withheld_directory_constant_works_as_a_path() -> None:
    context = "import os\nfrom .config import DATA_DIR\n"
    truth = (
        "def data_file(name):\n"
        "    if not name:\n"
        "        return None\n"
        "    return os.path.join(DATA_DIR, name + '.json')\n"
    )
    result = _compare(truth, [], context=context)
    assert result.conclusive, result.reason
    paths = [o["return"] for o in _returns(result) if isinstance(o.get("return"), str)]
    # os.path.join reads the stand-in through __fspath__ (os.fspath): its path is its name
    assert paths and all(p.startswith("<config.DATA_DIR>/") and p.endswith(".json") for p in paths)


def test_mixed_modes_draw_type_checks_per_type_not_per_parity_of_its_name() -> None:
    # FNV-1a's low bit is the parity of the key's characters: 'str' and 'int' have the same one, so a
    # plain ``h % 2`` gave both the same answer in every mixed variant; a dispatch on two types needs both
    string_types = CalibStandIn("six.string_types")
    answers = set()
    try:
        for k in range(1, 33):
            LOG.reset(standin_default(f"mixed{k}"))
            answers.add((isinstance("s", string_types), isinstance(1, string_types)))
    finally:
        LOG.reset()
    assert answers == {(True, True), (True, False), (False, True), (False, False)}


@needs_bwrap
def test_comparisons_between_two_dependency_values_go_either_way_in_mixed_modes() -> None:
    # netaddr's cidr_partition compares bounds of two withheld IPNetwork values (netaddr 0.8.0, ip/__init__.py)
    truth = (
        "def place(x, y):\n"
        "    if x.last < y.first:\n"
        "        return 'before'\n"
        "    if y.last < x.first:\n"
        "        return 'after'\n"
        "    return 'overlap'\n"
    )
    given = [{"args": {"x": "StandIn('x')", "y": "StandIn('y')"}, "standins": f"mixed{k}"} for k in range(1, 25)]
    first = _compare(truth, [truth], inputs=given, n_inputs=len(given), min_valid=1)
    second = _compare(truth, [truth], inputs=given, n_inputs=len(given), min_valid=1)
    assert [i.output for i in first.inputs] == [i.output for i in second.inputs]
    assert {o.get("return") for o in _returns(first)} == {"before", "after", "overlap"}
    assert list(first.candidates[0].matches) == [True] * len(given)


@needs_bwrap
def test_divmod_of_a_dependency_value_unpacks_into_stand_ins() -> None:
    # isodate's _strfduration splits a duration with divmod (isodate 0.6.1, isostrf.py)
    context = "from .clock import elapsed\n"
    truth = (
        "def hms(job):\n"
        "    total = elapsed(job)\n"
        "    minutes, seconds = divmod(total, 60)\n"
        "    hours, minutes = divmod(minutes, 60)\n"
        "    if hours:\n"
        "        return '%dh%02dm' % (hours, minutes)\n"
        "    return '%dm%02ds' % (minutes, seconds)\n"
    )
    result = _compare(truth, [], context=context)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    # a stand-in formats with %d as 0 (its __index__), as int() reads it
    assert "0h00m" in {o.get("return") for o in _returns(result)}


@needs_bwrap
def test_a_loop_of_arithmetic_on_a_stand_in_ends_as_a_stand_in_loop_not_a_timeout() -> None:
    # tomllib's skip_chars (CPython 3.11, tomllib/_parser.py) given a withheld helper's position: the
    # stand-in reads as index 0, so ``pos += 1`` never moves it and nothing is logged; the arithmetic
    # counts towards the 10,000 stand-in operations an input may make
    context = "from withheld import start_of\n"
    truth = (
        "def skip_ws(src):\n"
        "    pos = start_of(src)\n"
        "    while src[pos] in ' \\t':\n"
        "        pos += 1\n"
        "    return pos\n"
    )
    inputs = [{"args": {"src": "' a'"}}, {"args": {"src": "'a '"}}]
    result = _compare(truth, [], context=context, inputs=inputs, input_timeout=30.0, n_inputs=2, min_valid=1)
    assert [i.reason for i in result.inputs] == ["standin_loop", ""]  # not "timeout" (the 30 s timer)
