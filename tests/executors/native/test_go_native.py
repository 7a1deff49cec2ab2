"""The Go executor: x's line coverage (go tool cover), methods and x's file context, one process per input.

End-to-end tests compile and run real code in the sandbox. Expected coverages are counted by hand in the
comment next to each source, by the rule of docs/native-executors.md ("Go"): a line of x is executable
when a statement starts on it (not the ``func`` line, braces, ``else``, ``case`` labels), executed when an
input ran the cover block holding it. Expected outputs come from a Python re-implementation written here.
The report program's tests build it and a cover-instrumented file on the host (trusted code) and damage
the copies of the counters the way a process running x could.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from dataclasses import replace

import pytest

from calib.executors.native import LANGUAGES
from calib.executors.native.coverage import LineCoverage, write_copies
from calib.executors.native.coverage_go import (
    COUNT_NAME,
    GO_COVERAGE,
    locate_cover,
    read_go_each,
    read_go_report,
    x_lines,
)
from calib.executors.native.go import parse_go, prepare_go
from calib.executors.native.language import HARNESS_ROOT
from calib.executors.native.types import Unsupported
from tests.executors.native.test_native import canon, compare, needs

# statements start on lines 2 (y :=), 3 (if), 4, 5, 6 (the branch) and 8: 6 executable lines. No integer's
# square is 2, even modulo 2**64 (squares are 0 or 1 modulo 4), so every input runs 2, 3 and 8: 3 of 6.
UNREACHABLE = """func f(x int) int {
	y := x * 2
	if x*x == 2 {
		y = y * 3
		y = y - 7
		return y
	}
	return y + 1
}"""
# x's lines 2 (if), 3 (x < 0 only) and 4 (x >= 0 only), all reached when the inputs have both signs. The
# helper after it (x's source) and the one in the context are never called: their lines must not count.
REACHABLE = """func fold(x int) int {
	if x < 0 {
		return 1 - x
	}
	return x
}

func unusedHelper(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i * i
	}
	return s
}"""
def wrap(n: int) -> int:
    """n as Go's 64-bit int holds it (two's complement wrap-around)."""
    return (n + 2**63) % 2**64 - 2**63


FOLD_CONTEXT = "package p\n\nfunc alsoUnused(n int) int {\n\tif n > 3 {\n\t\treturn n\n\t}\n\treturn -n\n}\n"


@needs("go")
def test_unreachable_branch_is_inconclusive_for_coverage():
    result = compare("go", UNREACHABLE, [UNREACHABLE])
    assert result.valid_inputs == 10 and result.distinct_outputs >= 2
    assert result.coverage == pytest.approx(3 / 6) and result.uncovered_lines == (4, 5, 6)
    assert not result.conclusive and result.reason == "coverage 0.50 < 0.8"
    assert result.warnings == () and result.candidates[0].sim_func is None


@needs("go")
def test_fully_reached_function_is_conclusive_and_only_its_own_lines_count():
    result = compare("go", REACHABLE, ["func fold(v int) int { if v >= 0 { return v }; return 1 - v }"],
                     context=FOLD_CONTEXT)
    xs = [row.state["x"] for row in result.inputs]
    assert any(x < 0 for x in xs) and any(x >= 0 for x in xs), xs
    assert result.conclusive, result.reason
    assert result.coverage == 1.0 and result.uncovered_lines == () and result.warnings == ()
    assert result.candidates[0].sim_func == 1.0


@needs("go")
def test_without_the_shared_report_program_the_coverage_build_makes_its_own(monkeypatch):
    # no build cache (calib/executors/native/warm.py): x's coverage build builds report.go itself
    monkeypatch.setitem(LANGUAGES, "go", replace(LANGUAGES["go"], warm=None))
    result = compare("go", UNREACHABLE, [UNREACHABLE])
    assert result.coverage == pytest.approx(3 / 6) and result.uncovered_lines == (4, 5, 6)


STACK_CONTEXT = """package stack

import (
	"errors"
	"fmt"
)

