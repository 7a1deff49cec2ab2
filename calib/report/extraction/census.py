"""The ``census`` report (single documents against matched control documents): summary and blocks.

The census table holds each document's threshold, coverage and budget view (``calib.stats.census``);
the report adds, per document, role and procedure, the per-character margins of the best covering
window (``calib.stats.character_margins``, extraction paper App. E.2) drawn as a heat map over the
document's text, the covered character ranges, and the highest-scoring control windows for review.
"""

from __future__ import annotations

import html
import math
from typing import Any

import numpy as np
import polars as pl

from calib._exceptions import InputError
from calib.report.document import Block, Bullets, Figure, Heading, Markup, Paragraph, Table
from calib.report.extraction.blocks import REFERENCES
from calib.report.extraction.census_views import coverage_curve, global_problems, view_blocks
from calib.report.extraction.empty import EMPTY_NOTE, nothing_measured
from calib.report.extraction.figures import coverage_figure, margin_profile_figure
from calib.report.format import count, figure_name, fixed, number, pct, plain_text, power, setting_pct
from calib.report.procedure import (
    ROLES,
    methods_record,
    procedure_order,
    procedure_statement,
    provenance,
    provenance_blocks,
    statement_blocks,
    study_facts,
)
from calib.report.run import RunTables, setting
from calib.stats import CensusThreshold, character_margins

__all__ = ["CENSUS_SUMMARY_VERSION", "HEAT_BINS", "census_report", "census_summary", "heat_map_html"]

#: Version of the census summary.json layout (docs/report.md); bumped when a key changes meaning or goes away.
CENSUS_SUMMARY_VERSION = 1

#: Heat-map colours: (lowest margin, exclusive; highest margin, inclusive; background; text colour).
HEAT_BINS = ((0.0, 1.0, "#ffeda0", "#1f2328"), (1.0, 2.0, "#fed976", "#1f2328"), (2.0, 3.0, "#feb24c", "#1f2328"),
             (3.0, 5.0, "#fd8d3c", "#1f2328"), (5.0, math.inf, "#e31a1c", "#ffffff"))

#: Colour of characters no scored window covers (the document's first prefix, unscored windows).
UNCOVERED = "#8c959f"

#: Covered ranges the Markdown report lists per heat map (summary.json lists them all).
MAX_RANGES = 30

#: A zero score (log10 = −inf) enters the margins as this log10 value: below every threshold.
_ZERO = -400.0


def _side() -> pl.Expr:
    """The pair side of a window: ``control`` for a control document's, else ``document`` (membership
    ``candidate``; the ``kind`` column is the sample's own kind, e.g. an organism item's)."""
    return pl.when(pl.col("membership") == "control").then(pl.lit("control")).otherwise(pl.lit("document"))


def _scored(run: RunTables) -> pl.DataFrame:
    """Windows (no error) joined with their scores: one row per (window, role, procedure), with the pair side."""
    windows = run.tables["windows"].filter(pl.col("error").is_null() & pl.col("window_id").is_not_null())
    windows = windows.with_columns(_side().alias("side"))
    scores = run.tables["scores"].filter(pl.col("log10_value").is_not_null()).select(
        "window_id", "role", "procedure", "log10_value")
    return windows.select("window_id", "sample_id", "document", "side", "char_start", "char_end", "suffix").join(
        scores, on="window_id", how="inner")


def _text(run: RunTables, sample_id: str, windows: pl.DataFrame, length: int) -> tuple[str, str]:
    """The document's text (the samples table's ``function``, else ``body``), else rebuilt from the suffixes."""
    samples = run.tables["samples"].filter(pl.col("sample_id") == sample_id)
    for column in ("function", "body"):
        if column in samples.columns and samples.height and samples[column][0] is not None:
            text = samples[column][0]
            if len(text) >= length:
                return text[:length], f"samples.{column}"
    chars = ["·"] * length
    for start, end, suffix in windows.select("char_start", "char_end", "suffix").unique().sort("char_start").rows():
        if suffix is not None and len(suffix) == end - start:
            chars[start:end] = list(suffix)
    return "".join(chars), "rebuilt from the windows' suffixes (· = not covered by any suffix)"


def _codes(margins: np.ndarray) -> np.ndarray:
    """Per character: -1 no window, 0 at or below the threshold, i + 1 in heat bin i."""
    codes = np.where(np.isnan(margins), -1, 0)
    for i, (low, high, _, _) in enumerate(HEAT_BINS):
        codes = np.where((margins > low) & (margins <= high), i + 1, codes)
    return codes


