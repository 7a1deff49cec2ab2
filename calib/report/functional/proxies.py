"""Similarity metrics as proxies for execution (functional-memorization paper §5.2, Figure 3, Table 4).

Ground truth: the label 1[SIM_func ≥ τ_func] of every conclusive (sample, role) pair, target and
reference completions pooled, and again over the target's completions only (the paper's §5.2 evaluates the
target model's generations). Each metric of the ``similarities`` table is scored against it with
:func:`calib.stats.evaluate_proxy`: Pearson r with SIM_func, ROC AUC, and TPR at each
``analyze.fpr_levels`` FPR. A metric with no value on a pair leaves that pair out (counted as missing);
with no positive or no negative label the ROC is undefined and the report says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from calib.report.functional.agreement import metric_agreement
from calib.report.functional.judges import SUFFIX, judges_agreement
from calib.report.functional.methods import server_names
from calib.report.functional.samples import FUNC_METRIC, ROLES
from calib.report.run import RunData, setting
from calib.stats import RocCurve, evaluate_proxy

__all__ = ["ProxyResults", "evaluate_proxies", "metric_order", "proxy_pairs"]


@dataclass(frozen=True)
class ProxyResults:
    """The proxy section's numbers (``summary``) and each evaluated metric's ROC curve (for the figure)."""

    summary: dict[str, Any]
    curves: dict[str, RocCurve]


def metric_order(run: RunData) -> list[str]:
    """The metrics of the similarities table: those of ``measure.metrics`` in spec order, each followed by its
    further servers' ``METRIC@SERVER`` in the order the spec lists the servers, then the rest."""
    present = {m for m in run.similarities["metric"].unique().to_list() if m is not None and m != FUNC_METRIC}
    listed = []
    for metric in setting(run.spec, "measure.metrics", []):
        key = "measure.judge_server" if metric.startswith("judge_") else "measure.embedding_server"
        further = server_names(setting(run.spec, key))[1:] if metric.startswith("judge_") or metric == "embedding" \
            else []
        listed += [m for m in (metric, *(f"{metric}{SUFFIX}{server}" for server in further)) if m in present]
    return listed + sorted(present - set(listed))


def proxy_pairs(run: RunData) -> pl.DataFrame:
    """Conclusive (sample, role) pairs of both roles with their SIM_func: ``sample_id, role, sim_func``."""
    return (run.executions
            .filter(pl.col("role").is_in(ROLES) & pl.col("conclusive").fill_null(False)
                    & pl.col("sim_func").is_not_null()
                    & pl.col("sample_id").is_in(run.samples["sample_id"].implode()))
            .select(pl.col("sample_id").cast(pl.String), pl.col("role").cast(pl.String),
                    pl.col("sim_func").cast(pl.Float64))
            .unique(subset=["sample_id", "role"], keep="first", maintain_order=True))


def _metric_values(run: RunData, pairs: pl.DataFrame, metric: str) -> pl.DataFrame:
    values = (run.similarities.filter(pl.col("metric") == metric)
              .select(pl.col("sample_id").cast(pl.String), pl.col("role").cast(pl.String),
                      pl.col("value").cast(pl.Float64))
              .unique(subset=["sample_id", "role"], keep="first", maintain_order=True))
    joined = pairs.join(values, on=["sample_id", "role"], how="left", maintain_order="left")
    return joined.filter(pl.col("value").is_not_null() & pl.col("value").is_finite())


def _degenerate(n: int, n_positive: int, metric: str) -> str | None:
    if n == 0:
        return f"not evaluated: no conclusive pair has a {metric} value"
    if n_positive == 0:
        return "not evaluated: no positive label (no pair reaches τ_func), so ROC AUC and TPR are undefined"
    if n_positive == n:
        return "not evaluated: no negative label (every pair reaches τ_func), so ROC AUC and TPR are undefined"
    return None


def _evaluate(metric: str, frame: pl.DataFrame, n_pairs: int, tau_func: float,
              levels: tuple[float, ...]) -> tuple[dict[str, Any], RocCurve | None]:
    sim_func = frame["sim_func"].to_numpy()
    labels = sim_func >= tau_func
    n, n_positive = frame.height, int(np.count_nonzero(labels))
    record: dict[str, Any] = {"metric": metric, "n_pairs": n_pairs, "n": n, "n_missing": n_pairs - n,
                              "n_positive": n_positive, "n_negative": n - n_positive, "pearson_r": None,
                              "auc": None, "operating_points": [], "note": _degenerate(n, n_positive, metric)}
    if record["note"] is not None:
        return record, None
    result = evaluate_proxy(frame["value"].to_numpy(), labels, reference=sim_func, levels=levels)
    pearson = None if math.isnan(result.pearson_r) else result.pearson_r
    record.update(pearson_r=pearson, auc=result.auc, operating_points=[p.to_dict() for p in result.operating_points])
    if pearson is None:
        record["note"] = f"Pearson r undefined: {metric} or SIM_func is constant over the pairs"
    return record, result.roc


def _evaluate_pairs(run: RunData, pairs: pl.DataFrame, tau_func: float,
                    levels: tuple[float, ...]) -> tuple[dict[str, Any], dict[str, RocCurve]]:
    n_positive = int((pairs["sim_func"] >= tau_func).sum()) if pairs.height else 0
    records, curves = [], {}
    for metric in metric_order(run):
        record, roc = _evaluate(metric, _metric_values(run, pairs, metric), pairs.height, tau_func, levels)
        records.append(record)
        if roc is not None:
            curves[metric] = roc
    counts = {"n_pairs": pairs.height, "n_positive": n_positive, "n_negative": pairs.height - n_positive}
    return {**counts, "metrics": records}, curves


def evaluate_proxies(run: RunData, analyze: dict[str, Any]) -> ProxyResults:
    """Every metric of the similarities table against the execution label; see the module docstring.

    Returns
    -------
    ProxyResults
        ``summary``: ``tau_func, fpr_levels, n_pairs, n_positive, n_negative`` (over all conclusive
        pairs, both roles pooled) and ``metrics`` (one record per metric: ``metric, n_pairs, n, n_missing,
        n_positive, n_negative, pearson_r, auc, operating_points`` (``level, tpr, fpr, threshold``),
        ``note``); ``target_only`` (``roles, n_pairs, n_positive, n_negative, metrics``: the same over the
        target's completions only, as the paper evaluates); ``agreement`` (the correlation matrix of
        :func:`~calib.report.functional.agreement.metric_agreement`); ``judges_agreement`` and
        ``embeddings_agreement`` (:func:`~calib.report.functional.judges.judges_agreement`: pairwise agreement
        of one metric measured on several servers; empty lists otherwise). The curves are the pooled ones.
    """
    pairs = proxy_pairs(run)
    tau_func, levels = analyze["tau_func"], tuple(analyze["fpr_levels"])
    pooled, curves = _evaluate_pairs(run, pairs, tau_func, levels)
    target, _ = _evaluate_pairs(run, pairs.filter(pl.col("role") == "target"), tau_func, levels)
    summary = {"label": "SIM_func >= tau_func", "tau_func": tau_func, "fpr_levels": list(levels), **pooled,
               "target_only": {"roles": ["target"], **target},
               "agreement": metric_agreement(run, pairs, metric_order(run))}
    several = judges_agreement(run, metric_order(run))
    summary["judges_agreement"] = several["judges"]
    summary["embeddings_agreement"] = several["embeddings"]
    return ProxyResults(summary=summary, curves=curves)
