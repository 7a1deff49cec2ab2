"""I/O isomorphisms of small tasks: parsing, rewritten tests, the known-correct and known-wrong
solutions, the contract text and the metamorphic relation f(x) = y ⇔ T(f(T⁻¹(x'))) = y'."""

from __future__ import annotations

import pytest

from calib.probes.isomorphism import (
    ORIGINAL_ISO,
    NotApplicable,
    ParsedTest,
    contract_text,
    metamorphic_check,
    parse_test,
    rewrite_tests,
    transformed_reference,
)
from calib.probes.transforms import Affine, BaseDigits, Cubic, map_ints

BIJECTIONS = [Affine(3, 5), Affine(-2, 7), BaseDigits(7), BaseDigits(16), Cubic(1), Cubic(-3)]

# Small tasks in MBPP shape: (entry point, reference solution, tests). Values in the tests use only
# the decimal digits 0..6 so that base 7 can encode them, and each task has values >= 10 so that
# base 7 (which fixes 0..6) changes something.
ADD = ("add", "def add(a, b):\n    return a + b\n",
       ["assert add(2, 3) == 5", "assert (add(-4, 10)) == 6", "assert 15 == add(a=5, b=10)"])
EVENS = ("evens", "def evens(xs):\n    return [x for x in xs if x % 2 == 0]\n",
         ["assert evens([1, 2, 3, 4]) == [2, 4]", "assert evens([10, 13, 20, 25]) == [10, 20]"])
WOODALL = ("is_woodall",
           "def is_woodall(x):\n    n = 1\n    while n * 2 ** n - 1 < x:\n        n += 1\n"
           "    return n * 2 ** n - 1 == x\n",
           ["assert is_woodall(23) == True", "assert not is_woodall(24)", "assert is_woodall(63)",
            "assert is_woodall(64) is False"])
# 26 + 5 carries in base 7 and in base 16, so base conversion does not commute with it (carry-free
# additions such as 20 + 2 would, and the original solution would pass the base-b iso tests).
BUMP = ("bump", "def bump(d, by=1):\n    return {k: v + by for k, v in d.items()}\n",
        ["assert bump({'a': 1, 'b': 26}, by=5) == {'a': 6, 'b': 31}", "assert bump({1: 10}) == {1: 11}"])
# Recursion must reach the original, not the wrapper. (Linear, so the known-wrong run on large encoded
# inputs stays fast or stops at the recursion limit.)
TRI = ("tri", "def tri(n):\n    return 0 if n <= 0 else n + tri(n - 1)\n",
       ["assert tri(10) == 55", "assert tri(1) == 1", "assert tri(5) == 15"])
# A helper named like the bijection's functions must survive in the transformed reference.
HELPER = ("double_sum", "def encode(x):\n    return 2 * x\n\ndef double_sum(a, b):\n    return encode(a) + encode(b)\n",
          ["assert double_sum(2, 3) == 10", "assert double_sum(10, 1) == 22"])
STRING = ("remove_Occ", "def remove_Occ(s, ch):\n    return s.replace(ch, '')\n",
          ['assert remove_Occ("hello","l") == "heo"', 'assert remove_Occ("abcda","a") == "bcd"'])

INT_TASKS = [ADD, EVENS, WOODALL, BUMP, TRI, HELPER]

# (task, condition, bijection) where the original solution commutes with T, so it passes the rewritten
# tests although it ignores the contract. In an even base a number's parity is the parity of its last
# digit, which base conversion keeps, so `evens` under base 16 (inputs and outputs encoded) is one.
EQUIVARIANT = {("evens", "iso", BaseDigits(16))}


def _applicable(task, condition):
    # A predicate returns bools, which are never encoded: nothing to encode on the output side.
    return not (task is WOODALL and condition == "iso_dec")


# ---------------------------------------------------------------- parse_test