def _bin_label(low: float, high: float) -> str:
    return f"&gt; {low:g}" if math.isinf(high) else f"{low:g}–{high:g}"


def heat_map_html(text: str, margins: np.ndarray, anchor: str) -> str:
    """The document as preformatted text, each run of characters in one heat bin as one coloured span.

    A newline follows ``<pre>`` because HTML parsers drop the first one there: a document's own
    leading newline then survives.
    """
    codes = _codes(margins)
    cuts = np.flatnonzero(np.diff(codes)) + 1 if codes.size else np.array([], dtype=int)
    starts = np.concatenate([[0], cuts]).astype(int) if codes.size else np.array([], dtype=int)
    ends = np.concatenate([cuts, [codes.size]]).astype(int) if codes.size else np.array([], dtype=int)
    parts = []
    for start, end in zip(starts.tolist(), ends.tolist()):
        chunk = html.escape(text[start:end], quote=False)
        code = int(codes[start])
        if code == 0:
            parts.append(chunk)
        elif code == -1:
            parts.append(f'<span style="color:{UNCOVERED}" title="no scored window">{chunk}</span>')
        else:
            low, high, background, color = HEAT_BINS[code - 1]
            label = f"margin {_bin_label(low, high)}"
            parts.append(f'<span style="background:{background};color:{color}" title="{label}" '
                         f'data-bin="{code}">{chunk}</span>')
    legend = " ".join(f'<span style="background:{bg};color:{fg};padding:0 .4em">{_bin_label(lo, hi)}</span>'
                      for lo, hi, bg, fg in HEAT_BINS)
    return (f'<div class="heatmap" id="{html.escape(anchor)}"><p style="font-size:13px">Margin log10(score / '
            f'threshold) of the best covering window: {legend}; uncolored: at or below the threshold; '
            f'<span style="color:{UNCOVERED}">grey</span>: no scored window.</p><pre style="white-space:pre-wrap;'
            "overflow-wrap:anywhere;max-height:36em;overflow-y:auto;background:#fff;line-height:1.45\">\n"
            f"{''.join(parts)}</pre></div>")


def _ranges(margins: np.ndarray) -> list[dict[str, Any]]:
    covered = np.concatenate([[False], margins > 0, [False]])
    edges = np.flatnonzero(np.diff(covered.astype(np.int8)))
    return [{"start": int(a), "end": int(b), "max_margin": float(np.nanmax(margins[a:b]))}
            for a, b in zip(edges[0::2], edges[1::2])]


def _threshold(row: dict[str, Any]) -> CensusThreshold:
    e = int(row["log10_threshold"])
    top = row["max_control_score_log10"]
    return CensusThreshold(threshold=float(f"1e{e}"), log10_threshold=e,
                           max_control_score_log10=float(e if top is None else top),
                           n_control_windows=int(row["n_control_windows"] or 0))


def _heat(run: RunTables, scored: pl.DataFrame, row: dict[str, Any], problems: list[str]) -> dict[str, Any] | None:
    """The per-character margins of one census row's document, its text and covered ranges."""
    name = f"{row['document']}/{row['role']}/{row['procedure']}"
    if row["log10_threshold"] is None:
        return None
    windows = scored.filter((pl.col("document") == row["document"]) & (pl.col("side") == "document")
                            & (pl.col("role") == row["role"]) & (pl.col("procedure") == row["procedure"]))
    if not windows.height:
        return None
    sample_id = windows["sample_id"].drop_nulls().sort().first()
    windows = windows.filter(pl.col("sample_id") == sample_id).sort("char_start", "window_id")
    length = int(row["document_length"] or windows["char_end"].max())
    values = windows["log10_value"].to_numpy().astype(float)
    try:
        margins = character_margins(windows["char_start"].to_numpy(), windows["char_end"].to_numpy(),
                                    np.where(np.isneginf(values), _ZERO, values), _threshold(row), log10=True,
                                    document_length=length)
    except ValueError as exc:
        problems.append(f"{name}: no heat map ({exc})")
        return None
    covered = int((margins > 0).sum())
    if row["covered_characters"] is not None and covered != row["covered_characters"]:
        problems.append(f"{name}: the census table covers {row['covered_characters']} characters, the windows "
                        f"and scores {covered}")
    text, source = _text(run, sample_id, windows, length)
    table, fine = coverage_curve(windows["char_start"].to_numpy(), windows["char_end"].to_numpy(),
                                 np.where(np.isneginf(values), _ZERO, values), _threshold(row), length,
                                 row["max_margin"])
    curve = {"log10_threshold": int(row["log10_threshold"]), **table}
    if curve["covered_characters"][0] != covered:
        problems.append(f"{name}: the coverage curve covers {curve['covered_characters'][0]} characters at Δ = 0, "
                        f"the heat map {covered}")
    return {"document": row["document"], "role": row["role"], "procedure": row["procedure"], "sample_id": sample_id,
            "document_length": length, "covered_characters": covered, "text_source": source,
            "ranges": _ranges(margins), "_margins": margins, "_text": text, "_curve": curve, "_fine": fine}


