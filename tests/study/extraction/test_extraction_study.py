"""``calib study`` of kind ``extraction`` on the tiny model organism, end to end.

One real ``python -m calib study`` run (the organism's target and reference in the embedded server)
audits the planted verbatim members against matched controls: the organism's own controls plus
never-trained stdlib functions drawn from the same distribution (``[organism] extra_controls``).
Every number is checked against an independent computation from the scores table: numpy order
statistics, scipy's Beta and beta-binomial laws, closed forms.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps

from calib.study.tables import EXTRACTION_TABLES

ALPHA = 0.05
DECONTAMINATED = 1  # how many controls the spec's decontaminate list removes (the highest-scoring one)


def _spec(cache_dir: Path, decontaminate: list[str] | None = None) -> str:
    return f"""[study]
name = "extraction-tiny"
kind = "extraction"
seed = 0

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"
extra_controls = 120

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

[data]
source = "organism"
kinds = ["verbatim"]

[extraction]
prefix_tokens = 32
suffix_tokens = [16, 32]

[analyze]
alpha = {ALPHA}
decontaminate = {json.dumps(decontaminate or [])}
"""


def _calib(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "calib", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=900, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})


def _cache(organism) -> Path:
    return organism.root.parent.parent


@pytest.fixture(scope="module")
def workspace(organism_tiny, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("extraction")
    (root / "ex.toml").write_text(_spec(_cache(organism_tiny)))
    return root


@pytest.fixture(scope="module")
def run(workspace: Path) -> Path:
    proc = _calib("study", "ex.toml", "--run-dir", "a", "--quiet", *os.environ.get("XSTAGE", "").split(), cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    return workspace / "a"


def _table(run: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(run / "tables" / f"{name}.parquet")


def _scores(run: Path, role: str, procedure: str, suffix: int) -> tuple[np.ndarray, np.ndarray, pl.DataFrame]:
    windows = _table(run, "windows").filter(pl.col("error").is_null()).select("window_id", "membership")
    scores = _table(run, "scores").filter((pl.col("role") == role) & (pl.col("procedure") == procedure)
                                          & (pl.col("suffix_tokens") == suffix)).join(windows, on="window_id")
    members = scores.filter(pl.col("membership") == "member")["log10_value"].to_numpy()
    controls = scores.filter(pl.col("membership") == "control")["log10_value"].to_numpy()
    return members, controls, scores


def _point(run: Path, role: str, procedure: str, suffix: int, pool: str = "all", alpha: float = ALPHA) -> dict:
    ops = _table(run, "operating_points").filter(
        (pl.col("role") == role) & (pl.col("procedure") == procedure) & (pl.col("suffix_tokens") == suffix)
        & (pl.col("pool") == pool) & ((pl.col("alpha") - alpha).abs() < 1e-12))
    assert ops.height == 1
    return ops.row(0, named=True)


def test_tables_have_their_schemas_and_every_window_is_scored_by_every_procedure(run):
    for name, schema in EXTRACTION_TABLES.items():
        assert _table(run, name).schema == pl.Schema(schema), name
    samples = _table(run, "samples")
    assert int((samples["membership"] == "member").sum()) == 8  # the tiny organism's verbatim members
    assert int((samples["kind"] == "extra_control").sum()) == 120
    windows = _table(run, "windows")
    good = windows.filter(pl.col("error").is_null())
    # a window is exactly the text between its character offsets, and prefix + suffix are contiguous
    text = dict(samples.select("sample_id", "function").iter_rows())
    for w in good.head(40).iter_rows(named=True):
        assert text[w["sample_id"]][w["char_start"]:w["char_end"]] == w["suffix"]
        assert text[w["sample_id"]][:w["char_start"]].endswith(w["prefix"])
    skipped = windows.filter(pl.col("error").is_not_null())
    assert skipped["error"].str.contains("too short|re-tokenize|splits").all()
    scores = _table(run, "scores")
    procedures = {"greedy", "top_k", "base", "near_verbatim_greedy", "near_verbatim"}
    assert set(scores["procedure"]) == procedures
    assert scores.height == good.height * 2 * len(procedures)  # two models
    assert scores["error"].is_null().all()


def test_greedy_scores_agree_with_real_greedy_generations(run):
    """The teacher-forced greedy score is 1 exactly when the server's greedy generation is the suffix."""
    scores = _table(run, "scores")
    greedy = scores.filter(pl.col("procedure") == "greedy").select("window_id", "role", "value")
    near = scores.filter(pl.col("procedure") == "near_verbatim_greedy").select(
        "window_id", "role", pl.col("detail").map_elements(lambda d: json.loads(d)["distance"],
                                                           return_dtype=pl.Int64).alias("distance"))
    joined = greedy.join(near, on=["window_id", "role"])
    assert joined.height == greedy.height
    assert ((joined["value"] == 1.0) == (joined["distance"] == 0)).all()
    assert int((joined["value"] == 1.0).sum()) >= 8  # the target reproduces its members


