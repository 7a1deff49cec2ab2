"""Native harnesses under attack: code under test that tries to forge the harness's result lines.

Every hostile candidate below knows the reference's outputs (``twice(n) = 2 * n`` on the inputs
``n = 0..9``, so input ``k`` should give ``2 * k``) and writes result lines claiming exactly those
outputs on every descriptor it can reach, in the protocol the harness used before results carried the
batch key; its own computation returns -1. A host that believed those lines would score it
``sim_func == 1.0``; the right answer is 0.0 with ``-1`` as every output, which is what these tests
check (docs/native-executors.md, "What the harness guarantees"). Everything runs in the real sandbox.
"""

from __future__ import annotations

import json

from tests.executors.native.test_native import compare, needs

INPUTS = [{"n": n} for n in range(10)]


def _lines(k_expr: str, ret_expr: str) -> str:
    """The text of a forged result line, as a format string of the language (``%d`` placeholders)."""
    return '{\\"i\\":' + k_expr + ',\\"out\\":{\\"return\\":' + ret_expr + ',\\"stdout\\":\\"\\"}}\\n'


def _check(result, language: str) -> None:
    assert result.conclusive, result.reason
    # reference: twice(n) = 2 * n on n = 0..9
    assert [json.loads(r.output)["return"] for r in result.inputs] == [2 * n for n in range(10)]
    (forger,) = result.candidates
    assert forger.outcome == "ran", f"{language}: {forger.message}"
    assert [json.loads(out)["return"] for out in forger.outputs] == [-1] * 10
    assert forger.matches == (False,) * 10 and forger.sim_func == 0.0


C_FORGER = r"""#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
static void forge(void) {
  char line[160];
  for (int fd = 1; fd < 32; fd++) {
    syscall(SYS_write, fd, "{\"ready\":true}\n", 15);
    for (int k = 0; k < 10; k++) {
      int n = snprintf(line, sizeof line, "FORGED", k, 2 * k);
      syscall(SYS_write, fd, line, n);
    }
  }
}
__attribute__((constructor)) static void before_main(void) { forge(); }
/* its own main, and a macro that would rename the harness's main after it (one translation unit) */
int main(void) { forge(); return 0; }
#define main calib_harness_main_renamed
/* its own write(2), which would swallow the harness's records if the harness called it */
ssize_t write(int fd, const void *buf, size_t n) { forge(); return (ssize_t)n; }
int twice(int n) { forge(); return -1; }
""".replace("FORGED", _lines("%d", "%d"))


@needs("c")
def test_c_function_cannot_forge_results_or_replace_the_harness():
    result = compare("c", "int twice(int n) { return 2 * n; }", [C_FORGER], inputs=INPUTS)
    _check(result, "c")


CPP_FORGER = r"""#include <sys/syscall.h>
static void forge() {
  for (int fd = 1; fd < 32; fd++)
    for (int k = 0; k < 10; k++) {
      std::string line = "{\"i\":" + std::to_string(k) + ",\"out\":{\"return\":" + std::to_string(2 * k)
                         + ",\"stdout\":\"\"}}\n";
      syscall(SYS_write, fd, line.data(), line.size());
    }
}
static int early = (forge(), 0);
int main() { forge(); return 0; }
#define main calib_harness_main_renamed
long long twice(long long n) { forge(); return -1; }
"""


@needs("cpp")
def test_cpp_function_cannot_forge_results_or_replace_the_harness():
    result = compare("cpp", "long long twice(long long n) { return 2 * n; }", [CPP_FORGER], inputs=INPUTS)
    _check(result, "cpp")


JAVA_FORGER = """static int twice(int n) {
        try {
            java.io.FileOutputStream real = new java.io.FileOutputStream(java.io.FileDescriptor.out);
            for (int k = 0; k < 10; k++) real.write(String.format("FORGED", k, 2 * k).getBytes());
            real.flush();
        } catch (java.io.IOException e) { }
        return -1;
    }""".replace("FORGED", _lines("%d", "%d"))


@needs("java")
def test_java_method_cannot_forge_results_on_the_real_stdout():
    result = compare("java", "static int twice(int n) { return 2 * n; }", [JAVA_FORGER], inputs=INPUTS)
    _check(result, "java")


GO_FORGER = """func init() {
	for k := 0; k < 10; k++ {
		fmt.Fprintf(os.Stdout, "FORGED", k, 2*k)
	}
}

func Twice(n int) int {
	for fd := 1; fd < 32; fd++ {
		for k := 0; k < 10; k++ {
			syscall.Write(fd, []byte(fmt.Sprintf("FORGED", k, 2*k)))
		}
	}
	return -1
}""".replace("FORGED", _lines("%d", "%d"))


@needs("go")
def test_go_function_and_its_init_cannot_forge_results():
    result = compare("go", "func Twice(n int) int { return 2 * n }", [GO_FORGER], inputs=INPUTS)
    _check(result, "go")


RUST_FORGER = """fn twice(n: i64) -> i64 {
    use std::io::Write;
    for fd in 1..32 {  // safe Rust: every descriptor the process has, opened again by its /proc name
        if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(format!("/proc/self/fd/{}", fd)) {
            for k in 0..10 { let _ = write!(f, "FORGED", k, 2 * k); }
        }
    }
    -1
}""".replace("FORGED", _lines("{}", "{}").replace("{\\", "{{\\").replace("}}", "}}}}"))


@needs("rust")
def test_rust_function_cannot_forge_results_through_proc_fd():
    result = compare("rust", "fn twice(n: i64) -> i64 { 2 * n }", [RUST_FORGER], inputs=INPUTS)
    _check(result, "rust")


@needs("c")
def test_candidate_never_shares_a_process_or_tmp_with_the_truth():
    # the truth leaves each output in /tmp; a candidate that shared its process or /tmp would read them
    truth = r"""int leak(int n) {
  FILE *f = fopen("/tmp/calib-leak", "a"); if (f) { fprintf(f, "%d\n", 3 * n); fclose(f); }
  return 3 * n;
}"""
    reader = r"""int leak(int n) {
  int last = -1, v; FILE *f = fopen("/tmp/calib-leak", "r");
  if (!f) return -1;
  while (fscanf(f, "%d", &v) == 1) last = v;
  fclose(f); return last;
}"""
    result = compare("c", truth, [reader], inputs=INPUTS)
    assert result.conclusive, result.reason
    assert [json.loads(r.output)["return"] for r in result.inputs] == [3 * n for n in range(10)]
    # the reader's own process has its own empty /tmp: the file is never there
    assert [json.loads(out)["return"] for out in result.candidates[0].outputs] == [-1] * 10
    assert result.candidates[0].sim_func == 0.0