def test_parse_mbpp_shapes():
    p = parse_test('assert remove_Occ("hello","l") == "heo"', "remove_Occ")
    assert p == ParsedTest('assert remove_Occ("hello","l") == "heo"', "remove_Occ", ("hello", "l"), (), "heo", "==")
    p = parse_test("assert max_val([3, 'Python', 4]) == 4", "max_val")
    assert (p.args, p.expected) == (([3, "Python", 4],), 4)
    p = parse_test("assert (similar_elements((3, 4), (5, 4))) == (4,)", "similar_elements")
    assert (p.args, p.expected, p.op) == (((3, 4), (5, 4)), (4,), "==")
    p = parse_test("assert is_woodall(383) == True", "is_woodall")
    assert (p.args, p.expected) == ((383,), True)
    p = parse_test("assert 5 == add(2, b=-3), 'message ignored'", "add")
    assert (p.args, p.kwargs, p.expected) == ((2,), (("b", -3),), 5)
    assert parse_test("assert f(1)", "f").op == "truthy"
    p = parse_test("assert not f({1: 'x'})", "f")
    assert (p.op, p.expected, p.args) == ("falsy", False, ({1: "x"},))
    assert parse_test("assert f(1) is None", "f").op == "is"


@pytest.mark.parametrize("test,reason", [
    ("assert set(f([1, 2])) == set([1])", "neither side is a direct call to f(...)"),
    ("assert math.isclose(f(1), 2.5, rel_tol=0.001)", "not a single comparison of f(...) with a literal"),
    ("assert f(1) != 2", "comparison is not ==: NotEq"),
    ("assert f(y) == 1", "argument 0 is not a literal"),
    ("assert f(1, k=y) == 1", "keyword argument k is not a literal"),
    ("assert f(1) == g(1)", "expected value is not a literal"),
    ("assert f(*xs) == 1", "starred argument"),
    ("assert f(1) is 1", "'is' comparison with something other than True, False or None"),
    ("assert 0 < f(1) < 3", "not a single comparison of f(...) with a literal"),
    ("x = f(1)", "not a single assert statement"),
    ("assert f(1) == ", "syntax error: invalid syntax"),
])
def test_parse_not_applicable(test, reason):
    assert parse_test(test, "f") == NotApplicable(reason)


# ---------------------------------------------------------------- rewritten literals by hand