// Stack is a bounded stack of ints.
type Stack struct {
	items []int
	limit int
	drops int
	log   map[string]int
	next  *Stack
}

var ErrFull = errors.New("full")

func (s *Stack) full() bool { return s.limit > 0 && len(s.items) >= s.limit }

func (s *Stack) Push(v int) error {
	if s.full() {
		s.drops++
		return ErrFull
	}
	s.items = append(s.items, v)
	s.log["push"]++
	return nil
}

func main() { fmt.Println((&Stack{limit: 1}).Push(3)) }
"""
STACK_PUSH = STACK_CONTEXT[STACK_CONTEXT.index("func (s *Stack) Push"):STACK_CONTEXT.index("func main")].strip()
PUSH_EQUIVALENT = """func (st *Stack) Push(x int) error {
	if st.limit <= 0 || len(st.items) < st.limit {
		st.items = append(st.items, x)
		st.log["push"] += 1
		return nil
	}
	st.drops += 1
	return ErrFull
}"""
PUSH_NO_DROPS = """func (st *Stack) Push(x int) error {
	if st.full() { return ErrFull }
	st.items = append(st.items, x); st.log["push"]++; return nil
}"""


@needs("go")
def test_method_on_a_struct_of_the_file_context_reports_the_receiver():
    result = compare("go", STACK_PUSH, [PUSH_EQUIVALENT, PUSH_NO_DROPS], context=STACK_CONTEXT)
    assert result.conclusive, result.reason
    fulls = []
    for row in result.inputs:
        s, v = row.state["s"], row.state["v"]
        assert sorted(s) == ["drops", "items", "limit"]  # the fields of supported types: the input state
        full = s["limit"] > 0 and len(s["items"]) >= s["limit"]
        fulls.append(full)
        # reference: a full stack counts a drop and returns ErrFull (errors.New's *errorString, field s);
        # else v is pushed and the log (a map: empty, never nil, in the harness) counts it
        after = {**s, "items": s["items"] if full else [*s["items"], v], "drops": s["drops"] + full,
                 "log": {} if full else {"push": 1}, "next": None}
        expected = {"return": {"s": "full"} if full else None, "args": {"s": after}, "stdout": ""}
        assert row.output == canon(expected)
    assert any(fulls) and not all(fulls), fulls  # both branches: every line of Push ran
    assert result.coverage == 1.0
    equivalent, no_drops = result.candidates
    assert equivalent.sim_func == 1.0
    assert list(no_drops.matches) == [not full for full in fulls]


# The paper's appendix style: a function of a real-looking file, depending on the file's type, constant and
# helper. Lines of x with a statement: 2, 3, 4, 5, 6, 8, 9, 11, 13 (9 lines), all reached by INVENTORY.
INVENTORY_CONTEXT = """package inventory

import (
	"sort"
	"strings"
)

// Item is one line of an inventory.
type Item struct {
	Name string
	Qty  int
}

const maxQty = 50

func normalize(name string) string {
	return strings.ToLower(strings.TrimSpace(name))
}