def _review(scored: pl.DataFrame, rows: list[dict[str, Any]], listed: list[str], top: int) -> list[dict[str, Any]]:
    controls = scored.filter((pl.col("side") == "control") & (pl.col("log10_value") > float("-inf")))
    out = []
    for row in rows:
        picked = controls.filter((pl.col("document") == row["document"]) & (pl.col("role") == row["role"])
                                 & (pl.col("procedure") == row["procedure"]))
        picked = picked.sort(["log10_value", "window_id"], descending=[True, False]).head(top)
        out.append({"document": row["document"], "role": row["role"], "procedure": row["procedure"], "controls": [
            {"rank": i + 1, "window_id": r["window_id"], "sample_id": r["sample_id"], "log10_value": r["log10_value"],
             "removed": r["window_id"] in listed or r["sample_id"] in listed, "suffix": r["suffix"]}
            for i, r in enumerate(picked.to_dicts())]})
    return out


def _row(r: dict[str, Any]) -> dict[str, Any]:
    within = r["coverage_within_budget"]
    beyond = None if r["coverage"] is None or within is None else r["coverage"] - within
    e, shared = r["log10_threshold"], r.get("log10_threshold_global")
    return {**r, "threshold": None if e is None else power(e), "coverage_beyond_budget": beyond,
            "threshold_global": None if shared is None else power(shared)}


def _order(pairs: list[str]) -> Any:
    """Sort key of a census row: the spec's pair order, then the document name, role and procedure."""
    def key(r: dict[str, Any]) -> tuple[int, str, int, tuple[int, float, str]]:
        role, doc = r["role"], r["document"]
        return (pairs.index(doc) if doc in pairs else len(pairs), doc, ROLES.index(role) if role in ROLES
                else len(ROLES), procedure_order(r["procedure"]))
    return key


def _counts(run: RunTables, scored: pl.DataFrame) -> dict[str, Any]:
    windows = run.tables["windows"]
    docs = []
    ok = windows.filter(pl.col("error").is_null()).with_columns(_side().alias("side"))
    for name in sorted(set(ok["document"].drop_nulls().to_list())):
        mine = ok.filter(pl.col("document") == name)
        docs.append({"document": name, "document_windows": int((mine["side"] == "document").sum()),
                     "control_windows": int((mine["side"] == "control").sum())})
    scores = run.tables["scores"]
    return {"documents": docs, "windows_with_error": windows.height - windows.filter(pl.col("error").is_null()).height,
            "scored": scores.filter(pl.col("log10_value").is_not_null()).height,
            "unscored": scores.filter(pl.col("log10_value").is_null()).height}


def census_summary(run: RunTables) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The census report's summary.json content, and the heat maps (with their margins and text)."""
    spec = run.spec
    listed = [str(v) for v in setting(spec, "analyze.decontaminate", [])]
    settings = {"budgets": [float(b) for b in setting(spec, "analyze.budgets", [1e5])],
                "budget_confidence": float(setting(spec, "analyze.budget_confidence", 0.95)),
                "decontaminate": listed, "review": int(setting(spec, "analyze.review", 10))}
    pairs = [str(p.get("name")) for p in setting(spec, "census.pairs", []) if isinstance(p, dict)]
    rows = sorted((_row(r) for r in run.tables["census"].to_dicts()), key=_order(pairs))
    scored = _scored(run)
    problems: list[str] = []
    try:
        heats = [h for r in rows if r["error"] is None and (h := _heat(run, scored, r, problems)) is not None]
    except ValueError as exc:
        raise InputError(f"{exc}; check the run's census, windows and scores tables", path=str(run.root)) from None
    procedures = sorted(set(run.tables["census"]["procedure"].drop_nulls().to_list()), key=procedure_order)
    lengths = sorted({int(v) for v in run.tables["census"]["suffix_tokens"].drop_nulls().to_list()}
                     | {int(v) for v in setting(spec, "extraction.suffix_tokens", [])})
    summary = {
        "summary_version": CENSUS_SUMMARY_VERSION,
        "kind": "census",
        "study": study_facts(run),
        "settings": settings,
        "procedure": procedure_statement(run, procedures, lengths),
        "pairs": [{k: p.get(k) for k in ("name", "document", "control")} for p in setting(spec, "census.pairs", [])
                  if isinstance(p, dict)],
        "counts": _counts(run, scored),
        "census": rows,
        "heatmaps": [{k: v for k, v in h.items() if not k.startswith("_")} for h in heats],
        "coverage_curve": [{"document": h["document"], "role": h["role"], "procedure": h["procedure"], **h["_curve"]}
                           for h in heats],
        "review": _review(scored, rows, listed, settings["review"]),
        "consistency": problems + global_problems(rows),
        "provenance": provenance(run),
        "methods": methods_record(run),
    }
    return summary, heats


