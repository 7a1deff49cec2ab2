"""The census study's census stage: each document's windows against its matched controls' threshold."""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from calib.study.extraction.analysis import analysis_settings
from calib.study.extraction.common import procedure_names, scored_roles
from calib.study.runner import Stage, StageContext
from calib.study.tables import (
    CENSUS_SCHEMA,
)

__all__ = ["census_stage"]


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
    rows = []
    for pair in spec.census.pairs:
        for role, _ in scored_roles(spec):
            for procedure in procedure_names(spec):
                part = scores.filter((pl.col("document") == pair.name) & (pl.col("role") == role)
                                     & (pl.col("procedure") == procedure))
                doc = part.filter(pl.col("membership") == "candidate")
                ctrl = part.filter(pl.col("membership") == "control")
                removed = ctrl.filter(pl.col("window_id").is_in(list(drop)) | pl.col("sample_id").is_in(list(drop)))
                ctrl = ctrl.filter(~pl.col("window_id").is_in(list(drop)) & ~pl.col("sample_id").is_in(list(drop)))
                row: dict[str, Any] = {"document": pair.name, "role": role, "procedure": procedure,
                                       "suffix_tokens": spec.extraction.suffix_tokens[0],
                                       "n_windows": doc.height, "n_control_windows": ctrl.height,
                                       "removed_control_windows": removed.height}
                positive = ctrl.filter(pl.col("log10_value") > -math.inf)
                if doc.height == 0 or positive.height == 0:
                    row["error"] = ("the document has no scored window" if doc.height == 0 else
                                    "no control window has a positive score: the threshold is undefined")
                    rows.append(row)
                    continue
                threshold = census_threshold(positive["log10_value"].to_numpy(), log10=True)
                live = doc.filter(pl.col("log10_value") > -math.inf)
                sid = doc["sample_id"][0]
                result = census(live["char_start"].to_numpy(), live["char_end"].to_numpy(),
                                live["log10_value"].to_numpy(), threshold, log10=True,
                                document_length=lengths[sid], budget=int(budget) if budget else None,
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
                rows.append(row)
    return pl.DataFrame(rows, schema=CENSUS_SCHEMA)


census_stage = Stage("census", ("samples", "windows", "scores"), "census", "1", analysis_settings, _census)
