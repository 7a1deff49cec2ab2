"""Every number of the report, computed once from a run directory (the content of summary.json).

:func:`analyze_run` reads the tables, labels each sample, and collects the counts, the rates of each
group, the reasons, the threshold sensitivity, the examples, the proxy evaluation
(pooled and target-only, and the metrics' agreement), the duplication analysis (when the run has a
duplicates table) and the methods facts. The renderers only format what it returns, so the HTML, the
Markdown and summary.json cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from calib._exceptions import InputError
from calib.report.functional.cost import cost_summary
from calib.report.functional.counts import funnel, judge_summary, reason_counts, sample_counts
from calib.report.functional.duplication import analyze_duplication
from calib.report.functional.examples import Example, select_examples
from calib.report.functional.methods import methods_facts
from calib.report.functional.proxies import evaluate_proxies
from calib.report.functional.rates import rate_groups
from calib.report.functional.samples import sample_table
from calib.report.functional.sensitivity import threshold_sensitivity
from calib.report.run import RunData, setting
from calib.stats import RocCurve

__all__ = ["Analysis", "SUMMARY_VERSION", "analysis_settings", "analyze_run"]

#: Version of the summary.json layout (docs/report.md); bumped when a key changes meaning or goes away.
SUMMARY_VERSION = 2

_ANALYZE_DEFAULTS: dict[str, Any] = {"text_metric": "bleu", "tau_text": 0.75, "tau_func": 0.8, "confidence": 0.95,
                                     "fpr_levels": [0.001, 0.01, 0.1]}


@dataclass(frozen=True)
class Analysis:
    """The report's content: ``summary`` (JSON data), the per-sample table, examples and ROC curves.

    ``duplication`` is the per-sample near-duplicate counts and group (``Duplication.samples``), None
    when the run has no duplicates table.
    """

    summary: dict[str, Any]
    samples: pl.DataFrame
    examples: list[Example]
    curves: dict[str, RocCurve]
    duplication: pl.DataFrame | None = None


def analysis_settings(spec: dict[str, Any]) -> dict[str, Any]:
    """The ``[analyze]`` settings of the spec, with the spec's defaults for keys it lacks."""
    out = {key: setting(spec, f"analyze.{key}", default) for key, default in _ANALYZE_DEFAULTS.items()}
    out["fpr_levels"] = [float(v) for v in out["fpr_levels"]]
    for key in ("tau_text", "tau_func", "confidence"):
        out[key] = float(out[key])
    return out


def _consistency(run: RunData, frame: pl.DataFrame) -> dict[str, Any]:
    """Whether the claims table's verdicts agree with the ones derived here from the measurements."""
    claims = run.claims.select(pl.col("sample_id").cast(pl.String),
                               pl.col("textually_memorized").fill_null(False).alias("_claim_text"),
                               pl.col("functionally_memorized").fill_null(False).alias("_claim_func"))
    joined = frame.select("sample_id", "verdict").join(claims, on="sample_id", how="full", coalesce=True)
    differs = ((pl.col("verdict") == "textual") != pl.col("_claim_text").fill_null(False)) | (
        (pl.col("verdict") == "functional") != pl.col("_claim_func").fill_null(False)) | pl.col("verdict").is_null()
    bad = joined.filter(differs.fill_null(True)).sort("sample_id")["sample_id"].to_list()
    return {"claims_rows": run.claims.height, "disagreements": len(bad), "sample_ids": bad[:10]}


def _headline(groups: list[dict[str, Any]], confidence: float) -> dict[str, Any]:
    everything = groups[0]
    control = next((g for g in groups if g["membership"] == "control" and g["kind"] is None), None)
    return {
        "textually_memorized": everything["rates"]["text_counterfactual"],
        "functionally_memorized": everything["rates"]["func_memorized"],
        "func_flags_missed_by_text": everything["overlaps"]["func_flags_missed_by_text"],
        "text_flags_not_functional": everything["overlaps"]["text_flags_not_functional"],
        "controls": None if control is None else {
            "textually_memorized": control["rates"]["text_counterfactual"],
            "functionally_memorized": control["rates"]["func_memorized"]},
        "members_vs_controls": _members_vs_controls(groups, confidence),
    }


#: The rates members and controls are compared on (``headline.members_vs_controls``): key -> rate key.
_COMPARED = {"reproduced": "text_target", "textual": "text_counterfactual", "functional": "func_memorized"}


def _members_vs_controls(groups: list[dict[str, Any]], confidence: float) -> dict[str, Any] | None:
    """Members against controls (never trained on): the difference of each rate, Newcombe's interval, Fisher's p.

    Controls measure what the prompts, the rule and the task make likely without training, so only the
    difference is evidence of memorization (the extraction paper's matched comparison); the claim is
    positive when the interval of the textual or functional difference lies above 0.
    """
    from calib.stats import independent_difference

    member = next((g for g in groups if g["membership"] == "member" and g["kind"] is None), None)
    control = next((g for g in groups if g["membership"] == "control" and g["kind"] is None), None)
    if member is None or control is None:
        return None
    out: dict[str, Any] = {}
    for key, rate in _COMPARED.items():
        m, c = member["rates"][rate], control["rates"][rate]
        out[key] = (None if m is None or c is None else
                    independent_difference(m["k"], m["n"], c["k"], c["n"], confidence).to_dict())
    out["claim"] = any(out[key] is not None and out[key]["low"] > 0 for key in ("textual", "functional"))
    return out


def analyze_run(run: RunData) -> Analysis:
    """Compute everything the report states from ``run`` (see docs/report.md for the summary layout).

    Raises
    ------
    InputError
        When the tables hold values the statistics reject (a similarity outside [0, 1], a repeated
        row) or the spec's ``[analyze]`` settings are out of range; one line naming the problem.
    """
    analyze = analysis_settings(run.spec)
    frame = sample_table(run, text_metric=analyze["text_metric"], tau_text=analyze["tau_text"],
                         tau_func=analyze["tau_func"])
    try:
        groups = rate_groups(frame, analyze)
        proxies = evaluate_proxies(run, analyze)
        duplication = analyze_duplication(run, frame, analyze)
        sensitivity = threshold_sensitivity(run, frame, analyze)
    except ValueError as exc:
        raise InputError(f"{exc}; check the run's tables and spec.json", path=str(run.root)) from None
    examples = select_examples(run, frame, int(setting(run.spec, "report.examples", 5)))
    methods = methods_facts(run, analyze)
    summary = {
        "summary_version": SUMMARY_VERSION,
        "study": methods["study"],
        "operating_point": analyze,
        "counts": sample_counts(frame),
        "headline": _headline(groups, analyze["confidence"]),
        "funnel": funnel(run, frame),
        "judge": judge_summary(run, analyze["confidence"]),
        "groups": groups,
        "sensitivity": sensitivity,
        "reasons": reason_counts(run, frame),
        "examples": [e.record for e in examples],
        "proxies": proxies.summary,
        "duplication": None if duplication is None else duplication.summary,
        "cost": cost_summary(run),
        "methods": methods,
        "consistency": _consistency(run, frame),
    }
    return Analysis(summary=summary, samples=frame, examples=examples, curves=proxies.curves,
                    duplication=None if duplication is None else duplication.samples)
