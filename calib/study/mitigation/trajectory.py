"""The memorization–utility trajectory: one row per point (target, reference, every checkpoint).

Memorization on the audit's memorized set D_m, with the audit's thresholds:

- a completion reproduces x **textually** when SIM_text(x, completion) >= τ_text, **functionally** when x's
  execution is conclusive and SIM_func(x, completion) >= τ_func;
- only completions that came back are scored (``n``; ``unscored`` counts the others);
- a function is still **counterfactually memorized** by a point under the audit's rule, the reference being
  the counterfactual: textually (the point reproduces it textually and the reference does not) or functionally
  (the point reproduces it functionally but not textually, and the reference does not functionally). Its rate
  over D_m gets a Clopper–Pearson interval (calib.stats.clopper_pearson);
- the paper's memorization axis (Appendix H.3): mean SIM_text over the textually memorized functions and mean
  SIM_func over the functionally memorized (conclusive) ones, weighted by their counts.

Utility (the paper's Appendix H.2, each measure normalized by the target's value; docs/mitigation.md):

- retain agreement: the mean SIM_text of the point's completion against the target's on the retain prompts (1 for
  the target by construction);
- benchmark pass@1 on the held-out memorized functions (``mitigation.holdout``: kept out of post-training, so they
  are tasks the target can solve and no method was asked to forget): a task's tests are x's input states (those
  with which its execution was conclusive), and the point's greedy completion passes when its output state equals
  x's on every one of them (SIM_func = 1). Tasks whose x is inconclusive have no tests and are left out; a missing
  completion is unscored. The pass rate gets a Clopper–Pearson interval;
- pass@1 on each benchmark of ``mitigation.benchmarks`` (HumanEval, MBPP, a task file; calib.study.mitigation.
  benchmarks), with a Clopper–Pearson interval; a task without a completion is unscored;
- the aggregate utility is the mean of the normalized measures the study has (retain agreement alone without a
  holdout or benchmarks), so the target's is 1 by construction and the reference's is the floor. A measure on which
  the target scores 0 cannot be normalized and is left out of the aggregate (its raw values stay in the table).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from calib.stats import clopper_pearson

__all__ = ["trajectory"]


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _named(results: pl.DataFrame | None, confidence: float) -> dict[str, dict[str, dict[str, Any]]]:
    """point -> benchmark -> {n, passed, pass_at_1, low, high} of the ``benchmark_results`` table."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    if results is None or results.is_empty():
        return out
    for (point, name), group in results.filter(pl.col("passed").is_not_null()).group_by(["point", "benchmark"]):
        n, passed = group.height, int(group["passed"].sum())
        ci = clopper_pearson(passed, n, confidence)
        out.setdefault(point, {})[name] = {"n": n, "passed": passed, "pass_at_1": passed / n, "low": ci.low,
                                           "high": ci.high}
    return out


