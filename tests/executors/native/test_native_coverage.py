"""Line coverage of x in the C and C++ executors (calib/executors/native/coverage.py).

The end-to-end tests compile and run real code in the sandbox; every expected coverage is the number of
x's lines gcc gives code to at ``-O0`` (gcov's executable lines), counted by hand in the comment next to
the source, and the lines the inputs reach, derived from the inputs. The parser tests read the report gcov
itself writes for a small program built here on the host (trusted code), then damaged copies of it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess

import pytest

from calib.executors.native import LANGUAGES
from calib.executors.native.coverage import (
    GCOV_OUTPUT_BYTES,
    LineCoverage,
    copies_of,
    locate_gcov,
    read_gcov,
    write_copies,
    x_span,
)
from calib.executors.native.language import COUNTS_BYTES
from tests.executors.native.test_native import compare, needs

# gcov's executable lines (gcc -O0 gives each a line record): 1 (the entry), 2, 3 (the test), 4, 5, 6 (the
# branch) and 8. Lines 7 and 9 (braces) have no code of their own: gcc puts the epilogue on the return
# lines. Lines 4-6 are never reached: no integer's square is 2, even modulo 2**32 (squares are 0 or 1
# modulo 4), so every input reaches 1, 2, 3 and 8: 4 of 7 lines.
UNREACHABLE = """int f(int x) {
  int y = x * 2;
  if (x * x == 2) {
    y = y * 3;
    y = y - 7;
    return y;
  }
  return y + 1;
}"""
# x's own lines: 1, 2, 3 (x < 0 only), 4 (x >= 0 only), all reached when the inputs have both signs; the
# helper after it is global (so gcc emits it) and never called: its 8 lines of code are all unexecuted,
# as are the harness's glue lines that are not x's: they must not count.
REACHABLE = """int fold(int x) {
  if (x < 0)
    return 1 - x;
  return x;
}
int unused_helper(int n) {
  int s = 0;
  for (int i = 0; i < n; i++)
    s += i * i;
  if (s > 100)
    s -= 100;
  else
    s += 7;
  return s;
}"""
FOLD_EQUIVALENT = "int fold(int v) { return v < 0 ? 1 - v : v; }"


def _both_signs(result) -> None:
    xs = [row.state["x"] for row in result.inputs]
    assert any(x < 0 for x in xs) and any(x >= 0 for x in xs), xs


@needs("c")
def test_c_unreachable_branch_is_inconclusive_for_coverage():
    result = compare("c", UNREACHABLE, [UNREACHABLE])
    assert result.valid_inputs == 10 and result.distinct_outputs >= 2
    assert result.coverage == pytest.approx(4 / 7) and result.uncovered_lines == (4, 5, 6)
    assert not result.conclusive and result.reason == "coverage 0.57 < 0.8"
    assert result.warnings == () and result.candidates[0].sim_func is None


@needs("c")
def test_c_fully_reached_function_is_conclusive_and_only_its_own_lines_count():
    result = compare("c", REACHABLE, [FOLD_EQUIVALENT])
    _both_signs(result)
    assert result.conclusive, result.reason
    assert result.coverage == 1.0 and result.uncovered_lines == () and result.warnings == ()
    assert result.candidates[0].sim_func == 1.0


@needs("c")
def test_a_static_x_builds_and_is_measured():
    # nothing global to make local in its unit but calib_call (objcopy 2.40 fails on an empty list);
    # lines 1, 2 (the test), 3 (x > 3) and 4 (x <= 3), all reached by inputs of both kinds
    static = "static inline int f(int x) {\n  if (x > 3)\n    return x;\n  return -x;\n}"
    result = compare("c", static, [static])
    xs = [row.state["x"] for row in result.inputs]
    assert any(x > 3 for x in xs) and any(x <= 3 for x in xs), xs
    assert result.conclusive and result.coverage == 1.0, result.reason


@needs("cpp")
def test_cpp_the_same_pair():
    # the same sources are C++ too, with the same executable lines at -O0 (hand counts above)
    unreachable = compare("cpp", UNREACHABLE, [UNREACHABLE])
    assert unreachable.coverage == pytest.approx(4 / 7) and unreachable.uncovered_lines == (4, 5, 6)
    assert not unreachable.conclusive and unreachable.reason == "coverage 0.57 < 0.8"
    reachable = compare("cpp", REACHABLE, [REACHABLE])
    _both_signs(reachable)
    assert reachable.conclusive and reachable.coverage == 1.0 and reachable.warnings == ()


# x behaves the same in both builds but for one thing: its coverage build (-O0, where __OPTIMIZE__ is not
# defined) dies on x == 4. Run on -3, 4, -1, 5, 6, 7, 8, 9 it is two processes: -3 then the death on 4;
# -1 to 9 after the restart. Executable lines: 1-8, 10 and 12 (10 lines; 9, 11 are preprocessor lines,
# 13 the brace). Line 6 is reached only by the input that killed its process: not counted. Line 4 is reached
# only by -3, whose process died later (kept because the harness writes the counts after each input),
# line 8 only by 9 in the second process (kept because gcov merges both processes' counts): 9 of 10.
DIES_IN_COVERAGE_BUILD = """int f(int x) {
  int r = x + 1;
  if (x == -3)
    r = 100;
  if (x == 4)
    r = 200;
  if (x == 9)
    r = 300;
#ifndef __OPTIMIZE__
  if (x == 4) { volatile int *p = 0; *p = 1; }
#endif
  return r;
}"""


@needs("c")
def test_a_death_in_the_coverage_run_keeps_the_counts_of_earlier_inputs():
    inputs = [{"x": x} for x in (-3, 4, -1, 5, 6, 7, 8, 9)]
    result = compare("c", DIES_IN_COVERAGE_BUILD, [DIES_IN_COVERAGE_BUILD], inputs=inputs)
    assert result.valid_inputs == 8  # the normal build never dies
    assert result.coverage == pytest.approx(9 / 10) and result.uncovered_lines == (6,)
    assert result.conclusive, result.reason


@needs("c")
def test_without_gcov_the_sample_is_inconclusive(tmp_path, monkeypatch):
    # a PATH with the C toolchain and bubblewrap but no gcov: the locator finds none
    for tool in ("gcc", "sh", "nm", "objcopy", "bwrap"):
        os.symlink(shutil.which(tool), tmp_path / tool)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert locate_gcov(shutil.which("gcc")) is None and "gcov" not in LANGUAGES["c"].find_tools().exe
    result = compare("c", REACHABLE, [REACHABLE])
    assert result.valid_inputs == 10 and math.isnan(result.coverage) and not result.conclusive
    assert result.reason == "coverage_unavailable: gcov is not installed (apt-get install gcc)"
    assert result.candidates[0].sim_func is None


@needs("c")
def test_a_failing_coverage_build_makes_the_sample_inconclusive():
    only_optimized = "int f(int x) {\n#ifndef __OPTIMIZE__\n#error no coverage build\n#endif\n  return x;\n}"
    result = compare("c", only_optimized, [only_optimized])
    assert result.valid_inputs == 10 and math.isnan(result.coverage) and not result.conclusive
    assert result.reason.startswith("coverage_unavailable: x's coverage build failed (compile error:")
    assert "no coverage build" in result.reason and "\n" not in result.reason


@needs("c")
def test_x_that_tampers_with_its_counts_only_loses_its_own_coverage():
    # writes junk over its counts (in its own /tmp: GCOV_PREFIX) and leaves a link there, which reaches
    # nothing outside its process; gcov rejects the copy inside its sandbox: inconclusive, nothing raised
    hostile = r"""int f(int x) {
  const char *d = getenv("GCOV_PREFIX");
  if (d) {
    char p[512];
    snprintf(p, sizeof p, "%s/function.gcda", d);
    FILE *o = fopen(p, "w");
    if (o) { fputs("junk", o); fclose(o); }
    snprintf(p, sizeof p, "%s/function.gcno", d);
    symlink("/build/prog", p);
  }
  return x + 1;
}"""
    result = compare("c", hostile, [hostile])
    assert result.valid_inputs == 10 and not result.conclusive
    expected = "coverage_unavailable: the coverage report failed (exit 2: function.gcda:not a gcov data"
    assert result.reason.startswith(expected), result.reason


# --- the report parser, on gcov's own output -----------------------------------------------------------

PROGRAM = REACHABLE + "\nint main(void) { return fold(-1) + fold(2) - 4; }\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> bytes:
    """gcov's JSON report of PROGRAM (x = fold on lines 1-5, unused_helper on 6-15, main on 17), built,
    run and read here on the host: trusted code."""
    gcov = locate_gcov(shutil.which("gcc"))
    if gcov is None or shutil.which("gcc") is None:
        pytest.skip("gcc and gcov are needed")
    work = tmp_path_factory.mktemp("gcov")
    (work / "function.c").write_text(PROGRAM)
    subprocess.run(["gcc", "-O0", "--coverage", "-c", "function.c", "-o", "function.o"], cwd=work, check=True)
    subprocess.run(["gcc", "--coverage", "function.o", "-o", "prog"], cwd=work, check=True)
    subprocess.run(["./prog"], cwd=work, check=True)
    return subprocess.run([gcov, "--json-format", "--stdout", "--relative-only", "function.gcda"], cwd=work,
                          check=True, capture_output=True).stdout


def test_read_gcov_counts_only_x(report):
    assert read_gcov(report, "function.c", "fold", (1, 15)) == LineCoverage(1.0, 4, 4, ())
    # the helper is in the report, all of its 8 code lines unexecuted (lines 6-9, 10, 11, 13, 14)
    assert read_gcov(report, "function.c", "unused_helper", (6, 15)) == LineCoverage(0.0, 8, 0, (1, 2, 3, 4, 5, 6,
                                                                                                  8, 9))
    # x is found by its name where the harness placed it, not elsewhere
    assert read_gcov(report, "function.c", "fold", (6, 15)).startswith("gcov's report has no function fold")


def test_read_gcov_counts_a_line_reached_in_any_process(report):
    """One report per process's copy: line 3 (x < 0) reached only in the first, line 4 only in the second."""
    doc = json.loads(report)
    (entry,) = doc["files"]

    def without(line: int) -> bytes:
        lines = [{**item, "count": 0} if item["line_number"] == line else item for item in entry["lines"]]
        return json.dumps({**doc, "files": [{**entry, "lines": lines}]}).encode()

    assert read_gcov(without(3) + b"\n" + without(4), "function.c", "fold", (1, 15)) == LineCoverage(1.0, 4, 4, ())
    assert read_gcov(without(3) + b"\n" + without(3), "function.c", "fold", (1, 15)) == LineCoverage(0.75, 4, 3,
                                                                                                       (3,))