def _budget(r: dict[str, Any]) -> str:
    return "none" if r["budget"] is None else f"{count(r['budget'])} at {setting_pct(r['budget_confidence'])}"


def _census_table(summary: dict[str, Any]) -> list[Block]:
    rows = []
    for r in summary["census"]:
        note = r["error"] or ""
        rows.append((r["document"], r["role"], f"`{r['procedure']}`", number(r["suffix_tokens"]),
                     r["threshold"] or "none", power(r["max_control_score_log10"]),
                     f"{number(r['n_control_windows'])} ({number(r['removed_control_windows'])} removed)",
                     f"{number(r['windows_above'])} of {number(r['n_windows'])}",
                     f"{pct(r['coverage'])} ({number(r['covered_characters'])}/{number(r['document_length'])} chars)",
                     fixed(r["max_margin"]), _budget(r), power(r["min_log10_score_within_budget"]),
                     pct(r["coverage_within_budget"]), pct(r["coverage_beyond_budget"]), note))
    return [Table(("document", "role", "procedure", "ℓ_s", "threshold", "max control score", "control windows",
                   "windows above", "coverage", "max margin", "budget n", "min probability within n",
                   "coverage within n", "beyond n", "note"), tuple(rows), "census-table",
                  "Census of each document against its matched control.")]


def _heat_blocks(heats: list[dict[str, Any]]) -> list[Any]:
    blocks: list[Any] = [
        Heading(2, "Heat maps", "heatmaps"),
        Paragraph("Each character of a document coloured by the margin log10(score / threshold) of the best window "
                  "covering it (extraction paper App. E.2, Figure 18): coloured characters count towards the "
                  "coverage. Hover a run for its margin bin. report.md lists the covered character ranges instead."),
    ]
    if not heats:
        return blocks + [Paragraph("No document has a census threshold and scored windows: no heat map.")]
    for document in dict.fromkeys(h["document"] for h in heats):
        mine = [h for h in heats if h["document"] == document]
        blocks.append(Heading(3, document, f"heatmap-{figure_name(document)}"))
        for h in mine:
            label = f"{h['role']}, `{h['procedure']}`"
            anchor = f"heatmap-{figure_name(document, h['role'], h['procedure'])}"
            ranges = h["ranges"]
            listed = ", ".join(f"{r['start']}–{r['end']} ({r['max_margin']:.2f})" for r in ranges[:MAX_RANGES])
            extra = len(ranges) - MAX_RANGES
            more = f", and {extra} more (summary.json lists them)" if extra > 0 else ""
            markdown = (f"Covered character ranges [start–end) with their largest margin: {listed or 'none'}{more}. "
                        "The per-character heat map is in report.html.")
            blocks += [Paragraph(f"{label}: {h['covered_characters']} of {h['document_length']} characters covered "
                                 f"(text: {h['text_source']})."),
                       Markup(anchor, heat_map_html(h["_text"], h["_margins"], anchor), markdown)]
        svg = margin_profile_figure([{"label": f"{h['role']}, {h['procedure']}", "margins": h["_margins"]}
                                     for h in mine])
        if svg is not None:
            blocks.append(Figure(figure_name("profile", document), svg,
                                 f"{document}: margin of the best covering window along the document (0: the "
                                 "threshold)."))
    return blocks


