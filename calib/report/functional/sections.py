"""The report's sections as document blocks: headline, rates, inconclusive samples, proxies (and their agreement).

Every number written here is read from the analysis summary (summary.json); nothing is computed.
The worked examples, the threshold sensitivity, the duplication section and the methods section live in their
own modules.
"""

from __future__ import annotations

from typing import Any

from calib.report.document import Block, Bullets, Figure, Heading, Paragraph, Table
from calib.report.format import DASH, number, pct, rate_cell, rate_text, setting_pct, sim
from calib.report.functional.analysis import Analysis
from calib.report.functional.cost import cost_blocks
from calib.report.functional.counts import nothing_measured
from calib.report.functional.duplication import duplication_blocks
from calib.report.functional.figures import agreement_figure, rates_figure, roc_figure
from calib.report.functional.judges_section import judges_blocks
from calib.report.functional.rates import RATE_LABELS
from calib.report.functional.section_examples import examples_section
from calib.report.functional.section_methods import methods_section
from calib.report.functional.section_sensitivity import sensitivity_section

__all__ = ["report_blocks"]


def _operating_point(op: dict[str, Any]) -> str:
    return (f"Operating point: a completion is textually similar to x when SIM_text = `{op['text_metric']}` ≥ "
            f"τ_text = {number(op['tau_text'])}, and functionally similar when SIM_func (the share of x's valid "
            f"input states on which it gives x's output state) ≥ τ_func = {number(op['tau_func'])}. Every "
            f"interval is a two-sided {setting_pct(op['confidence'])} Clopper–Pearson interval.")


def _headline(summary: dict[str, Any]) -> list[Block]:
    op, head, counts = summary["operating_point"], summary["headline"], summary["counts"]
    metric, tt, tf = f"`{op['text_metric']}`", number(op["tau_text"]), number(op["tau_func"])
    textual = rate_text(head["textually_memorized"], of="scored samples")
    functional = rate_text(head["functionally_memorized"], of="conclusive samples")
    not_functional = rate_text(head["text_flags_not_functional"], of="conclusive textual flags")
    items = [
        f"**Textual memorization** (counterfactual, near-verbatim): {textual}"
        f" — the target's completion has {metric} ≥ {tt}, the reference's does not.",
        f"**Functional memorization** (counterfactual): {functional} — "
        f"the target's completion is functionally similar (SIM_func ≥ {tf}) with {metric} < {tt}, the reference's "
        "is not functionally similar.",
        "**Missed by textual auditing**: "
        f"{rate_text(head['func_flags_missed_by_text'], of='target-only functional flags')} have {metric} < {tt}: "
        "a textual audit at this threshold would not flag them.",
        f"**Textual flags not functional**: {not_functional}"
        f" have SIM_func < {tf}.",
    ]
    if head["controls"] is not None:
        items.append("**Controls** (never trained on, so target-only rates on them estimate the false-positive level):"
                     f" textual {rate_text(head['controls']['textually_memorized'], of='scored controls')}; functional "
                     f"{rate_text(head['controls']['functionally_memorized'], of='conclusive controls')}.")
    items += _membership_items(summary)
    items.append(f"**Samples**: {counts['samples']} audited; {counts['conclusive']} conclusive; "
                 f"{counts['inconclusive']} inconclusive (the execution of x did not meet the validity criteria: left "
                 f"out of functional counts, never counted as non-matches); {counts['unscored']} unscored (a completion"
                 " is missing or has no text score: left out of every rate).")
    blocks: list[Block] = [Heading(2, "Headline", "headline")]
    empty = nothing_measured(summary)
    if empty is not None:
        blocks.append(Paragraph(f"**Nothing was measured**: {empty}. Every rate below is undefined; fix the cause "
                                "and run the study again (finished work is kept)."))
    blocks += [Paragraph(_operating_point(op)), Bullets(tuple(items))]
    consistency = summary["consistency"]
    if consistency["disagreements"]:
        ids = ", ".join(f"`{s}`" for s in consistency["sample_ids"])
        blocks.append(Paragraph(f"**Warning**: the claims table disagrees with the verdicts recomputed from the "
                                f"similarities and executions tables for {consistency['disagreements']} sample(s) "
                                f"(first: {ids}); this report uses the recomputed verdicts."))
    return blocks


