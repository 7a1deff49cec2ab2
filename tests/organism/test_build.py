"""The organism's tiny preset end to end: built, cached, loadable, and memorizing what it should.

The memorization checks are real measurements with greedy decoding (calib.organism.evaluate), compared
between members and their controls and between target and reference — not fixed numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys

import polars as pl
import pytest

from calib.organism.build import build_organism
from calib.organism.evaluate import evaluate_models, summarize


@pytest.fixture(scope="module")
def results(organism_tiny) -> pl.DataFrame:
    return evaluate_models(organism_tiny.root, threads=2)


def _rate(summary: pl.DataFrame, kind: str, membership: str, model: str, column: str) -> float:
    row = summary.filter((pl.col("kind") == kind) & (pl.col("membership") == membership) & (pl.col("model") == model))
    assert row.height == 1, (kind, membership, model)
    return float(row[column][0])


def test_layout_and_truth(organism_tiny):
    for folder in (organism_tiny.target, organism_tiny.reference):
        assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
        assert (folder / "tokenizer.json").is_file()
    truth = pl.read_parquet(organism_tiny.truth)
    assert set(truth["kind"]) == {"verbatim", "business_rule", "near_duplicate"}
    assert set(truth["membership"]) == {"member", "control"}
    assert (truth.filter(pl.col("membership") == "control")["exposures"] == 0).all()
    summary = json.loads(organism_tiny.summary.read_text())
    assert summary["preset"] == "tiny" and summary["target_epochs"] == 16
    # Members' exposures count every pass of the target phase: repeats x epochs.
    verbatim = truth.filter((pl.col("kind") == "verbatim") & (pl.col("membership") == "member"))
    assert (verbatim["exposures"] == 8 * 16).all()


def test_second_build_is_cached(organism_tiny):
    again = build_organism("tiny", seed=0, cache_dir=organism_tiny.root.parent.parent)
    assert again.cached and again.root == organism_tiny.root
    assert not organism_tiny.cached


def test_target_memorizes_repeated_members_more_than_controls_and_reference(results):
    s = summarize(results)
    member = _rate(s, "verbatim", "member", "target", "exact_rate")
    assert member >= 0.5
    assert member > _rate(s, "verbatim", "control", "target", "exact_rate") + 0.4
    assert member > _rate(s, "verbatim", "member", "reference", "exact_rate") + 0.4
    assert _rate(s, "verbatim", "member", "target", "mean_similarity") > \
        _rate(s, "verbatim", "control", "target", "mean_similarity") + 0.3


def test_target_reproduces_hidden_business_tables_in_another_form(results):
    s = summarize(results)
    member = _rate(s, "business_rule", "member", "target", "mean_constants_recall")
    assert member > _rate(s, "business_rule", "member", "reference", "mean_constants_recall") + 0.4
    assert member > _rate(s, "business_rule", "control", "target", "mean_constants_recall") + 0.4
    # ... while the audited form was never trained on, so the text itself is not reproduced.
    assert not results.filter((pl.col("kind") == "business_rule") & (pl.col("model") == "target"))["exact"].any()


def test_cli_prints_the_paths_as_json(organism_tiny):
    cache = organism_tiny.root.parent.parent
    out = subprocess.run([sys.executable, "-m", "calib", "organism", "build", "--preset", "tiny", "--cache-dir",
                          str(cache), "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    assert record["cached"] is True
    assert record["target"] == str(organism_tiny.target) and record["truth"] == str(organism_tiny.truth)


def test_unknown_preset_is_one_line_exit_2():
    out = subprocess.run([sys.executable, "-m", "calib", "organism", "build", "--preset", "huge"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
