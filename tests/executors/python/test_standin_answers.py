"""Stand-in answers chosen per call (issue 24 §2): what a withheld dependency answers at each call of x.

The end-to-end tests run the real sandbox (``SandboxExecutor.compare``); the units below them run the
harness's stand-ins on the host, as the sandbox does.
"""

from __future__ import annotations

import asyncio
import shutil

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import standins
from calib.executors.sandbox.harness.calls import standin_default
from calib.executors.sandbox.harness.standins import LOG, CalibStandIn

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# A builder whose checks and conversions live in a withheld base class (the shape of aniso8601's
# ``PythonTimeBuilder.build_interval``): ``cls.range_check_interval`` is a classmethod of the base, and
# which branch runs depends on what it hands back at that call. Before per-call answers the class had no
# such attribute (every input raised AttributeError: coverage 0.14, one distinct output); the check
# passing its arguments through at one call and a value at another reaches every branch.
BUILDER_CONTEXT = "from isobuild.builders import BaseTimeBuilder\n\n\nclass PyBuilder(BaseTimeBuilder):\n    pass\n"
BUILDER = (
    "    @classmethod\n"
    "    def build_interval(cls, start=None, end=None, duration=None):\n"
    "        start, end, duration = cls.range_check_interval(start, end, duration)\n"
    "        if start is not None and end is not None:\n"
    "            return (cls.build_object(start), cls.build_object(end))\n"
    "        span = cls.build_object(duration)\n"
    "        if end is not None:\n"
    "            return (end, span)\n"
    "        return (start, span)\n"
)
# the same method with its local variables renamed (an equivalent candidate)
BUILDER_RENAMED = (
    "    @classmethod\n"
    "    def build_interval(cls, start=None, end=None, duration=None):\n"
    "        first, last, length = cls.range_check_interval(start, end, duration)\n"
    "        if first is not None and last is not None:\n"
    "            return (cls.build_object(first), cls.build_object(last))\n"
    "        built = cls.build_object(length)\n"
    "        if last is not None:\n"
    "            return (last, built)\n"
    "        return (first, built)\n"
)


def _compare(truth: str, candidates: list[str], context: str = "", inputs=None):
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=3.0))
    return asyncio.run(executor.compare(truth, candidates, context=context, inputs=inputs))


@needs_bwrap
def test_a_classmethod_of_a_withheld_base_answers_per_call_and_every_branch_is_reached() -> None:
    result = _compare(BUILDER, [], context=BUILDER_CONTEXT)
    assert result.conclusive, result.reason
    assert result.coverage >= 0.8 and result.distinct_outputs >= 2  # N=10, C=0.8, N_out=2 (unchanged)
    calls = [str(i.output) for i in result.inputs]
    # the class-level call is a logged call of the withheld base's method
    assert any('"isobuild.builders.BaseTimeBuilder.range_check_interval"' in c for c in calls)


@needs_bwrap
def test_an_equivalent_candidate_gets_the_same_answers_on_every_input() -> None:
    result = _compare(BUILDER, [BUILDER_RENAMED, BUILDER.replace(
        "(cls.build_object(start), cls.build_object(end))", "(cls.build_object(end), cls.build_object(start))")],
                      context=BUILDER_CONTEXT)
    assert result.conclusive, result.reason
    renamed, swapped = result.candidates
    assert renamed.sim_func == 1.0  # same answers at the same calls: the same output on every input
    assert swapped.sim_func is not None and swapped.sim_func < 1.0  # a real difference is still seen


# --- units: the answers themselves --------------------------------------------------------------------


def _in_mode(mode: str) -> None:
    LOG.reset(standin_default(mode))


def test_a_query_asked_again_at_once_keeps_its_answer_for_some_names_in_the_mixed_modes() -> None:
    # ``tokens.current()`` checked at several sites before ``tokens.move()``: for a name drawn sticky the
    # repeated call answers as the first did; a call of another stand-in in between moves it on.
    sticky = []
    for variant in range(1, 60):
        _in_mode(f"mixed{variant}")
        current, move = CalibStandIn("current", ["--", "x", None]), CalibStandIn("move", [0])
        first, second = current(), current()
        move()
        third = current()
        sticky.append((first, second, third) == ("--", "--", "x"))
        if not sticky[-1]:  # the other names: each call takes the next scripted answer
            assert (first, second, third) == ("--", "x", None)
    assert any(sticky) and not all(sticky)


def test_outside_the_mixed_modes_scripted_answers_are_taken_in_order() -> None:
    _in_mode("standin")
    current = CalibStandIn("current", ["--", "x"])
    assert [current(), current()] == ["--", "x"]
    assert standins.is_standin(current())  # then the mode's default


