"""A ``probes`` study on the model organism: real models (the embedded server), real sandbox, CoDeC.

The tasks are the tiny organism's planted business rules (``organism:business``), the panel its
reference and target models, the prompts in the completion style. The organism's models are tiny
memorizers that do not follow task text (docs/probes.md, "The organism demo"), so nothing here asserts
how well they do; what is checked is that every figure the study writes follows from the rows beneath
it, recomputed independently.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import polars as pl
import pytest
from scipy import stats

from calib.study import RunOptions, run_study

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


def _spec(cache_dir: Path) -> str:
    return f"""[study]
name = "probes-organism"
kind = "probes"
seed = 0

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.reference]
kind = "embedded"
model_dir = "organism:reference"
threads = 1

[servers.target]
kind = "embedded"
model_dir = "organism:target"
threads = 1

[models]
panel = ["reference", "target"]

[probes]
tasks = "organism:business"
style = "completion"
conditions = ["original", "syn40", "dead_code", "iso", "iso_dec"]
families = ["affine"]
n = 2
k = [1, 2]
max_tokens = 96
bootstrap = 200

[probes.codec]
n_context = 2

[[probes.codec.datasets]]
name = "members"
source = "organism:member"
seen = true

[[probes.codec.datasets]]
name = "controls"
source = "organism:control"
seen = false
"""


@pytest.fixture(scope="module")
def run(organism_tiny, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("probes-organism")
    (root / "p.toml").write_text(_spec(organism_tiny.root.parent.parent))
    result = run_study(root / "p.toml", run_dir=root / "run", options=RunOptions(progress=False))
    assert "report" in result.ran
    return root / "run"


def _table(run: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(run / "tables" / f"{name}.parquet")


def test_the_organisms_business_rules_become_tasks_whose_references_pass(run, organism_tiny):
    truth = pl.read_parquet(organism_tiny.truth)
    rules = truth.filter(pl.col("kind") == "business_rule")
    tasks = _table(run, "tasks")
    assert sorted(tasks["task_id"]) == sorted(f"{m}-{i}" for m, i in rules.select("membership", "item_id").iter_rows())
    assert tasks["reference_passed"].all()
    for row in tasks.iter_rows(named=True):
        assert row["code"] == rules.filter(pl.col("item_id") == row["task_id"].split("-")[1])["audited"][0]
        assert all(t.startswith(f"assert {row['entry_point']}(") for t in row["tests"])


def test_every_generation_is_run_or_says_why_not_and_pass_at_k_follows_from_the_results(run):
    gens = _table(run, "probe_generations")
    results = _table(run, "test_results")
    assert gens.height == results.height > 0
    assert (gens["program"].is_not_null() | gens["error"].is_not_null()).all()
    no_program = results.filter(pl.col("status") == "no_program")
    assert no_program.height == gens["program"].is_null().sum()
    passk = _table(run, "pass_at_k")
    for (model, label), group in results.group_by(["model", "label"]):
        counts = group.group_by("task_id").agg(pl.len().alias("n"), pl.col("passed").sum().alias("c"))
        for k in (1, 2):
            # unbiased pass@k, Chen et al. 2021 eq. 1, with math.comb
            by_hand = sum(1 - math.comb(n - c, k) / math.comb(n, k) for n, c in counts.select("n", "c").iter_rows())
            row = passk.filter((pl.col("model") == model) & (pl.col("label") == label) & (pl.col("k") == k))
            assert math.isclose(row["estimate"][0], by_hand / counts.height, abs_tol=1e-12)
            assert row["n_problems"][0] == counts.height


def test_codec_scores_follow_from_the_samples(run):
    codec = _table(run, "codec")
    scores = _table(run, "codec_scores")
    assert set(codec["model"]) == {"reference", "target"}
    # a sample longer than the organism's 512-token context cannot be scored: recorded, never fatal
    failed = codec.filter(pl.col("error").is_not_null())
    assert all("maximum context length is 512" in e for e in failed["error"])
    assert failed.height < codec.height / 4
    codec = codec.filter(pl.col("error").is_null())
    assert ((codec["ll_with"] - codec["ll_without"] - codec["delta"]).abs() < 1e-12).all()
    for row in scores.iter_rows(named=True):
        mine = codec.filter((pl.col("model") == row["model"]) & (pl.col("dataset") == row["dataset"]))
        k, n = int((mine["delta"] < 0).sum()), mine.height
        assert (row["decreased"], row["n"]) == (k, n) and math.isclose(row["score"], k / n)
        # Clopper–Pearson: Beta(0.025; k, n-k+1) and Beta(0.975; k+1, n-k), with 0 and 1 at the ends
        low = 0.0 if k == 0 else stats.beta.ppf(0.025, k, n - k + 1)
        high = 1.0 if k == n else stats.beta.ppf(0.975, k + 1, n - k)
        assert math.isclose(row["low"], low, abs_tol=1e-9) and math.isclose(row["high"], high, abs_tol=1e-9)
    for model in ("reference", "target"):
        mine = scores.filter(pl.col("model") == model)
        seen = mine.filter(pl.col("seen"))["score"][0]
        unseen = mine.filter(~pl.col("seen"))["score"][0]
        # one seen and one unseen dataset: the AUC is 1, 0.5 or 0 as the seen score is above, equal or below
        assert mine["auc"][0] == (1.0 if seen > unseen else 0.5 if seen == unseen else 0.0)


def test_the_report_renders_the_probes_sections(run):
    md = (run / "report" / "report.md").read_text()
    for needle in ("pass@1", "CoDeC", "Opcode"):
        assert needle in md, needle
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert summary["kind"] == "probes"
