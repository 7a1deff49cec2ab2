"""The caps on one document: too_large and long_line, in extract_document, the corpus readers and calib extract.

A document over the byte cap is dropped before it is decoded or parsed, one with a line over the
character cap before it is parsed; the readers never load past the byte cap; calib extract names each
file it drops whole. The sizes here are small (caps of a few hundred bytes), the behaviour the same.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from calib._exceptions import InvalidParameterError
from calib.cli import main
from calib.data.extract import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    DEFAULT_MAX_LINE_CHARS,
    extract_document,
    oversized,
)
from calib.data.schema import DROP_REASONS
from calib.data.sources import CorpusSpec, iter_documents

FUNCTION = "def f(x):\n" + "".join(f"    x = x + {i}\n" for i in range(12)) + "    return x\n"


def _extract(document, **caps):
    return extract_document(document, language="python", source="s", path="p", **caps)


def test_the_defaults_are_the_documented_corpus_filters():
    # docs/data.md: 1,000,000 bytes and 1,000 characters (the Codex / The Stack filters)
    assert (DEFAULT_MAX_DOCUMENT_BYTES, DEFAULT_MAX_LINE_CHARS) == (1_000_000, 1_000)
    assert {"too_large", "long_line", "unreadable"} <= set(DROP_REASONS)


def test_a_document_under_both_caps_is_cut_as_before():
    result = _extract(FUNCTION, max_document_bytes=len(FUNCTION), max_line_chars=20)
    assert [row["qualname"] for row in result.functions] == ["f"]
    assert result.dropped == Counter()


@pytest.mark.parametrize("document", [FUNCTION, FUNCTION.encode()])
def test_one_byte_over_the_cap_drops_the_document_as_too_large(document):
    result = _extract(document, max_document_bytes=len(FUNCTION) - 1)
    assert result.functions == [] and result.dropped == Counter(too_large=1)


def test_the_byte_cap_counts_utf8_bytes_not_characters():
    text = FUNCTION.replace("return x", "return 'é'")  # one character, two bytes
    assert _extract(text, max_document_bytes=len(text.encode()), max_line_chars=None).functions
    assert _extract(text, max_document_bytes=len(text), max_line_chars=None).dropped == Counter(too_large=1)


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_a_line_over_the_character_cap_drops_the_document_as_long_line(newline):
    text = FUNCTION.replace("\n", newline) + "y = '" + "a" * 95 + "'" + newline  # a 101-character line
    assert _extract(text, max_line_chars=101).functions
    assert _extract(text, max_line_chars=100).dropped == Counter(long_line=1)
    assert _extract(text.encode(), max_line_chars=100).dropped == Counter(long_line=1)


def test_the_line_cap_counts_characters_of_bytes_documents():
    line = "s = '" + "é" * 60 + "'"  # 66 characters, 126 bytes
    assert oversized((line + "\n").encode(), None, 66) is None
    assert oversized((line + "\n").encode(), None, 65) == "long_line"


def test_none_turns_a_cap_off_and_a_cap_below_one_is_refused():
    huge = FUNCTION + "z = [" + "1, " * 2_000 + "]\n"
    assert _extract(huge, max_document_bytes=None, max_line_chars=None).functions
    assert _extract(huge).dropped == Counter(long_line=1)
    with pytest.raises(InvalidParameterError, match="max_line_chars=0"):
        _extract(FUNCTION, max_line_chars=0)
    with pytest.raises(InvalidParameterError, match="max_document_bytes=-1"):
        _extract(FUNCTION, max_document_bytes=-1)


# --- the corpus readers --------------------------------------------------------------------------


def test_a_plain_file_over_the_cap_is_too_large_and_the_next_file_is_read(tmp_path):
    (tmp_path / "a_big.py").write_text(FUNCTION * 10)
    (tmp_path / "b_small.py").write_text(FUNCTION)
    docs = list(iter_documents(CorpusSpec(paths=(str(tmp_path),), max_document_bytes=len(FUNCTION) * 2)))
    assert [(d.path, d.text is None, d.metadata.get("error")) for d in docs] == [
        ("a_big.py", True, "too_large"), ("b_small.py", False, None)]


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_a_jsonl_line_over_the_cap_is_skipped_unread_and_the_rows_after_it_are_kept(tmp_path, suffix):
    rows = [{"content": FUNCTION, "path": "one.py"}, {"content": FUNCTION * 50, "path": "big.py"},
            {"content": FUNCTION, "path": "three.py"}]
    data = "".join(json.dumps(row) + "\n" for row in rows).encode()
    file = tmp_path / f"rows{suffix}"
    file.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    docs = list(iter_documents(CorpusSpec(paths=(str(file),), max_document_bytes=len(FUNCTION) * 3)))
    assert [(d.source.rsplit("#", 1)[1], d.text is None, d.metadata.get("error")) for d in docs] == [
        ("row=1", False, None), ("row=2", True, "too_large"), ("row=3", False, None)]
    assert docs[2].path == "three.py" and docs[2].text == FUNCTION


def test_a_csv_cell_over_the_cap_is_too_large(tmp_path):
    file = tmp_path / "rows.csv"
    file.write_text('content\n"' + FUNCTION + '"\n"' + FUNCTION * 20 + '"\n')
    docs = list(iter_documents(CorpusSpec(paths=(str(file),), max_document_bytes=len(FUNCTION) * 2)))
    assert [d.metadata.get("error") for d in docs] == [None, "too_large"]


#: A regular file that cannot be read even by root: reading this process's memory at offset 0 fails with
#: EIO (page 0 is never mapped). chmod 000 would not do: the tests may run as root, who reads anything.
UNREADABLE = Path("/proc/self/mem")
needs_proc = pytest.mark.skipif(not UNREADABLE.is_file(), reason="needs Linux /proc/self/mem")


@needs_proc
def test_an_unreadable_file_is_recorded_and_skipped(tmp_path):
    (tmp_path / "ok.py").write_text(FUNCTION)
    docs = list(iter_documents(CorpusSpec(paths=(str(UNREADABLE), str(tmp_path / "ok.py")))))
    assert [(d.source, d.metadata.get("error")) for d in docs] == [
        (str(UNREADABLE), "unreadable"), (str(tmp_path / "ok.py"), None)]


def test_corpus_spec_refuses_a_cap_below_one():
    with pytest.raises(InvalidParameterError, match="max_document_bytes must be None or a positive integer"):
        CorpusSpec(paths=("x",), max_document_bytes=0)


# --- calib extract ---------------------------------------------------------------------------------


def _cli(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


def test_calib_extract_drops_and_names_the_files_over_the_caps(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "big.py").write_text(FUNCTION * 30)  # over 3,000 bytes
    (corpus / "minified.py").write_text(FUNCTION + "x = [" + "1, " * 400 + "]\n")  # a 1,206-character line
    (corpus / "ok.py").write_text(FUNCTION)
    out = tmp_path / "functions.parquet"
    code, stdout, stderr = _cli(capsys, "extract", str(corpus), "--min-lines", "1", "--max-file-bytes", "3000",
                                "--out", str(out), "--json")
    assert code == 0, stderr
    record = json.loads(stdout)
    assert record["files"] == 3 and record["kept"] == 1
    assert record["dropped"] == {"too_large": 1, "long_line": 1}
    assert record["dropped_files"] == {str(corpus / "big.py"): "too_large",
                                       str(corpus / "minified.py"): "long_line"}
    import polars as pl

    assert pl.read_parquet(out)["path"].to_list() == ["ok.py"]


def test_calib_extract_summary_lists_the_dropped_files_and_obeys_max_line_chars(tmp_path, capsys):
    (tmp_path / "wide.py").write_text(FUNCTION + "y = '" + "a" * 1_500 + "'\n")
    code, stdout, _ = _cli(capsys, "extract", str(tmp_path / "wide.py"), "--min-lines", "1")
    assert code == 0
    assert "dropped: long_line 1" in stdout and f"dropped {tmp_path / 'wide.py'}: long_line" in stdout
    code, stdout, _ = _cli(capsys, "extract", str(tmp_path / "wide.py"), "--min-lines", "1",
                           "--max-line-chars", "2000")
    assert code == 0 and stdout.startswith("kept 1 functions from 1 files")


@needs_proc
def test_calib_extract_records_an_unreadable_file_and_goes_on(tmp_path, capsys):
    (tmp_path / "ok.py").write_text(FUNCTION)
    code, stdout, stderr = _cli(capsys, "extract", str(UNREADABLE), str(tmp_path / "ok.py"), "--language", "python",
                                "--min-lines", "1", "--json")
    assert code == 0, stderr
    record = json.loads(stdout)
    assert record["kept"] == 1 and record["files"] == 2
    assert record["dropped"] == {"unreadable": 1} and record["dropped_files"] == {str(UNREADABLE): "unreadable"}
