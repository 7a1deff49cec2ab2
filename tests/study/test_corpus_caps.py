"""The caps of ``calib extract`` where a study reads a corpus, and in ``calib dedup``.

``max_file_bytes`` and ``max_line_chars`` of ``[data]`` and ``[dedup]`` (docs/study-spec.md) and
``calib dedup --max-file-bytes / --max-line-chars`` (docs/dedup.md): a file with a 2,000-character line
is dropped by default (cap 1,000) and kept with a cap of 5,000; a file over 1,000,000 bytes likewise. A
drop is counted in the manifest and the document named in ``events.jsonl``; a bad value is a one-line
error naming the file, the key and the value. Every command runs in-process through :func:`calib.cli.main`.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.cli._helpers import run_calib
from tests.cli.test_dedup import X

FUNCTION = ("def scale(values, factor):\n    out = []\n    for v in values:\n        out.append(v * factor)\n"
            "    return out\n")
WIDE = 'BLOB = "' + "a" * 1_991 + '"\n'  # one line of 2,000 characters (the newline not counted)
# 15,000 lines of 80 characters: 1,215,000 bytes, over the default 1,000,000, no line over 1,000
PADDING = "".join(f"# {i:077d}\n" for i in range(15_000))


@pytest.fixture(autouse=True)
def _no_debug_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CALIB_DEBUG", raising=False)  # it would turn a one-line error into a traceback


def _server(name: str) -> str:
    # never contacted: the extract stage reads only the corpus
    return f'[servers.{name}]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'


def _spec(tmp_path: Path, data: str = "", servers: str | None = None, extra: str = "") -> Path:
    spec = tmp_path / "study.toml"
    spec.write_text(f'[study]\nname = "caps"\n\n{servers or _server("target") + _server("reference")}\n'
                    f'[models]\ntarget = "target"\nreference = "reference"\n\n'
                    f'[data]\nsource = "corpus"\npaths = ["corpus"]\nmin_lines = 2\n{data}\n{extra}')
    return spec


def _corpus(tmp_path: Path, files: dict[str, str]) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def _extract(capsys, tmp_path: Path, spec: Path) -> tuple[list[str], dict, list[dict]]:
    """Run the study's extract stage; (file names of the functions kept, manifest counts, document_dropped events)."""
    run = tmp_path / "run"
    outcome = run_calib(capsys, "study", spec, "--run-dir", run, "--stage", "extract", "--quiet")
    assert outcome.code == 0, outcome.err
    paths = sorted(Path(s).name for s in pl.read_parquet(run / "tables" / "functions.parquet")["source"])
    counts = json.loads((run / "manifest.json").read_text())["counts"]
    return paths, counts, _dropped_events(run)


def _dropped_events(run: Path) -> list[dict]:
    """The ``document_dropped`` events of the run's latest invocation (events.jsonl keeps every run's)."""
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    last = max(i for i, e in enumerate(events) if e["event"] == "run_start")
    return [e for e in events[last:] if e["event"] == "document_dropped"]


def test_a_file_with_a_long_line_is_dropped_by_default_and_kept_under_a_higher_cap(capsys, tmp_path):
    _corpus(tmp_path, {"ok.py": FUNCTION, "wide.py": WIDE + FUNCTION.replace("scale", "widen")})
    assert max(len(line) for line in WIDE.splitlines()) == 2_000
    paths, counts, dropped = _extract(capsys, tmp_path, _spec(tmp_path))
    assert paths == ["ok.py"]
    assert counts["dropped"] == {"long_line": 1} and counts["functions"] == 1
    assert [(e["source"], e["reason"]) for e in dropped] == [(str(tmp_path / "corpus" / "wide.py"), "long_line")]
    paths, counts, dropped = _extract(capsys, tmp_path, _spec(tmp_path, "max_line_chars = 5000"))
    assert paths == ["ok.py", "wide.py"] and counts["dropped"] == {} and dropped == []


def test_a_file_over_the_byte_cap_is_dropped_by_default_and_kept_under_a_higher_cap(capsys, tmp_path):
    big = PADDING + FUNCTION.replace("scale", "grow")
    assert len(big.encode()) > 1_000_000
    _corpus(tmp_path, {"ok.py": FUNCTION, "big.py": big})
    paths, counts, dropped = _extract(capsys, tmp_path, _spec(tmp_path))
    assert paths == ["ok.py"] and counts["dropped"] == {"too_large": 1}
    assert [(e["source"], e["reason"]) for e in dropped] == [(str(tmp_path / "corpus" / "big.py"), "too_large")]
    paths, counts, _ = _extract(capsys, tmp_path, _spec(tmp_path, "max_file_bytes = 2000000"))
    assert paths == ["big.py", "ok.py"] and counts["dropped"] == {}
    # and a cap one byte below the small file's size drops it too
    paths_small = _spec(tmp_path, f"max_file_bytes = {len(FUNCTION) - 1}")
    outcome = run_calib(capsys, "study", paths_small, "--run-dir", tmp_path / "run", "--stage", "extract", "--quiet")
    error = outcome.one_line_error()  # both files dropped: nothing to audit
    assert "no function to audit" in error
    assert error.endswith("data.max_file_bytes/max_line_chars (dropped: too_large 2)")


