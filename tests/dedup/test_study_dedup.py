"""The ``dedup`` stage of a functional study on the tiny model organism.

The organism's target was trained on its background and on planted members: near-duplicate families
(each audited function trained as several textual variants), business rules (trained in other
surface forms than the one audited: the same behaviour, rewritten) and verbatim functions (trained as
they are audited). The stage must find exactly that: each family's variants as textual
near-duplicates, each business rule's trained forms as semantic-only ones, nothing for the controls,
and no verbatim member counted as its own duplicate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from calib.dedup import duplicate_counts
from calib.study.tables import DUPLICATES_TABLE_SCHEMA


@pytest.fixture(scope="module")
def run(organism_tiny, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dedup-study")
    (root / "s.toml").write_text(f"""[study]
name = "dedup"

[organism]
preset = "tiny"
cache_dir = "{organism_tiny.root.parent.parent}"

[servers.target]
kind = "embedded"
model_dir = "organism:target"

[servers.reference]
kind = "embedded"
model_dir = "organism:reference"

[models]
target = "target"
reference = "reference"

[data]
source = "organism"

[dedup]
source = "organism"
""")
    proc = subprocess.run([sys.executable, "-m", "calib", "study", "s.toml", "--run-dir", "r", "--quiet"],
                          capture_output=True, text=True, cwd=root, timeout=900,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    assert proc.returncode == 0, proc.stderr
    return root / "r"


def test_the_planted_duplicates_are_found_and_nothing_else(run, organism_tiny):
    pairs = pl.read_parquet(run / "tables" / "duplicates.parquet")
    # the stage's table: the dedup library's columns plus the duplicate's source and text (report Figure 43)
    assert pairs.schema == pl.Schema(DUPLICATES_TABLE_SCHEMA)
    truth = pl.read_parquet(organism_tiny.truth)
    counts = duplicate_counts(pairs, truth["item_id"].to_list()).join(
        truth.select(pl.col("item_id").alias("sample_id"), "kind", "membership", "n_variants"), on="sample_id")
    # every pair points at one of the sample's own training variants: no stray match in the background
    assert (pairs["corpus_id"].str.split(":").list.first() == pairs["sample_id"]).all()
    families = counts.filter((pl.col("kind") == "near_duplicate") & (pl.col("membership") == "member"))
    assert (families["textual_dups"] == families["n_variants"]).all() and (families["semantic_dups"] == 0).all()
    rules = counts.filter((pl.col("kind") == "business_rule") & (pl.col("membership") == "member"))
    assert (rules["textual_dups"] == 0).all() and (rules["semantic_dups"] >= 1).all()
    assert (rules["semantic_dups"] <= rules["n_variants"]).all()
    verbatim = counts.filter(pl.col("kind") == "verbatim")
    assert (verbatim["textual_dups"] == 0).all()  # a member's own training copy is not its duplicate
    controls = counts.filter(pl.col("membership") == "control")
    assert (controls["textual_dups"] == 0).all() and (controls["semantic_dups"] == 0).all()
    # textual similarities are exact Jaccard values at or above the threshold, semantic ones cosines
    assert pairs.filter(pl.col("kind") == "textual")["similarity"].min() >= 0.4
    assert pairs.filter(pl.col("kind") == "semantic")["similarity"].min() >= 0.9


def test_the_stage_is_fingerprinted_and_skipped_on_a_rerun(run):
    root = run.parent
    before = (run / "events.jsonl").read_text().count("\n")
    proc = subprocess.run([sys.executable, "-m", "calib", "study", "s.toml", "--run-dir", "r", "--quiet"],
                          capture_output=True, text=True, cwd=root, timeout=600)
    assert proc.returncode == 0, proc.stderr
    new = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()[before:]]
    assert [e["stage"] for e in new if e["event"] == "stage_skip"] == [
        "extract", "prompt", "dedup", "generate", "execute", "measure", "analyze", "report"]
    manifest = json.loads((run / "manifest.json").read_text())
    pairs = pl.read_parquet(run / "tables" / "duplicates.parquet")
    assert manifest["stages"]["dedup"]["rows"] == pairs.height


def test_the_report_shows_the_papers_pattern_on_the_organism(run):
    """Textually similar completions come with textual near-duplicates, functionally similar ones with
    semantic-only near-duplicates (the paper's Figure 4), as the organism's planted design implies."""
    summary = json.loads((run / "report" / "summary.json").read_text())
    dup = summary["duplication"]
    pairs = pl.read_parquet(run / "tables" / "duplicates.parquet")
    assert dup["n_pairs"] == {"textual": int((pairs["kind"] == "textual").sum()),
                              "semantic": int((pairs["kind"] == "semantic").sum())}
    groups = dup["groups"]
    assert groups["textual"]["textual_dups"]["mean"] > groups["others"]["textual_dups"]["mean"]
    assert groups["functional"]["n"] >= 1
    assert groups["functional"]["semantic_dups"]["mean"] > groups["others"]["semantic_dups"]["mean"]
    assert (run / "report" / "figures" / "duplication.svg").is_file()
    assert "## Duplication" in (run / "report" / "report.md").read_text()
