"""``calib study`` of kind ``census`` on the tiny model organism, and the spec checks of both new kinds.

A document the target was trained on repeatedly (a planted verbatim member) and one it never saw (a
planted control) are each censused against a matched never-trained control document. Coverage is
recomputed here by painting characters one by one, the threshold from the scores table by hand; so are
the shared τ_global (numpy's max of the pooled control scores, rounded up), the coverage versus Δ and the
deterministic recovery (each window's greedy generation read from the scores' detail and compared with
its suffix).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from calib.study.tables import CENSUS_TABLES

SPEC = """[study]
name = "census-tiny"
kind = "census"

[organism]
preset = "tiny"
cache_dir = "{cache}"

[servers.target]
kind = "embedded"
model_dir = "organism:target"
threads = 1

[models]
target = "target"

[extraction]
prefix_tokens = 32
suffix_tokens = [32]
procedures = ["base", "top_k", "near_verbatim"]
stride = 2

[analyze]
budgets = [1000]

[[census.pairs]]
name = "trained"
document = "organism:member:0"
control = "organism:control:0-3"

[[census.pairs]]
name = "untrained"
document = "organism:control:7"
control = "organism:control:0-3"
"""


def _calib(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "calib", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=900, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})


@pytest.fixture(scope="module")
def workspace(organism_tiny, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("census")
    (root / "census.toml").write_text(SPEC.format(cache=organism_tiny.root.parent.parent))
    return root


@pytest.fixture(scope="module")
def run(workspace: Path) -> Path:
    proc = _calib("study", "census.toml", "--run-dir", "c", "--quiet", *os.environ.get("XSTAGE", "").split(),
                  cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    return workspace / "c"


def _table(run: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(run / "tables" / f"{name}.parquet")


def _census(run: Path, document: str, procedure: str) -> dict:
    frame = _table(run, "census").filter((pl.col("document") == document) & (pl.col("procedure") == procedure))
    assert frame.height == 1
    return frame.row(0, named=True)


def test_tables_and_windows_cover_each_document_at_the_stride(run):
    for name, schema in CENSUS_TABLES.items():
        assert _table(run, name).schema == pl.Schema(schema), name
    samples = _table(run, "samples")
    assert sorted(samples["membership"]) == ["candidate"] * 2 + ["control"] * 4  # the controls are shared
    windows = _table(run, "windows").filter(pl.col("start_token").is_not_null())  # cut, scored or not
    for _, part in windows.group_by(["document", "sample_id"]):
        starts = sorted(part["start_token"])
        assert starts == list(range(0, 2 * len(starts), 2))  # every window, stride 2, from the first token


def _painted(run: Path, document: str, procedure: str) -> tuple[float, int, int]:
    """Coverage recomputed character by character, and the threshold exponent, from the tables."""
    windows = _table(run, "windows").filter(pl.col("error").is_null() & (pl.col("document") == document))
    scores = _table(run, "scores").filter(pl.col("procedure") == procedure).join(
        windows.select("window_id", "membership", "char_start", "char_end"), on="window_id")
    control = scores.filter(pl.col("membership") == "control")["log10_value"].to_numpy()
    exponent = math.ceil(control.max())
    doc = scores.filter(pl.col("membership") == "candidate")
    sid = doc["sample_id"][0]
    text = _table(run, "samples").filter(pl.col("sample_id") == sid)["function"][0]
    covered = np.zeros(len(text), dtype=bool)
    for row in doc.iter_rows(named=True):
        if row["log10_value"] > exponent:
            covered[row["char_start"]:row["char_end"]] = True
    return covered.mean(), exponent, int(covered.sum())


def _paint(run: Path, document: str, procedure: str, exponent: float) -> tuple[int, int]:
    """Characters of the document covered by windows scoring > 10^exponent, and the document's length."""
    windows = _table(run, "windows").filter(pl.col("error").is_null() & (pl.col("document") == document)
                                            & (pl.col("membership") == "candidate"))
    doc = _table(run, "scores").filter(pl.col("procedure") == procedure).join(
        windows.select("window_id", "char_start", "char_end"), on="window_id")
    text = _table(run, "samples").filter(pl.col("sample_id") == doc["sample_id"][0])["function"][0]
    covered = np.zeros(len(text), dtype=bool)
    for row in doc.iter_rows(named=True):
        if row["log10_value"] > exponent:
            covered[row["char_start"]:row["char_end"]] = True
    return int(covered.sum()), len(text)