// Names lists the items in stock, sorted.
func Names(items []Item) []string {
	var out []string
	for _, it := range items {
		if it.Qty > 0 {
			out = append(out, it.Name)
		}
	}
	sort.Strings(out)
	return out
}
"""
RESTOCK = """func Restock(items []Item, name string, qty int) int {
	key := normalize(name)
	total := 0
	for i := range items {
		if normalize(items[i].Name) == key {
			items[i].Qty += qty
		}
		if items[i].Qty > maxQty {
			items[i].Qty = maxQty
		}
		total += items[i].Qty
	}
	return total
}"""
RESTOCK_UNCAPPED = """func Restock(items []Item, name string, qty int) int {
	t := 0
	for i, it := range items {
		if normalize(it.Name) == normalize(name) { items[i].Qty += qty }
		t += items[i].Qty
	}
	return t
}"""
INVENTORY = [{"items": [{"Name": "Bolt", "Qty": 3}, {"Name": "nut", "Qty": 7}], "name": " bolt", "qty": 4},
             {"items": [{"Name": "Bolt", "Qty": 48}], "name": "BOLT", "qty": 5},
             {"items": [], "name": "x", "qty": 1},
             {"items": [{"Name": "a", "Qty": 60}, {"Name": "b", "Qty": 1}], "name": "c", "qty": 2},
             {"items": [{"Name": "Gear ", "Qty": 0}], "name": "gear", "qty": 9},
             {"items": [{"Name": "a", "Qty": 1}], "name": "A", "qty": -3},
             {"items": [{"Name": "z", "Qty": 10}, {"Name": "Z", "Qty": 45}], "name": "z", "qty": 10},
             {"items": [{"Name": "q", "Qty": 2}], "name": "", "qty": 100}]


def _restock(items: list[dict], name: str, qty: int, cap: bool = True) -> tuple[list[dict], int]:
    out = []
    for it in items:
        q = it["Qty"] + (qty if it["Name"].strip().lower() == name.strip().lower() else 0)
        out.append({**it, "Qty": min(q, 50) if cap else q})
    return out, sum(it["Qty"] for it in out)


@needs("go")
def test_appendix_style_function_uses_its_files_type_constant_and_helper():
    result = compare("go", RESTOCK, [RESTOCK_UNCAPPED], context=INVENTORY_CONTEXT, inputs=INVENTORY)
    assert result.conclusive and result.coverage == 1.0, result.reason
    for row in result.inputs:
        items, total = _restock(**row.state)
        assert row.output == canon({"return": total, "args": {"items": items}, "stdout": ""})
    expected = [_restock(**s) == _restock(**s, cap=False) for s in INVENTORY]
    assert list(result.candidates[0].matches) == expected and not all(expected)


@needs("go")
def test_a_package_variable_does_not_leak_between_inputs():
    # one process per input: `calls` starts at 0 for every input, so x returns 100 + x everywhere
    counter = "func Next(x int) int {\n\tcalls++\n\treturn calls*100 + x\n}"
    result = compare("go", counter, [counter], context="package p\n\nvar calls int\n")
    assert result.conclusive, result.reason
    assert [json.loads(r.output)["return"] for r in result.inputs] == [wrap(100 + r.state["x"]) for r in result.inputs]


@needs("go")
def test_struct_parameters_and_results_are_json_objects():
    context = "type Point struct {\n\tX, Y int\n\tTag string `json:\"tag\"`\n}\n"
    move = "func Move(p *Point, d Point) Point {\n\tp.X += d.X\n\tp.Y += d.Y\n\treturn *p\n}"
    result = compare("go", move, ["func Move(a *Point, b Point) Point { a.X, a.Y = a.X+b.X, a.Y+b.Y; return *a }"],
                     context=context)
    assert result.conclusive and result.candidates[0].sim_func == 1.0, result.reason
    for row in result.inputs:
        p, d = row.state["p"], row.state["d"]
        moved = {**p, "X": p["X"] + d["X"], "Y": p["Y"] + d["Y"]}
        moved = {**moved, "X": wrap(moved["X"]), "Y": wrap(moved["Y"])}
        assert row.output == canon({"return": moved, "args": {"p": moved, "d": d}, "stdout": ""})


def test_unsupported_go_samples_say_why():
    cases = [
        ("func F(x int) int { return thing.Do(x) }", 'import "github.com/a/thing"',
         "external package github.com/a/thing"),
        ("func (s *Stack) Len() int { return 0 }", "", "receiver type Stack is not declared in x's file"),
        ("func (s *Stack[T]) Len() int { return 0 }", "type Stack[T any] struct{}", "generic type Stack[T]"),
        ("func F(m map[string]int) int { return 0 }", "", "map[string]int"),
    ]
    for source, context, why in cases:
        with pytest.raises(Unsupported, match=None) as info:
            parse_go(source, context)
        assert str(info.value).startswith(why), (source, str(info.value))


def test_prepare_builds_what_the_function_needs_of_its_file():
    sig = parse_go(STACK_PUSH, STACK_CONTEXT)
    assert [(p.name, p.mutable) for p in sig.params] == [("s", True), ("v", False)] and sig.recv == "Stack"
    text = "package main\n" + prepare_go(PUSH_NO_DROPS, sig)
    lines = text.splitlines()
    first, last = x_lines(PUSH_NO_DROPS)
    assert lines[first - 1: last] == PUSH_NO_DROPS.splitlines()  # x's lines keep their numbers
    assert lines[1] == 'import (errors "errors"); var _ = errors.New'  # fmt is used by main only
    assert "func (s *Stack) full()" in text and "type Stack struct" in text and "var ErrFull" in text
    assert "func main" not in text and "func (s *Stack) Push" not in text  # the variant's own Push only


# --- hostile x and the report --------------------------------------------------------------------------

@needs("go")
def test_x_that_reaches_for_its_counters_gets_no_coverage_and_nothing_raises():
    # linkname makes x's array the cover tool's calibCover: x could write its counters; not trusted
    forger = 'import _ "unsafe"\n\n//go:linkname forged main.calibCover\nvar forged [3]uint32\n\n' \
             "func f(x int) int {\n\tfor i := range forged {\n\t\tforged[i] = 1\n\t}\n\treturn x + 1\n}"
    result = compare("go", forger, [forger])
    assert result.valid_inputs == 10 and math.isnan(result.coverage) and not result.conclusive
    assert result.reason == ("coverage_unavailable: x's file uses //go:linkname, through which it could write "
                             "its own coverage counters")
    # declaring the counters' name itself breaks only x's coverage build
    squatter = "var calibCover = [4]uint32{1, 1, 1, 1}\n\nfunc f(x int) int {\n\treturn x + 1\n}"
    result = compare("go", squatter, [squatter])
    assert result.valid_inputs == 10 and not result.conclusive
    assert result.reason.startswith("coverage_unavailable: x's coverage build failed (compile error:")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """UNREACHABLE as function.go (x on line 3, as the template puts it), the cover tool's copy, and the
    report program, built here on the host from calib's sources (trusted code)."""
    go = shutil.which("go")
    cover = locate_cover(os.path.realpath(go)) if go else None
    if go is None or cover is None:
        pytest.skip("go and its cover tool are needed")
    work = tmp_path_factory.mktemp("gocover")
    (work / "cov").mkdir()
    (work / "function.go").write_text("package main\n\n" + UNREACHABLE + "\n")
    subprocess.run([cover, "-mode=count", "-var=calibCover", "-o", "cov/function.go", "function.go"], cwd=work,
                   check=True)
    shutil.copy(HARNESS_ROOT / "go" / "report.go", work / "report.go")
    subprocess.run([go, "build", "-o", "report", "report.go"], cwd=work, check=True,
                   env={**os.environ, "GO111MODULE": "off", "CGO_ENABLED": "0"})
    return work


