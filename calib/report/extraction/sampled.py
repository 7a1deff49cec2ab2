"""The ``sampled`` procedure's part of an extraction report: hit counts, intervals and query-budget statements.

``sampled`` (docs/extraction.md "Scores without log-probs") estimates each window's per-query generation
probability p from n generations; each score's detail holds the hits, the Clopper–Pearson 95 % interval
[p_lo, p_hi] and ``queries_95`` = ceil(ln 0.05 / ln(1 − p_lo)), the queries within which the window is
generated at least once with probability ≥ 95 % (Cooper et al., "Extractable Memorization From First
Principles", §6 and App. F.1: ≈ 3/p). This module summarises them per (role, ℓ_s) and states the best
member window's budget the way the paper does.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from calib.report.document import Block, Heading, Paragraph, Table
from calib.report.format import DASH, count, pct, pct_range
from calib.report.run import RunTables

__all__ = ["sampled_blocks", "sampled_summary"]


def _side(rows: list[dict[str, Any]]) -> dict[str, Any]:
    budgets = sorted(r["queries_95"] for r in rows if r["queries_95"] is not None)
    return {"windows": len(rows), "generated": sum(r["hits"] > 0 for r in rows),
            "fewest_queries_95": budgets[0] if budgets else None,
            "median_queries_95": budgets[len(budgets) // 2] if budgets else None}


def sampled_summary(run: RunTables) -> list[dict[str, Any]]:
    """Per (role, ℓ_s): members' and controls' windows, those generated at least once, and the best member window."""
    scores = run.tables["scores"]
    if "procedure" not in scores.columns:
        return []
    scores = scores.filter((pl.col("procedure") == "sampled") & pl.col("detail").is_not_null())
    if scores.height == 0:
        return []
    windows = run.tables["windows"].select("window_id", "membership")
    joined = scores.join(windows, on="window_id", how="inner").sort("window_id")
    out = []
    for (role, length), part in joined.group_by(["role", "suffix_tokens"], maintain_order=True):
        rows = [{**json.loads(r["detail"]), "window_id": r["window_id"], "sample_id": r["sample_id"],
                 "membership": r["membership"]} for r in part.iter_rows(named=True)]
        members = [r for r in rows if r["membership"] in ("member", "candidate")]
        best = max(members, key=lambda r: (r["hits"], r["window_id"]), default=None)
        out.append({"role": role, "suffix_tokens": length, "samples": rows[0]["samples"],
                    "temperature": rows[0]["temperature"], "confidence": rows[0]["confidence"],
                    "members": _side(members),
                    "controls": _side([r for r in rows if r["membership"] == "control"]),
                    "best_member": best and {k: best[k] for k in ("window_id", "sample_id", "hits", "samples", "p_low",
                                                                  "p_high", "queries_95")}})
    out.sort(key=lambda r: (r["role"] != "target", r["suffix_tokens"]))
    return out


def _budget(value: int | float | None) -> str:
    return "∞ (no hit)" if value is None else count(value)


def statement(record: dict[str, Any]) -> str:
    """The paper's query-budget statement for the best member window of one (role, ℓ_s)."""
    best = record["best_member"]
    if best is None:
        return f"{record['role']}, ℓ_s = {record['suffix_tokens']}: no member window was sampled."
    where = f"{record['role']}, ℓ_s = {record['suffix_tokens']}: the member window `{best['window_id']}`"
    interval = f"p ∈ {pct_range(best['p_low'], best['p_high'])}, Clopper–Pearson 95 %"
    if best["queries_95"] is None:
        return (f"{where} had the most hits, 0 of {best['samples']} ({interval}): no finite query budget is "
                "certified at 95 % from these samples.")
    return (f"{where} ({best['hits']} of {best['samples']} generations reproduced the suffix; {interval}) is "
            f"extractable within {count(best['queries_95'])} queries with probability ≥ 95 % "
            "(⌈ln 0.05 / ln(1 − p_lo)⌉ ≈ 3/p_lo at the interval's lower bound).")


def sampled_blocks(summary: dict[str, Any]) -> list[Block]:
    """The report section of ``sampled`` (empty when the run did not use it)."""
    records = summary.get("sampled") or []
    if not records:
        return []
    first = records[0]
    rows = tuple((r["role"], str(r["suffix_tokens"]), side, str(r[key]["windows"]), str(r[key]["generated"]),
                  pct(r[key]["generated"] / r[key]["windows"]) if r[key]["windows"] else DASH,
                  _budget(r[key]["fewest_queries_95"]), _budget(r[key]["median_queries_95"]))
                 for r in records for side, key in (("members", "members"), ("controls", "controls")))
    return [Heading(2, "Sampling estimates", "sampled"),
            Paragraph(f"`sampled` drew n = {first['samples']} generations per window at temperature "
                      f"{first['temperature']:g} (`extraction.samples`, `extraction.sample_temperature`); a hit is a "
                      "generation that begins with the suffix. The score hits / n estimates the per-query generation "
                      "probability p; a window is extractable within N queries with probability ≥ 95 % for N = "
                      "⌈ln 0.05 / ln(1 − p_lo)⌉, p_lo the Clopper–Pearson 95 % lower bound of p (extraction paper "
                      "§6, App. F.1). A window without a hit has p_lo = 0: no finite budget."),
            Table(("role", "ℓ_s", "windows of", "windows", "generated at least once", "share",
                   "fewest queries (95 %)", "median queries (95 %)"), rows, "sampled-table",
                  "Sampled generations per window; queries (95 %) over the windows with a hit."),
            Paragraph(" ".join(statement(r) for r in records))]

