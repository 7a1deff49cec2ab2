"""Python function extraction (calib.data.extract) and the ``calib extract`` command."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import polars as pl
import pytest

from calib._exceptions import InvalidParameterError
from calib.cli.main import main
from calib.data.extract import Deduplicator, extract_document, extract_python
from calib.data.schema import DROP_REASONS, FUNCTIONS_SCHEMA

FIXTURES = Path(__file__).parent / "fixtures"


def _extract(text: str, **kwargs):
    kwargs.setdefault("min_lines", 0)
    return extract_python(textwrap.dedent(text), source="s.py", path="s.py", **kwargs)


def _by_name(result):
    return {row["qualname"]: row for row in result.functions}


def test_rows_follow_the_schema_and_reassemble_the_document():
    text = (FIXTURES / "sample.py").read_text()
    result = extract_python(text, source="sample.py", path="sample.py", min_lines=0,
                            metadata={"repo": "r", "license": "MIT"})
    assert [row["qualname"] for row in result.functions] == ["fib", "Greeter.greet"]
    for row in result.functions:
        assert list(row) == list(FUNCTIONS_SCHEMA)
        whole = row["context"] + row["signature"] + row["body"]
        assert text.startswith(whole)
        assert not row["signature"].endswith(("\n", " "))
        assert row["repo"] == "r" and row["license"] == "MIT" and row["date"] is None
    fib = result.functions[0]
    assert fib["signature"] == "@functools.cache\ndef fib(n: int) -> int:"
    assert fib["docstring"] == '"""The n-th Fibonacci number."""'
    assert fib["body"].startswith('\n    """The n-th')
    assert fib["body_lines"] == 3
    assert fib["start_line"] == 6
    assert fib["context"].endswith("import functools\n\n\n")
    pl.DataFrame(result.functions, schema=FUNCTIONS_SCHEMA)  # the rows fit the declared schema


def test_nested_functions_stay_in_their_parent_and_methods_get_the_class():
    result = _extract("""
        class Outer:
            class Inner:
                def method(self):
                    return 1

            @staticmethod
            @other(
                1,
            )
            def deco(x):
                def helper():
                    return x
                return helper

        if True:
            def variant():
                pass
    """)
    rows = _by_name(result)
    assert set(rows) == {"Outer.Inner.method", "Outer.deco", "variant"}
    assert rows["Outer.deco"]["signature"] == "    @staticmethod\n    @other(\n        1,\n    )\n    def deco(x):"
    assert "def helper" in rows["Outer.deco"]["body"]
    assert rows["Outer.deco"]["body_lines"] == 3


def test_async_and_multiline_signatures():
    result = _extract('''
        async def fetch(
            url: str,
            *,
            retries: dict[str, int] = {"a": 1},  # a comment: with a colon
        ) -> bytes:
            """Get it.

            Details."""
            await sleep(1)
            return b""
    ''')
    row = result.functions[0]
    assert row["signature"].startswith("async def fetch(\n") and row["signature"].endswith(") -> bytes:")
    assert row["docstring"].startswith('"""Get it.') and row["docstring"].endswith('Details."""')
    assert row["body_lines"] == 2


def test_one_line_function_and_unicode_columns():
    result = _extract("""
        def f(s="é→"): return s  # ü
    """)
    row = result.functions[0]
    assert row["signature"] == 'def f(s="é→"):'
    assert row["body"] == " return s  # ü"


def test_tabs_are_kept_and_crlf_is_normalised():
    text = "class A:\r\n\tdef m(self):\r\n\t\tx = 1\r\n\t\treturn x\r\n"
    result = extract_document(text.encode(), language="python", source="s", path="s", min_lines=0)
    row = result.functions[0]
    assert row["signature"] == "\tdef m(self):"
    assert row["body"] == "\n\t\tx = 1\n\t\treturn x"
    assert "\r" not in row["context"] + row["body"]


def test_non_utf8_bytes_drop_the_document():
    result = extract_document(b"def f():\n    return '\xff'\n", language="python", source="s", path="s")
    assert result.functions == [] and result.dropped == {"not_utf8": 1}


def test_syntax_error_skips_the_document_with_a_reason():
    result = _extract("def ok():\n    return 1\n\ndef broken(:\n    pass\n")
    assert result.functions == [] and result.dropped == {"syntax_error": 1}


@pytest.mark.parametrize("sentinel", ["<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<|fim_prefix|>",
                                      "<|fim_middle|>", "<|fim_suffix|>", "<fim-prefix>", "<FIM_PAD>"])
def test_fim_sentinels_drop_the_document(sentinel):
    result = _extract(f"def f():\n    return '{sentinel}'\n")
    assert result.functions == [] and result.dropped == {"fim_sentinel": 1}