def _report(work, copies: list[bytes]) -> subprocess.CompletedProcess:
    target = work / f"copies{len(list(work.glob('copies*')))}"
    write_copies(str(target), copies, COUNT_NAME)
    return subprocess.run([str(work / "report"), str(work), str(target)], capture_output=True)


def test_report_program_reads_the_copies_and_refuses_damaged_ones(built):
    # the cover tool's three blocks of f: [0] lines 3-5 (entry to the if), [1] line 10 (return y + 1),
    # [2] lines 5-9 (the branch); counters as the harness sends them: little-endian uint32s
    def counts(*values: int) -> bytes:
        return b"".join(v.to_bytes(4, "little") for v in values)

    span = x_lines(UNREACHABLE)
    done = _report(built, [counts(5, 5, 0), counts(1, 0, 0)])
    assert done.returncode == 0, done.stderr
    assert read_go_report(done.stdout, "f", "", span) == LineCoverage(0.5, 6, 3, (4, 5, 6))
    # per copy, in copy order (x's lines): the first input reached 2, 3 and 8, the second 2 and 3
    assert read_go_each(done.stdout, "f", "", span) == (frozenset({2, 3, 4, 5, 6, 8}),
                                                         [frozenset({2, 3, 8}), frozenset({2, 3})])
    # a line run in any copy is run
    done = _report(built, [counts(1, 1, 0), counts(1, 0, 7)])
    assert read_go_report(done.stdout, "f", "", span) == LineCoverage(1.0, 6, 6, ())
    # forged values only mark blocks as run; no copy at all: nothing ran
    forged = read_go_report(_report(built, [counts(2**32 - 1, 0, 0)]).stdout, "f", "", span)
    assert forged == LineCoverage(2 / 6, 6, 2, (4, 5, 6, 8))
    assert read_go_report(_report(built, []).stdout, "f", "", span) == LineCoverage(0.0, 6, 0, (2, 3, 4, 5, 6, 8))
    for damaged in (b"", b"\x01\x02\x03", counts(1, 1, 1, 1), b"\xff" * (1 << 20)):
        done = _report(built, [counts(1, 1, 1), damaged])
        assert done.returncode == 1 and done.stdout == b""
        assert b"the copy of the counters in p0001 has" in done.stderr and b"the build has 3 counters" in done.stderr


