"""The report of a functional study: summary.json against counts made by hand, the sections, the files.

The synthetic run (tests/report/_fake_run.py, 40 samples, τ_text = 0.75, τ_func = 0.8):

  sample   membership  SIM_text T/R     SIM_func T/R   status                       verdict
  s00-s05  member      0.30 / 0.20      0.9 / 0.1      conclusive                   functional
  s06-s07  member      0.90 / 0.30      1.0 / 0.2      conclusive                   textual
  s08-s09  member      0.90 / 0.30      0.5 / 0.2      conclusive                   textual (not functional)
  s10-s11  member      0.95 / 0.80      1.0 / 1.0      conclusive                   none (both models)
  s12-s13  member      0.40 / 0.35      0.8 / 0.9      conclusive (T exactly τ)     none (both functional)
  s14      member      0.75 / 0.7499    0.3 / 0.3      conclusive (T exactly τ)     textual (not functional)
  s15      member      0.20 / 0.80      0.1 / 0.1      conclusive                   none (reference text only)
  s16      member      0.90 / 0.10      –              inconclusive (few valid)     textual
  s17-s19  member      0.30 / 0.30      –              inconclusive                 inconclusive
  s20      member      – / 0.30         –              target request failed        unscored
  s21      member      0.30 / –         –              reference unparsable         unscored
  s22      member      – / 0.20         0.4 / 0.0      no bleu for the target       unscored
  s23-s29  member      0.10-0.40 / .15  < 0.8 / ~0.1   conclusive                   none
  s30      control     0.20 / 0.10      0.9 / 0.0      conclusive                   functional (false positive)
  s31      control     0.20 / 0.30      0.1 / 0.9      conclusive                   none (reference functional)
  s32      control     0.30 / 0.30      –              inconclusive                 inconclusive
  s33-s39  control     0.05-0.35 / 0.1  < 0.8 / 0.2    conclusive                   none

By hand: 40 samples, 3 unscored, 37 scored, 5 inconclusive, 32 conclusive.
Text flags (37 scored): target {s06-s11, s14, s16} = 8, reference {s10, s11, s15} = 3;
  both 2, target only 6, reference only 1, neither 28. Textual rate 6/37.
Functional flags (32 conclusive): target {s00-s07, s10-s13, s30} = 13, reference {s10-s13, s31} = 5;
  both 4, target only 9, reference only 1, neither 18.
Functionally memorized {s00-s05, s30} = 7/32; of the 9 target-only flags 7 have SIM_text < τ_text;
  of the conclusive textual flags {s06-s09, s14}, 3 ({s08, s09, s14}) are not functional.
Members: 27 scored, 23 conclusive, textual 6/27, functional 6/23. Controls: 10 scored, 9 conclusive,
  textual 0/10, functional 1/9.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats

from calib._exceptions import InputError
from calib.report import write_report
from tests.report._fake_run import DEFAULT, METRICS, _metric_value, make_run, variant

SECTIONS = ("## Headline", "## Rates", "## Threshold sensitivity", "## Inconclusive and unscored samples",
            "## Worked examples",
            "## Proxy metrics", "## Methods", "### Models", "### Prompts and decoding", "### Data and filters",
            "### Execution", "### Similarity metrics and thresholds", "### Statistics", "### Provenance",
            "### References")


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Reference: Clopper & Pearson (1934) through scipy.stats.beta quantiles (docs/architecture.md "Statistics")."""
    gamma = 1 - confidence
    low = 0.0 if k == 0 else stats.beta.ppf(gamma / 2, k, n - k + 1)
    high = 1.0 if k == n else stats.beta.ppf(1 - gamma / 2, k + 1, n - k)
    return float(low), float(high)


def assert_interval(interval: dict[str, Any] | None, k: int, n: int, confidence: float = 0.95) -> None:
    assert interval is not None
    low, high = clopper_pearson(k, n, confidence)
    assert (interval["k"], interval["n"]) == (k, n)
    assert interval["estimate"] == pytest.approx(k / n)
    assert interval["low"] == pytest.approx(low, abs=1e-12)
    assert interval["high"] == pytest.approx(high, abs=1e-12)
    assert interval["confidence"] == confidence


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = make_run(tmp_path_factory.mktemp("run"))
    paths = write_report(run)
    return {"run": run, "paths": paths, "summary": json.loads(paths["summary"].read_text()),
            "md": paths["markdown"].read_text(), "html": paths["html"].read_text()}


