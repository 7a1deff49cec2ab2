"""``calib compare-runs RUN...``: the files it writes, what it prints, and the one-line refusals (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from calib.report.compare import COMPARISON_SCHEMA, compare_runs
from tests.report._fake_run import make_run
from tests.report.compare._runs import samples_b


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    return make_run(root / "small"), make_run(root / "large", samples_b())


def _edit_spec(run: Path, section: str, key: str, value: object) -> None:
    spec = json.loads((run / "spec.json").read_text())
    spec[section][key] = value
    (run / "spec.json").write_text(json.dumps(spec))


def test_out_gets_the_report_the_json_and_the_table(calib, pair, tmp_path):
    out = tmp_path / "cmp"
    done = calib("compare-runs", *pair, "--out", out)
    assert done.code == 0, done.err
    assert done.out == f"{out / 'report.md'}\n"
    assert sorted(p.name for p in out.iterdir()) == ["comparison.json", "comparisons.parquet", "report.html",
                                                      "report.md"]
    written = json.loads((out / "comparison.json").read_text())
    assert written == json.loads(json.dumps(compare_runs(list(pair))))
    table = pl.read_parquet(out / "comparisons.parquet")
    assert table.columns == list(COMPARISON_SCHEMA) and table.height == len(written["comparisons"]) == 6
    members_func = table.filter((pl.col("population") == "members") & (pl.col("rate") == "functional")).row(0,
                                                                                                    named=True)
    assert (members_func["design"], members_func["n10"], members_func["n01"]) == ("paired", 4, 2)
    assert members_func["k_b"] - members_func["k_a"] == 2
    page, markdown = (out / "report.html").read_text(), (out / "report.md").read_text()
    assert "<script" not in page and 'id="differences-table"' in page
    for text in (page, markdown):
        # members' functional rate: 4 flipped on, 2 off, of the 21 samples conclusive in both runs
        assert "small" in text and "mcnemar-exact" in text and "+9.5 pp" in text


def test_without_out_it_writes_under_the_first_run_and_json_prints_one_object(calib, pair):
    done = calib("compare-runs", *pair, "--json", "--pairs", "all", "--adjust", "bh")
    data = done.json()
    assert data["files"]["markdown"] == str(pair[0] / "report" / "compare-runs" / "report.md")
    assert Path(data["files"]["comparison"]).is_file()
    assert (data["pairing"], data["adjust"], len(data["comparisons"])) == ("all", "bh", 6)


def test_runs_at_different_thresholds_are_refused(calib, pair, tmp_path):
    other = make_run(tmp_path / "strict", analyze={"tau_text": 0.7})
    line = calib("compare-runs", pair[0], other).one_line_error()
    assert line == ("calib: error: runs small and strict differ in analyze.tau_text (0.75 vs 0.7); compare-runs "
                    "compares runs at one operating point; re-run one study with the other's [analyze] settings")


def test_runs_with_different_validity_criteria_are_refused(calib, pair, tmp_path):
    other = make_run(tmp_path / "lenient")
    _edit_spec(other, "execute", "min_valid", 5)
    line = calib("compare-runs", *pair, other).one_line_error()
    assert "runs small and lenient differ in execute.min_valid (8 vs 5)" in line and "[execute]" in line


def test_runs_of_different_kinds_are_refused_before_their_tables_are_read(calib, pair, tmp_path):
    other = tmp_path / "extract"
    other.mkdir()
    (other / "spec.json").write_text(json.dumps({"study": {"kind": "extraction"}}))
    line = calib("compare-runs", pair[0], other).one_line_error()
    assert "runs small and extract differ in study.kind ('functional' vs 'extraction')" in line


def test_census_runs_are_refused_with_the_kinds_it_compares(calib, tmp_path):
    for name in ("p1", "p2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "spec.json").write_text(json.dumps({"study": {"kind": "census"}}))
    line = calib("compare-runs", tmp_path / "p1", tmp_path / "p2").one_line_error()
    assert "study.kind = 'census': compare-runs compares functional, extraction, probes runs" in line


@pytest.mark.parametrize("case", ["one run", "not a run", "no tables", "twice"])
def test_bad_input_is_one_line_naming_it(calib, pair, tmp_path, case):
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "spec.json").write_text((pair[0] / "spec.json").read_text())
    args, expected = {
        "one run": ([pair[0]], "needs at least two run directories, got 1"),
        "not a run": ([pair[0], tmp_path / "nowhere"], f"{tmp_path / 'nowhere'}: not a run directory"),
        "no tables": ([pair[0], bare], f"{bare / 'tables' / 'samples.parquet'}: no samples table"),
        "twice": ([pair[0], pair[1], pair[0]], "the run directory is given twice"),
    }[case]
    line = calib("compare-runs", *args).one_line_error()
    assert expected in line
