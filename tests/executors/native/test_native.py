"""Native executors (calib.executors.native): C, C++, Java, Rust and Go compared end to end.

Every comparison compiles and runs real code in the sandbox. The expected outputs come from a Python
re-implementation of each reference function written here (the comment next to each says what it
computes), and the expected per-input matches of the non-equivalent candidates from the condition on
the input under which they agree with the reference.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from calib._exceptions import InvalidParameterError
from calib.executors.base import ExecutorConfig
from calib.executors.native import LANGUAGES, NativeExecutor, ToolchainMissing
from calib.executors.native.c import parse_c
from calib.executors.native.cpp import parse_cpp
from calib.executors.native.go import parse_go
from calib.executors.native.java import parse_java
from calib.executors.native.rust import parse_rust
from calib.executors.native.types import Unsupported, synthesize
from calib.executors.sandbox import Sandbox, SandboxUnavailable


def _skip_reason(language: str) -> str | None:
    lang = LANGUAGES[language]
    if lang.find_tools() is None:
        return f"{lang.compiler} is not installed (apt-get install {lang.package})"
    try:
        Sandbox()
    except SandboxUnavailable as exc:
        return f"bubblewrap does not work here: {exc}"
    return None


def needs(language: str) -> pytest.MarkDecorator:
    reason = _skip_reason(language)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def canon(obj: dict) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def compare(language: str, truth: str, candidates: list[str], **kwargs):
    config = ExecutorConfig(input_timeout=kwargs.pop("input_timeout", 0.5), workers=2,
                            **{k: kwargs.pop(k) for k in ("min_valid", "n_inputs") if k in kwargs})
    return asyncio.run(NativeExecutor(config, language).compare(truth, candidates, **kwargs))


# --- C: equivalent, non-equivalent, compile error, segfault, infinite loop ----------------------------

C_TRUTH = """int sum_pos(const int *a, int n) {
  int s = 0;
  for (int i = 0; i < n; i++) if (a[i] > 0) s += a[i];
  printf("n=%d\\n", n);
  return s;
}"""
C_EQUIVALENT = """int sum_pos(const int *xs, int len) {
  int t = 0, i = len;
  while (i-- > 0) t += xs[i] > 0 ? xs[i] : 0;
  fputs("n=", stdout); printf("%d\\n", len);
  return t;
}"""
C_SUM_ALL = """int sum_pos(const int *xs, int len) { int t = 0; for (int i = 0; i < len; i++) t += xs[i];
  printf("n=%d\\n", len); return t; }"""
C_BROKEN = "int sum_pos(const int *a, int n) { return undeclared_name; }"
C_SEGFAULT = """int sum_pos(const int *a, int n) {
  if (n > 2) { volatile int *p = 0; *p = 1; }
  int s = 0; for (int i = 0; i < n; i++) if (a[i] > 0) s += a[i];
  printf("n=%d\\n", n); return s; }"""
C_LOOP = "int sum_pos(const int *a, int n) { volatile int k = 0; for (;;) k++; return k; }"


@needs("c")
def test_c_end_to_end():
    result = compare("c", C_TRUTH, [C_EQUIVALENT, C_SUM_ALL, C_BROKEN, C_SEGFAULT, C_LOOP], input_timeout=0.3)
    assert result.conclusive, result.reason
    assert result.valid_inputs == 10 and result.executor == "native-c"
    # every line of sum_pos runs on an array with a positive element (tests/executors/native/test_native_coverage.py)
    assert result.coverage == 1.0 and result.warnings == ()
    arrays = [r.state["a"] for r in result.inputs]
    assert set(result.inputs[0].state) == {"a"}  # the length parameter is derived, not an input
    for row, a in zip(result.inputs, arrays):
        # reference: the sum of the positive elements, and the line printf prints
        assert row.output == canon({"return": sum(x for x in a if x > 0), "stdout": f"n={len(a)}\n"})
    assert result.distinct_outputs == len({r.output for r in result.inputs}) >= 2
    equivalent, sum_all, broken, segfault, loop = result.candidates
    assert equivalent.sim_func == 1.0 and equivalent.outcome == "ran"
    # summing all elements agrees exactly when no element is negative
    expected = [all(x >= 0 for x in a) for a in arrays]
    assert list(sum_all.matches) == expected and sum_all.sim_func == sum(expected) / 10 < 1.0
    assert broken.outcome == "unparsable" and "compile error" in broken.message
    assert "undeclared_name" in broken.message and broken.matches == (False,) * 10 and broken.sim_func == 0.0
    # the segfault (n > 2) costs only the inputs it happens on; the others still match
    assert list(segfault.matches) == [len(a) <= 2 for a in arrays]
    assert any(len(a) > 2 for a in arrays) and any(len(a) <= 2 for a in arrays)
    for out, a in zip(segfault.outputs, arrays):
        assert (out == canon({"outcome": "signal SIGSEGV"})) == (len(a) > 2)
    assert loop.matches == (False,) * 10 and loop.sim_func == 0.0
    assert json.loads(loop.outputs[0]) == {"outcome": "timeout"}


@needs("c")
def test_c_run_sandbox_denies_fork_network_host_files_and_build_writes():
    probe = """#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