_COMPARED_LABELS = {"reproduced": "near-verbatim reproduction by the target",
                    "textual": "textual memorization (counterfactual)",
                    "functional": "functional memorization (counterfactual)"}


def _difference(d: dict[str, Any]) -> str:
    return (f"{pct(d['k1'] / d['n1'])} of members ({d['k1']}/{d['n1']}) against {pct(d['k2'] / d['n2'])} of "
            f"controls ({d['k2']}/{d['n2']}): difference {pct(d['estimate'])}, {setting_pct(d['confidence'])} "
            f"interval {pct(d['low'])} to {pct(d['high'])}, Fisher exact p = {d['p_value']:.3g}")


def _membership_items(summary: dict[str, Any]) -> list[str]:
    """Members against controls (docs/report.md ``headline.members_vs_controls``), and why a rule that shows the
    answer yields no claim."""
    compared = summary["headline"].get("members_vs_controls")
    if compared is None:
        return []
    parts = [f"{label}: {_difference(compared[key])}" for key, label in _COMPARED_LABELS.items()
             if compared.get(key) is not None]
    if not parts:
        return []
    verdict = ("members are memorized beyond what controls show (the interval of a counterfactual difference lies "
               "above 0)" if compared["claim"] else
               "no memorization is claimed: no counterfactual difference has an interval above 0")
    items = ["**Members against controls** (controls were never trained on, so they measure what the prompts and "
             "the task make likely; only the difference is evidence): " + "; ".join(parts) + f". Calibrated claim: "
             f"{verdict}."]
    rule = (summary["methods"].get("decoding") or {}).get("rule")
    reproduced = compared.get("reproduced")
    if isinstance(rule, dict) and rule.get("shows_suffix") and reproduced is not None:
        equal = reproduced["p_value"] >= 1 - reproduced["confidence"]
        items.append(f"**Why the rule `{rule.get('name')}` decides nothing**: it shows the model the code it should "
                     "produce, so a model can reproduce any function, trained on or not, by copying. "
                     + ("Members and controls were reproduced at statistically equal rates "
                        f"(p = {reproduced['p_value']:.3g}), so reproduction under this rule is not evidence of "
                        "training and the calibrated claim rests on the difference alone."
                        if equal else
                        f"Members and controls were reproduced at different rates (p = {reproduced['p_value']:.3g}): "
                        "the difference, not the reproduction, carries any claim."))
    return items


def _rates(analysis: Analysis) -> list[Block]:
    summary = analysis.summary
    groups = summary["groups"]
    blocks: list[Block] = [
        Heading(2, "Rates", "rates"),
        Paragraph("As in Figure 2 of the functional-memorization paper: the share of samples each model completes "
                  "near-verbatim and functionally similarly, the counterfactual share (target only), and the part "
                  "of it textual similarity misses. Textual rates are over scored samples, functional rates over "
                  "conclusive samples. Controls are never trained on: their target-only rates estimate the "
                  "false-positive level of the audit."),
    ]
    plotted = [g for g in groups if g["kind"] is None]
    svg = rates_figure(plotted)
    if svg is not None:
        blocks.append(Figure("rates", svg, "Rates per group; whiskers: Clopper–Pearson intervals."))
    header = ("group", "scored", "conclusive", *RATE_LABELS.values())
    rows = tuple((g["label"], str(g["n_scored"]), str(g["n_conclusive"]),
                  *(rate_cell(g["rates"][k]) for k in RATE_LABELS)) for g in groups)
    blocks.append(Table(header, rows, "rates-table", "Rates: estimate [interval] k/n."))
    flags = tuple((g["label"], *(_cells(g["tables"], kind) for kind in ("text", "func"))) for g in groups)
    blocks.append(Table(("group", "text flags: both / target only / reference only / neither",
                         "functional flags: both / target only / reference only / neither"), flags, "flags-table",
                        "Target/reference flag counts (functional: conclusive samples)."))
    overlaps = tuple((g["label"], rate_cell(g["overlaps"]["func_flags_missed_by_text"]),
                      rate_cell(g["overlaps"]["text_flags_not_functional"])) for g in groups)
    blocks.append(Table(("group", "target-only functional flags with low text overlap",
                         "conclusive textual flags not functionally similar"), overlaps, "overlaps-table",
                        "Overlap of the two audits (paper §5.2)."))
    return blocks