def test_affine_rewrites_by_hand():
    t = Affine(3, 5)  # T(v) = 3v + 5, T⁻¹(u) = (u - 5) / 3
    # T(2) = 11, T(3) = 14, T(5) = 20; and f(T⁻¹(11), T⁻¹(14)) = f(2, 3) = 5 -> T(5) = 20.
    assert ((11 - 5) // 3, (14 - 5) // 3) == (2, 3) and 3 * 5 + 5 == 20
    iso = rewrite_tests(["assert add(2, 3) == 5"], "add", "iso", t)
    assert iso.tests == ("assert add(11, 14) == 20",)
    assert (iso.applicable, iso.reason, iso.values_mapped, iso.values_changed, iso.roundtrip_checked) == \
        (True, None, 3, 3, 3)
    assert rewrite_tests(["assert add(2, 3) == 5"], "add", "iso_enc", t).tests == ("assert add(11, 14) == 5",)
    assert rewrite_tests(["assert add(2, 3) == 5"], "add", "iso_dec", t).tests == ("assert add(2, 3) == 20",)
    # Nested and keyword values: T(1) = 8, T(26) = 83, T(5) = 20, T(6) = 23, T(31) = 98; keys 'a', 'b' stay.
    r = rewrite_tests(BUMP[2][:1], "bump", "iso", t)
    assert r.tests == ("assert bump({'a': 8, 'b': 83}, by=20) == {'a': 23, 'b': 98}",)
    assert r.values_mapped == r.roundtrip_checked == 5
    # A bool answer is never encoded: T(23) = 74 for the input, True stays True; `not` form is kept.
    r = rewrite_tests(WOODALL[2][:2], "is_woodall", "iso", t)
    assert r.tests == ("assert is_woodall(74) == True", "assert not is_woodall(77)")


def test_base7_and_cubic_rewrites_by_hand():
    # base 7: "10" -> 7, "6" -> 6, "4" -> 4 (sign kept): add(-4, 10) == 6 becomes add(-4, 7) == 6.
    r = rewrite_tests(["assert add(-4, 10) == 6"], "add", "iso", BaseDigits(7))
    assert r.tests == ("assert add(-4, 7) == 6",) and (r.values_mapped, r.values_changed) == (3, 1)
    # cubic c=1: T(2) = 9, T(3) = 28, T(5) = 126.
    r = rewrite_tests(["assert add(2, 3) == 5"], "add", "iso", Cubic(1))
    assert r.tests == ("assert add(9, 28) == 126",)


# ---------------------------------------------------------------- known-correct and known-wrong


@pytest.mark.parametrize("bijection", BIJECTIONS, ids=repr)
@pytest.mark.parametrize("condition", ORIGINAL_ISO)
@pytest.mark.parametrize("task", INT_TASKS, ids=lambda task: task[0])
def test_reference_passes_and_original_fails(task, condition, bijection):
    entry, code, tests = task
    assert all(metamorphic_check(code, tests))  # the tasks themselves are right
    r = rewrite_tests(tests, entry, condition, bijection)
    if not _applicable(task, condition):
        assert (r.applicable, r.reason, r.tests) == (False, "no integer in the outputs", ())
        return
    assert r.applicable, r.reason
    assert len(r.tests) == len(tests) and r.roundtrip_checked == r.values_mapped > 0
    reference = transformed_reference(code, entry, condition, bijection)
    assert metamorphic_check(reference, r.tests) == [True] * len(tests)
    # The untransformed solution ignores the contract: it fails a rewritten test unless it commutes with T.
    assert all(metamorphic_check(code, r.tests)) == ((entry, condition, bijection) in EQUIVARIANT)


def test_equivariant_task_passes_iso_unchanged():
    # Set intersection commutes with any bijection: the original solution passes the iso tests, so a
    # pass under iso alone does not show the contract was followed; iso_enc and iso_dec still catch it.
    code = "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b)))\n"
    tests = ["assert (similar_elements((3, 4, 5, 6), (5, 4, 10, 13))) == (4, 5)"]
    t = Affine(3, 5)
    assert metamorphic_check(code, rewrite_tests(tests, "similar_elements", "iso", t).tests) == [True]
    for condition in ("iso_enc", "iso_dec"):
        assert metamorphic_check(code, rewrite_tests(tests, "similar_elements", condition, t).tests) == [False]


@pytest.mark.parametrize("candidate,expected", [
    ("def add(a, b):\n    return a + b\n", [True, True, True]),
    ("def add(a, b):\n    return a - b\n", [False, False, False]),
    ("def add(a, b):\n    return a + b if a >= 0 else 0\n", [True, False, True]),
    ("def add(a, b):\n    raise RuntimeError\n", [False, False, False]),
])
@pytest.mark.parametrize("bijection", BIJECTIONS, ids=repr)
@pytest.mark.parametrize("condition", ORIGINAL_ISO)
def test_metamorphic_relation_test_by_test(candidate, expected, condition, bijection):
    # f(x) = y  <=>  T(f(T⁻¹(x'))) = y': a candidate passes original test i exactly when its
    # wrapped form (the candidate made to obey the contract) passes rewritten test i.
    entry, _, tests = ADD
    assert metamorphic_check(candidate, tests) == expected
    r = rewrite_tests(tests, entry, condition, bijection)
    assert metamorphic_check(transformed_reference(candidate, entry, condition, bijection), r.tests) == expected


def test_wrapper_decodes_and_encodes_nested_values():
    # The wrapper computes T(f(T⁻¹(x'))) elementwise; check one call against the formula by hand.
    t = Affine(3, 5)
    _, code, _ = EVENS
    ns: dict = {}
    exec(transformed_reference(code, "evens", "iso", t), ns)
    xs = [1, 2, 3, 4]
    encoded = map_ints(xs, t.forward)  # [8, 11, 14, 17]
    assert encoded == [8, 11, 14, 17]
    assert ns["evens"](encoded) == [11, 17]  # T(2) = 11, T(4) = 17
    assert ns["evens"]([True, 11]) == [11]  # True is not decoded: True % 2 == 1 drops it; T⁻¹(11) = 2 is kept


# ---------------------------------------------------------------- not applicable


@pytest.mark.parametrize("condition,reason", [("iso", "no integer in the inputs or outputs"),
                                              ("iso_enc", "no integer in the inputs"),
                                              ("iso_dec", "no integer in the outputs")])
@pytest.mark.parametrize("bijection", BIJECTIONS, ids=repr)
def test_string_task_not_applicable(condition, reason, bijection):
    entry, _, tests = STRING
    r = rewrite_tests(tests, entry, condition, bijection)
    assert (r.applicable, r.reason, r.tests, r.values_mapped, r.roundtrip_checked) == (False, reason, (), 0, 0)


def test_not_applicable_reasons_name_test_and_value():
    r = rewrite_tests(["assert is_woodall(23)", "assert is_woodall(383) == True"], "is_woodall", "iso", BaseDigits(7))
    assert not r.applicable
    assert r.reason == "test 1: value 383 is outside the domain of T (decimal digit 8 is not a base-7 digit)"
    r = rewrite_tests(["assert f(1) == 2", "assert set(f([1])) == {2}"], "f", "iso", Affine(3, 5))
    assert r.reason == "test 1: neither side is a direct call to f(...)"
    r = rewrite_tests(["assert add(2, 3) == 5"], "add", "iso", BaseDigits(7))  # 2, 3, 5 are fixed by base 7
    assert (r.applicable, r.values_mapped) == (False, 0) and "unchanged" in r.reason
    assert rewrite_tests([], "f", "iso", Affine()).reason == "no tests"
    with pytest.raises(ValueError, match="condition must be one of iso, iso_enc, iso_dec"):
        rewrite_tests(ADD[2], "add", "original", Affine())
    with pytest.raises(ValueError, match="wrap it in a list"):
        rewrite_tests("assert add(2, 3) == 5", "add", "iso", Affine())
    with pytest.raises(ValueError, match="entry_point must be a Python identifier"):
        rewrite_tests(ADD[2], "not a name", "iso", Affine())


# ---------------------------------------------------------------- contract and reference source


def test_contract_text_differs_per_condition_and_names_function():
    t = Affine(3, 5)
    texts = {c: contract_text(c, t, "add") for c in ORIGINAL_ISO}
    assert len(set(texts.values())) == 3
    for text in texts.values():
        assert "`add`" in text and "T(v) = 3·v + 5" in text and "T⁻¹(u) = (u - 5) / 3" in text
        assert "nested" in text and "True and False" in text
    assert "Inputs are encoded" in texts["iso"] and "Outputs are encoded" in texts["iso"]
    assert "Inputs are encoded" in texts["iso_enc"] and "Outputs are NOT encoded" in texts["iso_enc"]
    assert "Inputs are NOT encoded" in texts["iso_dec"] and "Outputs are encoded" in texts["iso_dec"]
    assert "def encode(v)" in contract_text("iso", t, "add", include_source=True)
    assert "def encode(v)" not in texts["iso"]
    assert "T(25) = 19" in contract_text("iso", BaseDigits(7), "add")


def test_transformed_reference_errors_and_shape():
    with pytest.raises(ValueError, match="does not define 'add'"):
        transformed_reference("def plus(a, b):\n    return a + b\n", "add", "iso", Affine())
    with pytest.raises(ValueError, match="code does not parse"):
        transformed_reference("def add(a, b) return a + b", "add", "iso", Affine())
    source = transformed_reference(ADD[1], "add", "iso_dec", Affine())
    assert "def _calib_original(a, b)" in source and "def add(*args, **kwargs)" in source
    assert "_calib_decode" not in source.split("def add(*args")[1]  # iso_dec does not decode inputs


def test_metamorphic_check_isolation_and_setup():
    code = "import math\ncounter = []\ndef f(x):\n    counter.append(x)\n    return math.floor(x)\n"
    # Each test runs in a fresh namespace: the list never holds more than one call.
    assert metamorphic_check(code, ["assert f(1.5) == 1 and len(counter) == 1"] * 2) == [True, True]
    assert metamorphic_check("def g():\n    return PI\n", ["assert g() == 3"], setup="PI = 3") == [True]
    assert metamorphic_check("def g(:\n", ["assert True", "assert True"]) == [False, False]
    assert metamorphic_check(code, []) == []
