"""The sections of an ``extraction`` report as document blocks, written from its summary (summary.json).

Numbers come from :func:`calib.report.extraction.summary.extraction_summary`; the figures also read the
score, margin and budget columns of the run's tables (too many values for summary.json).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from calib.report.document import Block, Bullets, Figure, Heading, Paragraph, Table
from calib.report.extraction.contrast import members_vs_controls_blocks, suffix_sweep_blocks
from calib.report.extraction.empty import EMPTY_NOTE, nothing_measured
from calib.report.extraction.figures import budget_figure, calibration_figure, margin_figure, score_figure
from calib.report.extraction.sampled import sampled_blocks
from calib.report.extraction.summary import groups_of, removed, where
from calib.report.format import (
    DASH,
    count,
    figure_name,
    fixed,
    number,
    pct,
    pct_range,
    plain_text,
    power,
    rate_cell,
    setting_pct,
)
from calib.report.procedure import (
    BINARY_PROCEDURES,
    procedure_order,
    provenance_blocks,
    statement_blocks,
    tokenizer_text,
)
from calib.report.run import RunTables

__all__ = ["REFERENCES", "extraction_blocks", "level"]

#: The works the extraction and census reports cite.
REFERENCES = (
    "A. F. Cooper et al., Extractable Memorization From First Principles (the extraction paper): §3 (the conformal "
    "test), §4 (population rates), §5 (census), §6 and App. F (query budgets), App. B.2 (extraction procedures), "
    "App. C (validity, the Beta law, atoms, multiple testing), App. D.1 (plotted intervals), App. D.3 (suffix "
    "length), App. D.5 (margin), "
    "App. E (census thresholds, decontamination).",
    "V. Vovk, A. Gammerman and G. Shafer (2005). Algorithmic Learning in a Random World, ch. 2 (conformal p-values).",
    "C. J. Clopper and E. S. Pearson (1934). The use of confidence or fiducial limits illustrated in the case of the "
    "binomial. Biometrika 26(4):404–413.",
    "Y. Benjamini and Y. Hochberg (1995). Controlling the false discovery rate. JRSS-B 57(1):289–300.",
    "R. G. Newcombe (1998). Improved confidence intervals for the difference between binomial proportions based on "
    "paired data. Statistics in Medicine 17(22):2635–2650 (method 10).",
    "R. G. Newcombe (1998). Interval estimation for the difference between independent proportions: comparison of "
    "eleven methods. Statistics in Medicine 17(8):873–890 (method 10, hybrid score).",
)

def level(value: float | None) -> str:
    """A certified or target level as a percentage with four significant digits (``0.09998%``)."""
    return DASH if value is None else f"{100 * value:.4g}%"


def _what(rec: dict[str, Any]) -> tuple[str, str, str]:
    return rec["role"], f"`{rec['procedure']}`", str(rec["suffix_tokens"])


def _threshold(op: dict[str, Any]) -> str:
    return op["threshold"] if op["k"] else "none (K = 0)"


def _calibrated(op: dict[str, Any]) -> str:
    if op["calibrated_rate"] is None:
        return DASH
    return f"{pct(op['calibrated_rate'])} [{pct(op['low'])}, {pct(op['high'])}]"


def _claims(op: dict[str, Any]) -> str:
    return f"{number(op['claims']) if op['k'] else DASH}/{number(op['n_members'])}"


def _headline(summary: dict[str, Any]) -> list[Block]:
    s = summary["settings"]
    conf = setting_pct(s["confidence"])
    pool = ("the decontaminated control pool (without the `analyze.decontaminate` list and the control screen's flags)"
            if s["primary_pool"] == "decontaminated" else "the full control pool")
    empty = nothing_measured(summary)
    blocks: list[Block] = [
        Heading(2, "Headline", "headline"),
        *([Paragraph(f"**Nothing was measured**: {empty}. {EMPTY_NOTE}")] if empty is not None else []),
        Paragraph(f"At the primary target level α = {s['alpha_as_written']} (`analyze.alpha`), with {pool}. "
                  f"Calibrated rate = member claim rate − α_N, with the {conf} Clopper–Pearson interval of the members "
                  f"shifted down by α_N (it holds the controls fixed). Realized FPR: the {conf} central interval and "
                  f"one-sided {conf} upper bound of α* ~ Beta(K, N−K+1), and P(α* > α_N). α†: the share of controls "
                  "above a tied lowest score (1 when there is no such atom); no level above α† can be certified."),
    ]
    rows = []
    for h in summary["headline"]:
        op = h["operating_point"]
        if op is None:
            rows.append((*_what(h), DASH, DASH, DASH, DASH, DASH, DASH, DASH, DASH, DASH, DASH,
                         f"no operating point at α = {s['alpha']:g} in the operating_points table"))
            continue
        rows.append((*_what(h), number(op["n_controls"]), number(op["k"]),
                     f"{op['k']}/{op['n_controls'] + 1} = {level(op['certified_alpha'])}", _threshold(op),
                     _claims(op), _calibrated(op), pct_range(op["fpr_low"], op["fpr_high"]), pct(op["fpr_upper"]),
                     pct(op["prob_exceeds_certified"]), level(op["alpha_dagger"]), op["note"]))
    blocks.append(Table(("role", "procedure", "ℓ_s", "N", "K", "α_N", "threshold τ", "claims / members",
                         "calibrated rate [interval]", "realized FPR interval", "FPR upper bound", "P(α* > α_N)", "α†",
                         "note"), tuple(rows), "headline-table", "Operating points at the primary α."))
    binary = [h for h in summary["headline"] if h["generation"] is not None]
    if binary:
        blocks.append(Paragraph("Binary procedures (`greedy`, `near_verbatim_greedy`) score 0 or 1: the test has one "
                                "operating point, so they are reported as member and control **generation** rates "
                                "(not extraction, and with no margin); a control generated is a non-member the "
                                "procedure reproduces, which cannot be memorization."))
        rows = [(*_what(h), rate_cell(g["members"]), rate_cell(g["controls"]), DASH if g["difference"] is None
                 else f"{pct(g['difference'])} {pct_range(g['difference_low'], g['difference_high'])}")
                for h in binary if (g := h["generation"])]
        blocks.append(Table(("role", "procedure", "ℓ_s", "members generated", "controls generated",
                             "difference (members − controls) [Newcombe]"), tuple(rows), "generation-table",
                            f"Generation rates of the binary procedures ({conf} Clopper–Pearson; the difference: "
                            "Newcombe's interval for independent proportions)."))
    if s["decontaminate"] and not s.get("screen"):  # with the screen, its section shows both pools
        blocks += _pools(summary)
    if summary["consistency"]:
        blocks.append(Paragraph("**Warning**: the tables disagree with each other: "
                                + "; ".join(summary["consistency"][:5]) + ". Re-run `calib study SPEC`."))
    return blocks


def _pools(summary: dict[str, Any]) -> list[Block]:
    listed = summary["settings"]["decontaminate"]
    rows = []
    for h in summary["headline"]:
        by = {p["pool"]: p for p in h["pools"]}
        ops = [by.get("all"), by.get("decontaminated")]

        def both(cell: Any, ops: list[dict[str, Any] | None] = ops) -> str:
            return " / ".join(DASH if op is None else cell(op) for op in ops)

        rows.append((*_what(h), both(lambda op: number(op["n_controls"])), both(lambda op: number(op["k"])),
                     both(lambda op: level(op["certified_alpha"])), both(_threshold), both(_claims),
                     both(_calibrated)))
    return [Heading(3, "Full and decontaminated control pools", "pools"),
            Paragraph(f"`analyze.decontaminate` lists {len(listed)} window or sample id(s) of controls verified as "
                      "reused member text; they are removed from the decontaminated pool. Contaminated controls sit "
                      "at the top of the control scores and raise τ (extraction paper App. D.2). Each cell: full "
                      "pool / decontaminated pool."),
            Table(("role", "procedure", "ℓ_s", "N", "K", "α_N", "threshold τ", "claims / members",
                   "calibrated rate [interval]"), tuple(rows), "pools-table", "Full pool / decontaminated pool.")]


def _procedures(summary: dict[str, Any]) -> list[str]:
    return sorted({h["procedure"] for h in summary["headline"]}, key=procedure_order)


def _sweep(summary: dict[str, Any], primary_alpha_n: dict[str, float | None]) -> list[Block]:
    blocks: list[Block] = [
        Heading(2, "Operating points", "sweep"),
        Paragraph("The sweep over `analyze.alphas`: each target level α gives K = floor(α(N+1)) and a threshold; "
                  "certified FPR α_N against the calibrated rate (extraction paper Figure 4). A larger α_N buys more "
                  "claims at more false positives; levels past α† all give the same claims."),
    ]
    pool = summary["settings"]["primary_pool"]
    for proc in _procedures(summary):
        series = [s for s in summary["sweep"] if s["procedure"] == proc]
        blocks.append(Heading(3, f"`{proc}`", f"sweep-{figure_name(proc)}"))
        if proc not in BINARY_PROCEDURES:
            curves = []
            for s in series:
                if s["pool"] != pool and any(t["pool"] == pool for t in series):
                    continue
                pts = {p["certified_alpha"]: p for p in s["points"] if p["certifiable"]}
                ordered = [pts[k] for k in sorted(pts)]
                curves.append({"label": f"{s['role']}, ℓ_s = {s['suffix_tokens']} ({s['pool']} pool)",
                               "certified": [p["certified_alpha"] for p in ordered],
                               "rate": [p["calibrated_rate"] for p in ordered],
                               "low": [p["low"] for p in ordered], "high": [p["high"] for p in ordered]})
            svg = calibration_figure(curves, primary_alpha_n.get(proc))
            if svg is not None:
                blocks.append(Figure(figure_name("calibration", proc), svg,
                                     f"`{proc}`: calibrated rate vs certified FPR α_N (log scale); bands: member "
                                     "Clopper–Pearson intervals shifted down by α_N."))
        rows = []
        for s in series:
            for p in s["points"]:
                flag = "K = 0" if not p["k"] else ("at atom" if p["at_atom"] else "")
                rows.append((s["role"], str(s["suffix_tokens"]), s["pool"], f"{p['alpha']:g}", number(p["k"]),
                             level(p["certified_alpha"]), _threshold(p), pct(p["in_sample_fpr"]), _claims(p),
                             _calibrated(p), pct(p["fpr_upper"]), flag))
        blocks.append(Table(("role", "ℓ_s", "pool", "α", "K", "α_N", "threshold τ", "in-sample FPR", "claims / members",
                             "calibrated rate [interval]", "FPR upper bound", "note"), tuple(rows),
                            f"sweep-table-{figure_name(proc)}", f"`{proc}`: every operating point."))
    return blocks


def _scores(run: RunTables, summary: dict[str, Any]) -> list[Block]:
    claims = run.tables["extraction_claims"].filter(pl.col("log10_value").is_not_null())
    decontaminated = summary["settings"]["primary_pool"] == "decontaminated"
    blocks: list[Block] = [
        Heading(2, "Score distributions", "scores"),
        Paragraph("Member and control log10 scores of each probabilistic procedure (extraction paper App. D.2); "
                  "a score of 0 (e.g. a suffix token outside the top k) is counted in the legend, not drawn. "
                  "Controls: the primary pool. Dashed: τ at the primary α."),
    ]
    thresholds = {(h["role"], h["procedure"], h["suffix_tokens"]): h["operating_point"] for h in summary["headline"]}
    drawn = False
    for proc in _procedures(summary):
        if proc in BINARY_PROCEDURES:
            continue
        panels = []
        for group in groups_of(claims.filter(pl.col("procedure") == proc)):
            rows = where(claims, group)
            controls = rows.filter(pl.col("membership") == "control")
            if decontaminated:
                controls = controls.filter(~removed(summary["settings"]["decontaminate"]))
            op = thresholds.get((group["role"], proc, group["suffix_tokens"]))
            panels.append({"title": f"{group['role']}, {proc}, ℓ_s = {group['suffix_tokens']}",
                           "members": rows.filter(pl.col("membership") == "member")["log10_value"].to_numpy(),
                           "controls": controls["log10_value"].to_numpy(),
                           "threshold": None if op is None else op["log10_threshold"]})
        svg = score_figure(panels)
        if svg is not None:
            drawn = True
            blocks.append(Figure(figure_name("scores", proc), svg,
                                 f"`{proc}`: member and control log10 scores; heights are shares of the windows."))
    if not drawn:
        blocks.append(Paragraph("No probabilistic procedure has a positive score to draw."))
    return blocks


def _margins(run: RunTables, summary: dict[str, Any]) -> list[Block]:
    blocks: list[Block] = [
        Heading(2, "Margins", "margins"),
        Paragraph("The margin of a claimed member is log10(score / τ) at the primary α: how many orders of magnitude "
                  "it clears the threshold (extraction paper App. D.5). A margin just above 0 is the weakest evidence "
                  "and the first to go under a tighter α. Binary procedures have no margin."),
    ]
    rows = tuple((*_what(m), str(m["n_claims"]), fixed(m["min"]), fixed(m["p25"]), fixed(m["median"]),
                  fixed(m["p75"]), fixed(m["max"]), *(str(a["count"]) for a in m["at_least"]), str(m["infinite"]))
                 for m in summary["margins"])
    levels = tuple(f"margin ≥ {a['delta']:g}" for a in summary["margins"][0]["at_least"]) if rows else ()
    if rows:
        blocks.append(Table(("role", "procedure", "ℓ_s", "claims", "min", "25%", "median", "75%", "max", *levels,
                             "infinite (τ = 0)"), rows, "margins-table", "Margins of the claimed members."))
    claimed = (pl.col("membership") == "member") & pl.col("claim").fill_null(False)
    claims = run.tables["extraction_claims"].filter(claimed)
    panels = []
    for proc in _procedures(summary):
        if proc in BINARY_PROCEDURES:
            continue
        series = []
        for group in groups_of(claims.filter(pl.col("procedure") == proc)):
            values = where(claims, group)["margin"].drop_nulls().to_numpy().astype(float)
            series.append({"label": f"{group['role']}, ℓ_s = {group['suffix_tokens']}",
                           "values": values[np.isfinite(values)]})
        panels.append({"title": proc, "series": series})
    svg = margin_figure(panels)
    if svg is not None:
        blocks.append(Figure("margins", svg, "Margins of the claimed members per procedure."))
    elif not rows:
        blocks.append(Paragraph("No probabilistic procedure was scored: no margins."))
    return blocks


def _multiple(summary: dict[str, Any]) -> list[Block]:
    s = summary["settings"]
    blocks: list[Block] = [
        Heading(2, "Multiple testing", "multiple-testing"),
        Paragraph("Each claim's guarantee is marginal: one control set reused for m members makes the claims dependent "
                  f"and bounds neither the family-wise error nor the false discovery rate (extraction paper App. C.5). "
                  f"Bonferroni at FWER δ = {s['fwer']:g} tests each member at δ/m, which needs δ/m ≥ 1/(N+1); "
                  f"Benjamini–Hochberg on the conformal p-values bounds the FDR at δ = {s['fdr']:g} (the p-values "
                  "share one control set, which makes them PRDS; atoms make them conservative)."),
    ]
    rows = tuple((*_what(r), str(r["m"]), str(r["n_controls"]), f"{r['per_candidate_alpha']:.3g} vs "
                  f"{r['smallest_level']:.3g}", str(r["bonferroni_max_candidates"]),
                  "yes" if r["bonferroni_feasible"] else "no", str(r["bonferroni_min_controls"]),
                  str(r["bonferroni_rejections"]), str(r["bh_rejections"]), str(r["claims"]))
                 for r in summary["multiple_testing"])
    if rows:
        blocks.append(Table(("role", "procedure", "ℓ_s", "m members", "N", "δ/m vs 1/(N+1)", "most members N supports",
                             "Bonferroni feasible", "controls needed", "Bonferroni rejections", "BH rejections",
                             "claims at α"), rows, "multiple-table", "Candidate-set statements over the members."))
    else:
        blocks.append(Paragraph("No member has a p-value: nothing to test."))
    return blocks


def _paired(summary: dict[str, Any]) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Target vs reference", "paired")]
    paired = summary["paired"]
    if paired is None:
        return blocks + [Paragraph("No reference model: no paired comparison.")]
    blocks.append(Paragraph("Both models' claims on the same members, each at its own calibrated threshold: the "
                            "difference of claim rates with Newcombe's paired interval (method 10). Bold: the "
                            "primary α."))
    rows = tuple((f"`{r['procedure']}`", str(r["suffix_tokens"]), f"**{r['alpha']:g}**" if r["primary"]
                  else f"{r['alpha']:g}", level(r["certified_alpha_target"]), level(r["certified_alpha_reference"]),
                  str(r["n"]), str(r["both"]), str(r["target_only"]), str(r["reference_only"]), str(r["neither"]),
                  f"{pct(r['difference'])} {pct_range(r['low'], r['high'])}") for r in paired)
    if rows:
        blocks.append(Table(("procedure", "ℓ_s", "α", "α_N target", "α_N reference", "members", "both", "target only",
                             "reference only", "neither", "difference [interval]"), rows, "paired-table",
                            "Paired claims, target − reference."))
    else:
        blocks.append(Paragraph("The paired table is empty."))
    return blocks


def _budgets(summary: dict[str, Any]) -> list[Block]:
    s = summary["settings"]
    blocks: list[Block] = [
        Heading(2, "Query budgets", "budgets"),
        Paragraph(f"A window is generated within n queries when 1 − (1 − p)^n ≥ c for its score p (c = "
                  f"{setting_pct(s['budget_confidence'])}, `analyze.budget_confidence`); the smallest such p is "
                  "the minimum probability below. Extractable members are claimed at the primary α **and** generated "
                  "within n (extraction paper §6): memorized is not the same as extractable within a budget."),
    ]
    if not summary["budgets"]:
        return blocks + [Paragraph("The budgets table is empty (no probabilistic procedure).")]
    # the table states the spec's budgets (the stage adds a grid of powers of ten: the figure draws them all)
    chosen = [b for b in summary["budgets"] if any(math.isclose(b["budget"], n, rel_tol=1e-9) for n in s["budgets"])]
    rows = tuple((*_what(b), count(b["budget"]), setting_pct(b["confidence"]), power(b["log10_min_probability"]),
                  rate_cell(b["member_interval"]), rate_cell(b["control_interval"]),
                  rate_cell(b["extractable_interval"])) for b in chosen or summary["budgets"])
    blocks.append(Table(("role", "procedure", "ℓ_s", "budget n", "c", "min probability", "members generated",
                         "controls generated", "extractable members"), rows, "budgets-table",
                        "Generation within the budgets of `analyze.budgets` (summary.json: every budget)."))
    panels = []
    for proc in sorted({b["procedure"] for b in summary["budgets"]}, key=procedure_order):
        keyed: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for b in summary["budgets"]:
            if b["procedure"] == proc:
                keyed.setdefault((b["role"], b["suffix_tokens"]), []).append(b)
        panels.append({"title": proc, "series": [
            {"label": f"{role}, ℓ_s = {length}", "budget": [b["budget"] for b in rows_],
             "members": [b["member_rate"] for b in rows_], "controls": [b["control_rate"] for b in rows_],
             "extractable": [b["extractable_rate"] for b in rows_]} for (role, length), rows_ in keyed.items()]})
    svg = budget_figure(panels)
    if svg is not None:
        blocks.append(Figure("budgets", svg, "Generation rates vs query budget (log scale): members solid, controls "
                                             "dashed, extractable members dotted."))
    return blocks


def _review(summary: dict[str, Any]) -> list[Block]:
    s = summary["settings"]
    blocks: list[Block] = [
        Heading(2, "Contamination review", "review"),
        Paragraph(f"The {s['review']} highest-scoring controls of each procedure (`analyze.review`; controls scoring 0 "
                  "are not listed). A control that reproduces member text is no non-member: check these, and list "
                  "the window or sample ids of verified reused text in `analyze.decontaminate`. Suffixes shown as "
                  "plain text (newlines as ⏎; summary.json has the whole text)."),
    ]
    shown = False
    for r in summary["review"]:
        if not r["controls"]:
            continue
        shown = True
        rows = tuple((str(c["rank"]), f"`{c['window_id']}`", f"`{c['sample_id']}`", fixed(c["log10_value"], 3),
                      f"{c['p_value']:.3g}" if c["p_value"] is not None else DASH,
                      "removed" if c["decontaminated"] else "", plain_text(c["suffix"])) for c in r["controls"])
        blocks.append(Table(("rank", "window", "sample", "log10 score", "p-value", "decontaminated", "suffix"), rows,
                            f"review-{figure_name(r['role'], r['procedure'], str(r['suffix_tokens']))}",
                            f"{r['role']}, `{r['procedure']}`, ℓ_s = {r['suffix_tokens']}: highest-scoring controls."))
    if not shown:
        blocks.append(Paragraph("No control scored above 0."))
    return blocks


def _methods(summary: dict[str, Any]) -> list[Block]:
    counts, s = summary["counts"], summary["settings"]
    w = counts["windows"]
    text = (f"{counts['samples']['members']} member and {counts['samples']['controls']} control samples; "
            f"{w['members']} member and {w['controls']} control windows; {w['samples_without_window']} sample(s) "
            "without a window" + (" (" + "; ".join(f"{e['reason']}: {e['count']}" for e in w["errors"]) + ")"
                                   if w["errors"] else "") + ".")
    rows = tuple((*_what(g), str(g["scored"]), str(g["unscored"]),
                  "; ".join(f"{e['reason']}: {e['count']}" for e in g["errors"]) or DASH) for g in counts["scores"])
    settings = [f"primary level α = {s['alpha_as_written']} ({s['primary_pool']} control pool)",
                "sweep α ∈ {" + ", ".join(f"{a:g}" for a in s["alphas"]) + "}",
                f"confidence {setting_pct(s['confidence'])}; FDR δ = {s['fdr']:g}; FWER δ = {s['fwer']:g}",
                "budgets n ∈ {" + ", ".join(count(b) for b in s["budgets"]) + "} at c = "
                f"{setting_pct(s['budget_confidence'])}",
                "decontaminate: " + (", ".join(f"`{d}`" for d in s["decontaminate"]) or "none"),
                f"contamination review: {s['review']} controls per procedure",
                f"windows cut with {tokenizer_text(summary['procedure'])}"]
    return [Heading(2, "Methods", "methods"), Heading(3, "Data", "methods-data"), Paragraph(text),
            Table(("role", "procedure", "ℓ_s", "scored windows", "unscored", "why unscored"), rows, "scored-table",
                  "Scores per procedure."),
            Heading(3, "Settings", "methods-settings"), Bullets(tuple(settings)),
            *provenance_blocks(summary), Heading(3, "References", "references"), Bullets(REFERENCES)]


def _title(summary: dict[str, Any]) -> list[Block]:
    study = summary["study"]
    models = summary["procedure"]["models"]
    who = " and ".join(f"{m['role']} `{m['model'] or m['server'] or 'unknown'}`" for m in models) or "no model"
    text = f"Extraction audit (population conformal test with matched controls) of {who}."
    if study.get("description"):
        text = f"{study['description']} {text}"
    return [Heading(1, f"calib report: {study.get('name') or 'study'}", "top"), Paragraph(text)]


def extraction_blocks(run: RunTables, summary: dict[str, Any]) -> list[Block]:
    """Every section of the extraction report, in order (docs/report.md, "Extraction report")."""
    primary: dict[str, float | None] = {}
    for h in summary["headline"]:
        op = h["operating_point"]
        value = op["certified_alpha"] if op and op["k"] else None
        primary[h["procedure"]] = value if primary.get(h["procedure"], value) == value else None
    return [*_title(summary), *statement_blocks(summary["procedure"], census=False), *_headline(summary),
            *_sweep(summary, primary), *suffix_sweep_blocks(summary), *_scores(run, summary),
            *_margins(run, summary), *_multiple(summary), *members_vs_controls_blocks(summary), *_paired(summary),
            *_budgets(summary), *sampled_blocks(summary), *_review(summary), *_methods(summary)]
