"""The ``mitigation`` study kind end to end on the tiny organism's real audit: NPO and DPO-ref post-training, every
checkpoint re-measured, the trajectory recomputed here from the scores (the audit's counterfactual rule, Clopper-
Pearson intervals against statsmodels), the audit's own numbers reproduced for the target and the reference, a
re-run that does nothing, and one-line errors for bad specs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from statsmodels.stats.proportion import proportion_confint

pytest.importorskip("peft")

SPEC = """[study]
name = "mit"
kind = "mitigation"
seed = 0

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.target]
kind = "embedded"
model_dir = "organism:target"
threads = 1

[servers.reference]
kind = "embedded"
model_dir = "organism:reference"
threads = 1

[models]
target = "target"
reference = "reference"

[mitigation]
audit = "{audit}"
methods = ["npo", "dpo-ref", "dpo-target"]
epochs = 10
save_epochs = [5, 10]
npo_learning_rate = 1e-3
dpo_learning_rate = 3e-3
retain_prompts = 10
holdout = 0.25
benchmarks = ["{tasks}"]
benchmark_max_tokens = 96
"""

ENV = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
TASKS = Path(__file__).parents[1] / "probes" / "fixtures" / "tasks.jsonl"


def _study(root, *args):
    return subprocess.run([sys.executable, "-m", "calib", "study", "mit.toml", "--run-dir", "run", "--quiet", *args],
                          capture_output=True, text=True, cwd=root, timeout=1200, env=ENV)


@pytest.fixture(scope="module")
def mitigation(audit, organism_tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("mitigation-study")
    (root / "mit.toml").write_text(SPEC.format(cache_dir=organism_tiny.root.parent.parent, audit=audit, tasks=TASKS))
    done = _study(root)
    assert done.returncode == 0, done.stderr[-3000:]
    return root


def _table(root, name):
    return pl.read_parquet(root / "run" / "tables" / f"{name}.parquet")


def test_the_target_and_reference_points_are_the_audits_own_numbers(mitigation, audit):
    scores = _table(mitigation, "mitigation_scores").filter(pl.col("set").is_in(["memorized", "heldout"]))
    claims = {r["sample_id"]: r for r in pl.read_parquet(audit / "tables" / "claims.parquet").iter_rows(named=True)}
    memorized = {s for s, r in claims.items()
                 if r["membership"] == "member" and r["verdict"] in ("textual", "functional")}
    assert set(scores["sample_id"]) == memorized
    for r in scores.filter(pl.col("point").is_in(["target", "reference"])).iter_rows(named=True):
        c = claims[r["sample_id"]]
        assert r["verdict"] == c["verdict"]
        assert r["text"] == pytest.approx(c[f"text_{r['point']}"], abs=1e-12)
        # the same x, seed and executor settings choose the same input states: the same SIM_func
        if r["conclusive"] and c["conclusive"]:
            assert r["func"] == pytest.approx(c[f"func_{r['point']}"], abs=1e-12)


def test_the_trajectory_is_recomputed_from_the_scores(mitigation, audit):
    spec = json.loads((audit / "spec.json").read_text())
    tau_text, tau_func, confidence = (spec["analyze"][k] for k in ("tau_text", "tau_func", "confidence"))
    scores = _table(mitigation, "mitigation_scores")
    memorized = scores.filter(pl.col("set") == "memorized")
    ref = {r["sample_id"]: r for r in memorized.filter(pl.col("point") == "reference").iter_rows(named=True)}
    trajectory = {r["point"]: r for r in _table(mitigation, "trajectory").iter_rows(named=True)}
    checkpoints = _table(mitigation, "checkpoints")
    assert sorted(checkpoints["point"]) == ["dpo-ref@10", "dpo-ref@5", "dpo-target@10", "dpo-target@5", "npo@10",
                                            "npo@5"]
    assert set(trajectory) == {"target", "reference", *checkpoints["point"]}
    for point, row in trajectory.items():
        rows = memorized.filter(pl.col("point") == point).to_dicts()

        def textual(r):
            return r["text"] is not None and r["text"] >= tau_text

        def functional(r):
            return bool(r["conclusive"]) and r["func"] is not None and r["func"] >= tau_func

        still = sum((textual(r) and not textual(ref[r["sample_id"]]))
                    or (functional(r) and not textual(r) and not functional(ref[r["sample_id"]])) for r in rows)
        assert (row["n"], row["memorized"]) == (len(rows), still)
        low, high = proportion_confint(still, len(rows), alpha=1 - confidence, method="beta")
        assert row["memorized_low"] == pytest.approx(low, abs=1e-9)
        assert row["memorized_high"] == pytest.approx(high, abs=1e-9)
        t = [r["text"] for r in rows if r["verdict"] == "textual"]
        f = [r["func"] for r in rows if r["verdict"] == "functional" and r["conclusive"]]
        assert row["memorization"] == pytest.approx((sum(t) + sum(f)) / (len(t) + len(f)))
        retain = scores.filter((pl.col("set") == "retain") & (pl.col("point") == point))["text"].to_list()
        assert row["retain_agreement"] == pytest.approx(sum(retain) / len(retain))
        assert row["retain_utility"] == pytest.approx(row["retain_agreement"]
                                                      / trajectory["target"]["retain_agreement"])
        # the held-out benchmark: a task passes when the completion's output equals x's on every input state
        tasks = scores.filter((pl.col("set") == "heldout") & (pl.col("point") == point) & pl.col("conclusive")
                              & pl.col("text").is_not_null())
        passed = sum(f == 1.0 for f in tasks["func"])
        assert (row["benchmark_n"], row["benchmark_passed"]) == (tasks.height, passed)
        low, high = proportion_confint(passed, tasks.height, alpha=1 - confidence, method="beta")
        assert (row["pass_low"], row["pass_high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
        measures = [row["retain_utility"], (passed / tasks.height) / trajectory["target"]["pass_at_1"]]
        # each named benchmark: pass@1 normalized by the target's, left out of the aggregate where the target's is 0
        named = json.loads(row["benchmarks"])
        base = json.loads(trajectory["target"]["benchmarks"])
        for name, got in named.items():
            if base[name]["pass_at_1"]:
                measures.append(got["pass_at_1"] / base[name]["pass_at_1"])
        assert row["utility"] == pytest.approx(sum(measures) / len(measures))
    assert trajectory["target"]["retain_agreement"] == pytest.approx(1.0)
    assert trajectory["target"]["utility"] == pytest.approx(1.0)


def test_held_out_functions_are_never_trained_on_and_the_target_solves_them(mitigation, audit):
    claims = pl.read_parquet(audit / "tables" / "claims.parquet")
    memorized = set(claims.filter((pl.col("membership") == "member")
                                  & pl.col("verdict").is_in(["textual", "functional"]))["sample_id"])
    scores = _table(mitigation, "mitigation_scores")
    held = set(scores.filter(pl.col("set") == "heldout")["sample_id"])
    forget = set(scores.filter(pl.col("set") == "memorized")["sample_id"])
    assert len(held) == round(0.25 * len(memorized)) and held | forget == memorized and not held & forget
    assert not held & set(_table(mitigation, "pairs")["sample_id"])
    t = {r["point"]: r for r in _table(mitigation, "trajectory").iter_rows(named=True)}
    # the target memorized them, the reference did not: the benchmark separates the two
    assert t["target"]["benchmark_n"] >= 1 and t["target"]["pass_at_1"] > t["reference"]["pass_at_1"]


def test_npo_and_dpo_reduce_what_the_target_still_memorizes(mitigation):
    t = {r["point"]: r for r in _table(mitigation, "trajectory").iter_rows(named=True)}
    # NPO's last checkpoint: the interval lies below the target's (tiny organism, lr 1e-3, 10 epochs)
    assert t["npo@10"]["memorized_high"] < t["target"]["memorized_low"]
    assert t["dpo-ref@10"]["memorized_rate"] < t["target"]["memorized_rate"]
    assert t["npo@10"]["utility"] < 1.0  # and it costs utility (retain agreement falls)


def test_dpo_target_trains_on_its_own_pairs(mitigation):
    pairs = _table(mitigation, "pairs")
    assert sorted(set(pairs["source"])) == ["ref", "target"]  # npo and dpo-ref share the ref pairs
    target = pairs.filter(pl.col("source") == "target")
    assert target.filter(pl.col("chosen_from") == "target").height + target["fallback"].sum() == target.height
    checkpoints = _table(mitigation, "checkpoints").filter(pl.col("method") == "dpo-target")
    assert set(checkpoints["pairs"]) == {target.filter(pl.col("chosen").is_not_null()).height}


def test_report_rerun_and_checkpoints(mitigation):
    run = mitigation / "run"
    assert (run / "report" / "report.html").is_file() and (run / "report" / "figures" / "trajectory.svg").is_file()
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert {p["point"] for p in summary["points"]} >= {"target", "reference", "npo@10"}
    for folder in _table(mitigation, "checkpoints")["folder"]:
        assert (run / folder / "adapter_model.safetensors").is_file()
    before = {p.name: p.read_bytes() for p in (run / "tables").glob("*.parquet")}
    done = _study(mitigation)
    assert done.returncode == 0, done.stderr
    assert {p.name: p.read_bytes() for p in (run / "tables").glob("*.parquet")} == before
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest and "stages" in manifest


def test_bad_specs_get_one_line(mitigation, tmp_path):
    text = (mitigation / "mit.toml").read_text()
    cases = [
        (text.replace('audit = "', 'audit = "/nowhere'), "mitigation.audit"),
        (text.replace('"npo", "dpo-ref", "dpo-target"', '"npo", "dpo-rewrite"'), "rewriter"),
        (text.replace("save_epochs = [5, 10]", "save_epochs = [5, 12]"), "save_epochs"),
        (text.replace('kind = "mitigation"', 'kind = "functional"'), "[mitigation]"),
        (text.replace(str(TASKS), "no-such-tasks.jsonl"), "mitigation.benchmarks"),
    ]
    for number, (spec, key) in enumerate(cases):
        (tmp_path / f"s{number}.toml").write_text(spec)
        done = subprocess.run([sys.executable, "-m", "calib", "check", f"s{number}.toml"], capture_output=True,
                              text=True, cwd=tmp_path, timeout=300, env=ENV)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and key in done.stderr, (key, done.stderr)


def test_benchmark_tasks_are_answered_by_every_point_and_their_verdicts_reproduce(mitigation):
    import asyncio

    from calib.executors.sandbox import Sandbox
    from calib.probes.tasks import load_tasks
    from calib.probes.testrun import run_tests

    tasks = {t.task_id: t for t in load_tasks(str(TASKS))}
    results = _table(mitigation, "benchmark_results")
    points = {"target", "reference", *_table(mitigation, "checkpoints")["point"]}
    assert set(results["point"]) == points and results.height == len(points) * len(tasks)
    assert set(results["benchmark"]) == {str(TASKS)} and set(results["task_id"]) == set(tasks)
    sandbox = Sandbox()
    for r in results.filter(pl.col("program").is_not_null()).iter_rows(named=True):
        t = tasks[r["task_id"]]
        run = asyncio.run(run_tests(sandbox, r["program"], t.tests, setup=t.setup))
        assert (run.all_passed, run.n_passed) == (r["passed"], r["tests_passed"]), r
    for r in results.filter(pl.col("program").is_null()).iter_rows(named=True):
        assert r["passed"] in (False, None) and r["status"] != "ok"
    trajectory = {r["point"]: r for r in _table(mitigation, "trajectory").iter_rows(named=True)}
    for point in points:
        mine = results.filter((pl.col("point") == point) & pl.col("passed").is_not_null())
        got = json.loads(trajectory[point]["benchmarks"])[str(TASKS)]
        assert (got["n"], got["passed"]) == (mine.height, int(mine["passed"].sum()))
        if got["n"]:
            low, high = proportion_confint(got["passed"], got["n"], alpha=0.05, method="beta")
            assert (got["low"], got["high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