def _review_blocks(summary: dict[str, Any]) -> list[Block]:
    s = summary["settings"]
    blocks: list[Block] = [
        Heading(2, "Control-window review", "review"),
        Paragraph(f"The {s['review']} highest-scoring windows of each matched control document (`analyze.review`; "
                  "windows scoring 0 are not listed). The threshold is set by the highest remaining one: a control "
                  "passage that reuses text of the document (a quotation, an earlier edition) is no non-member; "
                  "verify such passages and list their window ids in `analyze.decontaminate`."),
    ]
    shown = False
    for r in summary["review"]:
        if not r["controls"]:
            continue
        shown = True
        rows = tuple((str(c["rank"]), f"`{c['window_id']}`", f"`{c['sample_id']}`", fixed(c["log10_value"], 3),
                      "removed" if c["removed"] else "", plain_text(c["suffix"])) for c in r["controls"])
        blocks.append(Table(("rank", "window", "sample", "log10 score", "decontaminated", "suffix"), rows,
                            f"review-{figure_name(r['document'], r['role'], r['procedure'])}",
                            f"{r['document']}, {r['role']}, `{r['procedure']}`: highest-scoring control windows."))
    if not shown:
        blocks.append(Paragraph("No control window scored above 0."))
    return blocks


def _methods(summary: dict[str, Any]) -> list[Block]:
    s, counts = summary["settings"], summary["counts"]
    rows = tuple((d["document"], str(d["document_windows"]), str(d["control_windows"])) for d in counts["documents"])
    pairs = [f"`{p['name']}`: document `{p['document']}`, control `{p['control']}`" for p in summary["pairs"]]
    settings = ["budgets n ∈ {" + ", ".join(count(b) for b in s["budgets"]) + "} at c = "
                f"{setting_pct(s['budget_confidence'])}",
                "decontaminate: " + (", ".join(f"`{d}`" for d in s["decontaminate"]) or "none"),
                f"control-window review: {s['review']} windows per document"]
    return [Heading(2, "Methods", "methods"), Heading(3, "Data", "methods-data"),
            Bullets(tuple(pairs)) if pairs else Paragraph("No census pairs in the spec."),
            Table(("document", "document windows", "control windows"), rows, "windows-table",
                  f"Windows per pair ({counts['windows_with_error']} sample(s) without a window; "
                  f"{counts['scored']} scores, {counts['unscored']} unscored)."),
            Heading(3, "Settings", "methods-settings"), Bullets(tuple(settings)),
            *provenance_blocks(summary), Heading(3, "References", "references"), Bullets(REFERENCES)]


def census_report(run: RunTables) -> tuple[dict[str, Any], list[Any]]:
    """The census report: its summary (summary.json) and its blocks (which may hold :class:`Markup`)."""
    summary, heats = census_summary(run)
    study = summary["study"]
    models = summary["procedure"]["models"]
    who = " and ".join(f"{m['role']} `{m['model'] or m['server'] or 'unknown'}`" for m in models) or "no model"
    empty = nothing_measured({**summary, "kind": "census"})
    intro = f"Census of single documents against matched control documents, scored by {who}."
    if study.get("description"):
        intro = f"{study['description']} {intro}"
    blocks: list[Any] = [Heading(1, f"calib report: {study.get('name') or 'study'}", "top"), Paragraph(intro),
                         *statement_blocks(summary["procedure"], census=True), Heading(2, "Census", "census"),
                         *([Paragraph(f"**Nothing was measured**: {empty}. {EMPTY_NOTE}")] if empty is not None
                           else []),
                         Paragraph("Per document, role and procedure: the threshold (the largest decontaminated "
                                   "control-window score rounded up to a power of ten: a measured maximum, not a "
                                   "certified FPR), the windows above it, the coverage (exact: every window is "
                                   "scored) and the largest margin; within the budget: the coverage of windows "
                                   "above the threshold that are also generated at least once in n queries with "
                                   "probability ≥ c; beyond it, the rest of the coverage (memorized, not extractable "
                                   "within n).")]
    blocks += _census_table(summary)
    svg = coverage_figure([{"label": f"{r['document']}, {r['role']}, {r['procedure']}",
                            "within": r["coverage_within_budget"], "beyond": r["coverage_beyond_budget"]
                            if r["coverage_within_budget"] is not None else r["coverage"]}
                           for r in summary["census"] if r["error"] is None])
    if svg is not None:
        blocks.append(Figure("coverage", svg, "Coverage per document: within the query budget, and above the "
                                              "threshold beyond it."))
    blocks += view_blocks(summary, [h["_fine"] for h in heats])
    if summary["consistency"]:
        blocks.append(Paragraph("**Warning**: the tables disagree with each other: "
                                + "; ".join(summary["consistency"][:5]) + ". Re-run `calib study SPEC`."))
    blocks += _heat_blocks(heats) + _review_blocks(summary) + _methods(summary)
    return summary, blocks
