"""The analysis stages of a probes study: pass@k with bootstrap intervals, model comparisons, opcode
divergence and the CoDeC scores, computed from the run's tables (docs/probes.md).

Every pass@k figure is over the *problems a condition applies to* (an isomorphism does not apply to a
task without integers), and every comparison — a condition against ``original``, one model against
another — is paired: the same problems, resampled together (percentile bootstrap over problems,
Efron & Tibshirani 1993, ch. 13, as :func:`calib.stats.pass_at_k_summary` does for one condition).

A *missing* generation (its request failed, or its prompt overflowed the context: test_results status
``request_failed`` | ``overflow``) is neither a pass nor a failure: a problem's pass@k uses its n
completed generations only, and with fewer than k of them the (problem, condition) cell is missing.
A problem with a missing cell on either side is dropped from that paired comparison, and the row
counts the problems dropped by cause (``dropped_failed``, ``dropped_overflow``).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import polars as pl

from calib.stats import bootstrap_ci, jensen_shannon, pass_at_k, pass_at_k_summary
from calib.study.probes.tables import CODEC_SCORES_SCHEMA, MODEL_PAIRS_SCHEMA, OPCODES_SCHEMA, PASS_AT_K_SCHEMA

__all__ = ["MISSING_STATUSES", "codec_scores_table", "model_pairs_table", "opcodes_table", "pass_at_k_table",
           "per_problem"]


#: test_results statuses of a missing generation (no completion to test).
MISSING_STATUSES = ("request_failed", "overflow")


def per_problem(results: pl.DataFrame) -> pl.DataFrame:
    """(model, label, task_id) -> n completed generations, c of them passing every test, how many are missing,
    and whether an overflow is among them."""
    missing = pl.col("status").is_in(MISSING_STATUSES)
    return results.group_by(["model", "label", "task_id"], maintain_order=True).agg(
        missing.not_().sum().cast(pl.Int64).alias("n"),
        pl.col("passed").fill_null(False).filter(missing.not_()).sum().cast(pl.Int64).alias("c"),
        missing.sum().cast(pl.Int64).alias("missing"), (pl.col("status") == "overflow").any().alias("overflow"))


def _missing_cells(frame: pl.DataFrame, k: int) -> dict[str, str]:
    """task_id -> why its cell is missing (fewer than k completed): ``overflow`` or ``request_failed``."""
    return {t: "overflow" if o else "request_failed"
            for t, n, o in frame.select("task_id", "n", "overflow").iter_rows() if n < k}


def _dropped(a: pl.DataFrame, b: pl.DataFrame, k: int) -> dict[str, int]:
    """Problems asked on both sides but dropped from their paired comparison, by cause (overflow first)."""
    ma, mb = _missing_cells(a, k), _missing_cells(b, k)
    both = set(a["task_id"].to_list()) & set(b["task_id"].to_list())
    causes = ["overflow" if "overflow" in (ma.get(t), mb.get(t)) else "request_failed"
              for t in both if t in ma or t in mb]
    return {"dropped_failed": causes.count("request_failed"), "dropped_overflow": causes.count("overflow")}


def _values(frame: pl.DataFrame, k: int) -> dict[str, float]:
    """task_id -> unbiased pass@k of that problem (problems with fewer than k generations left out)."""
    return {t: pass_at_k(n, c, k) for t, n, c in frame.select("task_id", "n", "c").iter_rows() if n >= k}


def _paired(a: dict[str, float], b: dict[str, float], *, resamples: int, confidence: float, seed: int
            ) -> tuple[int, float, float, float, float, float] | None:
    """Over the problems in both: n, mean a, mean b, mean(b − a) and its bootstrap interval."""
    common = [t for t in a if t in b]
    if not common:
        return None
    pairs = np.array([[a[t], b[t]] for t in common], dtype=np.float64)
    diff = bootstrap_ci(pairs, lambda x: (x[..., 1] - x[..., 0]).mean(axis=-1), n_resamples=resamples,
                        confidence=confidence, seed=seed)
    return len(common), float(pairs[:, 0].mean()), float(pairs[:, 1].mean()), diff.estimate, diff.low, diff.high


def pass_at_k_table(results: pl.DataFrame, prompts: pl.DataFrame, *, ks: tuple[int, ...], resamples: int,
                    confidence: float, seed: int) -> pl.DataFrame:
    """One row per (model, label, k): pass@k over the label's problems and its paired change from original."""
    counts = per_problem(results)
    kinds = dict(prompts.select("label", "condition").unique().iter_rows())
    families = dict(prompts.select("label", "family").unique().iter_rows())
    rows = []
    for model in counts["model"].unique(maintain_order=True).to_list():
        mine = counts.filter(pl.col("model") == model)
        original = mine.filter(pl.col("label") == "original")
        for label in mine["label"].unique(maintain_order=True).to_list():
            frame = mine.filter(pl.col("label") == label)
            for k in ks:
                values = _values(frame, k)
                row: dict[str, Any] = {
                    "model": model, "label": label, "condition": kinds.get(label, label), "family": families.get(label),
                    "k": k, "n_problems": len(values), "estimate": None, "low": None, "high": None, "original": None,
                    "difference": None, "difference_low": None, "difference_high": None, "relative_change": None,
                    "confidence": confidence, "n_resamples": resamples,
                    "generations_missing": int(frame["missing"].sum()), "problems_missing": frame.height - len(values),
                    **({"dropped_failed": None, "dropped_overflow": None} if label == "original"
                       else _dropped(original, frame, k))}
                if not values:  # every cell missing: the row says how many and why, with no estimate
                    rows.append(row)
                    continue
                ns = [n for t, n in frame.select("task_id", "n").iter_rows() if t in values]
                cs = [c for t, c in frame.select("task_id", "c").iter_rows() if t in values]
                summary = pass_at_k_summary(ns, cs, k, confidence=confidence, n_resamples=resamples, seed=seed)
                row.update(n_problems=summary.n_problems, estimate=summary.estimate, low=summary.low,
                           high=summary.high)
                paired = _paired(_values(original, k), values, resamples=resamples, confidence=confidence, seed=seed)
                if paired is not None:
                    _, base, _, diff, low, high = paired
                    row.update(original=base, difference=diff, difference_low=low, difference_high=high,
                               relative_change=diff / base if base > 0 else None)
                rows.append(row)
    return pl.DataFrame(rows, schema=PASS_AT_K_SCHEMA)