def _group(summary: dict[str, Any], label: str) -> dict[str, Any]:
    return next(g for g in summary["groups"] if g["label"] == label)


def test_write_report_returns_and_writes_the_three_files(rendered):
    paths, run = rendered["paths"], rendered["run"]
    assert paths == {"html": run / "report" / "report.html", "markdown": run / "report" / "report.md",
                     "summary": run / "report" / "summary.json"}
    assert all(p.is_file() for p in paths.values())
    assert sorted(p.name for p in (run / "report" / "figures").iterdir()) == [
        "agreement.svg", "rates.svg", "roc.svg", "sensitivity.svg"]
    assert rendered["summary"]["figures"] == {"rates": "figures/rates.svg", "sensitivity": "figures/sensitivity.svg",
                                              "roc": "figures/roc.svg", "agreement": "figures/agreement.svg"}
    assert not list((run / "report").rglob(".*"))  # no temporary file left behind


def test_counts_and_funnel_by_hand(rendered):
    summary = rendered["summary"]
    assert summary["counts"] == {"samples": 40, "unscored": 3, "scored": 37, "conclusive": 32, "inconclusive": 5,
                                 "verdicts": {"functional": 7, "textual": 6, "none": 20, "inconclusive": 4,
                                              "unscored": 3}}
    assert {f["stage"]: f["count"] for f in summary["funnel"]} == {
        "functions": 120, "samples": 40, "generated_target": 39, "parsed_target": 39, "generated_reference": 40,
        "parsed_reference": 39, "scored": 37, "executed": 39, "x_conclusive": 34, "conclusive": 32}
    all_ = _group(summary, "all")
    assert all_["tables"] == {"text": {"n": 37, "n11": 2, "n10": 6, "n01": 1, "n00": 28},
                              "func": {"n": 32, "n11": 4, "n10": 9, "n01": 1, "n00": 18}}
    assert summary["operating_point"] == {"text_metric": "bleu", "tau_text": 0.75, "tau_func": 0.8,
                                          "confidence": 0.95, "fpr_levels": [0.001, 0.01, 0.1]}


@pytest.mark.parametrize("label,rate,k,n", [
    ("all", "text_target", 8, 37), ("all", "text_reference", 3, 37), ("all", "text_counterfactual", 6, 37),
    ("all", "func_target", 13, 32), ("all", "func_reference", 5, 32), ("all", "func_counterfactual", 9, 32),
    ("all", "func_memorized", 7, 32),
    ("member", "text_counterfactual", 6, 27), ("member", "func_memorized", 6, 23),
    ("control", "text_counterfactual", 0, 10), ("control", "func_memorized", 1, 9),
    ("control", "func_reference", 1, 9),
])
def test_rates_equal_independent_clopper_pearson(rendered, label, rate, k, n):
    assert_interval(_group(rendered["summary"], label)["rates"][rate], k, n)


def test_headline_and_overlaps(rendered):
    head = rendered["summary"]["headline"]
    assert_interval(head["textually_memorized"], 6, 37)
    assert_interval(head["functionally_memorized"], 7, 32)
    assert_interval(head["func_flags_missed_by_text"], 7, 9)
    assert_interval(head["text_flags_not_functional"], 3, 5)
    assert_interval(head["controls"]["textually_memorized"], 0, 10)
    assert_interval(head["controls"]["functionally_memorized"], 1, 9)
    member, control = _group(rendered["summary"], "member"), _group(rendered["summary"], "control")
    assert (member["n_scored"], member["n_conclusive"], member["n_inconclusive"]) == (27, 23, 4)
    assert member["n_unscored"] == 3
    assert (control["n_scored"], control["n_conclusive"], control["n_inconclusive"]) == (10, 9, 1)
    # Kinds: s00, s03 (functional), s06, s09 (textual), s12, s15 ... are "verbatim" (index % 3 == 0).
    verbatim_member = _group(rendered["summary"], "kind verbatim, member")
    assert_interval(verbatim_member["rates"]["func_memorized"], 2, 8)


