"""Reading corpora: files, directories, globs and JSONL / Parquet / CSV tables, plain or compressed."""

from __future__ import annotations

import csv
import gzip
import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calib._exceptions import InputError, InvalidParameterError
from calib.data.sources import CorpusSpec, Document, infer_format, iter_documents

ROWS = [
    {
        "content": f"def f{i}(x):\n    return x + {i}\n",
        "path": f"pkg/m{i}.py",
        "repo": "org/repo",
        "license": "mit",
        "language": "Python",
        "date": "2024-01-02",
    }
    for i in range(10)
]


def _compress(path: Path, data: bytes) -> None:
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(data))
    elif path.name.endswith(".zst"):
        with pa.CompressedOutputStream(str(path), "zstd") as out:
            out.write(data)
    else:
        path.write_bytes(data)


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    _compress(path, "".join(json.dumps(r) + "\n" for r in rows).encode())
    return path


def _write_csv(path: Path, rows: list[dict]) -> Path:
    import io

    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    _compress(path, buffer.getvalue().encode())
    return path


def _write_parquet(path: Path, rows: list[dict]) -> Path:
    table = pa.Table.from_pylist(rows)
    if path.name.endswith((".gz", ".zst")):
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        _compress(path, sink.getvalue().to_pybytes())
    else:
        pq.write_table(table, path, row_group_size=4)
    return path


WRITERS = {"jsonl": _write_jsonl, "csv": _write_csv, "parquet": _write_parquet}


@pytest.mark.parametrize("compression", ["", ".gz", ".zst"])
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_tables_in_every_format_and_compression(tmp_path, fmt, compression):
    file = WRITERS[fmt](tmp_path / f"corpus.{fmt}{compression}", ROWS)
    docs = list(iter_documents(CorpusSpec(paths=(str(file),), chunk_rows=3)))
    assert [d.text for d in docs] == [r["content"] for r in ROWS]
    assert docs[0].path == "pkg/m0.py"
    assert docs[0].metadata == {"path": "pkg/m0.py", "repo": "org/repo", "license": "mit", "language": "Python",
                                "date": "2024-01-02"}  # fmt: skip
    # CSV rows are numbered by the line they start on: line 1 is the header, each record spans 3 lines
    last = 2 + 3 * 9 if fmt == "csv" else 10
    assert docs[0].source == f"{file}#row={2 if fmt == 'csv' else 1}"
    assert docs[-1].source == f"{file}#row={last}"


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_chunk_boundaries_lose_and_repeat_nothing(tmp_path, fmt):
    file = WRITERS[fmt](tmp_path / f"c.{fmt}", ROWS)
    sources = [d.source for d in iter_documents(CorpusSpec(paths=(str(file),), format=fmt, chunk_rows=3))]
    rows = [2 + 3 * i for i in range(10)] if fmt == "csv" else list(range(1, 11))
    assert sources == [f"{file}#row={row}" for row in rows]


def test_configured_content_and_metadata_columns(tmp_path):
    rows = [{"code": "x = 1\n", "max_stars_repo_path": "a/b.py", "max_stars_repo_name": "o/r", "other": 3}]
    file = _write_parquet(tmp_path / "t.parquet", rows)
    spec = CorpusSpec(
        paths=(str(file),),
        content_column="code",
        metadata_columns={"path": "max_stars_repo_path", "repo": "max_stars_repo_name"},
    )
    (doc,) = iter_documents(spec)
    assert doc == Document("x = 1\n", f"{file}#row=1", "a/b.py", {"path": "a/b.py", "repo": "o/r"})


def test_rows_without_path_column_use_the_source_as_path(tmp_path):
    file = _write_jsonl(tmp_path / "t.jsonl", [{"content": "pass\n", "stars": 5}])
    (doc,) = iter_documents(CorpusSpec(paths=(str(file),)))
    assert doc.path == doc.source == f"{file}#row=1"
    assert doc.metadata == {}


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_empty_content_is_recorded_not_raised(tmp_path, fmt):
    rows = [{"content": "a = 1\n", "repo": "r"}, {"content": "", "repo": "r"}, {"content": "  \n", "repo": "r"}]
    if fmt != "csv":
        rows.append({"content": None, "repo": "r"})
    file = WRITERS[fmt](tmp_path / f"e.{fmt}", rows)
    docs = list(iter_documents(CorpusSpec(paths=(str(file),))))
    assert docs[0].text == "a = 1\n"
    assert [d.metadata for d in docs[1:]] == [{"repo": "r", "error": "empty_document"}] * (len(rows) - 1)
    assert all(d.text is None for d in docs[1:])


def test_malformed_json_line_is_recorded_and_reading_continues(tmp_path):
    file = tmp_path / "bad.jsonl"
    file.write_text('{"content": "a = 1\\n"}\n{"content": "oops\n\n[1, 2]\n{"content": "b = 2\\n"}\n')
    docs = list(iter_documents(CorpusSpec(paths=(str(file),))))
    assert [d.text for d in docs] == ["a = 1\n", None, None, "b = 2\n"]
    assert docs[1].source == f"{file}#row=2"
    assert docs[1].metadata["error"].startswith("bad_row: ")
    assert "\n" not in docs[1].metadata["error"]
    assert docs[2].metadata == {"error": "bad_row: expected a JSON object, got list"}
    assert docs[3].source == f"{file}#row=5"  # blank lines keep their numbers