def test_every_copy_of_the_counts_is_kept_as_sent(tmp_path):
    events = [{"i": 0, "cov": "00ff"}, {"i": 1, "cov": "0a0b0c"}, {"i": 2}]
    assert copies_of(events) == [bytes([0, 255]), bytes([10, 11, 12])]  # every input's copy (one process each)
    assert copies_of([{"cov": "zz"}, {"cov": 5}]) == []
    assert copies_of([{"cov": "00" * (COUNTS_BYTES + 1)}]) == []
    write_copies(str(tmp_path / "two"), [b"ab", b"cd"], "function.gcda")
    assert (tmp_path / "two" / "p0001" / "function.gcda").read_bytes() == b"cd"
    write_copies(str(tmp_path / "none"), [], "function.gcda")
    assert [p.name for p in (tmp_path / "none").iterdir()] == ["p0000"] and not any((tmp_path / "none/p0000").iterdir())


def test_read_gcov_gives_a_reason_for_anything_unusable(report):
    doc = json.loads(report)
    (entry,) = doc["files"]
    damaged = [
        (b"", "no JSON report from gcov"),
        (report[: len(report) // 2], "no JSON report from gcov"),
        (b"x" * GCOV_OUTPUT_BYTES, f"gcov's report is over {GCOV_OUTPUT_BYTES} bytes"),
        (json.dumps({**doc, "files": [{**entry, "file": "main.c"}]}).encode(), "gcov's report has no functions"),
        (json.dumps({**doc, "files": [{**entry, "lines": {}}]}).encode(), "gcov's report has no functions"),
        (json.dumps({**doc, "files": [{**entry, "lines": [*entry["lines"], {"line_number": True, "count": 1}]}]})
         .encode(), "malformed line record"),
        (json.dumps({**doc, "files": [{**entry, "lines": [{**entry["lines"][0], "count": -1}]}]}).encode(),
         "malformed line record"),
        (json.dumps({**doc, "files": [{**entry, "lines": []}]}).encode(), "gcov's report lists no executable line"),
        (b"[" * 100000 + b"]" * 100000, "no JSON report from gcov"),
    ]
    for raw, why in damaged:
        got = read_gcov(raw, "function.c", "fold", (1, 15))
        assert isinstance(got, str) and got.startswith(why), (raw[:80], got)


def test_x_span_is_where_the_template_puts_x():
    lang = LANGUAGES["c"]
    sig = lang.parse(REACHABLE)
    first, last = x_span("c", "function.c", lang.prepare, REACHABLE, sig)
    text = lang.sources(REACHABLE, sig)["function.c"].splitlines()
    assert text[first - 1: last] == REACHABLE.splitlines()