def _pooled(run: Path, procedure: str, drop: tuple[str, ...] = ()) -> np.ndarray:
    """Every pair's control-window scores minus the listed window ids, one per distinct cut (sample, offsets)."""
    windows = _table(run, "windows").filter(pl.col("error").is_null() & (pl.col("membership") == "control"))
    scores = _table(run, "scores").filter((pl.col("procedure") == procedure) & ~pl.col("window_id").is_in(drop))
    pooled = scores.join(windows.select("window_id", "char_start", "char_end"), on="window_id")
    return pooled.unique(["sample_id", "char_start", "char_end"])["log10_value"].to_numpy()


def test_the_shared_threshold_pools_every_pairs_controls(run):
    for procedure in ("base", "near_verbatim"):
        pooled = _pooled(run, procedure)
        exponent = math.ceil(np.max(pooled[np.isfinite(pooled)]))  # the paper's max, rounded up to a power of ten
        for document in ("trained", "untrained"):
            row = _census(run, document, procedure)
            assert row["log10_threshold_global"] == exponent >= row["log10_threshold"]
            assert row["n_control_windows_global"] == pooled.size  # a control shared by both pairs counts once
            covered, length = _paint(run, document, procedure, exponent)
            assert row["covered_characters_global"] == covered and row["coverage_global"] == pytest.approx(
                covered / length)
            assert row["coverage_global"] <= row["coverage"]


def test_coverage_versus_delta_by_hand(run):
    summary = json.loads((run / "report" / "summary.json").read_text())
    curves = {(c["document"], c["procedure"]): c for c in summary["coverage_curve"]}
    assert set(curves) == {(d, p) for d in ("trained", "untrained") for p in ("base", "near_verbatim")}
    for (document, procedure), curve in curves.items():
        row = _census(run, document, procedure)
        assert curve["log10_threshold"] == row["log10_threshold"] and curve["deltas"][0] == 0.0
        assert curve["covered_characters"][0] == row["covered_characters"]
        for delta, covered, share in zip(curve["deltas"], curve["covered_characters"], curve["coverage"]):
            by_hand, length = _paint(run, document, procedure, row["log10_threshold"] + delta)
            assert covered == by_hand and share == pytest.approx(by_hand / length)
        assert all(a >= b for a, b in zip(curve["coverage"], curve["coverage"][1:]))
    assert "coverage-delta" in summary["figures"]