def _cells(tables: dict[str, Any] | None, kind: str) -> str:
    if tables is None:
        return DASH
    t = tables[kind]
    return f"{t['n11']} / {t['n10']} / {t['n01']} / {t['n00']} (n = {t['n']})"


#: The most rows a table of reasons shows (summary.json keeps them all).
MAX_REASONS = 10


def _capped(rows: list[tuple[str, ...]], total: int) -> tuple[tuple[str, ...], ...]:
    if len(rows) <= MAX_REASONS:
        return tuple(rows)
    rest = len(rows) - MAX_REASONS
    filler = ("",) * (len(rows[0]) - 2)
    return (*rows[:MAX_REASONS], (f"{rest} other reasons (summary.json lists them)", *filler,
                                  str(total - sum(int(r[-1]) for r in rows[:MAX_REASONS]))))


def _tally_table(title: str, tally: list[dict[str, Any]], what: str, anchor: str) -> list[Block]:
    if not tally:
        return [Paragraph(f"{title}: none.")]
    rows = [(t["reason"], str(t["count"])) for t in tally]
    return [Table(("reason", what), _capped(rows, sum(t["count"] for t in tally)), anchor, title)]


def _nested_table(tallies: dict[str, list[dict[str, Any]]], header: tuple[str, ...], anchor: str, title: str, *,
                  code: bool) -> Block:
    rows: list[tuple[str, ...]] = []
    for key, tally in tallies.items():
        shown = [(t["reason"], str(t["count"])) for t in tally]
        name = f"`{key}`" if code else key
        rows += [(name, *row) for row in _capped(shown, sum(t["count"] for t in tally))]
    return Table(header, tuple(rows), anchor, title) if rows else Paragraph(f"{title}: none.")


def _reasons(summary: dict[str, Any]) -> list[Block]:
    reasons = summary["reasons"]
    blocks: list[Block] = [
        Heading(2, "Inconclusive and unscored samples", "reasons"),
        Paragraph("A sample is inconclusive when the execution of x gave fewer than N_in valid input states, line "
                  "coverage below C or fewer than N_out distinct output states; unscored when a completion is "
                  "missing or the text metric could not score it. Neither is ever counted as a non-match."),
    ]
    blocks += _tally_table("Inconclusive samples per validity criterion failed (a sample may fail several)",
                           reasons["inconclusive_criteria"], "samples", "criteria-table")
    blocks += _tally_table("Inconclusive samples, by recorded reason", reasons["inconclusive"], "samples",
                           "inconclusive-table")
    blocks += _tally_table("Unscored samples", reasons["unscored"], "samples", "unscored-table")
    blocks.append(_nested_table(reasons["generation_errors"], ("role", "error", "generations"),
                                "generation-errors-table", "Generation errors", code=False))
    blocks.append(_nested_table(reasons["similarity_failures"], ("metric", "why no value", "rows"),
                                "similarity-failures-table",
                                "Similarities without a value (e.g. unparsable judge replies)", code=True))
    return blocks


def _tpr_cell(point: dict[str, Any]) -> str:
    return f"{sim(point['tpr'])} (FPR {sim(point['fpr'])})"


def _proxy_table(records: list[dict[str, Any]], levels: list[float], anchor: str, title: str) -> Block:
    header = ("metric", "pairs used", "positive", "negative", "Pearson r", "ROC AUC",
              *(f"TPR at FPR ≤ {number(level)}" for level in levels), "note")
    rows = []
    for rec in records:
        points = rec["operating_points"] or [None] * len(levels)
        notes = [rec["note"]] if rec["note"] else []
        if rec["n_missing"]:
            notes.append(f"{rec['n_missing']} pair(s) without a value left out")
        rows.append((f"`{rec['metric']}`", str(rec["n"]), str(rec["n_positive"]), str(rec["n_negative"]),
                     sim(rec["pearson_r"]), sim(rec["auc"]), *(DASH if p is None else _tpr_cell(p) for p in points),
                     "; ".join(notes)))
    return Table(header, tuple(rows), anchor, title) if rows else Paragraph("No similarity metric was recorded.")


