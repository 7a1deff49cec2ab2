"""The blocks of the probes report (scale-aware diagnostics), from the summary of :mod:`calib.report.probes.summary`.

Sections: Procedure, pass@k, Budget and truncation, Applicability, Model comparisons (two models or more),
Opcode divergence, Test outcomes, CoDeC (when the study ran it), Methods. Percentages have one decimal; a difference is
in percentage points (pp) with its paired bootstrap interval and the relative change in %.
"""

from __future__ import annotations

import math
from typing import Any

from calib.report.document import Block, Bullets, Figure, Heading, Paragraph, Table
from calib.report.format import DASH, fixed, number, plain_text, setting_pct
from calib.report.probes.budget import budget_blocks
from calib.report.probes.empty import nothing_measured
from calib.report.probes.figures import codec_figure, entropy_figure, jsd_figure, pass_at_1_figure
from calib.report.procedure import provenance_blocks, rule_sentence

__all__ = ["REFERENCES", "probes_blocks"]

#: The works the probes report cites.
REFERENCES = (
    "P. K. Rajput et al. Memorization Diagnostics for Code LLMs Should be Scale-Aware. arXiv:2608.12771: "
    "§5 (conditions, generation, CoDeC, isomorphisms, opcode entropy), §6 (Tables 3–4, Figures 4–6), §7 (Tables 5–6).",
    "M. Chen et al. (2021). Evaluating large language models trained on code. arXiv:2107.03374, eq. (1) (unbiased "
    "pass@k).",
    "B. Efron and R. J. Tibshirani (1993). An Introduction to the Bootstrap, ch. 13 (percentile intervals).",
    "T. Y. Chen, S. C. Cheung and S. M. Yiu (1998). Metamorphic testing: a new approach for generating next test "
    "cases. HKUST-CS98-01.",
    "A. E. Djiré et al. (2025). Memorization or interpolation? Detecting LLM memorization through input perturbation "
    "analysis. arXiv:2505.03019 (synonym fuzzing).",
    "J. Lin (1991). Divergence measures based on the Shannon entropy. IEEE Trans. Inf. Theory 37(1):145–151.",
    "M. Zawalski et al. (2025). Detecting data contamination in LLMs via in-context learning. arXiv:2510.27055 "
    "(CoDeC).",
    "C. J. Clopper and E. S. Pearson (1934). The use of confidence or fiducial limits illustrated in the case of the "
    "binomial. Biometrika 26(4):404–413.",
)

#: The paper's reading of an opcode shift next to a pass@k drop (§6.3.2) and of the controls (§6.1, §7.2).
INTERPRETATION = (
    "A pass@k drop under Iso with **near-zero** opcode JSD from the original means the model kept the algorithm and "
    "mis-serialised the encoded interface (representational load, a compliance failure); a **large** JSD means it "
    "abandoned its strategy (a competence failure).",
    "A pass@1 drop on its own is **not** evidence of memorization: the same drop appears when a model loses the "
    "algorithm and when it keeps it but fails the interface (§6.3).",
    "Dead code matches the token increase of the Iso contract with the task unchanged, so its drop bounds the share "
    "of any Iso drop that prompt length alone explains (§7.2).",
    "Synonym fuzzing saturates at scale: small drops for large models say little about memorization (§6.1).",
)