def test_target_members_are_claimed_at_the_certified_level_as_recomputed_by_hand(run):
    members, controls, _ = _scores(run, "target", "base", 32)
    n = controls.size
    k = math.floor(ALPHA * (n + 1))
    tau = np.sort(controls)[::-1][k - 1]  # the K-th largest control score
    claims = int((members > tau).sum())
    point = _point(run, "target", "base", 32)
    assert (point["n_controls"], point["k"]) == (n, k)
    assert point["certified_alpha"] == pytest.approx(k / (n + 1))
    assert point["log10_threshold"] == pytest.approx(tau)
    assert point["claims"] == claims == members.size == 8
    # calibrated rate and the Clopper–Pearson band shifted by alpha_N (scipy's Beta quantiles)
    low = sps.beta.ppf(0.025, claims, members.size - claims + 1) if claims else 0.0
    assert point["calibrated_rate"] == pytest.approx(claims / members.size - k / (n + 1))
    assert point["low"] == pytest.approx(low - k / (n + 1))
    assert point["high"] == pytest.approx(1.0 - k / (n + 1))
    assert point["calibrated_rate"] > 0 and point["low"] > 0
    # the Beta law of the realized FPR: Beta(K, N-K+1), central 95 % interval
    assert point["fpr_low"] == pytest.approx(sps.beta.ppf(0.025, k, n - k + 1))
    assert point["fpr_high"] == pytest.approx(sps.beta.ppf(0.975, k, n - k + 1))


def test_the_reference_shows_no_calibrated_memorization_of_the_same_members(run):
    for procedure in ("base", "top_k", "greedy", "near_verbatim"):
        for suffix in (16, 32):
            point = _point(run, "reference", procedure, suffix)
            if point["k"] == 0:
                continue
            assert point["low"] <= 0.0 <= point["high"], (procedure, suffix, point)


def test_controls_give_an_empirical_fpr_within_the_beta_law_over_repeated_splits(run):
    """Calibrate on N never-trained controls, test fresh ones: the exceedances follow BetaBinomial(M, K, N-K+1).

    For exchangeable continuous scores the number of M fresh non-members above the K-th largest of N
    calibration scores is beta-binomial (the Beta law of the realized FPR, mixed with binomial noise);
    its mean share is alpha_N = K/(N+1).
    """
    _, controls, _ = _scores(run, "target", "base", 32)
    assert np.unique(controls).size == controls.size  # continuous scores: no ties
    rng = np.random.default_rng(20261130)
    n = 2 * controls.size // 3
    m = controls.size - n
    k = math.floor(ALPHA * (n + 1))
    counts = []
    for _ in range(600):
        order = rng.permutation(controls.size)
        calibration, fresh = controls[order[:n]], controls[order[n:]]
        tau = np.sort(calibration)[::-1][k - 1]
        counts.append(int((fresh > tau).sum()))
    counts = np.array(counts)
    law = sps.betabinom(m, k, n - k + 1)
    mean_share = counts.mean() / m
    se = counts.std(ddof=1) / math.sqrt(counts.size) / m
    assert abs(mean_share - k / (n + 1)) < 4 * se + 1e-12
    assert law.mean() / m == pytest.approx(k / (n + 1))
    # the share of splits at or below the law's 95 % quantile is about 95 %
    covered = float((counts <= law.ppf(0.95)).mean())
    assert covered >= 0.9


def test_paired_comparison_finds_the_target_claims_members_the_reference_does_not(run):
    paired = _table(run, "paired").filter((pl.col("procedure") == "base") & (pl.col("suffix_tokens") == 32)
                                          & ((pl.col("alpha") - ALPHA).abs() < 1e-12))
    row = paired.row(0, named=True)
    t_members, _, _ = _scores(run, "target", "base", 32)
    assert row["n"] == t_members.size
    assert row["target_only"] == row["n"] - row["both"] - row["reference_only"] - row["neither"]
    assert row["difference"] == pytest.approx((row["target_only"] - row["reference_only"]) / row["n"])
    assert row["difference"] > 0 and row["low"] > 0