def test_deterministic_recovery_by_hand(run):
    windows = _table(run, "windows").filter(pl.col("error").is_null() & (pl.col("membership") == "candidate"))
    scores = _table(run, "scores")
    base = dict(scores.filter(pl.col("procedure") == "base").select("window_id", "log10_value").iter_rows())
    for document in ("trained", "untrained"):
        row = _census(run, document, "base")
        length = row["document_length"]
        verbatim, near, beyond = (np.zeros(length, dtype=bool) for _ in range(3))
        counts = [0, 0]
        greedy = scores.filter(pl.col("procedure") == "near_verbatim").join(
            windows.filter(pl.col("document") == document).select("window_id", "suffix", "char_start", "char_end"),
            on="window_id")
        assert greedy.height == row["n_windows"] == row["recovery_windows"]
        for r in greedy.iter_rows(named=True):
            detail = json.loads(r["detail"])
            span = slice(r["char_start"], r["char_end"])
            if detail["generation"].startswith(r["suffix"]):  # the whole greedy continuation reproduces the suffix
                verbatim[span] = True
                counts[0] += 1
            if detail["distance"] <= 5:  # extraction.epsilon token edits
                near[span] = True
                counts[1] += 1
                w = base[r["window_id"]]
                if row["log10_threshold"] < w < row["min_log10_score_within_budget"]:
                    beyond[span] = True
        assert [row["recovered_verbatim"], row["recovered_near_verbatim"]] == counts
        assert row["recovery_coverage_verbatim"] == pytest.approx(verbatim.mean())
        assert row["recovery_coverage_near_verbatim"] == pytest.approx(near.mean())
        assert row["recovery_coverage_beyond_budget"] == pytest.approx(beyond.mean())
        assert row["recovery_coverage_verbatim"] <= row["recovery_coverage_near_verbatim"]
    # the trained document's first window is reproduced greedily; the never-trained one has nothing recovered
    assert _census(run, "trained", "base")["recovery_coverage_verbatim"] > 0
    assert _census(run, "untrained", "base")["recovery_coverage_near_verbatim"] == 0.0


def test_a_document_trained_on_repeatedly_is_covered_and_an_untrained_one_is_not(run):
    trained, untrained = _census(run, "trained", "base"), _census(run, "untrained", "base")
    for row, name in ((trained, "trained"), (untrained, "untrained")):
        coverage, exponent, characters = _painted(run, name, "base")
        assert row["log10_threshold"] == exponent
        assert row["coverage"] == pytest.approx(coverage) and row["covered_characters"] == characters
    assert trained["coverage"] > 0.5 and trained["max_margin"] > 5  # orders of magnitude above the control
    assert untrained["coverage"] == 0.0 and untrained["windows_above"] == 0
    # within a budget of 1000 queries at 95 %: windows with p >= 1 - 0.05^(1/1000)
    floor = math.log10(-math.expm1(math.log(0.05) / 1000))
    assert trained["min_log10_score_within_budget"] == pytest.approx(floor)
    assert trained["coverage_within_budget"] <= trained["coverage"]


def test_top_k_without_any_positive_control_window_says_the_threshold_is_undefined(run):
    rows = _table(run, "census").filter(pl.col("procedure") == "top_k")
    for row in rows.iter_rows(named=True):
        windows = _table(run, "windows").filter(pl.col("document") == row["document"])
        scores = _table(run, "scores").filter(pl.col("procedure") == "top_k").join(windows, on="window_id")
        controls = scores.filter(pl.col("membership") == "control")["log10_value"]
        if (controls == -math.inf).all():
            assert row["log10_threshold"] is None and "undefined" in row["error"]
        else:
            assert row["error"] is None and row["log10_threshold"] == math.ceil(controls.max())