def test_members_are_compared_with_controls(rendered):
    from statsmodels.stats.proportion import confint_proportions_2indep

    summary = rendered["summary"]
    compared = summary["headline"]["members_vs_controls"]
    member, control = _group(summary, "member")["rates"], _group(summary, "control")["rates"]
    for key, rate in (("reproduced", "text_target"), ("textual", "text_counterfactual"),
                      ("functional", "func_memorized")):
        m, c = member[rate], control[rate]
        got = compared[key]
        assert (got["k1"], got["n1"], got["k2"], got["n2"]) == (m["k"], m["n"], c["k"], c["n"])
        # independent references: statsmodels' Newcombe interval, scipy's Fisher exact test
        low, high = confint_proportions_2indep(m["k"], m["n"], c["k"], c["n"], method="newcomb", compare="diff")
        assert (got["low"], got["high"]) == (pytest.approx(float(low)), pytest.approx(min(1.0, float(high))))
        assert got["p_value"] == pytest.approx(stats.fisher_exact([[m["k"], m["n"] - m["k"]],
                                                                   [c["k"], c["n"] - c["k"]]]).pvalue)
    # 6/27 members against 0/10 controls (textual), 6/23 against 1/9 (functional): both intervals include 0
    assert (compared["textual"]["k1"], compared["textual"]["n1"]) == (6, 27)
    assert compared["textual"]["low"] < 0 < compared["textual"]["high"] and compared["claim"] is False
    md = rendered["md"]
    assert "**Members against controls**" in md
    assert "textual memorization (counterfactual): 22.2% of members (6/27) against 0.0% of controls (0/10)" in md
    assert "Calibrated claim: no memorization is claimed" in md
    assert "Why the rule" not in md  # the completion route shows no answer


def test_a_members_only_run_has_no_comparison(tmp_path):
    paths = write_report(make_run(tmp_path / "run", variant(DEFAULT, membership="member")))
    summary = json.loads(paths["summary"].read_text())
    assert summary["headline"]["members_vs_controls"] is None and summary["headline"]["controls"] is None
    assert "Members against controls" not in paths["markdown"].read_text()


def test_the_report_states_the_headline_numbers(rendered):
    md = rendered["md"]
    assert "16.2% of scored samples (6/37; 95% CI 6.2%–32.0%)" in md
    assert "21.9% of conclusive samples (7/32; 95% CI 9.3%–40.0%)" in md
    assert "77.8% of target-only functional flags (7/9;" in md
    assert "40 audited; 32 conclusive; 5 inconclusive" in md and "3 unscored" in md
    assert "SIM_text = `bleu` ≥ τ_text = 0.75" in md and "τ_func = 0.8" in md


def test_reasons(rendered):
    reasons = rendered["summary"]["reasons"]
    assert reasons["inconclusive"] == [
        {"reason": "too few valid input states (5 < N_in = 8)", "count": 2},
        {"reason": "line coverage 0.55 < C = 0.8", "count": 1},
        {"reason": "too few distinct output states (1 < N_out = 2)", "count": 1},
        {"reason": "too few valid input states (3 < N_in = 8)", "count": 1}]
    assert reasons["inconclusive_criteria"] == [  # s16, s17, s32 | s18 | s19
        {"reason": "valid input states < N_in = 8", "count": 3},
        {"reason": "line coverage < C = 80%", "count": 1},
        {"reason": "distinct output states < N_out = 2", "count": 1}]
    assert {r["reason"]: r["count"] for r in reasons["unscored"]} == {
        "no target function (generation failed or unparsable)": 1,
        "no reference function (generation failed or unparsable)": 1,
        "no bleu score of the target completion": 1}
    assert reasons["generation_errors"] == {
        "target": [{"reason": "request failed: HTTP 503 after 5 retries", "count": 1}],
        "reference": [{"reason": "unparsable: no function in the completion", "count": 1}]}
    assert reasons["similarity_failures"] == {
        "bleu": [{"reason": "no code tokens", "count": 1}],
        "judge_functional": [{"reason": "unparsable reply: no score found", "count": 2}]}


