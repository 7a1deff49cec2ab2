"""Inputs built from the regular expressions x uses, and from checks the search could not invert
before (issue 24 §2): strings a pattern matches (and near misses), a failed ``pattern.match(s)``
rewriting ``s``, ``len(s) != 9``, ``ord(ch) < 0x80``, ``s.isdigit()``.

The reference for "this string matches" is Python's own ``re`` (``re.fullmatch``): the generator
reads patterns with ``re._parser`` but writes strings itself. The end-to-end tests run the real sandbox.
"""

from __future__ import annotations

import ast
import asyncio
import random
import re
import shutil
import subprocess
import sys

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.python import SandboxExecutor
from calib.executors.sandbox.harness import cmplog, hints, regexes, synth

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# isodate 0.6.1, isodate/isoduration.py (ISO8601_PERIOD_REGEX), verbatim
ISO_DURATION = (r"^(?P<sign>[+-])?P(?!\b)(?P<years>[0-9]+([,.][0-9]+)?Y)?(?P<months>[0-9]+([,.][0-9]+)?M)?"
                r"(?P<weeks>[0-9]+([,.][0-9]+)?W)?(?P<days>[0-9]+([,.][0-9]+)?D)?((?P<separator>T)"
                r"(?P<hours>[0-9]+([,.][0-9]+)?H)?(?P<minutes>[0-9]+([,.][0-9]+)?M)?(?P<seconds>[0-9]+([,.][0-9]+)?S)?)?$")
PATTERNS: list[tuple[str | bytes, int]] = [
    (ISO_DURATION, 0),
    (r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})", 0),
    (r"[A-HJ-NP-SUVW]\d{7}[0-9A-J]", 0),  # a Spanish CIF, as validators' docs describe it
    (r"(?i)hello|wor[^l]d", 0),
    (r"(\w+)@(\w+)\.(com|org)", 0),
    (r"(?P<q>[\"'])(.*?)(?P=q)", 0),
    (r"^\s*#\s*(?P<key>\w+)\s*=\s*(?P<value>[^#\n]*)$", re.MULTILINE),
    (r"(?x) \d+ (\.\d+)?  # a number", 0),
    (r"(a)?(?(1)b|c)", 0),
    (r"(\w+\s?)+$", 0),  # a repeat inside an unbounded repeat: written, but not checked with re
    (rb"\x00[\x80-\xff]+[^\x00]", 0),
    (r"[^\W\d_]+\d*", re.ASCII),
]


@pytest.mark.parametrize(("pattern", "flags"), PATTERNS)
def test_generated_strings_match_their_pattern_and_near_misses_do_not(pattern: str | bytes, flags: int) -> None:
    rng = random.Random(7)
    made = regexes.generate(pattern, flags, rng, 3)
    assert len(made) >= 2, made
    for text in made:
        assert re.fullmatch(pattern, text, flags), (pattern, text)
    for miss in regexes.near_misses(pattern, flags, rng, 3):
        assert not re.fullmatch(pattern, miss, flags), (pattern, miss)


def test_the_first_string_fills_every_named_group() -> None:
    # isodate reads every group of the match (groupdict): the first string fills all of them
    first = regexes.generate(ISO_DURATION, 0, random.Random(1), 3)[0]
    groups = re.match(ISO_DURATION, first).groupdict()  # type: ignore[union-attr]
    assert all(v is not None for v in groups.values()), groups


def test_a_pattern_it_cannot_read_gives_nothing() -> None:
    for pattern in ("(", "a{5000}", "x" * 3000, 42, None, b"(?P<x"):
        assert regexes.generate(pattern) == [] and regexes.near_misses(pattern) == []  # type: ignore[arg-type]
    assert regexes.rewrite("abc", "abc", ("(", 0)) == []
    assert regexes.samples(ast.parse("def f(s):\n    return re.match(p, s)\n").body[0], None) == []


