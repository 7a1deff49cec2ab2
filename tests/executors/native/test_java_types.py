"""Java parameters of boxed, big-number and collection types (calib/executors/native/java.py).

benchmarks/native.py found most Java methods of real code refused for class-type parameters (List<E>,
BigInteger, ...). The outputs are recomputed here in Python (longs wrap to 64 bits, as Java's do;
Math.round is floor(x + 0.5)).
"""

from __future__ import annotations

import json
import math

import pytest

from calib.executors.native.java import parse_java
from calib.executors.native.types import Unsupported
from tests.executors.native.test_native import compare, needs

WEIGHTED = """public static long weighted(List<Integer> xs, BigInteger scale, Set<String> tags, Double bias) {
    long total = 0;
    for (int i = 0; i < xs.size(); i++) {
        total += (long) xs.get(i) * (i + 1);
    }
    if (tags.contains("a")) total += 1;
    xs.add(7);
    return scale.multiply(BigInteger.valueOf(total)).longValue() + Math.round(bias);
}"""
CONTEXT = "import java.util.*;\nimport java.math.BigInteger;\n\npublic class Stats {\n"


@needs("java")
def test_collections_big_numbers_and_boxed_values_as_parameters():
    result = compare("java", WEIGHTED, [WEIGHTED], context=CONTEXT, input_timeout=5.0)
    assert result.valid_inputs == 10, result.reason
    for row in result.inputs:
        s = row.state
        total = sum(v * (i + 1) for i, v in enumerate(s["xs"])) + ("a" in set(s["tags"]))
        out = json.loads(row.output)
        product = (s["scale"] * total + 2**63) % 2**64 - 2**63  # BigInteger.longValue keeps the low 64 bits
        assert out["return"] == (product + math.floor(s["bias"] + 0.5) + 2**63) % 2**64 - 2**63, s
        assert out["args"]["xs"] == [*s["xs"], 7]  # the list x changed is reported after the call
        assert out["args"]["tags"] == list(dict.fromkeys(s["tags"]))  # a set keeps its first occurrences, in order


def test_the_types_read():
    sig = parse_java("static int f(java.util.List<String> a, Long b, ArrayList<Double> c, BigDecimal d) { return 0; }")
    assert [(p.type.kind, p.type.native) for p in sig.params] == [
        ("list", "java.util.ArrayList<String>"), ("int", "Long"), ("list", "java.util.ArrayList<Double>"),
        ("float", "BigDecimal")]
    for bad in ("Map<String, Integer> m", "List<List<Integer>> m", "List<Object> m"):
        with pytest.raises(Unsupported):
            parse_java(f"static int f({bad}) {{ return 0; }}")


TALLY = """public static int tally(CharSequence text, StringBuilder log, Object tag, String... words) {
    int n = 0;
    for (String w : words) if (text.toString().contains(w)) n++;
    log.append(tag).append(':').append(n);
    return n + text.length();
}"""


def utf16_len(text: str) -> int:
    """Java's String.length(): UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@needs("java")
def test_text_builders_object_and_varargs_parameters():
    result = compare("java", TALLY, [TALLY], context="public class Words {\n", input_timeout=5.0)
    assert result.valid_inputs == 10, result.reason
    for row in result.inputs:
        s = row.state
        n = sum(1 for w in s["words"] if w in s["text"])
        out = json.loads(row.output)
        assert out["return"] == n + utf16_len(s["text"]), s
        # the builder x appended to is reported after the call (the Object parameter is a string)
        assert out["args"]["log"] == f"{s['log']}{s['tag']}:{n}"
        assert out["args"]["words"] == s["words"]  # a varargs array is an array: reported like one


def test_text_and_varargs_types_read():
    sig = parse_java("static void f(java.lang.CharSequence a, StringBuffer b, Object c, int... d) { }")
    assert [(p.type.kind, p.type.native, p.mutable) for p in sig.params] == [
        ("str", "CharSequence", False), ("str", "StringBuffer", True), ("str", "Object", False),
        ("list", "int[]", True)]
