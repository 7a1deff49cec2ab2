"""Function extraction from C, C++, Java, Rust and Go with the pinned tree-sitter grammars."""

from __future__ import annotations

from pathlib import Path

import pytest

from calib.data.extract import extract_document
from calib.data.treesitter import function_candidates, parser

FIXTURES = Path(__file__).parent / "fixtures"


def _rows(name: str, language: str, **kwargs):
    text = (FIXTURES / name).read_text()
    result = extract_document(text, language=language, source=name, path=name, min_lines=0, **kwargs)
    return text, {row["qualname"]: row for row in result.functions}


def _check_spans(text, rows):
    for row in rows.values():
        assert row["context"] + row["signature"] in text
        assert row["body"].startswith("{") and row["body"].endswith("}")
        assert not row["signature"].endswith((" ", "\n", "{"))
        assert text.splitlines()[row["start_line"] - 1].startswith(row["signature"].split("\n")[0])


def test_c():
    text, rows = _rows("sample.c", "c")
    assert set(rows) == {"sum_to", "main"}
    assert rows["sum_to"]["signature"] == "static long sum_to(int n)"
    assert rows["sum_to"]["docstring"] == "/* Sum the first n integers. */"
    assert rows["sum_to"]["body_lines"] == 5
    _check_spans(text, rows)


def test_cpp():
    text, rows = _rows("sample.cpp", "cpp")
    assert set(rows) == {"Polygon.area", "geo_count"}  # "= default" has no body
    assert rows["Polygon.area"]["signature"] == "  double area() const"
    assert rows["Polygon.area"]["docstring"] == "// Area by the shoelace formula."
    assert rows["geo_count"]["docstring"] == "/// Count vertices."
    _check_spans(text, rows)


def test_cpp_template_and_out_of_line_method():
    rows = function_candidates("cpp", "template <class T>\nT Box<T>::get() const {\n  return v;\n}\n")
    assert [(c.qualname, c.signature) for c in rows] == [("Box.get", "template <class T>\nT Box<T>::get() const")]


def test_java():
    text, rows = _rows("Sample.java", "java")
    assert set(rows) == {"Sample.Sample", "Sample.scale"}  # the abstract method has no body
    scale = rows["Sample.scale"]
    assert scale["signature"] == "    @Override\n    public int scale(int value)"
    assert scale["docstring"].startswith("/**") and "Scale a value" in scale["docstring"]
    assert scale["body_lines"] == 5
    _check_spans(text, rows)


def test_rust():
    text, rows = _rows("sample.rs", "rust")
    assert set(rows) == {"Stack.push", "brace_char"}
    push = rows["Stack.push"]
    assert push["signature"] == "    #[inline]\n    pub fn push(&mut self, item: T) -> usize"
    assert push["docstring"] == "/// Push an item and return the new depth."
    assert rows["brace_char"]["docstring"] == "// Free function."
    _check_spans(text, rows)


def test_go():
    text, rows = _rows("sample.go", "go")
    assert set(rows) == {"Counter.Add", "Join"}
    add = rows["Counter.Add"]
    assert add["signature"] == "func (c *Counter) Add(line string) int"
    assert add["docstring"].startswith("// Add records")
    assert add["body_lines"] == 8 and "\tfresh := 0" in add["body"]
    assert rows["Join"]["docstring"] == ""
    _check_spans(text, rows)


def test_comment_separated_by_a_blank_line_is_not_a_docstring():
    rows = function_candidates("rust", "// unrelated\n\nfn f() {\n    1\n}\n")
    assert rows[0].docstring == ""


def test_function_with_a_syntax_error_is_dropped_alone():
    text = "int good(void) {\n  return 1;\n}\nint bad(void) {\n  return 1 +;\n}\n"
    result = extract_document(text, language="c", source="s", path="s", min_lines=0)
    assert [row["qualname"] for row in result.functions] == ["good"]
    assert result.dropped == {"syntax_error": 1}


def test_parser_is_cached_and_unknown_language_named():
    assert parser("go") is parser("go")
    with pytest.raises(ValueError, match="language='cobol'"):
        parser("cobol")