def test_pathological_patterns_do_not_hang() -> None:
    # classic catastrophic-backtracking patterns: re.fullmatch("(a+)+$", "a" * 40 + "!") takes hours;
    # the generator neither checks such patterns with re nor writes long strings for them. Run in a
    # child process so that a hang fails the test instead of stopping the suite.
    code = (
        "import random, re\n"
        "from calib.executors.sandbox.harness import regexes\n"
        "for p in [r'(a+)+$', r'(a|aa)*b', r'(x+x+)+y', r'^(\\w+\\s?)*$', r'((ab)*|c)*d', '(' * 90 + ')' * 90]:\n"
        "    made = regexes.generate(p, 0, random.Random(0), 3) + regexes.near_misses(p, 0, random.Random(0), 3)\n"
        "    assert all(len(s) <= regexes.MAX_LENGTH for s in made), (p, made)\n"
        "print('done')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.stdout.strip() == "done", done.stderr


def test_patterns_x_uses_are_mined_from_its_body_and_module() -> None:
    source = (
        "import re\n"
        "WORD = r'[a-z]+'\n"
        "DATE = re.compile(r'\\d{4}-\\d{2}', re.I)\n"
        "UNUSED = re.compile(r'zz+')\n"
        "class K:\n"
        "    TAG = re.compile('<(?P<name>[a-z]+)>')\n"
        "def f(s):\n"
        "    if re.fullmatch(WORD + '!', s) or K.TAG.match(s):\n"
        "        return 1\n"
        "    return DATE.search(s)\n"
    )
    tree = ast.parse(source)
    found = regexes.patterns(tree.body[-1], tree)
    assert sorted(found) == sorted([("[a-z]+!", 0), ("<(?P<name>[a-z]+)>", 0), (r"\d{4}-\d{2}", int(re.I))])
    h = hints.analyse(tree.body[-1], skip_first=False)
    hints.mine_module(tree, h)
    # each pattern's strings are in the literals (and so in the pools of text parameters)
    for pattern, flags in found:
        assert any(re.fullmatch(pattern, s, flags) for s in h.strings), pattern
    assert not any(re.fullmatch("zz+", s) for s in h.strings)


def test_code_handling_encodings_gets_non_ascii_text() -> None:
    tree = ast.parse("def f(line):\n    line.encode('ascii')\n    return line\n")
    h = hints.analyse(tree.body[0], skip_first=False)
    hints.mine_module(tree, h)
    assert any(not s.isascii() for s in h.strings)


def test_the_recorder_keeps_failed_matches_lengths_code_points_and_checks_without_changing_results() -> None:
    source = (
        "import re\n"
        "DATE = re.compile(r'(?P<y>\\d{4})-(?P<m>\\d{2})')\n"
        "def f(s, items):\n"
        "    m = DATE.match(s)\n"
        "    word = re.fullmatch('[a-z]+', s, re.I)\n"
        "    n = len(s)\n"
        "    code = ord(s[0]) if s else -1\n"
        "    try:\n"
        "        number = int(s)\n"
        "    except ValueError:\n"
        "        number = None\n"
        "    return bool(m), bool(word), n != 9, code < 0x80, s[1:4].isdigit(), len(items) > 5, number\n"
    )
    plain: dict = {}
    exec(compile(source, "<t>", "exec"), plain)  # noqa: S102 - the test's own code
    tree = ast.parse(source)
    cmplog.instrument(tree.body[-1])
    recorded: dict = {cmplog.NAME: cmplog.compare}
    exec(compile(tree, "<t>", "exec"), recorded)  # noqa: S102
    cmplog.take_pairs()
    for args in (("abc", [1]), ("2024-01", []), ("12", [1, 2, 3, 4, 5, 6, 7]), ("é", ())):
        assert recorded["f"](*args) == plain["f"](*args)
    with pytest.raises(TypeError):  # ord() of a non-text fails as it would
        recorded["f"]([1], [])
    cmplog.take_pairs()
    recorded["f"]("abc", [1])
    pairs = cmplog.take_pairs()
    assert ("regex", "abc", (r"(?P<y>\d{4})-(?P<m>\d{2})", int(re.UNICODE))) in pairs
    assert ("len", "abc", 9) in pairs and ("ord", "a", 0x80) in pairs
    assert ("charclass", "bc", "isdigit") in pairs and ("number", "abc", "") in pairs
    assert not any(kind.startswith("len") and a == (1,) for kind, a, _ in pairs)  # texts only, not sequences
    assert not any(kind == "regex" and a != "abc" for kind, a, _ in pairs)  # the fullmatch that held


def test_replacements_turn_a_failed_check_into_one_that_passes() -> None:
    rng = random.Random(3)
    values = {"text": "abc", "n": 4}
    found = synth.replacements(values, [("regex", "abc", (ISO_DURATION, 0))], rng=rng)
    assert found and all(re.fullmatch(ISO_DURATION, r["text"]) and r["n"] == 4 for r in found)
    # the part of a text the pattern was tried on (``DATE.match(text.strip())``), inside containers too
    nested = synth.replacements({"rows": [" x "]}, [("regex", "x", (r"\d{2}", 0))], rng=rng)
    assert nested and all(re.fullmatch(r" \d{2} ", r["rows"][0]) for r in nested)
    # ``len(doi.upper()) != 9`` on "abc": texts of length 9; ``doi[1:8].isdigit()`` on "ABCDEFGHI": digits
    assert {len(r["text"]) for r in synth.replacements(values, [("len", "ABC", 9)])} == {9}
    digits = synth.replacements({"doi": "abcdefghi"}, [("charclass", "BCDEFGH", "isdigit")])
    assert digits and digits[0]["doi"][1:8].isdigit() and len(digits[0]["doi"]) == 9
    # ``ord(ch) < 0x80`` on "a": the code point and its neighbours; ``len(s) > 5``: lengths 5, 6 and 4
    assert [ord(r["text"][0]) for r in synth.replacements(values, [("ord", "a", 0x80)])] == [0x80, 0x81, 0x7F]
    assert {len(r["text"]) for r in synth.replacements(values, [("len_order", "abc", 5)])} == {4, 5, 6}
    # ``int(prefix)`` that refused the empty field after "/": a number there
    assert synth.replacements({"spec": "10.0.0.0/"}, [("number", "", "")]) == [{"spec": "10.0.0.0/1"}]
    assert synth.replacements(values, [("regex", "zzz", (r"\d", 0))]) == []  # not from this input


# --- end to end -------------------------------------------------------------------------------------------


def _compare(truth: str, context: str):
    executor = SandboxExecutor(ExecutorConfig(budget_seconds=4.0))
    return asyncio.run(executor.compare(truth, [truth], context=context))


GATED = (
    "def parse_stamp(text):\n"
    "    m = STAMP.fullmatch(text)\n"
    "    if m is None:\n"
    "        raise ValueError('not a stamp')\n"
    "    parts = m.groupdict()\n"
    "    if parts['sep'] == '/':\n"
    "        return ('us', parts['year'], parts['month'])\n"
    "    return ('iso', parts['year'], parts['month'])\n"
)
STAMP = r"(?P<year>\d{4})(?P<sep>[-/])(?P<month>\d{2})"


@needs_bwrap
def test_a_function_gated_by_a_module_level_compiled_regex_becomes_conclusive() -> None:
    context = f"import re\nSTAMP = re.compile(r'{STAMP}')\n"
    result = _compare(GATED, context)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0
    assert any(re.fullmatch(STAMP, ast.literal_eval(i.state["args"]["text"])) for i in result.inputs
               if i.valid and i.state["args"]["text"].startswith("'"))


@needs_bwrap
def test_a_pattern_built_at_run_time_is_matched_through_the_recorded_failure() -> None:
    # the pattern is not a literal (no static mining): only the failed fullmatch, recorded while
    # exploring, says what the text must look like
    context = f"import re\nSTAMP = re.compile(''.join([{STAMP[:20]!r}, {STAMP[20:]!r}]))\n"
    tree = ast.parse(context + GATED)
    assert regexes.patterns(tree.body[-1], tree) == []
    result = _compare(GATED, context)
    assert result.conclusive, result.reason
    assert any(re.fullmatch(STAMP, ast.literal_eval(i.state["args"]["text"])) for i in result.inputs
               if i.valid and i.state["args"]["text"].startswith("'"))


@needs_bwrap
def test_code_point_and_length_checks_are_passed() -> None:
    # unidecode's _get_repl_str and validators' es_cif, reduced: branches on ord(char) ranges and on a
    # text of length 9 with seven digits inside
    truth = (
        "def classify(code):\n"
        "    code = code.upper()\n"
        "    if len(code) != 9:\n"
        "        return 'length'\n"
        "    point = ord(code[0])\n"
        "    if point > 0xeffff:\n"
        "        return 'private'\n"
        "    if not code[1:8].isdigit():\n"
        "        return 'letters'\n"
        "    if point < 0x80:\n"
        "        return 'ascii'\n"
        "    return int(code[1:8]) % 23\n"
    )
    result = _compare(truth, "")
    assert result.conclusive, result.reason
    assert result.coverage == 1.0


# fastimport 0.9.14, fastimport/helpers.py ``parse_tz`` (its body, verbatim but for comments): ``tz[1:-2]`` of an input
# too short to reach it is empty, and ``int(b"")`` refuses it
PARSE_TZ = (
    "def parse_tz(tz):\n"
    "    sign_byte = tz[0:1]\n"
    "    if sign_byte not in (b'+', b'-'):\n"
    "        raise ValueError(tz)\n"
    "    sign = {b'+': +1, b'-': -1}[sign_byte]\n"
    "    hours = int(tz[1:-2])\n"
    "    minutes = int(tz[-2:])\n"
    "    return sign * 60 * (60 * hours + minutes)\n"
)


def test_an_int_of_an_empty_slice_of_a_short_input_wants_digits_where_the_slice_starts() -> None:
    tree = ast.parse(PARSE_TZ)
    cmplog.instrument(tree.body[0])
    recorded: dict = {cmplog.NAME: cmplog.compare}
    exec(compile(tree, "<t>", "exec"), recorded)  # noqa: S102 - the test's own code
    cmplog.take_pairs()
    with pytest.raises(ValueError, match="invalid literal for int"):  # raised on to x as int() raises it
        recorded["parse_tz"](b"+")
    pairs = cmplog.take_pairs()
    assert ("at", b"+", (1, b"1234")) in pairs
    (found,) = synth.replacements({"tz": b"+"}, [("at", b"+", (1, b"1234"))])
    assert found == {"tz": b"+1234"}
    assert recorded["parse_tz"](found["tz"]) == 60 * (60 * 12 + 34)  # the digits reach both fields
    cmplog.take_pairs()
    with pytest.raises(ValueError):  # a text the slice reaches, not a number: kept as before, no digits wanted
        recorded["parse_tz"](b"+abcd")
    assert not any(kind == "at" and b == (1, b"1234") for kind, _, b in cmplog.take_pairs())


@needs_bwrap
def test_a_timezone_parser_fed_a_short_input_becomes_conclusive() -> None:
    result = _compare(PARSE_TZ, "")
    assert result.conclusive, result.reason
    assert any(i.valid and i.output and '"return":' in i.output and "1234" in i.state["args"]["tz"]
               for i in result.inputs)


# kconfiglib's ``_string_special_search = re.compile(...).search`` called as ``_string_special_search(s, i)``
# (``Kconfig._expand_str``, tuning sample of issue 24's twenty-fourth round: 0.71 of its lines before)
SPECIAL = "import re\n_special_search = re.compile(''.join(['\"', '|', \"'\", r'|\\\\'])).search\n"
EXPAND = (
    "def expand(s, i):\n"
    "    match = _special_search(s, i)\n"
    "    if not match:\n"
    "        return 'unterminated'\n"
    "    if match.group() == '\\\\':\n"
    "        return 'escape at %d' % match.start()\n"
    "    return 'quote at %d' % match.start()\n"
)


def test_a_module_name_bound_to_a_pattern_s_method_is_recorded_as_that_method() -> None:
    tree = ast.parse(SPECIAL + EXPAND)
    cmplog.instrument(tree.body[-1], tree)
    namespace: dict = {cmplog.NAME: cmplog.compare}
    exec(compile(tree, "<t>", "exec"), namespace)  # noqa: S102
    cmplog.take_pairs()
    pattern = namespace["_special_search"].__self__
    assert namespace["expand"]("abc", 0) == "unterminated"
    pairs = cmplog.take_pairs()
    assert ("regex", "abc", (pattern.pattern, int(pattern.flags))) in pairs
    made = synth.replacements({"s": "abc", "i": 0}, pairs, rng=random.Random(0))
    assert made and all(pattern.search(m["s"]) for m in made)  # Python's re is the reference
    assert {namespace["expand"](m["s"], 0)[:5] for m in made} <= {"escap", "quote"}
    # the instrumented body reads back as written, and a name bound otherwise is called as it is
    assert "__calib_cmp__.bare(_special_search" in ast.unparse(tree.body[-1])
    assert ast.unparse(cmplog.Plain().visit(tree.body[-1])) == ast.unparse(ast.parse(EXPAND).body[0])
    other = ast.parse("def search(s, i):\n    return s\n_special_search = search\n" + EXPAND)
    cmplog.instrument(other.body[-1], other)
    assert "bare" not in ast.unparse(other.body[-1])


# a macro call ``$(name)``: no literal of the file spells one (the pattern is joined at run time)
MACRO = "import re\n_macro_search = re.compile(''.join([r'\\$', r'\\(', r'\\w+', r'\\)'])).search\n"
MACROS = (
    "def macros(s, i=0):\n"
    "    found = _macro_search(s, i)\n"
    "    if not found:\n"
    "        return None\n"
    "    return found.start(), found.group()[2:-1]\n"
)


@needs_bwrap
def test_a_function_searching_with_a_bound_pattern_method_becomes_conclusive() -> None:
    result = _compare(MACROS, MACRO)
    assert result.conclusive, result.reason
    texts = [ast.literal_eval(i.state["args"]["s"]) for i in result.inputs if i.valid
             and i.state["args"]["s"].startswith("'")]
    assert any(re.search(r"\$\(\w+\)", t) for t in texts), texts
