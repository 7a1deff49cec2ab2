"""``calib compare-runs`` on two real studies of the tiny organism: its target, and its reference in the target's
place, audit the same samples, so every difference is paired; each interval is checked against statsmodels
(Newcombe 1998 method 10 from Wilson limits) and each p-value against statsmodels' exact McNemar test, from the
studies' own claims tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pytest
from statsmodels.stats.contingency_tables import mcnemar

from tests.report.compare.test_compare_functional import _paired_newcombe

SPEC = """[study]
name = "{name}"
seed = 7

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.target]
kind = "embedded"
model_dir = "organism:{target}"

[servers.reference]
kind = "embedded"
model_dir = "organism:reference"

[models]
target = "target"
reference = "reference"

[data]
source = "organism"
limit = 6

[measure]
metrics = ["bleu"]
"""


@pytest.fixture(scope="module")
def comparison(organism_tiny, tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("organism-compare")
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}

    def study(name: str, target: str) -> subprocess.CompletedProcess:
        (root / f"{name}.toml").write_text(SPEC.format(name=name, target=target,
                                                       cache_dir=organism_tiny.root.parent.parent))
        return subprocess.run([sys.executable, "-m", "calib", "study", f"{name}.toml", "--run-dir", name, "--quiet"],
                              capture_output=True, text=True, cwd=root, timeout=1200, env=env)

    # the two studies side by side: separate interpreters and run directories, nothing shared but the organism
    with ThreadPoolExecutor(2) as pool:
        for done in pool.map(study, ("trained", "untrained"), ("target", "reference")):
            assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run([sys.executable, "-m", "calib", "compare-runs", "trained", "untrained", "--out", "cmp",
                           "--json"], capture_output=True, text=True, cwd=root, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout.count("\n") == 1
    return root, json.loads(done.stdout)


def _flags(run: Path) -> dict[str, dict]:
    """Per sample, from the study's claims table: membership, counted (scored, conclusive) and the three flags."""
    out = {}
    for row in pl.read_parquet(run / "tables" / "claims.parquet").iter_rows(named=True):
        scored = row["text_target"] is not None and row["text_reference"] is not None
        out[row["sample_id"]] = {"membership": row["membership"], "scored": scored,
                                 "conclusive": scored and bool(row["conclusive"]),
                                 "reproduced": scored and bool(row["textual_target"]),
                                 "textual": bool(row["textually_memorized"]),
                                 "functional": bool(row["functionally_memorized"])}
    return out


def test_the_same_samples_are_compared_paired_and_checked_against_statsmodels(comparison):
    root, result = comparison
    a, b = _flags(root / "trained"), _flags(root / "untrained")
    assert sorted(a) == sorted(b)  # one organism, one study seed: the same samples
    assert result["comparisons"] and all(c["design"] == "paired" for c in result["comparisons"])
    where = {"reproduced": "scored", "textual": "scored", "functional": "conclusive"}
    for c in result["comparisons"]:
        rate, member = c["rate"], c["population"][:-1]  # members -> member, controls -> control
        both = [s for s in a if a[s]["membership"] == member and a[s][where[rate]] and b[s][where[rate]]]
        assert c["n_paired"] == len(both) and c["conflicting_ids"] == 0
        if not both:
            assert c["difference"] is None and c["note"]
            continue
        n11 = sum(b[s][rate] and a[s][rate] for s in both)
        n10 = sum(b[s][rate] and not a[s][rate] for s in both)
        n01 = sum(a[s][rate] and not b[s][rate] for s in both)
        n00 = len(both) - n11 - n10 - n01
        d = c["difference"]
        assert (d["n11"], d["n10"], d["n01"], d["n00"]) == (n11, n10, n01, n00)
        low, high = _paired_newcombe(n11, n10, n01, n00)
        assert (d["low"], d["high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
        assert c["p_value"] == pytest.approx(mcnemar([[n11, n10], [n01, n00]], exact=True).pvalue, abs=1e-12)
    # the organism's target reproduces members its reference (never trained on them) does not
    assert any(c["difference"] and c["difference"]["n01"] > 0 for c in result["comparisons"])
    assert (root / "cmp" / "report.html").is_file() and (root / "cmp" / "comparisons.parquet").is_file()