def _ok(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _pc(value: Any) -> str:
    """A share as a percentage with one decimal, no sign (``58.1``)."""
    return f"{100 * value:.1f}" if _ok(value) else DASH


def _pp(value: Any) -> str:
    """A difference of shares in percentage points with its sign (``-22.7``)."""
    return f"{100 * value:+.1f}" if _ok(value) else DASH


def _interval(cell: dict[str, Any] | None) -> str:
    if not cell or not _ok(cell.get("estimate")):
        return DASH
    return f"{_pc(cell['estimate'])} [{_pc(cell['low'])}, {_pc(cell['high'])}]"


def _change(cell: dict[str, Any] | None) -> str:
    if not cell or not _ok(cell.get("difference")):
        return DASH
    rel = cell.get("relative_change")
    relative = f" ({100 * rel:+.1f}%)" if _ok(rel) else " (relative change undefined: original 0)"
    return f"{_pp(cell['difference'])} [{_pp(cell['difference_low'])}, {_pp(cell['difference_high'])}]{relative}"


def _names(summary: dict[str, Any]) -> dict[str, str]:
    return {p["label"]: p["name"] for p in summary["procedure"]["labels"]}


def _models(summary: dict[str, Any]) -> list[str]:
    return [m["server"] for m in summary["procedure"]["models"]]


#: The tiers' letters, as the scale-aware paper's tables label models (F = frontier, M = mid-tier, S = small).
TIER_LETTERS = {"frontier": "F", "mid": "M", "small": "S"}


def _scale(model: dict[str, Any]) -> str:
    """``; 7 B parameters, tier small`` for a model the spec describes (models.parameters, models.tiers)."""
    parts = []
    if model.get("parameters_billions") is not None:
        parts.append(f"{model['parameters_billions']:g} B parameters")
    if model.get("tier"):
        parts.append(f"tier {model['tier']}")
    return "; " + ", ".join(parts) if parts else ""


def _label(summary: dict[str, Any], server: str) -> str:
    """A model's row label: its server name, with its tier's letter as the paper writes it (``big (F)``)."""
    tier = next((m.get("tier") for m in summary["procedure"]["models"] if m["server"] == server), None)
    return f"{server} ({TIER_LETTERS[tier]})" if tier in TIER_LETTERS else server


def _procedure(summary: dict[str, Any]) -> list[Block]:
    s, proc = summary["settings"], summary["procedure"]
    tasks = proc["tasks"]
    left = ", ".join(f"{x['count']} {x['status'] or 'unknown status'}" for x in tasks["left_out_statuses"])
    task_text = (f"**Tasks**: `{tasks['source']}`" + (f" (first {tasks['limit']})" if tasks["limit"] else "")
                 + f": {tasks['total']} tasks, {tasks['left_out']} left out because their reference solution failed "
                 f"its own tests" + (f" ({left})" if left else "") + f"; {tasks['used']} used.")
    models = "; ".join(f"{i + 1}. `{m['server']}` (model `{m['model'] or DASH}`, {m['kind'] or DASH} server"
                       + _scale(m)
                       + (f"; reports `{', '.join(m['models_in_generations'])}`" if m["models_in_generations"] else "")
                       + ")" for i, m in enumerate(proc["models"])) or DASH
    ks = ", ".join(str(k) for k in summary["ks"] or s["k"])
    items = [
        task_text,
        f"**Models** (the scale axis, smallest first as `models.panel` lists them): {models}.",
        f"**Generation**: n = {number(s['n'])} completions per task and condition at temperature "
        f"{number(s['temperature'])} (at most {number(s['max_tokens'])} tokens, `{s['style']}` prompts); each "
        f"program is run against the condition's tests in the sandbox ({number(s['test_timeout'])} s per test) and "
        "passes when every test passes." + rule_sentence(
            (summary.get("methods") or {}).get("generation"), models="The panel's models",
            each="every task, condition and model", baseline="a change between conditions or models is not the rule's"
            " doing"),
        f"**pass@k** (k = {ks}): the unbiased estimator 1 − C(n − c, k)/C(n, k) per problem with c passing of n "
        "generations, averaged over problems (Chen et al. 2021, eq. 1). Each condition is scored on the tasks it "
        "applies to, and compared with the original **on the same tasks**.",
        f"**Intervals**: percentile bootstrap over problems, {number(s['bootstrap'])} resamples, "
        f"{setting_pct(s['confidence'])} confidence; a difference from the original (or between two models) resamples "
        "the same problems for both, so its interval is paired.",
        "**Opcode divergence**: every program that compiles is disassembled (Python `dis`); opcode counts are pooled "
        "over a problem's generations per model and condition; H is the entropy of that profile in bits (§5.5) and "
        "the JSD (bits, 0 to 1) compares it with the original's profile of the same model and problem, over all "
        "and over passing generations.",
        "**CoDeC**: " + ("each model's contamination score on datasets known seen or unseen (see CoDeC)."
                         if summary["codec"] else "not run (no `[probes.codec]` in the spec, or no scores)."),
    ]
    rows = tuple((f"`{p['label']}`", p["name"], p["description"]) for p in proc["labels"])
    return [Heading(2, "Procedure", "procedure"), Bullets(tuple(items)),
            Table(("label", "condition", "what it does"), rows, "conditions-table",
                  "The conditions: every one keeps the algorithm of the task unchanged."),
            Paragraph("**Reading the results** (paper §6.3.2, §7.2):"), Bullets(INTERPRETATION)]


def _problems_row(summary: dict[str, Any], labels: list[str], k: int) -> tuple[str, ...]:
    cells = []
    for label in labels:
        found = sorted({r["n_problems"] for r in summary["pass_at_k"] if r["label"] == label and r["k"] == k
                        and r["n_problems"] is not None})
        cells.append(DASH if not found else str(found[0]) if len(found) == 1 else f"{found[0]}–{found[-1]}")
    return ("problems", *cells)


def _pass_tables(summary: dict[str, Any], k: int) -> list[Block]:
    names, models, labels = _names(summary), _models(summary), summary["labels"]
    cells = {(r["model"], r["label"]): r for r in summary["pass_at_k"] if r["k"] == k}
    shown = [lab for lab in labels if any((m, lab) in cells for m in models)]
    if not shown:
        return [Paragraph(f"No pass@{k} in the pass_at_k table.")]
    head = ("model", *(names[lab] for lab in shown))
    rows = tuple((_label(summary, m), *(_interval(cells.get((m, lab))) for lab in shown)) for m in models)
    changed = [lab for lab in shown if lab != "original"]
    blocks: list[Block] = [Table(head, (*rows, _problems_row(summary, shown, k)), f"pass-at-{k}-table",
                                 f"pass@{k} (%) per model and condition: estimate [bootstrap interval]; the last row "
                                 "is the number of problems each condition is scored on. A letter after a model is "
                                 "its tier (F frontier, M mid-tier, S small; models.tiers).")]
    if changed:
        change_rows = tuple((_label(summary, m), *(_change(cells.get((m, lab))) for lab in changed)) for m in models)
        blocks.append(Table(("model", *(names[lab] for lab in changed)), change_rows, f"pass-at-{k}-change-table",
                            f"Change of pass@{k} from the original on the same problems: difference in percentage "
                            "points [paired bootstrap interval] (relative change)."))
    return blocks


def _headline(summary: dict[str, Any]) -> list[Block]:
    empty = nothing_measured(summary)
    blocks: list[Block] = [Heading(2, "pass@k", "pass-at-k")]
    if empty is not None:
        blocks.append(Paragraph(f"**Nothing was measured**: {empty}. Every pass@k below is undefined; fix the cause "
                                "and run the study again (finished work is kept)."))
    blocks += _pass_tables(summary, 1)
    used = summary["procedure"]["tasks"]["used"]
    fewer = [f"{_names(summary)[a['label']]} applies to {a['applicable']} of {a['prompts']} tasks"
             for a in summary["applicability"] if a["applicable"] < a["prompts"]]
    if fewer:
        blocks.append(Paragraph("Not every condition applies to every task (the isomorphisms need integers in the "
                                f"tests that T can rewrite; see Applicability): {'; '.join(fewer)}. Their pass@k and "
                                f"change are over those tasks only, of the {used} used."))
    labels, names = summary["labels"], _names(summary)
    svg = pass_at_1_figure(labels, [names[lab] for lab in labels],
                           [{"model": m, "cells": summary["pass_at_1"].get(m, {})} for m in _models(summary)])
    if svg is not None:
        blocks.append(Figure("pass-at-1", svg, "pass@1 per condition and model with its bootstrap interval (%)."))
    for k in summary["ks"]:
        if k != 1:
            blocks += [Heading(3, f"pass@{k}", f"pass-at-{k}"), *_pass_tables(summary, k)]
    if not summary["model_pairs"]:
        models = _models(summary)
        blocks.append(Paragraph(f"One model in the panel (`{models[0] if models else DASH}`): no comparison between "
                                "models." if len(models) < 2 else "The run has no model_pairs rows: no comparison "
                                "between models."))
    if summary["consistency"]:
        blocks.append(Paragraph("**Warning**: the tables disagree with each other: "
                                + "; ".join(summary["consistency"][:5]) + ". Re-run `calib study SPEC`."))
    return blocks


def _applicability(summary: dict[str, Any]) -> list[Block]:
    names = _names(summary)
    rows = tuple((names[a["label"]], str(a["applicable"]), str(a["not_applicable"]),
                  "; ".join(f"{plain_text(r['reason'], 80)} ({r['count']})" for r in a["reasons"][:3]) or DASH,
                  f"{a['reference_passed']} passed, {a['reference_failed']} failed"
                  + (f", {a['reference_unknown']} not run" if a["reference_unknown"] else ""),
                  str(a.get("original_passes", 0)) if ":" in a["label"] else DASH,
                  fixed(a["mean_prompt_tokens"], 1), fixed(a["mean_added_tokens"], 1))
                 for a in summary["applicability"])
    blocks: list[Block] = [
        Heading(2, "Applicability", "applicability"),
        Paragraph("Per condition: the tasks it could be built for, the most common reasons it could not, and the "
                  "proof by test of the rewrite: the condition's known-correct solution (the reference, through T "
                  "for the isomorphisms) run against the condition's tests. Under an isomorphism the untransformed "
                  "reference is run too: where it passes, T commutes with the task on those tests, and a pass there "
                  "cannot show that a model followed the contract. Added tokens are the prompt's tokens beyond the "
                  "original prompt's (dead code is matched to the Iso contract's)."),
        Table(("condition", "applicable", "not applicable", "most common reasons", "known-correct solution",
               "untransformed reference passes", "mean prompt tokens", "mean added tokens"), rows,
              "applicability-table",
              "Applicability of each condition (prompts table)."),
    ]
    failures = summary["reference_failures"]
    if failures:
        listed = ", ".join(f"{names.get(f['label'], f['label'])} `{f['task_id']}`" for f in failures[:10])
        more = f" and {len(failures) - 10} more (summary.json lists them)" if len(failures) > 10 else ""
        blocks.append(Paragraph(f"**Bug**: {len(failures)} prompt(s) whose known-correct solution fails the "
                                f"condition's own tests: {listed}{more}. The rewrite of these tasks is wrong, not the "
                                "models; their pass@k cannot be read. Report it with the run directory."))
    else:
        blocks.append(Paragraph("Every applicable prompt's known-correct solution that was run passes its tests."))
    return blocks


def _pairs(summary: dict[str, Any]) -> list[Block]:
    if not summary["model_pairs"]:
        return []
    names = _names(summary)
    rows = tuple((names.get(r["label"], r["label"]), str(r["k"]), f"`{r['model_a']}` → `{r['model_b']}`",
                  number(r["n_problems"]), _pc(r["estimate_a"]), _pc(r["estimate_b"]),
                  f"{_pp(r['difference'])} [{_pp(r['low'])}, {_pp(r['high'])}]") for r in summary["model_pairs"])
    return [Heading(2, "Model comparisons", "model-comparisons"),
            Paragraph("Consecutive models of the panel on the same problems: pass@k of the larger minus the smaller, "
                      "in percentage points, with the paired bootstrap interval."),
            Table(("condition", "k", "models", "problems", "pass@k a (%)", "pass@k b (%)", "difference (pp)"), rows,
                  "model-pairs-table", "Paired differences between models.")]


def _opcodes(summary: dict[str, Any], values: dict[str, Any]) -> list[Block]:
    names, models, labels = _names(summary), _models(summary), summary["labels"]
    def row(r: dict[str, Any]) -> tuple[str, ...]:
        head = (f"`{r['model']}`", names[r["label"]], str(r["problems"]), f"{r['programs']} ({r['passing']})")
        if r["label"] == "original":  # the reference profile: no divergence from itself, no change
            return (*head, DASH, DASH, fixed(r["entropy_median"], 2), DASH)
        return (*head, f"{fixed(r['jsd_median'], 3)} / {fixed(r['jsd_mean'], 3)} ({r['jsd_problems']})",
                f"{fixed(r['passing_jsd_median'], 3)} / {fixed(r['passing_jsd_mean'], 3)} "
                f"({r['passing_jsd_problems']})", fixed(r["entropy_median"], 2), _pp(r["pass_at_1_difference"]))

    rows = tuple(row(r) for r in summary["opcodes"])
    blocks: list[Block] = [
        Heading(2, "Opcode divergence", "opcodes"),
        Paragraph("Per model and condition: the per-problem JSD of the pooled opcode profile from the original's "
                  "(median / mean over problems, and how many problems have one), over all generations and over "
                  "passing generations only; the median opcode entropy; and the pass@1 change beside it. Read a "
                  "pass@1 drop with a near-zero JSD as a kept algorithm behind a mis-serialised interface, a large "
                  "JSD as an abandoned strategy."),
        Table(("model", "condition", "problems", "programs (passing)", "JSD all: median / mean (problems)",
               "JSD passing: median / mean (problems)", "entropy median (bits)", "Δ pass@1 (pp)"), rows,
              "opcodes-table", "Opcode divergence from the original and opcode entropy (opcodes table).")
        if rows else Paragraph("The opcodes table has no rows."),
    ]
    others = [lab for lab in labels if lab != "original"]
    jsd = jsd_figure([{"title": m, "groups": [{"name": names[lab], "all": values[m][lab]["jsd"],
                                               "passing": values[m][lab]["passing_jsd"]}
                                              for lab in others if lab in values.get(m, {})]}
                      for m in models if m in values])
    if jsd is not None:
        blocks.append(Figure("jsd", jsd, "Per-problem JSD (bits) of each condition's opcode profile from the "
                                         "original's, one panel per model: all and passing generations."))
    entropy = entropy_figure([{"title": m, "series": [{"name": names[lab], "values": values[m][lab]["entropy"]}
                                                      for lab in labels if lab in values.get(m, {})]}
                              for m in models if m in values])
    if entropy is not None:
        blocks.append(Figure("entropy", entropy, "Opcode entropy of each problem's pooled profile per condition, one "
                                                 "panel per model (the original in black)."))
    return blocks


def _outcomes(summary: dict[str, Any]) -> list[Block]:
    names = _names(summary)
    statuses = list(dict.fromkeys(s["status"] for r in summary["outcomes"] for s in r["statuses"]))
    rows = tuple((f"`{r['model']}`", names[r["label"]], str(r["generations"]), str(r["passed"]),
                  *(str(next((s["count"] for s in r["statuses"] if s["status"] == st), 0)) for st in statuses))
                 for r in summary["outcomes"])
    blocks: list[Block] = [
        Heading(2, "Test outcomes", "outcomes"),
        Paragraph("Per model and condition, how each generation's program fared against the tests: `ok` ran every "
                  "test (passed or not), `no_program` means no code could be taken from the completion, the other "
                  "statuses are the sandbox's (syntax error, an exception at import, a timeout, a crash)."),
        Table(("model", "condition", "generations", "passed", *statuses), rows, "outcomes-table",
              "Test outcomes (test_results table).") if rows else Paragraph("The test_results table has no rows."),
    ]
    errs = [(f"`{e['model']}`", str(e["generations"]), str(e["with_error"]),
             "; ".join(f"{plain_text(x['error'], 100)} ({x['count']})" for x in e["errors"]) or DASH)
            for e in summary["generation_errors"]]
    if any(e["with_error"] for e in summary["generation_errors"]):
        blocks.append(Table(("model", "generations", "without a program", "most common reasons"), tuple(errs),
                            "generation-errors-table", "Generations without a program (probe_generations table)."))
    return blocks


def _codec(summary: dict[str, Any]) -> list[Block]:
    codec = summary["codec"]
    if codec is None:
        return []
    rows = tuple((f"`{r['model']}`", f"`{r['dataset']}`", "seen" if r["seen"] else "unseen", number(r["n"]),
                  number(r["decreased"]), f"{_pc(r['score'])} [{_pc(r['low'])}, {_pc(r['high'])}]",
                  fixed(r["mean_delta"], 4)) for r in codec["scores"])
    models = tuple((f"`{m['model']}`", _pc(m["seen_mean"]), _pc(m["unseen_mean"]), _pp(m["gap"]), _pc(m["auc"]))
                   for m in codec["models"])
    blocks: list[Block] = [
        Heading(2, "CoDeC", "codec"),
        Paragraph(f"Each sample of a dataset is scored alone and after {codec['n_context']} other samples of the same "
                  "dataset (Zawalski et al. 2025); the contamination score is the share of samples whose mean "
                  "per-token log-likelihood falls with that context, with its Clopper–Pearson interval. Seen datasets "
                  "should score high, unseen ones low; the AUC (ties count one half) is how well a model's scores "
                  "separate the seen datasets from the unseen."),
        Table(("model", "dataset", "seen", "samples", "decreased", "score (%)", "mean Δ log-likelihood"), rows,
              "codec-table", "CoDeC score per model and dataset."),
        Table(("model", "seen mean (%)", "unseen mean (%)", "gap (pp)", "AUC (%)"), models, "codec-models-table",
              "Seen and unseen mean scores and the AUC per model (paper Table 4)."),
        Paragraph("**Caveat** (paper §6.2): the seen/unseen gap shrinks with scale, from 58 points on Pythia-12B to "
                  "5.5 on Llama-3.1-405B (AUC from 100% to 75%): for large models a low score or a small gap is weak "
                  "evidence either way, and seen labels are often probable rather than certain."),
    ]
    svg = codec_figure(_models(summary), codec["scores"])
    if svg is not None:
        blocks.append(Figure("codec", svg, "CoDeC contamination score per model and dataset with its Clopper–Pearson "
                                           "interval: seen (circles) and unseen (squares) datasets."))
    if codec["errors"]:
        failed = "; ".join(f"`{e['model']}` `{e['dataset']}`: {e['count']}" for e in codec["errors"])
        blocks.append(Paragraph(f"Samples whose scoring failed (left out of the scores): {failed}."))
    return blocks


def _methods(summary: dict[str, Any]) -> list[Block]:
    s, c = summary["settings"], summary["counts"]
    b = s["bijection"]
    settings = [f"conditions: {', '.join(f'`{x}`' for x in s['conditions']) or DASH}; families: "
                f"{', '.join(f'`{x}`' for x in s['families']) or DASH}",
                f"bijections: affine a = {b['affine_a']}, b = {b['affine_b']}; base {b['base']}; cubic c = "
                f"{b['cubic_c']}",
                f"n = {number(s['n'])}, k = {', '.join(str(k) for k in s['k'])}, temperature "
                f"{number(s['temperature'])}, max_tokens {number(s['max_tokens'])}, style `{s['style']}`, test "
                f"timeout {number(s['test_timeout'])} s",
                f"bootstrap: {number(s['bootstrap'])} resamples at {setting_pct(s['confidence'])}"]
    counts = (f"{c['tasks']} tasks ({c['tasks_used']} used), {c['prompts']} prompts ({c['applicable_prompts']} "
              f"applicable), {c['generations']} generations, {c['test_results']} test runs ({c['passed']} passed).")
    return [Heading(2, "Methods", "methods"), Heading(3, "Data", "methods-data"), Paragraph(counts),
            Heading(3, "Settings", "methods-settings"), Bullets(tuple(settings)),
            *provenance_blocks(summary), Heading(3, "References", "references"), Bullets(REFERENCES)]


def probes_blocks(summary: dict[str, Any], values: dict[str, Any]) -> list[Block]:
    """The probes report's blocks from its summary and the per-problem opcode values (model → label → key → list)."""
    study = summary["study"]
    models = _models(summary)
    intro = (f"Scale-aware memorization diagnostics (perturbation probes, I/O isomorphisms, opcode divergence"
             f"{', CoDeC' if summary['codec'] else ''}) of {len(models)} model(s): "
             f"{', '.join(f'`{m}`' for m in models) or DASH}.")
    if study.get("description"):
        intro = f"{study['description']} {intro}"
    return [Heading(1, f"calib report: {study.get('name') or 'study'}", "top"), Paragraph(intro),
            *_procedure(summary), *_headline(summary), *budget_blocks(summary), *_applicability(summary),
            *_pairs(summary),
            *_opcodes(summary, values), *_outcomes(summary), *_codec(summary), *_methods(summary)]