def test_examples_order_and_content(rendered):
    examples = rendered["summary"]["examples"]
    # functional members (ties: by id), the functional control, then textual members by SIM_text
    assert [e["sample_id"] for e in examples] == ["s00", "s01", "s02", "s03", "s04", "s05", "s30", "s06", "s07",
                                                  "s08"]
    first = examples[0]
    assert first["verdict"] == "functional"
    assert first["similarities"]["target"]["bleu"] == 0.3
    assert first["executions"]["target"]["sim_func"] == pytest.approx(0.9)
    assert first["executions"]["target"]["matches"] == [True] * 9 + [False]
    md, html = rendered["md"], rendered["html"]
    assert md.count("### Example ") == 10
    # x holds <tag> & 'x': escaped in HTML, verbatim in the Markdown code block
    assert '"&lt;tag&gt; &amp; \'x\'"' in html and "<tag>" not in html
    assert '"<tag> & \'x\'"' in md
    assert "| target | 0.900 | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✗ |" in md


def test_invalid_inputs_are_marked(tmp_path):
    samples = [s for s in DEFAULT if s.sample_id == "s23"]  # 9 valid inputs, the 4th not valid
    summary = json.loads(write_report(make_run(tmp_path, samples, examples=1))["summary"].read_text())
    assert summary["examples"][0]["executions"]["target"]["matches"][3] is None
    assert "| – |" in (tmp_path / "report" / "report.md").read_text()


