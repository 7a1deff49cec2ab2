"""The census report's views beyond one threshold: the shared τ_global, coverage versus Δ, deterministic recovery.

* **Shared threshold** (extraction paper §5): beside each document's own threshold τ(pair), the census
  against τ_global of its (role, procedure) — every pair's decontaminated control windows pooled, so the
  highest τ(pair) — read from the census table (``*_global`` columns).
* **Coverage versus Δ** (§5, App. E.2, the margin plots of Figure 6): the share of the document covered by
  windows scoring above 10^Δ·τ(pair), at the Δ of :data:`DELTAS` (table, summary.json) and on a fine grid
  (figure), by :func:`calib.stats.coverage_by_margin` from the windows and scores.
* **Deterministic recovery** (App. F.4): the census table's ``recovery_*`` columns — the share of the
  document covered by windows whose one greedy generation reproduces the suffix verbatim or within ε
  token edits, and the part of it above τ(pair) that the query budget does not reach by sampling.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calib.report.document import Block, Figure, Heading, Paragraph, Table
from calib.report.extraction.figures import coverage_delta_figure
from calib.report.format import count, number, pct, power
from calib.stats import CensusThreshold, coverage_by_margin

__all__ = ["CURVE_POINTS", "DELTAS", "coverage_curve", "global_problems", "view_blocks"]

#: The margins Δ (orders of magnitude above a document's own threshold) of the coverage-versus-Δ table.
DELTAS = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 15.0, 20.0)

#: Points of the figure's Δ grid (from 0 to the largest window margin, plus :data:`DELTAS`).
CURVE_POINTS = 121


def coverage_curve(starts: np.ndarray, ends: np.ndarray, values: np.ndarray, threshold: CensusThreshold,
                   length: int, max_margin: float | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Coverage vs Δ of one document: the table's points (summary.json) and the figure's fine grid.

    ``values`` are the windows' log10 scores (zero scores already replaced by a very low value).
    """
    top = 1.05 * max(float(max_margin or 0.0), 1.0)
    grid = np.union1d(np.asarray(DELTAS), np.linspace(0.0, top, CURVE_POINTS))
    curve = coverage_by_margin(starts, ends, values, threshold, grid, log10=True, document_length=length)
    at = {d: i for i, d in enumerate(curve.deltas)}
    table = {"deltas": list(DELTAS), "covered_characters": [curve.covered_characters[at[d]] for d in DELTAS],
             "coverage": [curve.coverage[at[d]] for d in DELTAS]}
    drawn = [i for i, d in enumerate(curve.deltas) if d <= top]
    return table, {"deltas": [curve.deltas[i] for i in drawn], "coverage": [curve.coverage[i] for i in drawn]}


def global_problems(rows: list[dict[str, Any]]) -> list[str]:
    """Census rows whose τ_global lies below their own threshold (the pool's maximum cannot be lower)."""
    out = []
    for r in rows:
        own, shared = r.get("log10_threshold"), r.get("log10_threshold_global")
        if own is not None and shared is not None and shared < own:
            out.append(f"{r['document']}/{r['role']}/{r['procedure']}: τ_global 10^{shared} is below the pair's "
                       f"threshold 10^{own}")
    return out


def _global_blocks(summary: dict[str, Any]) -> list[Block]:
    rows = tuple((r["document"], r["role"], f"`{r['procedure']}`", r["threshold"] or "none",
                  r["threshold_global"] or "none", number(r.get("n_control_windows_global")),
                  f"{number(r.get('windows_above_global'))} of {number(r['n_windows'])}", pct(r["coverage"]),
                  pct(r.get("coverage_global")))
                 for r in summary["census"] if r.get("n_control_windows_global") is not None)
    blocks: list[Block] = [Heading(2, "Shared threshold", "shared-threshold")]
    if not rows:
        return blocks + [Paragraph("The census table has no τ_global columns (a run from before them): re-run "
                                   "`calib study SPEC` to add them (only the census stage runs again).")]
    return blocks + [
        Paragraph("Beside each pair's own threshold τ(pair), the census against one threshold shared by every "
                  "document of a role and procedure, τ_global: the largest score among all pairs' decontaminated "
                  "control windows pooled (a control window of several pairs counts once), rounded up to a power "
                  "of ten — the highest τ(pair) (extraction paper §5). It can only lower a document's coverage."),
        Table(("document", "role", "procedure", "τ(pair)", "τ_global", "pooled control windows",
               "windows above τ_global", "coverage at τ(pair)", "coverage at τ_global"), rows, "global-table",
              "Census of each document against its own threshold and the shared τ_global.")]