def test_read_go_report_gives_a_reason_for_anything_unusable():
    good = {"blocks": 3, "copies": 2, "funcs": [{"name": "f", "recv": "", "start": 3, "end": 11,
                                                  "lines": [4, 5, 7], "reached": [[4], [4, 7]]}]}
    span = (3, 11)
    assert read_go_each(json.dumps(good).encode(), "f", "", span) == (frozenset({2, 3, 5}), [frozenset({2}),
                                                                                          frozenset({2, 5})])
    assert read_go_report(json.dumps(good).encode(), "f", "", span) == LineCoverage(2 / 3, 3, 2, (3,))

    def with_lines(lines, reached=((4,),)) -> bytes:
        return json.dumps({**good, "funcs": [{**good["funcs"][0], "lines": lines, "reached": reached}]}).encode()

    damaged = [
        (b"", "the coverage report is not JSON"),
        (b"[" * 100000 + b"]" * 100000, "the coverage report is not JSON"),
        (b"\xff\xfe", "the coverage report is not JSON"),
        (b" " * (8 << 20), "the coverage report is over"),
        (b'{"funcs": 3}', "the coverage report has no list of functions"),
        (json.dumps({**good, "funcs": [{**good["funcs"][0], "start": 1}]}).encode(), "the coverage report has no "
                                                                                       "function f in lines 3-11"),
        (json.dumps({**good, "funcs": good["funcs"] * 2}).encode(), "the coverage report has no function f"),
        (with_lines([4, True]), "malformed line record"),
        (with_lines([4, 40]), "malformed line record"),
        (with_lines([4, "5"]), "malformed line record"),
        (with_lines({"4": 1}), "malformed line record"),
        (with_lines([4, 5], [[6]]), "malformed line record"),  # reached a line that is not executable
        (with_lines([4, 5], [4]), "malformed line record"),
        (with_lines([4, 5], None), "malformed line record"),
        (with_lines([], []), "the coverage report lists no executable line of f"),
    ]
    for raw, why in damaged:
        got = read_go_report(raw, "f", "", span)
        assert isinstance(got, str) and got.startswith(why), (raw[:60], got)
    assert read_go_report(json.dumps(good).encode(), "f", "Stack", span).startswith("the coverage report has no "
                                                                                      "function Stack.f")


def test_without_the_cover_tool_coverage_is_unavailable_with_the_remedy():
    tools = LANGUAGES["go"].find_tools()
    if tools is None:
        pytest.skip("go is not installed")
    assert GO_COVERAGE.missing(tools) == ""
    bare = replace(tools, exe={k: v for k, v in tools.exe.items() if k != "cover"})
    assert GO_COVERAGE.missing(bare) == "go tool cover is not installed (apt-get install golang-go)"
