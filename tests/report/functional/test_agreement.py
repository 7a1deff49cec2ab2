"""Metric agreement and the target-only proxy evaluation (summary.json ``proxies.agreement``,
``proxies.target_only``; docs/report.md "Proxy metrics").

The synthetic run of tests/report/_fake_run.py: conclusive (sample, role) pairs with a SIM_func are the 32
conclusive samples' two completions, plus s21's target (its reference is unparsable) and s22's two (s22
is unscored: no bleu for the target, yet executed) — 34 target pairs and 33 reference pairs, 67 in all.
Target pairs with SIM_func >= 0.8: s00-s07, s10-s13, s30 = 13.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats

from calib.report import write_report
from tests.report._fake_run import DEFAULT, METRICS, make_run


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = make_run(tmp_path_factory.mktemp("run"))
    paths = write_report(run)
    return {"run": run, "summary": json.loads(paths["summary"].read_text()), "md": paths["markdown"].read_text()}


def _pairs(run: Path, roles: tuple[str, ...]) -> dict[str, dict[tuple[str, str], float]]:
    """Every variable's value per conclusive (sample, role) pair, read straight from the parquet tables."""
    execs = pl.read_parquet(run / "tables" / "executions.parquet")
    sims = pl.read_parquet(run / "tables" / "similarities.parquet")
    func = {(r["sample_id"], r["role"]): r["sim_func"] for r in execs.iter_rows(named=True)
            if r["role"] in roles and r["conclusive"] and r["sim_func"] is not None}
    out = {"sim_func": func}
    for metric in METRICS:
        out[metric] = {(r["sample_id"], r["role"]): r["value"] for r in sims.iter_rows(named=True)
                       if r["metric"] == metric and r["value"] is not None and (r["sample_id"], r["role"]) in func}
    return out


def test_correlation_matrix_equals_scipy_pairwise(rendered):
    agreement = rendered["summary"]["proxies"]["agreement"]
    assert agreement["variables"] == [*METRICS, "sim_func"]
    assert (agreement["roles"], agreement["n_pairs"]) == (["target", "reference"], 67)
    values = _pairs(rendered["run"], ("target", "reference"))
    names = agreement["variables"]
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            keys = sorted(set(values[a]) & set(values[b]))
            x = np.array([values[a][k] for k in keys])
            y = np.array([values[b][k] for k in keys])
            assert agreement["n"][i][j] == len(keys), (a, b)
            assert agreement["pearson"][i][j] == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12), (a, b)
            assert agreement["spearman"][i][j] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12), (a, b)
    # bleu has no value on s22's target (and s21's reference has no pair): 66 pairs; the judge misses two
    assert agreement["n"][names.index("bleu")][names.index("sim_func")] == 66
    assert agreement["n"][names.index("judge_functional")][names.index("sim_func")] == 65


def test_an_undefined_correlation_is_null(tmp_path):
    """exact is constant (0) when no completion reaches bleu 0.95: its correlations are undefined, not 0."""
    low = [replace(s, text=(0.9, s.text[1])) if s.text[0] is not None and s.text[0] >= 0.95 else s for s in DEFAULT]
    summary = json.loads(write_report(make_run(tmp_path, low))["summary"].read_text())
    agreement = summary["proxies"]["agreement"]
    row = agreement["pearson"][agreement["variables"].index("exact")]
    assert row == [None] * len(agreement["variables"])
    assert agreement["pearson"][1][1] == pytest.approx(1.0)


def test_target_only_evaluation_uses_exactly_the_target_pairs(rendered):
    proxies = rendered["summary"]["proxies"]
    target = proxies["target_only"]
    assert target["roles"] == ["target"]
    assert (target["n_pairs"], target["n_positive"], target["n_negative"]) == (34, 13, 21)
    # the pooled keys are unchanged: both roles, 67 pairs
    assert (proxies["n_pairs"], proxies["n_positive"], proxies["n_negative"]) == (67, 18, 49)
    values = _pairs(rendered["run"], ("target",))
    assert len(values["sim_func"]) == 34 and {k[1] for k in values["sim_func"]} == {"target"}
    for rec in target["metrics"]:
        keys = sorted(values[rec["metric"]])
        scores = np.array([values[rec["metric"]][k] for k in keys])
        labels = np.array([values["sim_func"][k] >= 0.8 for k in keys])
        assert (rec["n"], rec["n_missing"], rec["n_positive"]) == (len(keys), 34 - len(keys), int(labels.sum()))
        pos, neg = scores[labels], scores[~labels]
        u = stats.mannwhitneyu(pos, neg).statistic  # ties count one half
        assert rec["auc"] == pytest.approx(u / (pos.size * neg.size), abs=1e-12), rec["metric"]
        sims = np.array([values["sim_func"][k] for k in keys])
        assert rec["pearson_r"] == pytest.approx(stats.pearsonr(scores, sims).statistic, abs=1e-9)
    # the target's judge misses s15's reply only (s31's unparsable reply is the reference's)
    judge = next(r for r in target["metrics"] if r["metric"] == "judge_functional")
    assert judge["n_missing"] == 1


def test_the_report_shows_both_evaluations_and_the_matrix(rendered):
    md = rendered["md"]
    section = md[md.index("## Proxy metrics"):md.index("## Methods")]
    assert "*Proxy metrics against execution (target and reference completions pooled).*" in section
    assert "*Proxy metrics against execution (target completions only).*" in section
    assert "over the 34 pairs of the target's completions only" in section
    target = rendered["summary"]["proxies"]["target_only"]["metrics"]
    bleu = next(r for r in target if r["metric"] == "bleu")
    row = f"| `bleu` | {bleu['n']} | {bleu['n_positive']} | {bleu['n_negative']} | {bleu['pearson_r']:.3f} |"
    assert row in section
    agreement = rendered["summary"]["proxies"]["agreement"]
    r, rho = agreement["pearson"][1][5], agreement["spearman"][1][5]
    assert f"{r:.3f} / {rho:.3f}" in section and not math.isnan(r)
    svg = (rendered["run"] / "report" / "figures" / "agreement.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<image" not in svg  # vector cells, no raster
