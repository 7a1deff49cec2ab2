"""Opcode histograms, entropy and Jensen–Shannon divergence (paper §5.5, §6.3.2)."""

from __future__ import annotations

import dis
import math
import sys
from collections import Counter
from types import CodeType

import numpy as np
import pytest
import scipy.spatial.distance
import scipy.stats

from calib._exceptions import InvalidParameterError
from calib.probes.opcodes import EXCLUDED_OPCODES, opcode_entropy, opcode_histogram, opcode_jsd, pool

ITERATIVE = """
def factorial(n):
    result = 1
    for i in range(2, n + 1):
        result *= i
    return result
"""
# The same program with other names, spacing and comments: the same bytecode up to operands.
RENAMED = """
def fact(k):   # another name
    acc=1
    # a comment line
    for j in range(2,k+1):
        acc *= j

    return acc
"""
RECURSIVE = """
def factorial(n):
    if n < 2:
        return 1
    return n * factorial(n - 1)
"""
LOOP_SUM = """
def total(n):
    s = 0
    for i in range(n):
        s += i
    return s
"""
RANGE_SUM = """
def total(n):
    return sum(range(n))
"""
NESTED = """
def outer(values):
    def inner(x):
        return x * 2
    scale = lambda y: y + 1
    return [scale(inner(v)) for v in values if v]
"""


def flat_counts(code: CodeType) -> Counter:
    """The counts of one code object alone (no nested code), by dis."""
    return Counter(i.opname for i in dis.get_instructions(code) if i.opname not in EXCLUDED_OPCODES)


def test_identical_and_renamed_programs_have_zero_divergence():
    a, b = opcode_histogram(ITERATIVE), opcode_histogram(RENAMED)
    assert a == b
    assert opcode_jsd(a, a) == 0.0
    assert opcode_jsd(a, b) == 0.0


@pytest.mark.parametrize("first,second", [(ITERATIVE, RECURSIVE), (LOOP_SUM, RANGE_SUM)],
                         ids=["iterative-vs-recursive-factorial", "loop-vs-sum-range"])
def test_different_algorithms_diverge(first, second):
    a, b = opcode_histogram(first), opcode_histogram(second)
    divergence = opcode_jsd(a, b)
    assert 0 < divergence <= 1
    # Reference: the square of scipy's Jensen–Shannon distance in base 2 over the union of opcodes.
    keys = sorted(set(a) | set(b))
    p, q = np.array([a.get(k, 0) for k in keys], float), np.array([b.get(k, 0) for k in keys], float)
    assert divergence == pytest.approx(scipy.spatial.distance.jensenshannon(p, q, base=2) ** 2, abs=1e-12)
    assert opcode_jsd(b, a) == pytest.approx(divergence, abs=1e-15)


def test_recursion_and_loop_show_their_signature_opcodes():
    iterative, recursive = opcode_histogram(ITERATIVE), opcode_histogram(RECURSIVE)
    assert iterative["FOR_ITER"] == 1 and "FOR_ITER" not in recursive
    assert recursive["COMPARE_OP"] == 1 and "COMPARE_OP" not in iterative


def test_entropy_by_hand():
    # {A: 2, B: 2}: π = (1/2, 1/2), H = 2 · ½ · log2 2 = 1 bit.
    assert opcode_entropy({"A": 2, "B": 2}) == pytest.approx(1.0, abs=1e-15)
    # {A: 1, B: 1, C: 2}: π = (¼, ¼, ½), H = ¼·2 + ¼·2 + ½·1 = 1.5 bits.
    assert opcode_entropy({"A": 1, "B": 1, "C": 2}) == pytest.approx(1.5, abs=1e-15)
    assert opcode_entropy({"A": 7}) == 0.0
    assert opcode_entropy({"A": 3, "B": 0}) == 0.0


@pytest.mark.parametrize("source", [ITERATIVE, RECURSIVE, NESTED, RANGE_SUM])
def test_entropy_matches_scipy(source):
    hist = opcode_histogram(source)
    assert opcode_entropy(hist) == pytest.approx(scipy.stats.entropy(list(hist.values()), base=2), abs=1e-12)
    assert 0 < opcode_entropy(hist) <= math.log2(len(hist))


def test_empty_or_negative_histograms_are_rejected():
    with pytest.raises(InvalidParameterError, match="hist is empty"):
        opcode_entropy({})
    with pytest.raises(InvalidParameterError, match="hist is empty"):
        opcode_entropy(pool([None, None]))
    with pytest.raises(InvalidParameterError, match="hist\\['A'\\]=-1"):
        opcode_entropy({"A": -1, "B": 3})
    with pytest.raises(ValueError, match="p_counts"):
        opcode_jsd({}, {"A": 1})


def test_nested_functions_lambdas_and_comprehensions_are_counted():
    module = compile(NESTED, "<test>", "exec")
    # Walk by hand: module -> outer -> (inner, <lambda>, <listcomp>), found by name in co_consts.
    outer = next(c for c in module.co_consts if isinstance(c, CodeType) and c.co_name == "outer")
    nested = {c.co_name: c for c in outer.co_consts if isinstance(c, CodeType)}
    # CPython 3.12 inlines comprehensions (PEP 709); 3.11 compiles them to their own code object.
    assert set(nested) == {"inner", "<lambda>"} | ({"<listcomp>"} if sys.version_info < (3, 12) else set())
    expected = flat_counts(module) + flat_counts(outer) + sum((flat_counts(c) for c in nested.values()), Counter())
    hist = opcode_histogram(NESTED)
    assert hist == dict(expected)
    assert sum(hist.values()) > sum(flat_counts(module).values()) + sum(flat_counts(outer).values())
    if sys.version_info < (3, 12):
        assert hist["RETURN_VALUE"] == 5  # module, outer, inner, lambda, list comprehension


def test_histogram_excludes_bookkeeping_and_is_sorted():
    hist = opcode_histogram(NESTED)
    assert not set(hist) & EXCLUDED_OPCODES
    assert list(hist) == sorted(hist)
    assert all(name in dis.opmap for name in hist)  # base opcode names, no specialised forms


@pytest.mark.parametrize("source", ["def f(:\n    pass", "return (", "x = 1\x00"])
def test_unparsable_source_gives_none(source):
    assert opcode_histogram(source) is None


def test_pool_is_the_sum_and_skips_none():
    a, b, c = opcode_histogram(ITERATIVE), opcode_histogram(RECURSIVE), opcode_histogram(RANGE_SUM)
    pooled = pool([a, None, b, c, None])
    keys = set(a) | set(b) | set(c)
    assert pooled == {k: a.get(k, 0) + b.get(k, 0) + c.get(k, 0) for k in sorted(keys)}
    assert list(pooled) == sorted(pooled)
    assert pool([]) == {} and pool([None]) == {}


def test_comprehension_and_loop_differ_as_the_paper_warns():
    # §8 construct validity: behaviourally identical programs can compile to different bytecode.
    loop = "def squares(n):\n    out = []\n    for i in range(n):\n        out.append(i * i)\n    return out\n"
    comprehension = "def squares(n):\n    return [i * i for i in range(n)]\n"
    assert opcode_jsd(opcode_histogram(loop), opcode_histogram(comprehension)) > 0
