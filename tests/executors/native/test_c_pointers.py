"""C pointers to numbers without a length parameter (out-parameters) and integer types spelled any way.

A pointer such as ``int *result`` gets a zeroed buffer of 64 elements holding the input's values first;
every element is reported after the call unless the pointer is to const. The expected outputs come
from Python re-implementations written here; widths of C library typedefs from glibc's headers on
x86-64 (``off_t``/``time_t`` 64-bit signed, ``wint_t`` 32-bit unsigned, ``uint_fast16_t`` 64-bit).
"""

from __future__ import annotations

import json

from calib.executors.native.c import POINTER_CAPACITY, parse_c, scalar
from tests.executors.native.test_native import compare, needs

DIVMOD = """int divmod(int a, int b, int *q, long *r) {
  if (b == 0) return -1;
  *q = a / b;
  *r = a % b;
  return 0;
}"""
DIVMOD_SAME = """int divmod(int a, int b, int *quot, long *rem) {
  if (!b) return -1;
  quot[0] = a / b; rem[0] = a - (a / b) * b;
  return 0;
}"""
DIVMOD_NO_REM = """int divmod(int a, int b, int *q, long *r) {
  if (b == 0) return -1;
  *q = a / b;
  return 0;
}"""


def c_div(a: int, b: int) -> tuple[int, int]:
    """C99 division: the quotient truncates toward zero, the remainder takes the dividend's sign."""
    q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return q, a - q * b


def test_integer_types_spelled_any_way_and_library_typedefs():
    assert [(t.bits, t.signed) for t in map(scalar, ("short unsigned int", "long long unsigned", "unsigned char",
                                                     "signed char", "unsigned long long int"))] == [
        (16, False), (64, False), (8, False), (8, True), (64, False)]
    assert [(t.bits, t.signed) for t in map(scalar, ("off_t", "time_t", "wint_t", "wchar_t", "uint_fast16_t",
                                                     "int_least8_t"))] == [
        (64, True), (64, True), (32, False), (32, True), (64, False), (8, True)]
    assert scalar("short long") is None and scalar("int int") is None and scalar("char").kind == "char"


def test_pointers_without_length_are_out_parameters_and_arrays_keep_their_length():
    sig = parse_c("void minmax(const int *a, int n, int *lo, int *hi) { }")
    assert [(p.name, p.length, p.capacity, p.mutable) for p in sig.params] == [
        ("a", "n", 0, False), ("lo", "", POINTER_CAPACITY, True), ("hi", "", POINTER_CAPACITY, True)]
    assert sig.raw_params == ("a", "n", "lo", "hi")
    # the previous integer is the length only when its name says so (``b`` of divmod is a divisor)
    assert parse_c("int g(size_t count, const int *a) { return 0; }").params[0].length == "count"
    assert [p.name for p in parse_c(DIVMOD).params] == ["a", "b", "q", "r"]
    const = parse_c("double mean3(const double *v) { return (v[0] + v[1] + v[2]) / 3; }").params[0]
    assert (const.capacity, const.mutable) == (POINTER_CAPACITY, False)


@needs("c")
def test_out_parameters_are_part_of_the_output_state():
    result = compare("c", DIVMOD, [DIVMOD_SAME, DIVMOD_NO_REM])
    assert result.conclusive, result.reason
    for row in result.inputs:
        if not row.valid:
            continue
        a, b = row.state["a"], row.state["b"]
        q0, r0 = row.state["q"], row.state["r"]
        out = json.loads(row.output)
        q, r = [0] * POINTER_CAPACITY, [0] * POINTER_CAPACITY
        q[:len(q0)], r[:len(r0)] = q0, r0  # the input's values at the front of a zeroed buffer
        if b != 0 and not (a == -2**31 and b == -1):
            q[0], r[0] = c_div(a, b)
            assert out["return"] == 0
        else:
            assert b != 0 or out["return"] == -1
        if b == 0 or not (a == -2**31 and b == -1):
            assert out["args"] == {"q": q, "r": r}
    same, no_rem = result.candidates
    assert same.sim_func == 1.0
    # without the remainder the output differs exactly when x changed r[0]
    for row, match in zip(result.inputs, no_rem.matches):
        if row.valid:
            r0 = (row.state["r"] or [0])[0]
            changed = row.state["b"] != 0 and c_div(row.state["a"], row.state["b"])[1] != r0
            assert match == (not changed)
