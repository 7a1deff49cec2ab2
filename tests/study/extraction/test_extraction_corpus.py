"""An extraction study of whole corpus documents, scored through real HTTP servers.

The corpus is a JSONL file of the tiny organism's verbatim members and controls with a ``split``
column (mapped to ``membership``) plus one row without a membership, which must be recorded and
skipped. The target is the organism's target model in-process (``embedded``); the reference is the
*same* model behind ``calib serve`` on 127.0.0.1, reached through the ``openai`` kind (vLLM's
routes: /tokenize, /detokenize, prompt_logprobs) — so the two must score every window identically and
the paired comparison must find no difference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest


@pytest.fixture(scope="module")
def served_target(served_organism_target: str) -> str:
    """The session's ``calib serve`` of the organism's target (tests/_served.py)."""
    return served_organism_target


@pytest.fixture(scope="module")
def run(organism_tiny, served_target, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("extraction-corpus")
    truth = pl.read_parquet(organism_tiny.truth).filter(pl.col("kind") == "verbatim")
    with (root / "corpus.jsonl").open("w") as out:
        for row in truth.iter_rows(named=True):
            out.write(json.dumps({"text": row["audited"], "split": row["membership"], "path": row["source"]}) + "\n")
        out.write(json.dumps({"text": "def orphan():\n    return 1\n" * 20, "path": "no-split.py"}) + "\n")
    (root / "corpus.toml").write_text(f"""[study]
name = "extraction-corpus"
kind = "extraction"

[servers.target]
kind = "embedded"
model_dir = "{organism_tiny.target}"
threads = 1

[servers.served]
kind = "openai"
base_url = "{served_target}/v1"
max_retries = 2

[models]
target = "target"
reference = "served"

[data]
source = "corpus"
unit = "document"
paths = ["corpus.jsonl"]
content_column = "text"
metadata_columns = {{membership = "split", path = "path"}}

[extraction]
prefix_tokens = 24
suffix_tokens = [24]
procedures = ["greedy", "top_k", "base"]
top_k = 20

[analyze]
alpha = 0.2
""")
    proc = subprocess.run([sys.executable, "-m", "calib", "study", "corpus.toml", "--run-dir", "r", "--quiet",
                           *os.environ.get("XSTAGE", "").split()],
                          capture_output=True, text=True, cwd=root, timeout=900,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    assert proc.returncode == 0, proc.stderr
    return root / "r"


def _table(run: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(run / "tables" / f"{name}.parquet")


def test_documents_with_a_membership_become_samples_and_one_without_is_recorded(run):
    samples = _table(run, "samples")
    assert sorted(set(samples["membership"])) == ["control", "member"]
    assert samples.height == 16  # the tiny organism's 8 verbatim members and 8 controls
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    skipped = [e for e in events if e["event"] == "sample_error" and "membership" in e.get("error", "")]
    assert len(skipped) == 1 and skipped[0]["source"].endswith("corpus.jsonl#row=17")  # the 17th line
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["counts"]["dropped"] == {"no membership": 1}


def test_the_same_model_over_http_scores_every_window_as_in_process(run):
    scores = _table(run, "scores")
    assert scores["error"].is_null().all()
    wide = scores.filter(pl.col("role") == "target").select("window_id", "procedure", "log10_value").join(
        scores.filter(pl.col("role") == "reference").select("window_id", "procedure",
                                                           pl.col("log10_value").alias("served")),
        on=["window_id", "procedure"])
    assert wide.height == scores.height // 2 > 0
    a, b = wide["log10_value"].to_numpy(), wide["served"].to_numpy()
    assert np.array_equal(np.isneginf(a), np.isneginf(b))
    finite = np.isfinite(a)
    assert np.allclose(a[finite], b[finite], rtol=0, atol=1e-4)  # float32 log-probs through JSON
    paired = _table(run, "paired")
    assert paired.height > 0
    assert (paired["target_only"] == 0).all() and (paired["reference_only"] == 0).all()
    assert (paired["difference"] == 0).all()