def test_budgets_follow_the_closed_form(run):
    budgets = _table(run, "budgets").filter((pl.col("role") == "target") & (pl.col("procedure") == "base")
                                            & (pl.col("suffix_tokens") == 16))
    members, controls, _ = _scores(run, "target", "base", 16)
    for row in budgets.iter_rows(named=True):
        n, c = row["budget"], row["confidence"]
        p_min = -math.expm1(math.log1p(-c) / n)  # 1 - (1 - p)^n = c
        assert row["log10_min_probability"] == pytest.approx(math.log10(p_min), rel=1e-9)
        assert row["members_generated"] == int((members >= row["log10_min_probability"]).sum())
        assert row["controls_generated"] == int((controls >= row["log10_min_probability"]).sum())
        assert row["members_extractable"] <= row["members_generated"]
    generated = budgets.sort("budget")["members_generated"].to_list()
    assert generated == sorted(generated) and 1e5 in budgets["budget"].to_list()


def test_claims_table_p_values_margins_and_multiple_testing(run):
    claims = _table(run, "extraction_claims").filter(
        (pl.col("role") == "target") & (pl.col("procedure") == "base") & (pl.col("suffix_tokens") == 32))
    members, controls, _ = _scores(run, "target", "base", 32)
    mine = claims.filter(pl.col("membership") == "member")
    for row in mine.iter_rows(named=True):
        assert row["p_value"] == pytest.approx((1 + (controls >= row["log10_value"]).sum()) / (controls.size + 1))
    point = _point(run, "target", "base", 32)
    assert mine["margin"].to_numpy() == pytest.approx(mine["log10_value"].to_numpy() - point["log10_threshold"])
    assert int(mine["claim"].sum()) == point["claims"]
    # Bonferroni over m members at FWER 0.05, and Benjamini-Hochberg at FDR 0.05 (statsmodels as the reference)
    from statsmodels.stats.multitest import multipletests

    p = mine["p_value"].to_numpy()
    assert mine["bonferroni"].to_list() == (p <= 0.05 / p.size).tolist()
    assert mine["bh"].to_list() == multipletests(p, alpha=0.05, method="fdr_bh")[0].tolist()
    assert claims.filter(pl.col("membership") == "control")["bh"].is_null().all()


def test_a_finished_run_rerun_does_no_work(run, workspace):
    before = (run / "events.jsonl").read_text().count("\n")
    tables = {name: _table(run, name) for name in EXTRACTION_TABLES}
    proc = _calib("study", "ex.toml", "--run-dir", "a", "--quiet", cwd=workspace)
    assert proc.returncode == 0 and "ran: none" in proc.stdout, proc.stderr
    new = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()[before:]]
    assert not [e for e in new if e["event"] in ("stage_start", "chunk")]
    for name, frame in tables.items():
        assert _table(run, name).equals(frame), name