int probe(int k) {
  if (k == 0) { pid_t p = fork(); if (p == 0) _exit(0); return p < 0; }
  if (k == 1) { int s = socket(AF_INET, SOCK_STREAM, 0); struct sockaddr_in a = {0};
                a.sin_family = AF_INET; a.sin_port = htons(80); a.sin_addr.s_addr = inet_addr("1.1.1.1");
                return s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) != 0; }
  if (k == 2) return open(HOST_FILE, O_RDONLY) < 0;
  if (k == 3) return open("/build/planted", O_WRONLY | O_CREAT, 0600) < 0;
  return 7;
}"""
    probe = probe.replace("HOST_FILE", json.dumps(str(Path(__file__).resolve())))
    result = compare("c", probe, [], inputs=[{"k": k} for k in range(5)], min_valid=1)
    # 1 = refused for each probe; 7 = the control input
    assert [json.loads(r.output)["return"] for r in result.inputs] == [1, 1, 1, 1, 7]


@needs("c")
def test_c_build_sandbox_cannot_read_host_files():
    leak = f'#include {json.dumps(str(Path(__file__).resolve()))}\nint f(int x) {{ return x; }}'
    result = compare("c", "int f(int x) { return x + 1; }", [leak])
    assert result.conclusive
    assert result.candidates[0].outcome == "unparsable"
    assert "No such file or directory" in result.candidates[0].message


C_STRUCT_TRUTH = """typedef struct { int x; int y; } Point;
struct box { double w, h; char tag; bool open; };
Point shift(Point p, struct box *b, int k) {
  p.x += k; p.y -= k;
  b->w *= 2; b->tag = 'z';
  return p;
}"""
# the candidates do not define Point and struct box: x's definitions are put in front of them
C_STRUCT_EQUIVALENT = """Point shift(Point q, struct box *bb, int d) {
  Point r = {q.x + d, q.y - d}; bb->w = bb->w + bb->w; bb->tag = 'z'; return r; }"""
C_STRUCT_NO_DOUBLE = """Point shift(Point q, struct box *bb, int d) {
  Point r = {q.x + d, q.y - d}; bb->tag = 'z'; return r; }"""


def i32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


@needs("c")
def test_c_structs_by_value_and_by_pointer():
    result = compare("c", C_STRUCT_TRUTH, [C_STRUCT_EQUIVALENT, C_STRUCT_NO_DOUBLE])
    assert result.conclusive, result.reason
    for row in result.inputs:
        p, b, k = row.state["p"], row.state["b"], row.state["k"]
        assert set(p) == {"x", "y"} and set(b) == {"w", "h", "tag", "open"}
        # reference: the point shifted by (k, -k) in 32-bit two's complement (gcc wraps int overflow
        # at the synthesized boundaries); the box's width doubled and its tag set to 'z'
        expected = {"return": {"x": i32(p["x"] + k), "y": i32(p["y"] - k)}, "stdout": "",
                    "args": {"b": {**b, "w": b["w"] * 2, "tag": "z"}}}
        assert json.loads(row.output) == expected
    equivalent, no_double = result.candidates
    assert equivalent.sim_func == 1.0
    # without the doubling the box differs exactly when its width is not 0
    assert list(no_double.matches) == [r.state["b"]["w"] == 0 for r in result.inputs]


@needs("c")
def test_unsupported_parameter_is_inconclusive_with_reason():
    result = compare("c", "struct p { int *xs; };\nint f(struct p q) { return 0; }", ["int f(int x) { return x; }"])
    assert not result.conclusive and result.reason == "unsupported: struct p (field int *xs)"
    assert result.candidates[0].outcome == "not_run" and result.candidates[0].sim_func is None


def test_missing_toolchain_names_compiler_and_package(monkeypatch):
    # a language whose compiler is not found (here: an entry whose lookup finds nothing)
    missing = dataclasses.replace(LANGUAGES["c"], name="c", compiler="gcc-99", package="gcc-99",
                                  locate=lambda: None)
    monkeypatch.setitem(LANGUAGES, "c", missing)
    with pytest.raises(ToolchainMissing) as caught:
        NativeExecutor(ExecutorConfig(), "c")
    assert str(caught.value) == "cannot run c code: gcc-99 is not installed (apt-get install gcc-99)"


def test_unknown_language_is_rejected():
    with pytest.raises(InvalidParameterError, match="language='cobol'"):
        NativeExecutor(ExecutorConfig(), "cobol")


# --- Rust ----------------------------------------------------------------------------------------------

RUST_TRUTH = """fn clamp_all(v: &mut Vec<i32>, lo: i32) -> usize {
    let mut n = 0;
    for x in v.iter_mut() { if *x < lo { *x = lo; n += 1; } }
    println!("{}", n);
    n
}"""
RUST_EQUIVALENT = """fn clamp_all(v: &mut Vec<i32>, lo: i32) -> usize {
    let c = v.iter().filter(|&&x| x < lo).count();
    for i in 0..v.len() { v[i] = v[i].max(lo); }
    print!("{}\\n", c);
    c
}"""
RUST_NO_WRITE = """fn clamp_all(v: &mut Vec<i32>, lo: i32) -> usize {
    let c = v.iter().filter(|&&x| x < lo).count(); println!("{}", c); c }"""
RUST_BROKEN = "fn clamp_all(v: &mut Vec<i32>, lo: i32) -> usize { v.len() + lo }"


@needs("rust")
def test_rust_end_to_end():
    result = compare("rust", RUST_TRUTH, [RUST_EQUIVALENT, RUST_NO_WRITE, RUST_BROKEN])
    assert result.conclusive, result.reason
    for row in result.inputs:
        v, lo = row.state["v"], row.state["lo"]
        # reference: elements below lo raised to lo, their count returned and printed
        n = sum(1 for x in v if x < lo)
        assert row.output == canon({"return": n, "args": {"v": [max(x, lo) for x in v]}, "stdout": f"{n}\n"})
    equivalent, no_write, broken = result.candidates
    assert equivalent.sim_func == 1.0
    # without the write-back the vector differs exactly when something was clamped
    expected = [not any(x < r.state["lo"] for x in r.state["v"]) for r in result.inputs]
    assert list(no_write.matches) == expected and no_write.sim_func < 1.0
    assert broken.outcome == "unparsable" and "mismatched types" in broken.message


# --- Java ----------------------------------------------------------------------------------------------

JAVA_TRUTH = """public static int countAbove(int[] xs, int t) {
    int c = 0;
    for (int i = 0; i < xs.length; i++) { if (xs[i] > t) { c++; xs[i] = t; } }
    System.out.println("c=" + c);
    if (t == 7) throw new IllegalArgumentException("seven");
    return c;
}"""
JAVA_EQUIVALENT = """int countAbove(int[] a, int lim) {
    int n = 0;
    for (int i = a.length - 1; i >= 0; i--) if (a[i] > lim) { a[i] = lim; n += 1; }
    System.out.print("c=" + n + "\\n");
    if (lim == 7) throw new IllegalArgumentException();
    return n;
}"""
JAVA_NO_WRITE = """static int countAbove(int[] a, int lim) {
    int n = 0; for (int v : a) if (v > lim) n++; System.out.println("c=" + n); return n; }"""
JAVA_BROKEN = "static int countAbove(int[] a, int lim) { return a.size(); }"


@needs("java")
def test_java_end_to_end():
    states = [{"xs": xs, "t": t} for xs, t in [([], 0), ([1, 5, 9], 4), ([3, 3], 3), ([-2, 8, 0, 11], 7),
                                              ([10, -10], -20), ([6], 5), ([0, 0, 0], 1), ([2, 9], 2),
                                              ([4, 4, 4, 9], 0), ([1], 1)]]
    result = compare("java", JAVA_TRUTH, [JAVA_EQUIVALENT, JAVA_NO_WRITE, JAVA_BROKEN], inputs=states)
    assert result.conclusive, result.reason
    for row in result.inputs:
        xs, t = row.state["xs"], row.state["t"]
        c = sum(1 for x in xs if x > t)
        # reference: count of elements above t, clamped in place; t == 7 throws after printing
        if t == 7:
            expected = {"raised": "java.lang.IllegalArgumentException", "stdout": f"c={c}\n"}
        else:
            expected = {"return": c, "args": {"xs": [min(x, t) for x in xs]}, "stdout": f"c={c}\n"}
        assert row.output == canon(expected)
    equivalent, no_write, broken = result.candidates
    assert equivalent.sim_func == 1.0
    expected = [not any(x > s["t"] for x in s["xs"]) and s["t"] != 7 for s in states]
    assert list(no_write.matches) == expected and no_write.sim_func == sum(expected) / 10
    assert broken.outcome == "unparsable" and "cannot find symbol" in broken.message


@needs("java")
def test_java_out_of_memory_and_stack_overflow_make_inputs_invalid():
    source = """static long grow(int n) {
        if (n == 1) { long[] big = new long[Integer.MAX_VALUE - 8]; return big.length; }
        if (n == 2) return grow(n);
        return n;
    }"""
    result = compare("java", source, [], inputs=[{"n": 1}, {"n": 2}, {"n": 3}], min_valid=1)
    # a 16 GiB array exceeds -Xmx (memory_mb = 1024); grow(2) recurses forever
    assert [(r.valid, r.reason) for r in result.inputs] == [(False, "memory"), (False, "recursion"), (True, "")]
    assert json.loads(result.inputs[2].output) == {"return": 3, "stdout": ""}


# --- Go ------------------------------------------------------------------------------------------------

GO_TRUTH = """func Reverse(s string, xs []int) (string, int) {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	t := 0
	for i := range xs { xs[i] *= 2; t += xs[i] }
	fmt.Println(len(r))
	return string(r), t
}"""
GO_EQUIVALENT = """func Reverse(s string, xs []int) (string, int) {
	var b strings.Builder
	rs := []rune(s)
	for k := len(rs) - 1; k >= 0; k-- { b.WriteRune(rs[k]) }
	sum := 0
	for k, v := range xs { xs[k] = v + v; sum += 2 * v }
	fmt.Printf("%d\\n", len(rs))
	return b.String(), sum
}"""
GO_NO_REVERSE = """func Reverse(s string, xs []int) (string, int) {
	t := 0; for i := range xs { xs[i] *= 2; t += xs[i] }; fmt.Println(len(s)); return s, t }"""
GO_BROKEN = "func Reverse(s string, xs []int) (string, int) { return s }"
GO_LOOP = "func Reverse(s string, xs []int) (string, int) { for {} }"


@needs("go")
def test_go_end_to_end():
    result = compare("go", GO_TRUTH, [GO_EQUIVALENT, GO_NO_REVERSE, GO_BROKEN, GO_LOOP], input_timeout=0.3)
    assert result.conclusive, result.reason
    for row in result.inputs:
        s, xs = row.state["s"], row.state["xs"]
        # reference: reversed string and sum of doubled elements; the slice is doubled in place
        expected = {"return": [s[::-1], sum(2 * x for x in xs)], "args": {"xs": [2 * x for x in xs]},
                    "stdout": f"{len(s)}\n"}
        assert row.output == canon(expected)
    equivalent, no_reverse, broken, loop = result.candidates
    assert equivalent.sim_func == 1.0
    expected = [r.state["s"] == r.state["s"][::-1] for r in result.inputs]
    assert list(no_reverse.matches) == expected and no_reverse.sim_func < 1.0
    assert broken.outcome == "unparsable" and "not enough return values" in broken.message
    assert loop.sim_func == 0.0 and json.loads(loop.outputs[0]) == {"outcome": "timeout"}


# --- C++ -----------------------------------------------------------------------------------------------

CPP_TRUTH = """int dedupe(std::vector<int>& v, const std::string& tag) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::cout << tag << ":" << v.size() << "\\n";
  if (tag.size() > 6) throw std::runtime_error("long tag");
  return (int) v.size();
}"""
CPP_EQUIVALENT = """int dedupe(vector<int>& v, const string& tag) {
  set<int> s(v.begin(), v.end()); v.assign(s.begin(), s.end());
  printf("%s:%zu\\n", tag.c_str(), v.size());
  if (tag.length() >= 7) throw runtime_error("x");
  return s.size(); }"""
CPP_NO_WRITE = """int dedupe(vector<int>& v, const string& tag) {
  set<int> s(v.begin(), v.end()); printf("%s:%zu\\n", tag.c_str(), s.size());
  if (tag.length() >= 7) throw runtime_error("x"); return s.size(); }"""
CPP_BROKEN = "int dedupe(vector<int>& v, const string& tag) { return v.length(); }"


@needs("cpp")
def test_cpp_end_to_end():
    result = compare("cpp", CPP_TRUTH, [CPP_EQUIVALENT, CPP_NO_WRITE, CPP_BROKEN])
    assert result.conclusive, result.reason
    for row in result.inputs:
        v, tag = row.state["v"], row.state["tag"]
        u = sorted(set(v))
        # reference: sorted unique elements in place; a tag longer than 6 throws after printing
        if len(tag) > 6:
            expected = {"raised": "St13runtime_error", "stdout": f"{tag}:{len(u)}\n"}
        else:
            expected = {"return": len(u), "args": {"v": u}, "stdout": f"{tag}:{len(u)}\n"}
        assert row.output == canon(expected)
    equivalent, no_write, broken = result.candidates
    assert equivalent.sim_func == 1.0
    expected = [len(r.state["tag"]) > 6 or sorted(set(r.state["v"])) == r.state["v"] for r in result.inputs]
    assert list(no_write.matches) == expected and no_write.sim_func < 1.0
    assert broken.outcome == "unparsable" and "has no member named" in broken.message


# --- signatures and synthesis (no compiler) ------------------------------------------------------------

def test_signature_parsers():
    c = parse_c("static long f(const double *xs, size_t n, char *buf, int k) { return 0; }")
    assert [(p.name, p.type.kind, p.mutable, p.length) for p in c.params] == [
        ("xs", "list", False, "n"), ("buf", "str", True, ""), ("k", "int", False, "")]
    assert c.raw_params == ("xs", "n", "buf", "k") and c.returns.native == "long"
    out = parse_c("int f(int *a) { return 0; }").params[0]  # no length next to it: an out-parameter buffer
    assert (out.type.kind, out.mutable, out.length, out.capacity) == ("list", True, "", 64)
    go = parse_go("func F(a, b int, s []string) (int, error) { return 0, nil }")
    assert [(p.name, p.type.native, p.mutable) for p in go.params] == [
        ("a", "int", False), ("b", "int", False), ("s", "[]string", True)]
    assert go.raw_params == ("2",)
    rust = parse_rust("pub fn g(v: &mut [u8], s: &str, n: usize) -> Option<u8> { None }")
    assert [(p.name, p.type.kind, p.mutable) for p in rust.params] == [
        ("v", "list", True), ("s", "str", False), ("n", "int", False)]
    java = parse_java("private static double h(double[] d, String s) { return 0; }")
    assert [(p.name, p.type.native, p.mutable) for p in java.params] == [
        ("d", "double[]", True), ("s", "String", False)]
    cpp = parse_cpp("bool k(std::vector<std::string>& w, const std::string &t, int n = 3) { return 1; }")
    assert [(p.name, p.type.native, p.mutable) for p in cpp.params] == [
        ("w", "std::vector<std::string>", True), ("t", "std::string", False), ("n", "int", False)]
    with pytest.raises(Unsupported, match="pointers"):
        parse_cpp("int k(int *p) { return 0; }")


def test_synthesis_is_seeded_distinct_and_typed():
    sig = parse_c("int f(const int *a, int n, unsigned char u, bool b) { return 0; }")
    first, again = synthesize(sig, 30, seed=3), synthesize(sig, 30, seed=3)
    assert first == again and first != synthesize(sig, 30, seed=4)
    assert len({json.dumps(s, sort_keys=True) for s in first}) == 30
    assert first[0] == {"a": [], "u": 0, "b": False}
    for state in first:
        assert 0 <= len(state["a"]) <= 5 and 0 <= state["u"] <= 255 and isinstance(state["b"], bool)
