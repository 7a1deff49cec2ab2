"""The census study's census stage: each document's windows against its matched controls' threshold.

Per (pair, role, procedure) the stage writes one census row (:data:`calib.study.tables.CENSUS_SCHEMA`):

* the census against the pair's own threshold τ(pair): the largest decontaminated control-window score,
  rounded up to a power of ten (extraction paper §5, App. E.1), with the query-budget view (§6, App. F.1);
* the census against the shared τ_global of (role, procedure): the threshold of every pair's
  decontaminated control windows pooled (a control window shared by several pairs counts once). The pool's
  maximum is the largest pair maximum, so τ_global is the highest τ(pair), as in the paper (§5: "the highest
  threshold used as a shared τ_global across books"), and its coverage can only be lower;
* deterministic recovery (App. F.4): the role's one greedy generation per window, kept whole in the
  ``near_verbatim`` scores' detail with its token edit distance to the suffix: the share of the document
  covered by windows whose greedy continuation reproduces the suffix verbatim (distance 0) and within
  ``extraction.epsilon`` edits, and the share covered by windows recovered that way, above τ(pair) and yet
  below the probability the query budget reaches (memorized, recovered deterministically, not sampled
  within n queries).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import polars as pl

from calib.study.extraction.analysis import analysis_settings
from calib.study.extraction.common import procedure_names, scored_roles
from calib.study.runner import Stage, StageContext
from calib.study.tables import (
    CENSUS_SCHEMA,
)

__all__ = ["census_stage"]

#: The procedure whose scores' detail holds each window's greedy generation and its edit distance.
RECOVERY_PROCEDURE = "near_verbatim"


def _kept_controls(part: pl.DataFrame, drop: set[str]) -> tuple[pl.DataFrame, int]:
    """A pair's control windows the decontaminate list leaves, and how many it removed."""
    ctrl = part.filter(pl.col("membership") == "control")
    gone = pl.col("window_id").is_in(list(drop)) | pl.col("sample_id").is_in(list(drop))
    return ctrl.filter(~gone), ctrl.filter(gone).height


def _distances(scores: pl.DataFrame, role: str) -> dict[str, int]:
    """window id -> token edit distance of the role's greedy generation to the suffix (near_verbatim detail)."""
    out: dict[str, int] = {}
    rows = scores.filter((pl.col("role") == role) & (pl.col("procedure") == RECOVERY_PROCEDURE)
                         & pl.col("detail").is_not_null())
    for wid, detail in rows.select("window_id", "detail").iter_rows():
        distance = json.loads(detail).get("distance")
        if distance is not None:
            out[wid] = int(distance)
    return out


def _global(scores: pl.DataFrame, pairs: list[str], role: str, procedure: str, drop: set[str]) -> dict[str, Any]:
    """τ_global of (role, procedure): the census threshold of every pair's decontaminated control windows pooled."""
    from calib.stats import census_threshold

    kept = [_kept_controls(scores.filter((pl.col("document") == name) & (pl.col("role") == role)
                                         & (pl.col("procedure") == procedure)), drop)[0] for name in pairs]
    pool = pl.concat(kept).unique(["sample_id", "char_start", "char_end"], keep="first", maintain_order=True)
    positive = pool.filter(pl.col("log10_value") > -math.inf)["log10_value"].to_numpy()
    threshold = census_threshold(positive, log10=True) if positive.size else None
    return {"threshold": threshold, "n": pool.height}


def _recovery(doc: pl.DataFrame, distances: dict[str, int], epsilon: int, length: int, log10_threshold: int | None,
              floor: float | None) -> dict[str, Any]:
    """The recovery columns of one census row (nulls when no window of the document has a greedy generation)."""
    from calib.stats import window_coverage

    d = np.array([distances.get(w, -1) for w in doc["window_id"].to_list()], dtype=np.int64)
    has = d >= 0
    if not has.any():
        return {}
    starts, ends, values = doc["char_start"].to_numpy(), doc["char_end"].to_numpy(), doc["log10_value"].to_numpy()

    def share(mask: np.ndarray) -> float:
        return window_coverage(starts[mask], ends[mask], document_length=length) / length

    near = has & (d <= epsilon)
    out = {"recovery_windows": int(has.sum()), "recovered_verbatim": int((has & (d == 0)).sum()),
           "recovered_near_verbatim": int(near.sum()), "recovery_coverage_verbatim": share(has & (d == 0)),
           "recovery_coverage_near_verbatim": share(near)}
    if log10_threshold is not None and floor is not None:
        out["recovery_coverage_beyond_budget"] = share(near & (values > log10_threshold) & (values < floor))
    return out