def test_html_pre_tag_is_not_a_sentinel():
    assert len(_extract("def f():\n    return '<pre>'\n").functions) == 1


def test_empty_document():
    assert _extract("  \n\n").dropped == {"empty_document": 1}


def test_length_filters_count_reasons():
    short = "def short():\n    return 1\n\n"
    long_ = "def long():\n" + "".join(f"    x{i} = {i}\n" for i in range(60)) + "\n"
    fine = "def fine():\n" + "".join(f"    y{i} = {i}\n" for i in range(12))
    result = extract_python(short + long_ + fine, source="s", path="s")
    assert [row["qualname"] for row in result.functions] == ["fine"]
    assert result.dropped == {"too_short": 1, "too_long": 1}
    assert set(result.dropped) <= set(DROP_REASONS)


def test_bad_parameters_name_the_value():
    with pytest.raises(InvalidParameterError, match="min_lines=5, max_lines=2"):
        extract_python("x = 1", source="s", path="s", min_lines=5, max_lines=2)
    with pytest.raises(InvalidParameterError, match="language='cobol'"):
        extract_document("x", language="cobol", source="s", path="s")


def test_huge_file_completes_with_right_counts():
    n = 20_000
    parts = []
    for i in range(n):
        lines = 12 if i % 2 else 3
        parts.append(f"def f{i}(a):\n" + "".join(f"    a += {j} * {i}\n" for j in range(lines)) + "    return a\n")
    text = "\n".join(parts)
    result = extract_python(text, source="big.py", path="big.py", min_lines=10, max_lines=50)
    assert len(result.functions) == n // 2
    assert result.dropped == {"too_short": n // 2}
    assert all(len(row["context"]) <= 8_000 for row in result.functions)
    assert result.functions[-1]["start_line"] == text.count("\n") - 13


def test_deduplicator_drops_repeats_across_documents():
    body = "def f(x):\n    y = x + 1\n    return y\n"
    method = "class K:\n    def f(x):\n        y = x + 1\n\n        return y   \n"
    dedup = Deduplicator()
    first = extract_document(body, language="python", source="a", path="a", min_lines=0, deduplicator=dedup)
    second = extract_document(method, language="python", source="b", path="b", min_lines=0, deduplicator=dedup)
    assert len(first.functions) == 1
    assert second.functions == [] and second.dropped == {"duplicate": 1}
    assert len(dedup) == 1


# --- calib extract --------------------------------------------------------------------------------


def _run(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


def test_cli_writes_the_functions_table(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("sample.py", "sample.go", "Sample.java"):
        (corpus / name).write_bytes((FIXTURES / name).read_bytes())
    (corpus / "copy.py").write_bytes((FIXTURES / "sample.py").read_bytes())
    (corpus / "bad.py").write_bytes(b"def f(:\n")
    (corpus / "notes.txt").write_text("ignored")
    out = tmp_path / "functions.parquet"
    code, stdout, stderr = _run(capsys, "extract", str(corpus), "--min-lines", "1", "--out", str(out), "--json")
    assert code == 0, stderr
    record = json.loads(stdout)
    assert set(record) == {"kept", "dropped", "dropped_files", "files", "seconds", "out"}
    assert record["files"] == 5 and record["out"] == str(out)
    assert record["dropped"]["syntax_error"] == 1 and record["dropped"]["duplicate"] == 2
    # the Python file that does not parse is dropped whole, and named (duplicates are single functions)
    assert record["dropped_files"] == {str(corpus / "bad.py"): "syntax_error"}
    table = pl.read_parquet(out)
    assert dict(table.schema) == FUNCTIONS_SCHEMA
    assert table.height == record["kept"] > 0
    assert set(table["language"]) == {"python", "go", "java"}
    assert not list(tmp_path.glob(".*.tmp"))


def test_cli_summary_glob_and_language(tmp_path, capsys, monkeypatch):
    (tmp_path / "a.txt").write_text("def f():\n    return 1\n")
    code, stdout, _ = _run(capsys, "extract", str(tmp_path / "*.txt"), "--language", "python", "--min-lines", "0")
    assert code == 0
    assert stdout.startswith("kept 1 functions from 1 files")


@pytest.mark.parametrize("args", [("extract", "/no/such/path"), ("extract", "/no/such/*.py"),
                                  ("extract", "--min-lines", "9", "--max-lines", "2", "x")])
def test_cli_bad_input_is_one_line(capsys, args):
    code, stdout, stderr = _run(capsys, *args)
    assert code == 2 and stdout == ""
    assert stderr.count("\n") == 1 and "Traceback" not in stderr


def test_cli_unknown_extension(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("x")
    code, _, stderr = _run(capsys, "extract", str(tmp_path / "a.txt"))
    assert code == 2 and "--language" in stderr