def model_pairs_table(results: pl.DataFrame, panel: tuple[str, ...], *, ks: tuple[int, ...], resamples: int,
                      confidence: float, seed: int) -> pl.DataFrame:
    """Consecutive models of the panel on the same problems: pass@k of the larger minus the smaller's."""
    counts = per_problem(results)
    rows = []
    for label in counts["label"].unique(maintain_order=True).to_list():
        for k in ks:
            for a, b in zip(panel, panel[1:]):
                fa = counts.filter((pl.col("model") == a) & (pl.col("label") == label))
                fb = counts.filter((pl.col("model") == b) & (pl.col("label") == label))
                paired = _paired(_values(fa, k), _values(fb, k), resamples=resamples, confidence=confidence,
                                 seed=seed)
                dropped = _dropped(fa, fb, k)
                if paired is None and not any(dropped.values()):
                    continue
                n, ea, eb, diff, low, high = paired or (0, None, None, None, None, None)
                rows.append({"label": label, "k": k, "model_a": a, "model_b": b, "n_problems": n, "estimate_a": ea,
                             "estimate_b": eb, "difference": diff, "low": low, "high": high, **dropped})
    return pl.DataFrame(rows, schema=MODEL_PAIRS_SCHEMA)


def _entropy(hist: dict[str, int]) -> float | None:
    """H(π) in bits (:func:`calib.probes.opcodes.opcode_entropy`); None for an empty pool."""
    from calib.probes.opcodes import opcode_entropy

    return opcode_entropy(hist) if hist else None


def opcodes_table(generations: pl.DataFrame, results: pl.DataFrame) -> pl.DataFrame:
    """Opcode histograms pooled per (model, task, label), over all programs and over passing ones, with the
    Jensen–Shannon divergence (bits) from the same model's ``original`` generations of the task."""
    from calib.probes.opcodes import opcode_histogram, pool

    passed = {(r["model"], r["prompt_id"], r["sample_index"]): bool(r["passed"])
              for r in results.select("model", "prompt_id", "sample_index", "passed").iter_rows(named=True)}
    pools: dict[tuple[str, str, str], tuple[list[dict[str, int]], list[dict[str, int]]]] = {}
    for g in generations.iter_rows(named=True):
        key = (g["model"], g["task_id"], g["label"])
        every, good = pools.setdefault(key, ([], []))
        hist = opcode_histogram(g["program"]) if g["program"] else None
        if hist:
            every.append(hist)
            if passed.get((g["model"], g["prompt_id"], g["sample_index"])):
                good.append(hist)
    pooled = {key: (pool(every), pool(good), len(every), len(good)) for key, (every, good) in pools.items()}
    rows = []
    for (model, task, label), (every, good, n_all, n_good) in pooled.items():
        base = pooled.get((model, task, "original"))
        jsd = passing_jsd = None
        if base is not None and label != "original":
            if every and base[0]:
                jsd = jensen_shannon(every, base[0])
            if good and base[1]:
                passing_jsd = jensen_shannon(good, base[1])
        rows.append({"model": model, "task_id": task, "label": label, "programs": n_all, "passing": n_good,
                     "histogram": json.dumps(every), "passing_histogram": json.dumps(good) if good else None,
                     "entropy": _entropy(every), "passing_entropy": _entropy(good), "jsd": jsd,
                     "passing_jsd": passing_jsd})
    return pl.DataFrame(rows, schema=OPCODES_SCHEMA)


def codec_scores_table(codec: pl.DataFrame, *, confidence: float) -> pl.DataFrame:
    """Per (model, dataset): the CoDeC score with its Clopper–Pearson interval; per model, the seen/unseen AUC."""
    from calib.probes.codec import CodecSample, codec_auc, codec_score

    rows = []
    for model in codec["model"].unique(maintain_order=True).to_list():
        mine = codec.filter(pl.col("model") == model)
        seen = dict(mine.select("dataset", "seen").unique().iter_rows())
        samples = [CodecSample(r["dataset"], r["sample_id"], r["tokens"] or 0,
                               math.nan if r["ll_without"] is None else r["ll_without"],
                               math.nan if r["ll_with"] is None else r["ll_with"],
                               math.nan if r["delta"] is None else r["delta"], tuple(r["context_ids"] or ()),
                               r["error"]) for r in mine.iter_rows(named=True)]
        scores = codec_score(samples, confidence=confidence)
        scored = {name: s for name, s in scores.items() if s.n > 0}
        pos = [s.score for name, s in scored.items() if seen[name]]
        neg = [s.score for name, s in scored.items() if not seen[name]]
        auc = codec_auc(pos, neg) if pos and neg else None
        for name, s in scores.items():
            rows.append({"model": model, "dataset": name, "seen": seen[name], "n": s.n, "decreased": s.k,
                         "score": s.score if s.n else None, "low": s.low, "high": s.high,
                         "mean_delta": s.mean_delta if s.n else None, "auc": auc})
    return pl.DataFrame(rows, schema=CODEC_SCORES_SCHEMA)