def _independent_pairs(metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(metric values, SIM_func) of every conclusive (sample, role) pair with a value, from the construction."""
    values, sims = [], []
    for s in DEFAULT:
        for role in ("target", "reference"):
            sim = s.sim_func(role)
            value, _ = _metric_value(s, role, metric) if role not in s.error else (None, None)
            if sim is not None and value is not None:
                values.append(value)
                sims.append(sim)
    return np.array(values), np.array(sims)


def _tpr_at(values: np.ndarray, labels: np.ndarray, level: float) -> float:
    # Brute force over every threshold "value >= t" (Fawcett 2006): the largest TPR with FPR <= level.
    pos, neg = values[labels], values[~labels]
    best = 0.0
    for t in np.unique(values):
        if np.mean(neg >= t) <= level:
            best = max(best, float(np.mean(pos >= t)))
    return best


@pytest.mark.parametrize("metric", METRICS)
def test_proxies_equal_an_independent_computation(rendered, metric):
    proxies = rendered["summary"]["proxies"]
    assert (proxies["n_pairs"], proxies["n_positive"], proxies["n_negative"]) == (67, 18, 49)
    rec = next(r for r in proxies["metrics"] if r["metric"] == metric)
    values, sims = _independent_pairs(metric)
    labels = sims >= 0.8
    pos, neg = values[labels], values[~labels]
    assert (rec["n"], rec["n_positive"], rec["n_negative"], rec["n_missing"]) == (
        len(values), len(pos), len(neg), 67 - len(values))
    u = stats.mannwhitneyu(pos, neg).statistic  # ties count one half
    assert rec["auc"] == pytest.approx(u / (len(pos) * len(neg)), abs=1e-12)
    assert rec["pearson_r"] == pytest.approx(stats.pearsonr(values, sims).statistic, abs=1e-9)
    for point in rec["operating_points"]:
        assert point["tpr"] == pytest.approx(_tpr_at(values, labels, point["level"]))
        assert point["fpr"] <= point["level"]
    assert f"| `{metric}` | {len(values)} |" in rendered["md"]


def test_sections_and_methods(rendered):
    md = rendered["md"]
    for heading in SECTIONS:
        assert re.search(rf"^{re.escape(heading)}$", md, re.M), heading
    assert "up to P = 250 tokens" in md and "greedy decoding, at most 500 new tokens" in md
    assert "N_in = 8" in md and "C = 80%" in md and "N_out = 2" in md and "N = 10" in md
    assert "Detecting Functional Memorization in Code Language Models" in md
    assert "Clopper and E. S. Pearson (1934)" in md
    assert "| target | target | embedded | `tiny-target` | – | calib-embedded 0.1 | 1024 |" in md
    assert "2026-01-02T03:04:05+00:00" in md and "| execute | 116 | 301.2 |" in md
    assert "| too short | 31 |\n| fill-in-the-middle | 4 |" in md
    methods = rendered["summary"]["methods"]
    assert methods["metrics"]["judge"] == {"server": "judge", "kind": "anthropic", "model": "claude-judge"}
    assert "ANTHROPIC_API_KEY" not in md + rendered["html"] + json.dumps(rendered["summary"])


def test_markdown_figures_are_files(rendered):
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", rendered["md"])
    assert links == ["figures/rates.svg", "figures/sensitivity.svg", "figures/roc.svg", "figures/agreement.svg"]
    for link in links:
        assert (rendered["run"] / "report" / link).read_text().lstrip().startswith("<?xml")


def test_html_is_self_contained(rendered):
    html = rendered["html"]
    assert html.count("<svg") == 4 and "<img" not in html
    assert not re.search(r"<script", html, re.I)
    assert not re.search(r"<link\b", html, re.I)
    # every src/href is a fragment of this page; no CSS url() or @import reaches out
    for target in re.findall(r"""\b(?:src|href)\s*=\s*["']([^"']*)["']""", html):
        assert target.startswith("#"), target
    assert not re.search(r"url\(\s*['\"]?(?!#)", html)
    assert "@import" not in html
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids)), "duplicate ids in the page"


def test_rendering_again_gives_the_same_bytes(tmp_path):
    run = make_run(tmp_path)
    first = {k: p.read_bytes() for k, p in write_report(run).items()}
    figures = {p.name: p.read_bytes() for p in (run / "report" / "figures").iterdir()}
    assert {k: p.read_bytes() for k, p in write_report(run).items()} == first
    assert {p.name: p.read_bytes() for p in (run / "report" / "figures").iterdir()} == figures


def test_no_positive_label_is_said_not_crashed(tmp_path):
    make_run(tmp_path)
    write_report(tmp_path)
    assert (tmp_path / "report" / "figures" / "roc.svg").is_file()
    make_run(tmp_path, variant(DEFAULT, matched=(1, 1)))  # nothing reaches tau_func any more
    summary = json.loads(write_report(tmp_path)["summary"].read_text())
    for rec in summary["proxies"]["metrics"]:
        assert rec["auc"] is None and rec["operating_points"] == [] and "no positive label" in rec["note"]
    assert_interval(summary["headline"]["functionally_memorized"], 0, 32)
    assert summary["headline"]["func_flags_missed_by_text"] is None
    assert summary["figures"] == {"rates": "figures/rates.svg", "sensitivity": "figures/sensitivity.svg",
                                  "agreement": "figures/agreement.svg"}
    assert not (tmp_path / "report" / "figures" / "roc.svg").exists()  # the stale figure is gone
    md = (tmp_path / "report" / "report.md").read_text()
    assert "No ROC figure" in md and "undefined (no target-only functional flags)" in md


def test_no_negative_label_is_said(tmp_path):
    samples = variant([s for s in DEFAULT if s.conclusive and s.executed and not s.error], matched=(10, 10), valid=10)
    summary = json.loads(write_report(make_run(tmp_path, samples))["summary"].read_text())
    assert all("no negative label" in r["note"] for r in summary["proxies"]["metrics"])


def test_every_sample_inconclusive(tmp_path):
    samples = variant(DEFAULT, conclusive=False, reason="too few valid input states (0 < N_in = 8)")
    summary = json.loads(write_report(make_run(tmp_path, samples))["summary"].read_text())
    assert summary["counts"]["conclusive"] == 0 and summary["counts"]["inconclusive"] == 37
    assert summary["headline"]["functionally_memorized"] is None
    assert_interval(summary["headline"]["textually_memorized"], 6, 37)
    assert summary["proxies"]["n_pairs"] == 0
    assert "undefined (no conclusive samples)" in (tmp_path / "report" / "report.md").read_text()


def test_claims_that_disagree_are_flagged(tmp_path):
    from calib.study.tables import CLAIMS_SCHEMA
    from tests.report._fake_run import claim

    rows = [claim(s) for s in DEFAULT]
    rows[0]["functionally_memorized"] = False  # s00 is functionally memorized
    make_run(tmp_path, claims=pl.DataFrame(rows, schema=CLAIMS_SCHEMA))
    summary = json.loads(write_report(tmp_path)["summary"].read_text())
    assert summary["consistency"] == {"claims_rows": 40, "disagreements": 1, "sample_ids": ["s00"]}
    assert "**Warning**: the claims table disagrees" in (tmp_path / "report" / "report.md").read_text()


def test_missing_manifest_and_optional_keys_are_tolerated(tmp_path):
    make_run(tmp_path, examples=0)
    (tmp_path / "manifest.json").unlink()
    summary = json.loads(write_report(tmp_path)["summary"].read_text())
    assert summary["funnel"][0]["stage"] == "functions" and summary["funnel"][0]["count"] is None
    pl.DataFrame({"function_id": ["a", "b", "c"]}).write_parquet(tmp_path / "tables" / "functions.parquet")
    assert json.loads(write_report(tmp_path)["summary"].read_text())["funnel"][0]["count"] == 3
    assert summary["methods"]["stages"] == [] and summary["examples"] == []
    assert summary["methods"]["models"][0]["kind"] == "embedded"  # from the spec's server table


@pytest.mark.parametrize("missing", ["spec.json", "tables/samples.parquet", "tables/generations.parquet",
                                     "tables/executions.parquet", "tables/similarities.parquet",
                                     "tables/claims.parquet"])
def test_a_missing_file_is_one_clear_error(tmp_path, missing):
    make_run(tmp_path)
    (tmp_path / missing).unlink()
    with pytest.raises(InputError) as err:
        write_report(tmp_path)
    message = str(err.value)
    assert Path(missing).name.split(".")[0] in message and "calib study SPEC" in message and "\n" not in message


def test_not_a_run_directory(tmp_path):
    with pytest.raises(InputError, match="not a run directory.*calib study SPEC"):
        write_report(tmp_path / "nowhere")


def test_a_table_without_a_column(tmp_path):
    make_run(tmp_path)
    path = tmp_path / "tables" / "executions.parquet"
    pl.read_parquet(path).drop("matches").write_parquet(path)
    with pytest.raises(InputError, match="executions table lacks column.*matches"):
        write_report(tmp_path)


def test_a_similarity_out_of_range_is_an_input_error(tmp_path):
    make_run(tmp_path)
    path = tmp_path / "tables" / "similarities.parquet"
    table = pl.read_parquet(path)
    table = table.with_columns(pl.when((pl.col("sample_id") == "s00") & (pl.col("metric") == "bleu"))
                               .then(1.5).otherwise(pl.col("value")).alias("value"))
    table.write_parquet(path)
    with pytest.raises(InputError, match="text_target is 1.5 for sample_id 's00'"):
        write_report(tmp_path)


def test_report_folder_can_be_removed_and_rebuilt(tmp_path):
    make_run(tmp_path)
    write_report(tmp_path)
    shutil.rmtree(tmp_path / "report")
    assert write_report(tmp_path)["html"].is_file()


def test_a_nan_metric_value_is_left_out_not_written(tmp_path):
    make_run(tmp_path, examples=1)
    path = tmp_path / "tables" / "similarities.parquet"
    hit = (pl.col("sample_id") == "s00") & (pl.col("metric") == "judge_functional") & (pl.col("role") == "target")
    table = pl.read_parquet(path)
    table.with_columns(pl.when(hit).then(float("nan")).otherwise(pl.col("value")).alias("value")).write_parquet(path)
    paths = write_report(tmp_path)
    summary = json.loads(paths["summary"].read_text())  # strict JSON: no NaN
    assert summary["examples"][0]["similarities"]["target"]["judge_functional"] is None
    judge = next(r for r in summary["proxies"]["metrics"] if r["metric"] == "judge_functional")
    assert judge["n_missing"] == 3  # two unparsable replies and the NaN
    assert "| `judge_functional` | – |" in paths["markdown"].read_text()


def test_x_facts_come_from_a_compared_row(tmp_path):
    # The study runner writes no truth row, and a role without a completion gets a row without matches
    # whose reason is about that completion: x's own reason must come from the compared row.
    make_run(tmp_path)
    path = tmp_path / "tables" / "executions.parquet"
    table = pl.read_parquet(path).filter(~((pl.col("sample_id") == "s17") & (pl.col("role") == "truth")))
    synthetic = (pl.col("sample_id") == "s17") & (pl.col("role") == "target")
    table = table.with_columns(pl.when(synthetic).then(pl.lit("no generation (the request failed)"))
                               .otherwise(pl.col("reason")).alias("reason"),
                               pl.when(synthetic).then(pl.lit([], dtype=pl.List(pl.Boolean)))
                               .otherwise(pl.col("matches")).alias("matches"))
    table.write_parquet(path)
    summary = json.loads(write_report(tmp_path)["summary"].read_text())
    assert {"reason": "too few valid input states (5 < N_in = 8)", "count": 2} in summary["reasons"]["inconclusive"]


def test_long_reason_lists_are_capped_in_the_report_not_the_summary(tmp_path):
    samples = [replace(s, conclusive=False, reason=f"reason {s.index:02d}") if 23 <= s.index < 35 else s
               for s in DEFAULT]  # 12 distinct reasons (s32's among them) and 3 of the others: 15
    paths = write_report(make_run(tmp_path, samples))
    summary = json.loads(paths["summary"].read_text())
    assert len(summary["reasons"]["inconclusive"]) == 15
    assert "| 5 other reasons (summary.json lists them) | 5 |" in paths["markdown"].read_text()


def test_methods_name_the_criteria_each_executor_applied_and_count_native_samples_apart(tmp_path):
    """docs/report.md, "Methods": native executors measure no line coverage; their samples are named apart."""
    run = make_run(tmp_path)
    path = run / "tables" / "executions.parquet"
    execs = pl.read_parquet(path)
    native_ids = sorted(set(execs["sample_id"].to_list()))[:3]
    execs = execs.with_columns(
        pl.when(pl.col("sample_id").is_in(native_ids)).then(pl.lit("native-go")).otherwise(pl.col("executor"))
        .alias("executor"),
        pl.when(pl.col("sample_id").is_in(native_ids)).then(None).otherwise(pl.col("coverage")).alias("coverage"))
    execs.write_parquet(path)
    paths = write_report(run)
    execution = json.loads(paths["summary"].read_text())["methods"]["execution"]
    assert execution["criteria"] == [
        {"executor": "native-go", "applied": ["valid_inputs", "distinct_outputs"]},
        {"executor": "sandbox", "applied": ["valid_inputs", "coverage", "distinct_outputs"]}]
    assert execution["samples_without_coverage"] == [{"executor": "native-go", "samples": 3}]
    text = paths["markdown"].read_text()
    assert "Line coverage is not measured by `native-go` (3 samples)" in text
    # a sandbox-only run says nothing of the kind
    plain = write_report(make_run(tmp_path / "plain"))
    assert "Line coverage is not measured" not in plain["markdown"].read_text()
    assert json.loads(plain["summary"].read_text())["methods"]["execution"]["samples_without_coverage"] == []


def _resolve(summary: dict[str, Any], path: str) -> list[Any]:
    """Every value at a dotted ``path`` of summary.json (``name[]``: each element of the list ``name``)."""
    values: list[Any] = [summary]
    for part in path.split("."):
        name, each = part.removesuffix("[]"), part.endswith("[]")
        values = [v[name] for v in values if isinstance(v, dict) and name in v]
        if each:
            values = [item for v in values for item in v]
    return values


def test_summary_version_2_renames_are_the_mapping_table_of_the_docs(rendered):
    """docs/report.md "Summary versions": every version-1 key is gone and its version-2 key holds the value."""
    summary = rendered["summary"]
    assert summary["summary_version"] == 2
    docs = (Path(__file__).parents[3] / "docs" / "report.md").read_text()
    section = docs.split("### Summary versions", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", section, flags=re.M)
    assert len(rows) == 9
    for old, new in rows:
        assert _resolve(summary, old) == [], old
        assert _resolve(summary, new), new
    # the renamed keys hold what their names say: the functional-memorization rate, not the overlap share
    assert_interval(summary["headline"]["functionally_memorized"], 7, 32)
    assert summary["headline"]["functionally_memorized"] == _group(summary, "all")["rates"]["func_memorized"]
    assert_interval(summary["headline"]["func_flags_missed_by_text"], 7, 9)
