"""The Java executor's own parts (docs/native-executors.md, "Java"): JaCoCo line coverage of x, a class
loader per input, x's file context and instance methods.

Every comparison compiles and runs real code in the sandbox. Expected coverages are JaCoCo's lines with
code (javac's line number table: a static method's declaration line and a closing brace after a
``return`` have none), counted by hand in the comment next to each source; expected outputs come from
a Python re-implementation next to each function.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from calib.executors.native import coverage_java
from calib.executors.native.coverage import REPORT_BYTES, LineCoverage
from calib.executors.native.coverage_java import JACOCO, read_jacoco, read_jacoco_each, x_lines
from calib.executors.native.java import parse_java_in
from calib.executors.native.languages import LANGUAGES
from calib.executors.native.types import Unsupported
from tests.executors.native.test_native import canon, compare, needs


def _jacoco() -> pytest.MarkDecorator:
    tools = LANGUAGES["java"].find_tools()
    reason = JACOCO if tools is not None and coverage_java.missing_jacoco(tools) else None
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def wrap(value: int, bits: int = 32) -> int:
    return (value + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))


# JaCoCo's lines with code: 2, 3 (the test), 4, 5, 6 and 8; line 1 (a static method's declaration) and the
# braces 7 and 9 have none. Lines 4-6 are never reached: no int's square is 2, even modulo 2**32 (squares
# are 0 or 1 modulo 4), so every input reaches 2, 3 and 8: 3 of 6 lines.
UNREACHABLE = """static int f(int x) {
    int y = x * 2;
    if (x * x == 2) {
        y = y * 3;
        y = y - 7;
        return y;
    }
    return y + 1;
}"""
# x's lines with code: 2 (the test), 3 (x < 0 only) and 4 (x >= 0 only), all reached when the inputs have
# both signs; the helper after it (never called) is not x: its lines must not count.
REACHABLE = """static int fold(int x) {
    if (x < 0)
        return 1 - x;
    return x;
}
static int unusedHelper(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += i * i;
    return s;
}"""


@needs("java")
@_jacoco()
def test_java_unreachable_branch_is_inconclusive_for_coverage():
    result = compare("java", UNREACHABLE, [UNREACHABLE])
    assert result.valid_inputs == 10 and result.distinct_outputs >= 2
    assert result.coverage == pytest.approx(3 / 6) and result.uncovered_lines == (4, 5, 6)
    assert not result.conclusive and result.reason == "coverage 0.50 < 0.8"
    assert result.warnings == () and result.candidates[0].sim_func is None


@needs("java")
@_jacoco()
def test_java_reachable_function_is_conclusive_with_full_coverage():
    result = compare("java", REACHABLE, ["int fold(int v) { return v < 0 ? 1 - v : v; }"])
    xs = [row.state["x"] for row in result.inputs]
    assert any(x < 0 for x in xs) and any(x >= 0 for x in xs), xs
    assert result.conclusive, result.reason
    assert result.coverage == 1.0 and result.uncovered_lines == () and result.warnings == ()
    assert result.candidates[0].sim_func == 1.0


# x replaces the agent's execution data of every class (its own included) with a one-probe record under the
# same class id, through reflection on the agent's internals; in a normal run (no agent) it does nothing.
HOSTILE = r"""static int f(int x) {
    try {
        Object agent = Class.forName("org.jacoco.agent.rt.RT").getMethod("getAgent").invoke(null);
        java.lang.reflect.Field d = agent.getClass().getDeclaredField("data");
        d.setAccessible(true);
        Object data = d.get(agent);
        java.lang.reflect.Field s = data.getClass().getDeclaredField("store");
        s.setAccessible(true);
        Object store = s.get(data);
        java.lang.reflect.Field e = store.getClass().getDeclaredField("entries");
        e.setAccessible(true);
        @SuppressWarnings("unchecked") Map<Long, Object> entries = (Map<Long, Object>) e.get(store);
        Class<?> kind = Class.forName(store.getClass().getPackageName() + ".ExecutionData");
        for (Long id : new ArrayList<>(entries.keySet()))
            entries.put(id, kind.getConstructor(long.class, String.class, boolean[].class)
                .newInstance(id, "junk", new boolean[] {true}));
    } catch (Exception ex) {
    }
    return x + 1;
}"""


@needs("java")
@_jacoco()
def test_java_x_writing_junk_execution_data_only_loses_its_own_coverage():
    result = compare("java", HOSTILE, [HOSTILE])
    assert result.valid_inputs == 10 and not result.conclusive and math.isnan(result.coverage)
    # the report program (build sandbox) fails on the junk and says so; nothing is raised on the host
    expected = "coverage_unavailable: JaCoCo could not read the execution data or x's classes ("
    assert result.reason.startswith(expected), result.reason
    assert "ArrayIndexOutOfBounds" in result.reason


@needs("java")
def test_java_without_jacoco_the_sample_is_inconclusive(monkeypatch):
    monkeypatch.setitem(coverage_java.JACOCO_JARS, "agent", "/nonexistent/org.jacoco.agent.jar")
    result = compare("java", REACHABLE, [REACHABLE])
    assert result.valid_inputs == 10 and math.isnan(result.coverage) and not result.conclusive
    assert result.reason == "coverage_unavailable: JaCoCo is not installed (apt-get install libjacoco-java libasm-java)"


# --- isolation: a class loader per input -------------------------------------------------------------------

COUNTER_CONTEXT = "public class Counter {\n    private static int calls;\n    static { calls = 0; }\n\n"
COUNTER = "static int next(int x) {\n    calls++;\n    return x * 10 + calls;\n}"


@needs("java")
def test_java_static_state_does_not_leak_between_inputs():
    # all 30 pool states (and then the 10 chosen) run in one JVM; each input's first call sees calls == 0
    result = compare("java", COUNTER, [COUNTER], context=COUNTER_CONTEXT)
    assert result.valid_inputs == 10 and result.conclusive, result.reason
    for row in result.inputs:  # reference: x * 10 + 1 in 32-bit arithmetic
        assert row.output == canon({"return": wrap(row.state["x"] * 10 + 1), "stdout": ""})
    assert result.candidates[0].sim_func == 1.0


# --- file context and instance methods ----------------------------------------------------------------------

ACCOUNT_CONTEXT = """package org.example.bank;