def test_answers_are_fixed_by_the_mode_name_and_ordinal_not_by_the_process() -> None:
    # the same input state answers the same in a fresh process: draws use FNV-1a on the mode, the
    # stand-in's name, its plain arguments and the call's rank (no hash seed)
    def answers(variant: int) -> list[str]:
        _in_mode(f"mixed{variant}")
        check, out = CalibStandIn("dep.check"), []
        for arg in (1, 2, None, "a"):
            try:
                first, second = check(arg, "x")  # a checker handing back what it was given
                out.append(repr((first, second)))
            except (standins.CalibStandInError, TypeError, ValueError) as exc:
                out.append(type(exc).__name__)
        return out

    runs = [answers(v) for v in range(1, 40)]
    assert runs == [answers(v) for v in range(1, 40)]
    seen = {a for run in runs for a in run}
    # handed back at some calls, two stand-ins at others, items drawn one by one at others
    assert "(1, 'x')" in seen and "(<dep.check()[0]>, <dep.check()[1]>)" in seen
    assert any("None" in a and "dep.check" in a for a in seen)


def test_an_unpacked_stand_in_draws_its_items_the_same_however_x_unpacks_it() -> None:
    # ``start, end = parse(text)``: in a mixed mode the items are drawn one by one (``end`` None in some
    # inputs); a candidate that keeps the answer first (``pair = parse(text); start, end = pair``) gets
    # the same items, as it must: answers never depend on how the call is written
    def unpack(variant: int, at_once: bool) -> str:
        _in_mode(f"mixed{variant}")
        parse = CalibStandIn("parse")
        try:
            if at_once:
                start, end = parse("2024")
            else:
                pair = parse("2024")
                start, end = pair
        except (standins.CalibStandInError, TypeError, ValueError) as exc:  # a drawn None, 0 ... or failure
            return type(exc).__name__
        return repr((start, end))

    at_once = [unpack(v, True) for v in range(1, 80)]
    assert at_once == [unpack(v, False) for v in range(1, 80)]
    assert "(<parse()[0]>, <parse()[1]>)" in at_once
    assert any(a.startswith("(<parse()[0]>, ") and a != "(<parse()[0]>, <parse()[1]>)" for a in at_once)


def test_only_a_call_with_several_arguments_hands_them_back() -> None:
    # ``start, end = check(start, end)`` may get ``(start, end)``; ``pre, post = split(number)`` never
    # gets ``number`` (it could not unpack), nor does any other one-argument call
    pairs, singles = set(), set()
    for variant in range(1, 80):
        _in_mode(f"mixed{variant}")
        try:
            pairs.add(repr(CalibStandIn("check")(3, 4)))
            singles.add(repr(CalibStandIn("split")(7)))
        except standins.CalibStandInError:
            pass
    assert "(3, 4)" in pairs and "<check()>" in pairs
    assert "7" not in singles and "<split()>" in singles


def test_a_class_on_a_withheld_base_lends_its_attributes_only_while_x_runs() -> None:
    base = CalibStandIn("withheld.Base")

    class Builder(base):  # the stand-in's __mro_entries__ gives the base
        pass

    cls = Builder
    _in_mode("standin")
    assert not hasattr(cls, "range_check")  # building self, the output state: the class as it is
    standins.StandInFinder.active = True
    try:
        check = cls.range_check
        assert check is cls.range_check  # one stand-in per input
        assert standins.standin_name(check) == "withheld.Base.range_check"
        check(1)
        assert LOG.entries[-1][:2] == ["call", "withheld.Base.range_check"]
    finally:
        standins.StandInFinder.active = False


def test_a_withheld_base_next_to_a_base_with_its_own_metaclass_still_builds() -> None:
    import abc

    class Both(CalibStandIn("withheld.Base"), abc.ABC):
        pass

    assert issubclass(Both, abc.ABC) and Both.__mro__[1].__name__ == "Base"


def test_a_stand_in_is_a_number_drawn_per_name_in_the_mixed_modes_and_0_outside_them() -> None:
    # outside the mixed modes a stand-in used as an integer is 0, as before
    for mode in ("standin", "zero", "none", "items"):
        _in_mode(mode)
        assert int(CalibStandIn("consts.JAN")) == 0 and [10, 20][CalibStandIn("consts.JAN")] == 10
    # in a mixed mode each name has its number (1, 0 or 2), the same at each use and in a fresh process
    # (FNV-1a of the variant and the name): ``date(year, JAN, 1)`` holds a valid month in some inputs
    drawn = {}
    for variant in range(1, 40):
        _in_mode(f"mixed{variant}")
        jan, may = CalibStandIn("consts.JAN"), CalibStandIn("consts.MAY")
        drawn[variant] = (int(jan), jan.__index__(), [10, 20, 30][may])
        assert drawn[variant][0] == drawn[variant][1] in (0, 1, 2)
    assert {d[0] for d in drawn.values()} == {0, 1, 2} and {d[2] for d in drawn.values()} == {10, 20, 30}
    assert sum(d[0] == 1 for d in drawn.values()) > len(drawn) / 3  # 1 the most often (half of the names)
    for variant in range(1, 40):
        _in_mode(f"mixed{variant}")
        assert (int(CalibStandIn("consts.JAN")), CalibStandIn("consts.JAN").__index__(),
                [10, 20, 30][CalibStandIn("consts.MAY")]) == drawn[variant]