def _agreement(proxies: dict[str, Any]) -> list[Block]:
    agreement = proxies["agreement"]
    names = agreement["variables"]
    if len(names) < 2:
        return []
    text = (f"Agreement of the metrics (Figure 3(a) of the paper): Pearson's r (the paper's) / Spearman's ρ between "
            f"every similarity metric and SIM_func over the {agreement['n_pairs']} conclusive pairs (both models), "
            "each cell over the pairs where both have a value; – where fewer than 3 pairs remain or a variable is "
            "constant.")
    rows = tuple((f"`{a}`", *(f"{sim(agreement['pearson'][i][j])} / {sim(agreement['spearman'][i][j])}"
                              for j in range(len(names)))) for i, a in enumerate(names))
    blocks: list[Block] = [Paragraph(text), Table(("", *(f"`{b}`" for b in names)), rows, "agreement-table",
                                                  "Correlations between the metrics: Pearson r / Spearman ρ.")]
    svg = agreement_figure(names, agreement["pearson"])
    if svg is not None:
        blocks.append(Figure("agreement", svg, "Pearson's r between the metrics and SIM_func."))
    return blocks


def _proxies(analysis: Analysis) -> list[Block]:
    proxies = analysis.summary["proxies"]
    levels = proxies["fpr_levels"]
    target = proxies["target_only"]
    blocks: list[Block] = [
        Heading(2, "Proxy metrics", "proxies"),
        Paragraph(f"As in §5.2 and Figure 3 of the functional-memorization paper: each similarity metric is scored "
                  f"against the execution label SIM_func ≥ τ_func = {number(proxies['tau_func'])} over the "
                  f"{proxies['n_pairs']} conclusive (sample, completion) pairs of both models "
                  f"({proxies['n_positive']} positive, {proxies['n_negative']} negative), and over the "
                  f"{target['n_pairs']} pairs of the target's completions only, as the paper evaluates "
                  f"({target['n_positive']} positive, {target['n_negative']} negative). Pearson r is with SIM_func;"
                  " ROC AUC counts ties one half; TPR at FPR ≤ α is the best fixed threshold's (its FPR in "
                  "parentheses)."),
        _proxy_table(proxies["metrics"], levels, "proxy-table",
                     "Proxy metrics against execution (target and reference completions pooled)."),
        _proxy_table(target["metrics"], levels, "proxy-target-table",
                     "Proxy metrics against execution (target completions only)."),
    ]
    svg = roc_figure(analysis.curves, levels)
    if svg is not None:
        blocks.append(Figure("roc", svg, "ROC curves of the proxy metrics on log-log axes (both models' completions);"
                                         " dotted: the FPR levels."))
    else:
        blocks.append(Paragraph("No ROC figure: no metric could be evaluated (see the notes above)."))
    return blocks + _agreement(proxies) + judges_blocks(analysis.summary["proxies"])


def _title(summary: dict[str, Any]) -> list[Block]:
    study = summary["study"]
    models = {m["role"]: m for m in summary["methods"]["models"]}
    who = " vs ".join(f"{role} `{models[role]['model'] or models[role]['server'] or 'unknown'}`"
                      for role in ("target", "reference"))
    text = f"Functional memorization audit ({who})."
    if study.get("description"):
        text = f"{study['description']} {text}"
    return [Heading(1, f"calib report: {study.get('name') or 'study'}", "top"), Paragraph(text)]


def report_blocks(analysis: Analysis) -> list[Block]:
    """Every section of the report, in order (docs/report.md lists them)."""
    summary = analysis.summary
    return [*_title(summary), *_headline(summary), *_rates(analysis), *sensitivity_section(summary), *_reasons(summary),
            *examples_section(analysis), *_proxies(analysis),
            *duplication_blocks(summary, analysis.duplication), *cost_blocks(summary), *methods_section(summary)]