import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;

/** An account. */
public class Account implements Comparable<Account> {
    private static final Logger LOG = null;
    private long balance;
    private final List<String> log = new ArrayList<>();
    private int ops;
    public Account() {
        this.balance = 0;
    }
    private long fee(long amount) {
        return amount > 100 ? 2 : 1;
    }
    private void note(String what) {
        log.add(what);
        ops++;
    }
    /** Withdraws. */
"""
WITHDRAW = """    public boolean withdraw(long amount) {
        long total = amount + fee(amount);
        if (total > balance) {
            note("refused " + amount);
            return false;
        }
        balance -= total;
        note("paid " + amount);
        return true;
    }"""
WITHDRAW_OTHER = """    public boolean withdraw(long amount) {
        long total = amount + fee(amount);
        boolean ok = total <= balance;
        if (ok) balance = balance - total;
        note((ok ? "paid " : "refused ") + amount);
        return ok;
    }"""
WITHDRAW_NO_FEE = """    public boolean withdraw(long amount) {
        if (amount > balance) { note("refused " + amount); return false; }
        balance -= amount; note("paid " + amount); return true;
    }"""


def _withdraw(amount: int, balance: int, ops: int) -> dict:
    """Reference: the fee (2 above 100, else 1) is added (64-bit), refused above the balance; every call
    is logged and counted."""
    total = wrap(amount + (2 if amount > 100 else 1), 64)
    ok = total <= balance
    return {"return": ok, "stdout": "", "this": {"balance": wrap(balance - total, 64) if ok else balance,
                                                  "log": [("paid " if ok else "refused ") + str(amount)],
                                                  "ops": wrap(ops + 1)}}


@needs("java")
def test_java_instance_method_of_the_file_class_uses_its_fields_and_helpers():
    # the unused Logger field (an external package) is left out; balance and ops come from the input state
    result = compare("java", WITHDRAW, [WITHDRAW_OTHER, WITHDRAW_NO_FEE], context=ACCOUNT_CONTEXT)
    assert result.conclusive, result.reason
    assert sorted(result.inputs[0].state) == ["amount", "this.balance", "this.ops"]
    for row in result.inputs:
        s = row.state
        assert json.loads(row.output) == _withdraw(s["amount"], s["this.balance"], s["this.ops"]), row
    other, no_fee = result.candidates
    assert other.sim_func == 1.0
    assert no_fee.sim_func < 1.0
    # without the fee: the same only when both refuse (a payment moves the balance by a different amount)
    assert list(no_fee.matches) == [
        r.state["amount"] > r.state["this.balance"]
        and not _withdraw(r.state["amount"], r.state["this.balance"], r.state["this.ops"])["return"]
        for r in result.inputs]


NESTED_CONTEXT = """package p;
import java.util.*;
public class Outer {
    static final int BASE = 10;
    private static int twice(int v) {
        return 2 * v;
    }
    public class Inner {
        private int k;
        public Inner(int k) {
            this.k = k;
        }
"""
ADD = """        public int add(int x) {
            return twice(x) + k + BASE;
        }"""


@needs("java")
def test_java_method_of_a_nested_class_built_with_its_constructor():
    # the constructor takes k (new.k); Outer's static helper and constant are kept; the inner class is made
    # static (nothing of Outer's instance is used)
    result = compare("java", ADD, [ADD], context=NESTED_CONTEXT)
    assert result.conclusive, result.reason
    for row in result.inputs:  # reference: 2x + k + 10 in 32-bit arithmetic; k unchanged
        x, k = row.state["x"], row.state["new.k"]
        assert json.loads(row.output) == {"return": wrap(2 * x + k + 10), "stdout": "", "this": {"k": k}}


@needs("java")
def test_java_override_of_a_dropped_supertype_still_builds():
    # extends AbstractList is dropped (the rest of the file is unknown), so @Override is blanked in x and get
    context = "public class Range extends java.util.AbstractList<Integer> {\n    private int n = 3;\n" \
              "    @Override\n    public Integer get(int i) { return i; }\n"
    source = "    @Override\n    public int size() {\n        return n + get(1);\n    }"
    result = compare("java", source, [source], context=context)
    assert result.conclusive and result.coverage == 1.0, result.reason
    assert all(json.loads(r.output)["return"] == wrap(r.state["this.n"] + 1) for r in result.inputs)


@pytest.mark.parametrize(("context", "source", "reason"), [
    ("public enum Color {\n    RED, GREEN;\n", "int f(int x) { return x; }", "instance method of enum Color"),
    ("public abstract class Base {\n    abstract int weight();\n", "int f(int x) { return x + weight(); }",
     "abstract method weight of Base"),
    ("public class Box {\n    private final List<String> items;\n    Box(List<String> items) { this.items = items; }\n",
     "int f(int x) { return x; }", "no constructor of Box with parameters of supported types"),
])
def test_java_contexts_that_cannot_be_built_give_their_reason(context, source, reason):
    with pytest.raises(Unsupported, match=f"^{reason}$"):
        parse_java_in(source, context)


# --- the report reader, on the report program's own output ------------------------------------------------

# Lines 3-15 are x (f); JaCoCo's lines with code there: 4 (the lambda's creation, and its body in
# lambda$f$0), 5, 6, 8 (new Target$1, also its constructor's line), 10 and 11 (run(): a void method's return
# is on its closing brace), 13 and 14; none on 3, 7, 9, 12 and 15. f(3) reaches 4 (and the lambda), 5, 6;
# f(-2) reaches 4, 5, 8, 10, 11, 13, 14. The helper (line 17) and the class's constructor (line 2) are not x.
REPORTED = """import java.util.function.IntUnaryOperator;
class Target {
    static int f(int x) {
        IntUnaryOperator twice = v -> 2 * v;
        if (x > 0) {
            return twice.applyAsInt(x);
        }
        Runnable r = new Runnable() {
            public void run() {
                System.out.print("");
            }
        };
        r.run();
        return -x;
    }
    static int helper(int n) {
        return n + 1;
    }
}
class Run {
    public static void main(String[] a) throws Exception {
        Object agent = Class.forName("org.jacoco.agent.rt.RT").getMethod("getAgent").invoke(null);
        java.lang.reflect.Method get = Class.forName("org.jacoco.agent.rt.IAgent")
            .getMethod("getExecutionData", boolean.class);
        get.invoke(agent, true);
        int[] xs = {3, -2};
        for (int k = 0; k < 2; k++) {
            Target.f(xs[k]);
            new java.io.File(a[0] + "/p000" + k).mkdirs();
            java.nio.file.Files.write(java.nio.file.Path.of(a[0] + "/p000" + k + "/jacoco.exec"),
                                      (byte[]) get.invoke(agent, true));
        }
    }
}
"""


@pytest.fixture(scope="module")
def reported(tmp_path_factory) -> tuple[bytes, Path]:
    """The report program's output for REPORTED run with the agent on f(3), then f(-2), one copy each:
    built, run and read here on the host (trusted code)."""
    tools = LANGUAGES["java"].find_tools()
    if tools is None or coverage_java.missing_jacoco(tools):
        pytest.skip("java and JaCoCo are needed")
    work = tmp_path_factory.mktemp("jacoco")
    (work / "Target.java").write_text(REPORTED)
    cp = coverage_java._classpath()
    subprocess.run([tools.exe["javac"], "-d", "build", "Target.java"], cwd=work, check=True)
    with zipfile.ZipFile(coverage_java.JACOCO_JARS["agent"]) as jar:
        jar.extract("jacocoagent.jar", work)
    subprocess.run([tools.exe["java"], "-javaagent:jacocoagent.jar=output=none", "-cp", "build", "Run", "copies"],
                   cwd=work, check=True)
    (work / "build" / "Run.class").unlink()
    source = coverage_java.HARNESS_ROOT / "java" / "CalibJacoco.java"
    subprocess.run([tools.exe["javac"], "-cp", cp, "-d", "report", str(source)], cwd=work, check=True)
    argv = [tools.exe["java"], "-cp", f"report:{cp}", "CalibJacoco", "build", "copies"]
    return subprocess.run(argv, cwd=work, check=True, capture_output=True).stdout, work


def test_read_jacoco_counts_x_its_lambdas_and_anonymous_classes_only(reported):
    raw, _ = reported
    assert read_jacoco(raw, "Target", "f", (3, 15)) == LineCoverage(1.0, 8, 8, ())
    # per copy, as x's lines (1 = line 3): f(3) reached 4, 5, 6; f(-2) all but 6
    assert read_jacoco_each(raw, "Target", "f", (3, 15)) == (frozenset({2, 3, 4, 6, 8, 9, 11, 12}),
                                                             [frozenset({2, 3, 4}), frozenset({2, 3, 6, 8, 9, 11, 12})])
    # the helper alone: its one line, never reached; x is found by its name within its lines only
    assert read_jacoco(raw, "Target", "helper", (16, 18)) == LineCoverage(0.0, 1, 0, (2,))
    assert read_jacoco(raw, "Target", "f", (16, 18)).startswith("the JaCoCo report has no method f of Target")


def test_the_report_program_rejects_junk_copies(reported):
    _, work = reported
    (work / "copies" / "p0002").mkdir()
    (work / "copies" / "p0002" / "jacoco.exec").write_bytes(b"junk")
    try:
        java = shutil.which("java") or "java"
        raw = subprocess.run([java, "-cp", f"report:{coverage_java._classpath()}", "CalibJacoco", "build", "copies"],
                             cwd=work, check=True, capture_output=True).stdout
    finally:
        shutil.rmtree(work / "copies" / "p0002")
    assert read_jacoco(raw, "Target", "f", (3, 15)) == \
        "JaCoCo could not read the execution data or x's classes (IOException: Invalid execution data file.)"


def test_read_jacoco_gives_a_reason_for_anything_unusable(reported):
    raw, _ = reported
    doc = json.loads(raw)
    first = doc["methods"][1]
    assert first["name"] == "f"
    cases = [
        (b"not json", "the JaCoCo report is not JSON"),
        (b"{}", "the JaCoCo report has no method list"),
        (json.dumps({**doc, "methods": [{**first, "lines": [[4, 7]]}]}).encode(), "malformed line record"),
        (json.dumps({**doc, "methods": [{**first, "lines": [[99, 1]]}]}).encode(), "malformed line record"),
        (json.dumps({**doc, "methods": [5]}).encode(), "malformed method record"),
        (json.dumps({**doc, "methods": [{**first, "lines": []}]}).encode(), "the JaCoCo report lists no line"),
        (raw.replace(b'"name":"f"', b'"name":"g"'), "the JaCoCo report has no method f of Target in lines 3-15"),
        (b"[" * 100000 + b"]" * 100000, "the JaCoCo report is not JSON"),
        (b" " * REPORT_BYTES, f"the JaCoCo report is over {REPORT_BYTES} bytes"),
    ]
    for damaged, why in cases:
        got = read_jacoco(damaged, "Target", "f", (3, 15))
        assert isinstance(got, str) and got.startswith(why), (damaged[:60], got)
    no_copies = json.dumps({"methods": doc["methods"]}).encode()
    assert read_jacoco_each(no_copies, "Target", "f", (3, 15)) == "the JaCoCo report has no list of copies"


def test_x_lines_counts_x_alone():
    assert x_lines(REACHABLE) == 5 and x_lines(UNREACHABLE) == 9 and x_lines(REPORTED.split("\n", 2)[2]) == 13
    assert x_lines('static int f() {\n  String s = "}";\n  char c = \'{\';\n  return 1; // }\n}\nint g() {}') == 5


# a floor at -100: of the seeded pool (seed 0) only states 17 and later are below it (the pool of C's
# test_native_choice.py: the same name and parameter types draw the same states)
FLOOR = """static int f(int v) {
    int r = v;
    if (v < -100) {
        r = -100;
    }
    return r / 2;
}"""


@needs("java")
@_jacoco()
def test_java_inputs_are_chosen_by_the_lines_they_reach():
    # JaCoCo's lines with code: 2, 3, 4 and 6 (1, 5 and 7 have none); line 4 needs v < -100, which no state
    # a choice by outputs alone keeps reaches (test_native_choice.py checks the pool)
    result = compare("java", FLOOR, [FLOOR])
    taken = [row.state["v"] for row in result.inputs if row.state["v"] < -100]
    assert taken and result.coverage == 1.0 and result.conclusive and result.uncovered_lines == (), result.reason