def test_a_decontaminated_control_window_lowers_nothing_it_should_not(run, workspace):
    """Removing the highest control window recomputes the threshold from the rest (the paper's App. E.1)."""
    windows = _table(run, "windows").filter(pl.col("document") == "trained")
    scores = _table(run, "scores").filter(pl.col("procedure") == "base").join(windows, on="window_id")
    ranked = scores.filter(pl.col("membership") == "control").sort("log10_value", descending=True)
    top = ranked["window_id"][0]
    text = (workspace / "census.toml").read_text().replace("budgets = [1000]",
                                                           f'budgets = [1000]\ndecontaminate = ["{top}"]')
    (workspace / "census-decon.toml").write_text(text)
    # a copy of the run: the list is an analysis setting, so the windows and scores are reused, the census redone
    shutil.copytree(run, workspace / "d")
    proc = _calib("study", "census-decon.toml", "--run-dir", "d", "--quiet", *os.environ.get("XSTAGE", "").split(),
                  cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    row = pl.read_parquet(workspace / "d" / "tables" / "census.parquet").filter(
        (pl.col("document") == "trained") & (pl.col("procedure") == "base")).row(0, named=True)
    assert row["removed_control_windows"] == 1
    assert row["n_control_windows"] == ranked.height - 1
    assert row["log10_threshold"] == math.ceil(ranked["log10_value"][1])
    # the removed window's cut still reaches the shared pool through the untrained pair, whose list is not it
    assert row["n_control_windows_global"] == ranked.height
    assert row["log10_threshold_global"] == math.ceil(ranked["log10_value"][0]) >= row["log10_threshold"]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


BASE = """[study]
name = "x"
kind = "census"

[organism]
preset = "tiny"

[servers.t]
kind = "embedded"
model_dir = "organism:target"

[models]
target = "t"
"""


@pytest.mark.parametrize("extra, message", [
    ("", "study.kind = 'census' needs [[census.pairs]]"),
    ('[extraction]\nprocedures = ["greedy"]\n[[census.pairs]]\nname = "a"\ndocument = "organism:member:0"\n'
     'control = "organism:control:0"\n', "extraction.procedures: the census needs probabilities"),
    ('[[census.pairs]]\nname = "a"\ndocument = "nowhere.txt"\ncontrol = "organism:control:0"\n',
     "document = 'nowhere.txt' of pair 'a' is not a file"),
    ('[extraction]\nsuffix_tokens = [10, 20]\n[[census.pairs]]\nname = "a"\ndocument = "organism:member:0"\n'
     'control = "organism:control:0"\n', "a census uses one suffix length"),
])
def test_bad_census_specs_give_one_line(tmp_path, extra, message):
    proc = _calib("check", str(_write(tmp_path, BASE + extra)), "--no-probe", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "s.toml:" in lines[0], lines


def test_bad_extraction_specs_give_one_line(tmp_path):
    text = BASE.replace('kind = "census"', 'kind = "extraction"') + '[data]\nsource = "organism"\n'
    for extra, message in (('[extraction]\nsuffix_tokens = [10, 10]\n', "distinct suffix lengths"),
                           ('[extraction]\nprocedures = ["beam"]\n', "extraction.procedures"),
                           ('[analyze]\nalpha = 1.5\n', "analyze.alpha"),
                           ('[[census.pairs]]\nname = "a"\ndocument = "d"\ncontrol = "c"\n',
                            "[census] is read only by study.kind = 'census'")):
        proc = _calib("check", str(_write(tmp_path, text + extra)), "--no-probe", cwd=tmp_path)
        assert proc.returncode == 2, (extra, proc.stderr)
        assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_calib_check_lists_the_scoring_capabilities_an_extraction_study_needs(tmp_path, organism_tiny):
    text = (BASE.replace('kind = "census"', 'kind = "extraction"')
            .replace('preset = "tiny"', f'preset = "tiny"\ncache_dir = "{organism_tiny.root.parent.parent}"')
            + '[data]\nsource = "organism"\n')
    proc = _calib("check", str(_write(tmp_path, text)), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["kind"] == "extraction" and report["ok"] is True
    assert report["stages"] == ["samples", "windows", "score", "calibrate", "claims", "budgets", "paired", "report"]
    assert set(report["servers"]["t"]["needs"]) >= {"scoring", "tokenize"}
    assert report["servers"]["t"]["capabilities"]["max_top_logprobs"] >= 40


def test_a_census_control_that_is_a_member_is_refused(tmp_path, organism_tiny):
    text = (BASE.replace('preset = "tiny"', f'preset = "tiny"\ncache_dir = "{organism_tiny.root.parent.parent}"')
            + '[[census.pairs]]\nname = "a"\ndocument = "organism:control:0"\ncontrol = "organism:member:1"\n')
    proc = _calib("study", str(_write(tmp_path, text)), "--run-dir", "r", "--quiet", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "is a member of the target's training data" in proc.stderr