# A country's holidays in the shape of the holidays package: month constants and the base class come from
# the package itself, withheld in the paper's setting. While a stand-in was 0 as an integer, every input
# raised ValueError at ``date(year, JAN, 1)`` (coverage 0.12); a month drawn per name reaches the year branches.
HOLIDAYS_CONTEXT = ("from datetime import date\n\nfrom holidays.constants import JAN, MAY, NOV\n"
                    "from holidays.holiday_base import HolidayBase\n\n\nclass Land(HolidayBase):\n")
HOLIDAYS = (
    "    def _populate(self, year):\n"
    "        days = {}\n"
    "        days[date(year, JAN, 1)] = 'New Year'\n"
    "        if year >= 2011:\n"
    "            days[date(year, JAN, 6)] = 'Epiphany'\n"
    "        if year >= 1950:\n"
    "            days[date(year, MAY, 1)] = 'Labour Day'\n"
    "        if 1937 <= year <= 1945 or year >= 1989:\n"
    "            days[date(year, NOV, 11)] = 'Independence Day'\n"
    "        return sorted(days.items())\n"
)


@needs_bwrap
def test_withheld_month_constants_take_valid_numbers_in_some_inputs() -> None:
    result = _compare(HOLIDAYS, [HOLIDAYS.replace("1937 <= year", "1938 <= year")], context=HOLIDAYS_CONTEXT)
    assert result.conclusive, result.reason  # N=10, N_in=8, C=0.8, N_out=2 (unchanged)
    assert result.coverage >= 0.8 and result.valid_inputs >= 8
    returned = [i.output for i in result.inputs if i.valid and '"exception"' not in str(i.output)]
    assert len(returned) >= 2  # dates were made: the months were valid
    (candidate,) = result.candidates
    assert candidate.sim_func is not None  # compared on the same inputs (1937 itself may not be drawn)


# --- conversions answer their builtin type (issue 24's twenty-fourth round) -------------------------------

# dkim's ``GenEd25519Keys`` (tuning sample, coverage 0.79 before): a withheld key's ``encode(...)`` then
# ``.decode("utf-8")`` is written to a file; a stand-in there made ``pkf.write`` raise on every input
KEYGEN = (
    "def gen_keys(private_key_file):\n"
    "    skg = signing.SigningKey(seed=b'0' * 32)\n"
    "    priv_key = skg.generate()\n"
    "    with open(private_key_file, 'w') as pkf:\n"
    "        pkf.write(priv_key.encode(encoder=encoding.Base64Encoder).decode('utf-8'))\n"
    "    with open(private_key_file) as pkf:\n"
    "        return pkf.read()\n"
)


@needs_bwrap
def test_a_conversion_of_a_withheld_object_is_written_as_a_text() -> None:
    result = _compare(KEYGEN, [], context="from nacl import signing, encoding\n")
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert any(i.valid and '"return":"bytes"' in (i.output or "") for i in result.inputs)  # b"bytes".decode()


def test_conversions_answer_their_builtin_type_and_other_calls_a_stand_in() -> None:
    _in_mode("standin")
    key = CalibStandIn("key")
    encoded = key.encode(encoder=None)
    assert type(encoded) is bytes and type(encoded.decode("utf-8")) is str  # what Python's bytes.decode gives
    assert type(key.hexdigest()) is str and type(key.digest()) is bytes and type(key.strftime("%Y")) is str
    assert bytes.fromhex(key.hexdigest()) == b"\x01\x23\xab\xcd"
    assert standins.is_standin(key.generate()) and standins.is_standin(key.strip())  # not a conversion
    _in_mode("none")
    assert key.decode() is None  # another mode's default stays the default
    typed, stripped = set(), set()
    for variant in range(1, 80):  # the mixed modes: a conversion's answer is sometimes its type, a text method's never
        _in_mode(f"mixed{variant}")
        try:
            typed.add(repr(CalibStandIn("name").decode()))
            stripped.add(repr(CalibStandIn("name").strip()))
        except standins.CalibStandInError:  # a mixed mode may make the call fail
            continue
    assert "'text'" in typed and len(typed) > 1  # else the mode's drawn answers ('', None, a stand-in ...)
    assert "'text'" not in stripped  # ``result["info"].split("(")[1]`` of a stand-in flows on as stand-ins