def test_a_jsonl_row_over_the_byte_cap_is_dropped(capsys, tmp_path):
    rows = [{"content": FUNCTION, "path": "a.py"}, {"content": FUNCTION.replace("scale", "s2") + WIDE * 2,
                                                    "path": "b.py"}]
    _corpus(tmp_path, {"rows.jsonl": "".join(json.dumps(r) + "\n" for r in rows)})
    size = len(rows[1]["content"].encode())  # over a cap of 4,000 bytes, with no line over 5,000 characters
    caps = "max_file_bytes = 4000\nmax_line_chars = 5000"
    paths, counts, dropped = _extract(capsys, tmp_path, _spec(tmp_path, caps))
    assert size > 4_000 and paths == ["rows.jsonl#row=1"] and counts["dropped"] == {"too_large": 1}
    assert [e["source"] for e in dropped] == [f"{tmp_path / 'corpus' / 'rows.jsonl'}#row=2"]


@pytest.mark.parametrize("section, line, shown", [
    ("data", "max_line_chars = 0", "data.max_line_chars: Input should be greater than or equal to 1 (got 0)"),
    ("data", "max_file_bytes = 10000000000",
     "data.max_file_bytes: Input should be less than or equal to 1000000000 (got 10000000000)"),
    ("data", 'max_file_bytes = "1MB"', "data.max_file_bytes: Input should be a valid integer"),
    ("dedup", "max_line_chars = -5", "dedup.max_line_chars: Input should be greater than or equal to 1 (got -5)"),
])
def test_a_bad_cap_is_a_one_line_error_naming_file_line_key_and_value(capsys, tmp_path, section, line, shown):
    _corpus(tmp_path, {"ok.py": FUNCTION})
    extra = f'[dedup]\nsource = "corpus"\npaths = ["corpus"]\n{line}\n' if section == "dedup" else ""
    spec = _spec(tmp_path, line if section == "data" else "", extra=extra)
    number = spec.read_text().splitlines().index(line) + 1
    error = run_calib(capsys, "check", spec, "--no-probe").one_line_error()
    assert error.startswith(f"calib: error: {spec}:{number}: {shown}"), error


def test_the_dedup_stage_reads_the_training_corpus_under_its_own_caps(capsys, tmp_path, tiny_model_dir):
    # The audited corpus holds X; the training corpus holds X in a file with a 2,000-character line.
    _corpus(tmp_path, {"x.py": X})
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "copy.py").write_text(WIDE + X)
    server = f'kind = "embedded"\nmodel_dir = "{tiny_model_dir}"\n'
    servers = f"[servers.target]\n{server}\n[servers.reference]\n{server}\n"

    def dedup(caps: str) -> tuple[pl.DataFrame, dict]:
        spec = _spec(tmp_path, servers=servers, extra=f'[prompt]\nmax_context_tokens = 40\n\n[dedup]\nsource = "corpus"'
                     f'\npaths = ["train"]\nsemantic = false\n{caps}\n')
        outcome = run_calib(capsys, "study", spec, "--run-dir", tmp_path / "run", "--stage", "dedup", "--quiet")
        assert outcome.code == 0, outcome.err
        counts = json.loads((tmp_path / "run" / "manifest.json").read_text())["counts"]
        return pl.read_parquet(tmp_path / "run" / "tables" / "duplicates.parquet"), counts

    pairs, counts = dedup("")
    assert pairs.height == 0 and counts["dedup_corpus"] == 0 and counts["dedup_dropped"] == {"long_line": 1}
    assert [(e["stage"], e["source"], e["reason"]) for e in _dropped_events(tmp_path / "run")] == [
        ("dedup", str(tmp_path / "train" / "copy.py"), "long_line")]
    pairs, counts = dedup("max_line_chars = 5000")
    assert counts["dedup_corpus"] == 1 and counts["dedup_dropped"] == {}
    assert pairs["kind"].to_list() == ["textual"] and pairs["similarity"].to_list() == [1.0]  # X itself


# --- calib dedup -----------------------------------------------------------------------------------


def test_calib_dedup_drops_and_lists_files_over_the_caps_and_obeys_higher_ones(capsys, tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "wide.py").write_text(WIDE + X)
    (tmp_path / "corpus" / "big.py").write_text(PADDING + X.replace("moving_average", "moving_mean"))
    (tmp_path / "audit.py").write_text(X)
    args = ("dedup", tmp_path / "corpus", "--against", tmp_path / "audit.py", "--out", tmp_path / "p.parquet",
            "--no-semantic")
    record = run_calib(capsys, *args, "--json").json()
    assert record["corpus_functions"] == 0 and record["pairs"]["textual"] == 0
    assert record["dropped_files"] == {str(tmp_path / "corpus" / "big.py"): "too_large",
                                       str(tmp_path / "corpus" / "wide.py"): "long_line"}
    outcome = run_calib(capsys, *args)
    assert outcome.code == 0 and f"  dropped {tmp_path / 'corpus' / 'wide.py'}: long_line\n" in outcome.out
    record = run_calib(capsys, *args, "--max-line-chars", "5000", "--max-file-bytes", "2000000", "--json").json()
    assert record["corpus_functions"] == 2 and record["dropped_files"] == {}
    assert record["pairs"]["textual"] == 2  # X itself and the renamed copy beside the padding
    record = run_calib(capsys, *args, "--max-line-chars", "5000", "--json").json()
    assert record["corpus_functions"] == 1 and record["dropped_files"] == {
        str(tmp_path / "corpus" / "big.py"): "too_large"}


def test_calib_dedup_refuses_a_cap_below_one(capsys, tmp_path):
    (tmp_path / "audit.py").write_text(X)
    error = run_calib(capsys, "dedup", tmp_path / "audit.py", "--against", tmp_path / "audit.py", "--out",
                   tmp_path / "p.parquet", "--no-semantic", "--max-line-chars", "0").one_line_error()
    assert "--max-line-chars" in error and "0" in error