def _curve_blocks(summary: dict[str, Any], fine: list[dict[str, Any]]) -> list[Block]:
    blocks: list[Block] = [
        Heading(2, "Coverage versus margin", "coverage-margin"),
        Paragraph("The share of each document covered by windows scoring more than 10^Δ times its own threshold "
                  "(Δ = 0: the census coverage; extraction paper §5 and App. E.2): how much of the coverage is far "
                  "above the matched control, and how much only just clears it. It never rises with Δ.")]
    curves = summary["coverage_curve"]
    if not curves:
        return blocks + [Paragraph("No document has a census threshold and scored windows: no curve.")]
    rows = tuple((c["document"], c["role"], f"`{c['procedure']}`", power(c["log10_threshold"]),
                  *(pct(v) for v in c["coverage"])) for c in curves)
    blocks.append(Table(("document", "role", "procedure", "τ(pair)", *(f"Δ = {d:g}" for d in DELTAS)), rows,
                        "coverage-margin-table", "Coverage of windows scoring above 10^Δ·τ(pair)."))
    svg = coverage_delta_figure([{"label": f"{c['document']}, {c['role']}, {c['procedure']}", **f}
                                 for c, f in zip(curves, fine)])
    if svg is not None:
        blocks.append(Figure("coverage-delta", svg, "Coverage vs the margin Δ above each document's own threshold."))
    return blocks


def _recovery_blocks(summary: dict[str, Any]) -> list[Block]:
    blocks: list[Block] = [
        Heading(2, "Deterministic recovery", "recovery"),
        Paragraph("One greedy generation of ℓ_s tokens after each window's prefix (the `near_verbatim` procedure's, "
                  "kept whole in the scores' detail with its token edit distance to the suffix): the share of the "
                  "document inside windows whose greedy continuation reproduces the suffix verbatim, and within ε "
                  "token edits (near-verbatim), at the cost of one generation per window (extraction paper App. F.4); "
                  "beyond n: recovered near-verbatim, above τ(pair), yet below the probability that n sampled "
                  "queries reach.")]
    rows = tuple((r["document"], r["role"], f"`{r['procedure']}`", number(r["recovery_windows"]),
                  number(r["recovered_verbatim"]), number(r["recovered_near_verbatim"]),
                  pct(r["recovery_coverage_verbatim"]), pct(r["recovery_coverage_near_verbatim"]),
                  pct(r["coverage"]), pct(r["recovery_coverage_beyond_budget"]),
                  count(r["budget"]) if r["budget"] is not None else "none")
                 for r in summary["census"] if r.get("recovery_windows") is not None)
    if not rows:
        return blocks + [Paragraph("No window has a greedy generation (the study did not score `near_verbatim`): "
                                   "no recovery.")]
    return blocks + [Table(("document", "role", "procedure", "greedy generations", "verbatim", "near-verbatim",
                            "coverage verbatim", "coverage near-verbatim", "coverage above τ(pair)",
                            "recovered beyond n", "budget n"), rows, "recovery-table",
                           "Deterministic recovery by one greedy generation per window.")]


def view_blocks(summary: dict[str, Any], fine: list[dict[str, Any]]) -> list[Block]:
    """The report's shared-threshold, coverage-versus-Δ and recovery sections."""
    return _global_blocks(summary) + _curve_blocks(summary, fine) + _recovery_blocks(summary)