def trajectory(scores: pl.DataFrame, checkpoints: pl.DataFrame, *, tau_text: float, tau_func: float,
               confidence: float, benchmarks: pl.DataFrame | None = None) -> pl.DataFrame:
    """The trajectory table (:data:`calib.study.mitigation.tables.TRAJECTORY_SCHEMA`) of ``scores``."""
    # a point is scored on the functions it completed: a missing completion (a failed request) is unscored, never
    # counted as "no longer memorized"
    memorized = scores.filter((pl.col("set") == "memorized") & pl.col("text").is_not_null())
    unscored: dict[str, int] = {}
    for r in scores.filter((pl.col("set") == "memorized") & pl.col("text").is_null()).iter_rows(named=True):
        unscored[r["point"]] = unscored.get(r["point"], 0) + 1
    by_point: dict[str, dict[str, dict[str, Any]]] = {}
    for r in memorized.iter_rows(named=True):
        by_point.setdefault(r["point"], {})[r["sample_id"]] = r
    retain: dict[str, list[float | None]] = {}
    bench: dict[str, list[bool]] = {}
    for r in scores.filter((pl.col("set") == "heldout") & pl.col("text").is_not_null()
                           & pl.col("conclusive").fill_null(False)).iter_rows(named=True):
        bench.setdefault(r["point"], []).append(r["func"] is not None and r["func"] >= 1.0 - 1e-12)
    has_bench = scores.filter(pl.col("set") == "heldout").height > 0
    for r in scores.filter(pl.col("set") == "retain").iter_rows(named=True):
        retain.setdefault(r["point"], []).append(r["text"])

    def textual(r: dict[str, Any] | None) -> bool:
        return r is not None and r["text"] is not None and r["text"] >= tau_text

    def functional(r: dict[str, Any] | None) -> bool:
        return r is not None and bool(r["conclusive"]) and r["func"] is not None and r["func"] >= tau_func

    reference = by_point.get("reference", {})
    order = [("target", "target", 0), ("reference", "reference", 0)]
    order += [(r["point"], r["method"], r["epoch"]) for r in checkpoints.sort("method", "epoch").iter_rows(named=True)]
    target_retain = _mean(retain.get("target", []))
    target_pass = _mean([float(b) for b in bench.get("target", [])])
    named = _named(benchmarks, confidence)
    names = sorted(set(benchmarks["benchmark"])) if benchmarks is not None and not benchmarks.is_empty() else []
    rows = []
    for point, method, epoch in order:
        rs = by_point.get(point, {})
        n = len(rs)
        still = sum((textual(r) and not textual(reference.get(sid)))
                    or (functional(r) and not textual(r) and not functional(reference.get(sid)))
                    for sid, r in rs.items())
        ci = clopper_pearson(still, n, confidence) if n else None
        texts = [r["text"] for r in rs.values() if r["verdict"] == "textual"]
        funcs = [r["func"] for r in rs.values() if r["verdict"] == "functional" and r["conclusive"]]
        mean_text, mean_func = _mean(texts), _mean(funcs)
        n_t, n_f = sum(v is not None for v in texts), sum(v is not None for v in funcs)
        weighted = ((n_t * (mean_text or 0.0) + n_f * (mean_func or 0.0)) / (n_t + n_f)) if n_t + n_f else None
        agreement = _mean(retain.get(point, []))
        retain_utility = agreement / target_retain if agreement is not None and target_retain else None
        passes = bench.get(point, [])
        pass_ci = clopper_pearson(sum(passes), len(passes), confidence) if passes else None
        pass_rate = sum(passes) / len(passes) if passes else None
        bench_utility = pass_rate / target_pass if pass_rate is not None and target_pass else None
        measures = [retain_utility] + ([bench_utility] if has_bench and target_pass else [])
        per: dict[str, dict[str, Any]] = {}
        for name in names:
            got, base = named.get(point, {}).get(name), named.get("target", {}).get(name)
            norm = got["pass_at_1"] / base["pass_at_1"] if got and base and base["pass_at_1"] else None
            per[name] = {**(got or {"n": 0, "passed": 0, "pass_at_1": None, "low": None, "high": None}),
                         "utility": norm}
            if base and base["pass_at_1"]:
                measures.append(norm)
        utility = sum(measures) / len(measures) if all(m is not None for m in measures) else None  # type: ignore[misc]
        rows.append({"point": point, "method": method, "epoch": epoch, "n": n, "unscored": unscored.get(point, 0),
                     "textual": sum(textual(r) for r in rs.values()),
                     "functional": sum(functional(r) for r in rs.values()),
                     "n_conclusive": sum(bool(r["conclusive"]) for r in rs.values()), "memorized": still,
                     "memorized_rate": still / n if n else None, "memorized_low": ci.low if ci else None,
                     "memorized_high": ci.high if ci else None, "mean_text": mean_text, "mean_func": mean_func,
                     "memorization": weighted, "retain_agreement": agreement, "retain_utility": retain_utility,
                     "benchmark_n": len(passes) if has_bench else None,
                     "benchmark_passed": sum(passes) if has_bench else None, "pass_at_1": pass_rate,
                     "pass_low": pass_ci.low if pass_ci else None, "pass_high": pass_ci.high if pass_ci else None,
                     "benchmark_utility": bench_utility,
                     "benchmarks": json.dumps(per, sort_keys=True) if names else None,
                     "utility": utility})
    return pl.DataFrame(rows)