def test_non_utf8_file_is_a_document_without_text(tmp_path):
    (tmp_path / "good.py").write_text("def f():\n    return 1\n")
    (tmp_path / "bad.py").write_bytes(b"x = '\xff\xfe'\n")
    docs = {Path(d.source).name: d for d in iter_documents(CorpusSpec(paths=(str(tmp_path),)))}
    assert docs["bad.py"] == Document(None, str(tmp_path / "bad.py"), "bad.py", {"error": "not_utf8"})
    assert docs["good.py"].text == "def f():\n    return 1\n"


def test_non_utf8_csv_row_is_dropped_alone(tmp_path):
    file = tmp_path / "t.csv"
    file.write_bytes(b'content,repo\n"x = \'\xff\'",r\n"y = 2",r\n')
    docs = list(iter_documents(CorpusSpec(paths=(str(file),))))
    assert [(d.text, d.metadata.get("error")) for d in docs] == [(None, "not_utf8"), ("y = 2", None)]


def test_directories_recurse_and_filter_by_extension(tmp_path):
    for rel in ("a.py", "sub/b.py", "sub/deeper/c.py", "sub/notes.txt", "d.PY"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"# {rel}\n")
    docs = list(iter_documents(CorpusSpec(paths=(str(tmp_path),), extensions=("py",))))
    assert [d.path for d in docs] == ["a.py", "d.PY", "sub/b.py", "sub/deeper/c.py"]
    assert all(d.source == str(tmp_path / d.path) for d in docs)
    assert docs[2].text == "# sub/b.py\n"


def test_globs_expand_recursively_and_filter(tmp_path):
    for rel in ("x/a.py", "x/y/b.py", "x/y/c.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("pass\n")
    docs = list(iter_documents(CorpusSpec(paths=(str(tmp_path / "x" / "**" / "*"),), extensions=(".py",))))
    assert sorted(Path(d.source).name for d in docs) == ["a.py", "b.py"]
    with pytest.raises(InputError, match="no file matches this glob"):
        list(iter_documents(CorpusSpec(paths=(str(tmp_path / "nothing*.py"),))))


def test_format_is_inferred_per_file(tmp_path):
    assert infer_format("a/b.JSONL.gz") == "jsonl"
    assert infer_format("b.ndjson") == "jsonl"
    assert infer_format("b.pq.zst") == "parquet"
    assert infer_format("b.csv") == "csv"
    assert infer_format("b.py") == "files"
    with pytest.raises(InputError, match="cannot tell the table format"):
        infer_format(tmp_path / "archive.tar.gz")


def test_missing_content_column_lists_the_columns(tmp_path):
    file = _write_parquet(tmp_path / "t.parquet", [{"text": "x", "repo": "r"}])
    with pytest.raises(InputError, match=r"no content column 'content'; the columns are 'text', 'repo'") as info:
        list(iter_documents(CorpusSpec(paths=(str(file),))))
    assert str(file) in str(info.value) and "set content_column" in str(info.value)
    csv_file = _write_csv(tmp_path / "t.csv", [{"code": "x"}])
    with pytest.raises(InputError, match=r"the columns are 'code'"):
        list(iter_documents(CorpusSpec(paths=(str(csv_file),))))
    jsonl_file = _write_jsonl(tmp_path / "t.jsonl", [{"code": "x"}])
    with pytest.raises(InputError, match=r"the columns are 'code'"):
        list(iter_documents(CorpusSpec(paths=(str(jsonl_file),))))


def test_named_metadata_column_must_exist(tmp_path):
    file = _write_jsonl(tmp_path / "t.jsonl", [{"content": "x"}])
    with pytest.raises(InputError, match=r"metadata column\(s\) 'repo_name' not in the table"):
        list(iter_documents(CorpusSpec(paths=(str(file),), metadata_columns={"repo": "repo_name"})))


def test_missing_path_and_bad_spec(tmp_path):
    with pytest.raises(InputError, match="no such file or directory") as info:
        list(iter_documents(CorpusSpec(paths=(str(tmp_path / "absent.jsonl"),))))
    assert "absent.jsonl" in str(info.value)
    with pytest.raises(InvalidParameterError, match="format must be one of files, jsonl, parquet, csv"):
        CorpusSpec(paths=("x",), format="xml")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="chunk_rows"):
        CorpusSpec(paths=("x",), chunk_rows=0)
    with pytest.raises(InvalidParameterError, match="paths"):
        iter_documents(CorpusSpec())


def _big_jsonl(path: Path, rows: int) -> Path:
    block = "".join(json.dumps({"content": f"def f{i}(x):\n    return x * {i}\n" * 20}) + "\n" for i in range(1000))
    with open(path, "w") as out:
        for _ in range(rows // 1000):
            out.write(block)
    return path


def test_reading_is_lazy_and_streams_the_file(tmp_path):
    # 20k rows of ~500 bytes: 10 MB, ten times the reader's 1 MiB buffer.
    file = _big_jsonl(tmp_path / "big.jsonl", 20_000)
    docs = iter_documents(CorpusSpec(paths=(str(file),)))
    assert isinstance(docs, Iterator)
    first = next(docs)
    assert first.source == f"{file}#row=1"
    # A row appended after the first document was read is still seen: the reader had not loaded the file.
    with open(file, "a") as out:
        out.write(json.dumps({"content": "appended = True\n"}) + "\n")
    rest = list(docs)
    assert len(rest) == 20_000 and rest[-1].text == "appended = True\n"


def test_memory_is_bounded_by_the_row_not_the_file(tmp_path):
    file = _big_jsonl(tmp_path / "big.jsonl", 20_000)
    size = file.stat().st_size
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_documents(CorpusSpec(paths=(str(file),))))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 20_000
    assert peak < size / 10, (peak, size)