# --- census -------------------------------------------------------------------------------------
async def _census(ctx: StageContext) -> pl.DataFrame:
    from calib.stats import census, census_threshold

    spec, a = ctx.spec, ctx.spec.analyze
    samples = ctx.table("samples")
    lengths = {sid: len(text) for sid, text in samples.select("sample_id", "function").iter_rows()}
    windows = ctx.table("windows").filter(pl.col("error").is_null())
    scores = ctx.table("scores").filter(pl.col("log10_value").is_not_null()).join(
        windows.select("window_id", "membership", "document", "char_start", "char_end"), on="window_id")
    drop = set(a.decontaminate)
    budget = a.budgets[0] if a.budgets else None
    names = [pair.name for pair in spec.census.pairs]
    rows = []
    for role, _ in scored_roles(spec):
        distances = _distances(scores, role)
        for procedure in procedure_names(spec):
            shared = _global(scores, names, role, procedure, drop)
            for pair in spec.census.pairs:
                part = scores.filter((pl.col("document") == pair.name) & (pl.col("role") == role)
                                     & (pl.col("procedure") == procedure))
                doc = part.filter(pl.col("membership") == "candidate")
                ctrl, removed = _kept_controls(part, drop)
                row: dict[str, Any] = {"document": pair.name, "role": role, "procedure": procedure,
                                       "suffix_tokens": spec.extraction.suffix_tokens[0],
                                       "n_windows": doc.height, "n_control_windows": ctrl.height,
                                       "removed_control_windows": removed, "n_control_windows_global": shared["n"]}
                positive = ctrl.filter(pl.col("log10_value") > -math.inf)
                live = doc.filter(pl.col("log10_value") > -math.inf)
                length = lengths[doc["sample_id"][0]] if doc.height else None
                if doc.height and shared["threshold"] is not None:
                    wide = census(live["char_start"].to_numpy(), live["char_end"].to_numpy(),
                                  live["log10_value"].to_numpy(), shared["threshold"], log10=True,
                                  document_length=length)
                    row.update({"log10_threshold_global": wide.log10_threshold,
                                "windows_above_global": wide.windows_above,
                                "covered_characters_global": wide.covered_characters, "coverage_global": wide.coverage,
                                "document_length": wide.document_length})
                if doc.height == 0 or positive.height == 0:
                    row["error"] = ("the document has no scored window" if doc.height == 0 else
                                    "no control window has a positive score: the threshold is undefined")
                    rows.append(row)
                    continue
                threshold = census_threshold(positive["log10_value"].to_numpy(), log10=True)
                result = census(live["char_start"].to_numpy(), live["char_end"].to_numpy(),
                                live["log10_value"].to_numpy(), threshold, log10=True,
                                document_length=length, budget=int(budget) if budget else None,
                                budget_confidence=a.budget_confidence)
                row.update({"document_length": result.document_length,
                            "log10_threshold": result.log10_threshold,
                            "max_control_score_log10": result.max_control_score_log10,
                            "windows_above": result.windows_above, "covered_characters": result.covered_characters,
                            "coverage": result.coverage, "max_margin": result.max_margin,
                            "budget": None if result.budget is None else float(result.budget),
                            "budget_confidence": result.budget_confidence,
                            "min_log10_score_within_budget": result.min_log10_score_within_budget,
                            "windows_within_budget": result.windows_within_budget,
                            "coverage_within_budget": result.coverage_within_budget, "error": None})
                row.update(_recovery(doc, distances, spec.extraction.epsilon, result.document_length,
                                     result.log10_threshold, result.min_log10_score_within_budget))
                rows.append(row)
    order = {name: i for i, name in enumerate(names)}
    rows.sort(key=lambda r: order[r["document"]])  # pair order first, as before τ_global came per (role, procedure)
    return pl.DataFrame(rows, schema=CENSUS_SCHEMA)


census_stage = Stage("census", ("samples", "windows", "scores"), "census", "2", analysis_settings, _census)
