"""The probes report's budget section: the completion budget, truncation per condition, and missing generations.

Every condition of one problem is asked with the same ``max_tokens`` (calib.study.probes.generate), so a
longer prompt (dead code, the Iso contract) no longer gets a smaller budget; what the budget still does is
measured here: the **truncation rate** of each (model, condition), the share of its completed generations
that stopped at the budget (``finish_reason`` = ``length``), with a Clopper–Pearson interval. A generation
whose request failed or whose prompt overflowed the context is **missing**: left out of pass@k, and a
problem with a missing cell is dropped from the paired comparisons it is in (counted per comparison).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from calib.report.document import Block, Heading, Paragraph, Table
from calib.report.format import DASH, setting_pct
from calib.stats import clopper_pearson

__all__ = ["budget_blocks", "dropped_rows", "truncation_rows"]


def truncation_rows(generations: pl.DataFrame, models: list[str], labels: list[str],
                    confidence: float) -> list[dict[str, Any]]:
    """Per (model, label): generations, missing ones by cause, the budgets asked, and the truncation rate."""
    g = generations
    if "missing" not in g.columns:  # a run from before missing generations were told apart
        g = g.with_columns(pl.when(pl.col("text").is_null()).then(pl.lit("request_failed")).alias("missing"),
                           pl.lit(None, dtype=pl.Int64).alias("max_tokens"))
    rows = []
    for model in models:
        for label in labels:
            mine = g.filter((pl.col("model") == model) & (pl.col("label") == label))
            if not mine.height:
                continue
            done = mine.filter(pl.col("missing").is_null())
            truncated = int(done["finish_reason"].eq("length").fill_null(False).sum())
            ci = clopper_pearson(truncated, done.height, confidence) if done.height else None
            budgets = done["max_tokens"].drop_nulls()
            rows.append({"model": model, "label": label, "generations": mine.height, "completed": done.height,
                         "missing_failed": int(mine["missing"].eq("request_failed").fill_null(False).sum()),
                         "missing_overflow": int(mine["missing"].eq("overflow").fill_null(False).sum()),
                         "truncated": truncated, "rate": ci.estimate if ci else None,
                         "low": ci.low if ci else None, "high": ci.high if ci else None,
                         "max_tokens_min": int(budgets.min()) if budgets.len() else None,  # type: ignore[arg-type]
                         "max_tokens_max": int(budgets.max()) if budgets.len() else None})  # type: ignore[arg-type]
    return rows


def dropped_rows(pass_rows: list[dict[str, Any]], pair_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every paired comparison with the problems it dropped (a missing cell on either side), by cause."""
    def counts(r: dict[str, Any]) -> dict[str, int]:
        return {"dropped_failed": r.get("dropped_failed") or 0, "dropped_overflow": r.get("dropped_overflow") or 0}

    out = [{"comparison": "condition", "label": r["label"], "k": r["k"], "baseline": "original",
            "compared": r["label"], "model": r["model"], **counts(r)} for r in pass_rows if r["label"] != "original"]
    out += [{"comparison": "models", "label": r["label"], "k": r["k"], "baseline": r["model_a"],
             "compared": r["model_b"], "model": None, **counts(r)} for r in pair_rows]
    return out


def _budget(r: dict[str, Any]) -> str:
    low, high = r["max_tokens_min"], r["max_tokens_max"]
    return DASH if low is None else str(low) if low == high else f"{low}–{high}"


def _rate(r: dict[str, Any]) -> str:
    if r["rate"] is None:
        return DASH
    return f"{100 * r['rate']:.1f} [{100 * r['low']:.1f}, {100 * r['high']:.1f}]"


def budget_blocks(summary: dict[str, Any]) -> list[Block]:
    """The section: how the budget was set, the truncation table, and the problems each comparison dropped."""
    names = {p["label"]: p["name"] for p in summary["procedure"]["labels"]}
    rows = tuple((f"`{r['model']}`", names.get(r["label"], r["label"]), str(r["generations"]), str(r["completed"]),
                  str(r["missing_failed"]), str(r["missing_overflow"]), _budget(r), str(r["truncated"]), _rate(r))
                 for r in summary.get("truncation", []))
    blocks: list[Block] = [
        Heading(2, "Budget, truncation and missing generations", "truncation"),
        Paragraph(f"Every condition of a problem was asked with the same completion budget: `max_tokens` = "
                  f"{summary['settings']['max_tokens']}, lowered for a problem to the smallest room the model's "
                  "context leaves after any of its prompts, so a longer prompt gets no smaller budget. Truncated: "
                  "completed generations that stopped at the budget (finish reason `length`), with the "
                  f"Clopper–Pearson {setting_pct(summary['settings']['confidence'])} interval. A generation whose "
                  "request failed or whose prompt overflowed the context is missing, never a failure: pass@k uses "
                  "the completed generations only, and a problem with fewer than k of them in a condition is "
                  "dropped from the comparisons of that condition."),
        Table(("model", "condition", "generations", "completed", "missing: failed", "missing: overflow",
               "budget (tokens)", "truncated", "truncation rate (%)"), rows, "truncation-table",
              "Budget and truncation per model and condition (probe_generations table).")
        if rows else Paragraph("The probe_generations table has no rows."),
    ]
    dropped = [d for d in summary.get("dropped", []) if d["dropped_failed"] or d["dropped_overflow"]]
    if not dropped:
        blocks.append(Paragraph("No problem was dropped from a paired comparison."))
        return blocks
    listed = "; ".join(
        (f"`{d['model']}` {names.get(d['label'], d['label'])} vs Original" if d["comparison"] == "condition"
         else f"{names.get(d['label'], d['label'])} `{d['baseline']}` vs `{d['compared']}`")
        + f" (pass@{d['k']}): {d['dropped_failed']} by failed requests, {d['dropped_overflow']} by overflow"
        for d in dropped[:12])
    more = f" and {len(dropped) - 12} more (summary.json `dropped`)" if len(dropped) > 12 else ""
    blocks.append(Paragraph(f"**Problems dropped from paired comparisons** (a missing cell on either side): "
                            f"{listed}{more}."))
    return blocks