def test_a_decontaminate_list_adds_the_smaller_pool_and_keeps_the_full_one(run, workspace):
    _, _, scores = _scores(run, "target", "base", 32)
    top = scores.filter(pl.col("membership") == "control").sort("log10_value", descending=True)["sample_id"][0]
    spec = workspace / "decon.toml"
    spec.write_text(_spec(_cache_dir_of(workspace), [top]).replace('name = "extraction-tiny"',
                                                                    'name = "extraction-decon"'))
    proc = _calib("study", "decon.toml", "--run-dir", "a", "--quiet", cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    # only the analysis stages ran again: scoring is not redone for an analysis setting
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    last = [e for e in events if e["event"] == "run_start"][-1]
    after = events[events.index(last):]
    assert {e["stage"] for e in after if e["event"] == "stage_skip"} >= {"samples", "windows", "score"}
    full, clean = _point(run, "target", "base", 32, "all"), _point(run, "target", "base", 32, "decontaminated")
    assert clean["n_controls"] == full["n_controls"] - DECONTAMINATED
    assert clean["k"] == math.floor(ALPHA * (clean["n_controls"] + 1))
    claims = _table(run, "extraction_claims")
    assert set(claims.filter(pl.col("contaminated"))["sample_id"]) == {top}


def _cache_dir_of(workspace: Path) -> str:
    text = (workspace / "ex.toml").read_text()
    return text.split('cache_dir = "', 1)[1].split('"', 1)[0]


def test_the_report_sweeps_both_suffix_lengths_with_members_against_controls(run):
    """The report's suffix-length sweep (App. D.3) and member − control rows (App. D.1) on the real run."""
    from statsmodels.stats.proportion import confint_proportions_2indep

    from calib.report import write_report

    paths = write_report(run)
    summary = json.loads(paths["summary"].read_text())
    pool = summary["settings"]["primary_pool"]
    rows = [r for r in summary["suffix_sweep"] if r["role"] == "target" and r["pool"] == pool]
    assert sorted({r["suffix_tokens"] for r in rows}) == [16, 32]
    claims = _table(run, "extraction_claims")
    dropped = set(claims.filter(pl.col("contaminated"))["window_id"])
    for r in rows:
        members, _, scores = _scores(run, "target", r["procedure"], r["suffix_tokens"])
        controls = scores.filter((pl.col("membership") == "control") & ~pl.col("window_id").is_in(list(dropped)))
        values = controls["log10_value"].to_numpy()
        if r["binary"]:  # generation: score 1
            mk, ck = int((members == 0).sum()), int((values == 0).sum())
        else:
            point = _point(run, "target", r["procedure"], r["suffix_tokens"], pool)
            mk, ck = point["claims"], int((values > point["log10_threshold"]).sum())
            assert r["calibrated_rate"] == pytest.approx(point["calibrated_rate"])
        assert (r["member_flags"], r["n_members"], r["control_flags"], r["n_controls"]) == (
            mk, members.size, ck, values.size), r["procedure"]
        low, high = confint_proportions_2indep(mk, members.size, ck, values.size, method="newcomb", compare="diff")
        assert (r["difference_low"], r["difference_high"]) == pytest.approx((low, high))
    base = [r for r in rows if r["procedure"] == "base"]
    assert [r["member_flags"] for r in base] == [8, 8]  # every verbatim member, at both lengths
    assert (run / "report" / "figures" / "suffix-sweep.svg").read_text().lstrip().startswith("<?xml")
    assert "figures/suffix-sweep.svg" in paths["markdown"].read_text()


def test_compare_runs_pairs_the_target_of_one_run_with_another_runs_model_on_the_same_windows(run, tmp_path):
    """compare-runs on real tables: run b is run a with the reference's claims in the target's place (as if a
    second study had audited the reference model), so b − a on the shared windows is the run's own paired
    comparison with its sign turned, and its interval Newcombe's method 10 (statsmodels' Wilson limits)."""
    import shutil

    from statsmodels.stats.contingency_tables import mcnemar

    from calib.report.compare import compare_runs
    from tests.report.compare.test_compare_functional import _paired_newcombe

    other = tmp_path / "b"
    shutil.copytree(run, other)
    for name in ("extraction_claims", "operating_points"):
        table = _table(run, name)
        swapped = table.filter(pl.col("role") == "reference").with_columns(pl.lit("target").alias("role"))
        swapped.write_parquet(other / "tables" / f"{name}.parquet")
    result = compare_runs([run, other])
    (c,) = [c for c in result["comparisons"] if (c["role"], c["procedure"], c["suffix_tokens"], c["population"],
                                                   c["rate"]) == ("target", "base", 32, "members", "claim")]
    row = _table(run, "paired").filter((pl.col("procedure") == "base") & (pl.col("suffix_tokens") == 32)
                                       & ((pl.col("alpha") - ALPHA).abs() < 1e-12)).row(0, named=True)
    assert (c["design"], c["n_paired"], c["conflicting_ids"]) == ("paired", row["n"], 0)
    d = c["difference"]
    assert (d["n11"], d["n10"], d["n01"], d["n00"]) == (row["both"], row["reference_only"], row["target_only"],
                                                        row["neither"])
    assert d["estimate"] == pytest.approx(-row["difference"])
    assert (d["low"], d["high"]) == pytest.approx(_paired_newcombe(d["n11"], d["n10"], d["n01"], d["n00"]), abs=1e-9)
    table = [[d["n11"], d["n10"]], [d["n01"], d["n00"]]]
    assert c["p_value"] == pytest.approx(mcnemar(table, exact=True).pvalue, abs=1e-12)
    assert c["model_a"].endswith("/target") and c["model_b"].endswith("/reference")
