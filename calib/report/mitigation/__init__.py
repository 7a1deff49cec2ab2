"""The ``mitigation`` study's report: the memorization–utility trajectory of every post-training checkpoint.

Reads the run's ``trajectory``, ``checkpoints`` and ``pairs`` tables (docs/mitigation.md).
"""

from __future__ import annotations

import json
from typing import Any

from calib._exceptions import InputError
from calib.report.document import Figure, Heading, Paragraph, Table
from calib.report.mitigation.figures import trajectory_figure

__all__ = ["mitigation_report"]


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def mitigation_report(run: Any) -> tuple[dict[str, Any], list[Any]]:
    """(summary, blocks) of a mitigation run."""
    for name in ("trajectory", "checkpoints", "pairs"):
        if name not in run.tables:
            raise InputError(f"the run has no {name} table; run `calib study SPEC` to its end", path=str(run.root))
    points = run.tables["trajectory"].to_dicts()
    bench = any(p.get("benchmark_n") is not None for p in points)
    pairs = run.tables["pairs"].to_dicts()
    spec = run.spec
    confidence = (spec.get("analyze") or {}).get("confidence", 0.95)
    sources: dict[str, dict[str, int]] = {}
    for row in pairs:
        s = sources.setdefault(row["source"], {"pairs": 0, "accepted": 0, "fallback": 0, "no_chosen": 0})
        s["pairs"] += 1
        s["accepted"] += row["chosen_from"] in ("target", "rewrite")
        s["fallback"] += bool(row["fallback"])
        s["no_chosen"] += row["chosen"] is None
    summary = {"study": spec.get("study"), "audit": (spec.get("mitigation") or {}).get("audit"),
               "methods": (spec.get("mitigation") or {}).get("methods"), "pairs": sources, "points": points}
    blocks: list[Any] = [
        Heading(2, "Mitigation", "mitigation"),
        Paragraph(f"The target was post-trained away from the {points[0]['n'] if points else 0} functions its audit "
                  f"found memorized ({summary['audit']}); each checkpoint's greedy completions were re-measured with "
                  "the audit's text metric, executor and thresholds. *Still memorized* applies the audit's "
                  "counterfactual rule with the reference; its interval is Clopper–Pearson at "
                  f"{100 * confidence:g} %. *Memorization* is the paper's axis (mean SIM_text over the textually, "
                  "mean SIM_func over the functionally memorized functions, weighted by their counts); *utility* is "
                  "the mean of retain agreement (SIM_text against the target's own completions of held-out prompts) "
                  + ("and pass@1 on the memorized functions held out of post-training (a completion passes when its "
                     "output equals x's on every input state) " if bench else "")
                  + "each normalized to the target, so the reference's utility is the floor."),
        Table(("point", "still memorized", "interval", "textual", "functional", "memorization", "retain agreement",
               *(("pass@1", "pass@1 interval") if bench else ()), "utility", "unscored"),
              tuple((p["point"], f"{p['memorized']}/{p['n']} ({_pct(p['memorized_rate'])})",
                     f"{_pct(p['memorized_low'])} – {_pct(p['memorized_high'])}", str(p["textual"]),
                     f"{p['functional']}/{p['n_conclusive']}", _num(p["memorization"]), _num(p["retain_agreement"]),
                     *((f"{p['benchmark_passed']}/{p['benchmark_n']} ({_pct(p['pass_at_1'])})",
                        f"{_pct(p['pass_low'])} – {_pct(p['pass_high'])}") if bench else ()),
                     _num(p["utility"]), str(p.get("unscored") or 0)) for p in points), "trajectory-table",
              "Every point: the target and the reference (the audit's completions) and each checkpoint; "
              "unscored: memorized functions without the point's completion (not counted as mitigated)."),
    ]
    svg = trajectory_figure(points)
    if svg is not None:
        blocks.append(Figure("trajectory", svg, "Memorization against utility along post-training; the ideal keeps "
                                                "the target's utility at the reference's memorization."))
    named = [(p["point"], json.loads(p["benchmarks"])) for p in points if p.get("benchmarks")]
    if named:
        blocks.append(Heading(3, "Benchmarks", "benchmarks"))
        blocks.append(Table(("point", "benchmark", "pass@1", "interval", "normalized"),
                            tuple((point, name, f"{b['passed']}/{b['n']} ({_pct(b['pass_at_1'])})",
                                   f"{_pct(b['low'])} – {_pct(b['high'])}", _num(b["utility"]))
                                  for point, per in named for name, b in sorted(per.items())), "benchmarks-table",
                            "Greedy pass@1 with the paper's protocols (HumanEval: the dataset's prompt, cut at the "
                            "function's end; MBPP: 3-shot); a task passes when all its tests pass in the sandbox. "
                            "Normalized by the target's; a benchmark the target does not solve at all stays out of "
                            "the aggregate utility."))
    blocks.append(Heading(3, "Preference pairs", "pairs"))
    blocks.append(Table(("source", "pairs", "accepted", "fell back to the reference", "no preferred completion"),
                        tuple((src, str(v["pairs"]), str(v["accepted"]), str(v["fallback"]), str(v["no_chosen"]))
                              for src, v in sources.items()), "pairs-table",
                        "A target sample or rewrite is kept only if it parses, BLEU <= 0.3 and SIM_func <= 0.2."))
    checkpoints = run.tables["checkpoints"].to_dicts()
    if checkpoints:
        blocks.append(Heading(3, "Checkpoints", "checkpoints"))
        blocks.append(Table(("point", "folder", "pairs", "learning rate", "epoch loss"),
                            tuple((c["point"], c["folder"], str(c["pairs"]), f"{c['learning_rate']:g}",
                                   _num(c["loss"])) for c in checkpoints), "checkpoints-table"))
    return summary, blocks
