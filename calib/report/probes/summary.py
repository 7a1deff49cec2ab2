"""The ``probes`` report (scale-aware diagnostics): summary.json content and the report's blocks.

A probes study runs every task of a benchmark under several conditions (original, synonym fuzzing,
dead code, the I/O isomorphisms of three bijection families) through a panel of models, smallest
first, and measures pass@k, opcode divergence from the original and, optionally, CoDeC contamination
scores (Rajput et al., "Memorization Diagnostics for Code LLMs Should be Scale-Aware", §5–§7). This
module reads the run's tables into the summary; :mod:`calib.report.probes.blocks` writes the blocks.

Conditions are named by a **label**: the condition itself (``original``, ``syn20``, ``syn40``,
``dead_code``) or ``CONDITION:FAMILY`` for the isomorphisms (``iso:affine``, ``iso_dec:base``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from calib.report.probes.blocks import probes_blocks
from calib.report.probes.budget import dropped_rows, truncation_rows
from calib.report.procedure import methods_record, provenance, study_facts
from calib.report.run import RunTables, probed_models, setting

__all__ = ["CONDITION_NAMES", "PROBES_SUMMARY_VERSION", "STATUS_ORDER", "bijection_formula", "label_name",
           "label_order", "probes_report", "probes_summary"]

#: Version of the probes summary.json layout (docs/report.md); bumped when a key changes meaning or goes away.
PROBES_SUMMARY_VERSION = 1

#: Conditions in the order the report shows them, with the names the paper gives them (Table 3, Table 6).
CONDITION_NAMES: dict[str, str] = {"original": "Original", "syn20": "Syn-20", "syn40": "Syn-40",
                                   "dead_code": "Dead code", "iso": "Iso", "iso_enc": "Iso-Enc", "iso_dec": "Iso-Dec"}

#: Bijection families in the order the report shows them (the paper's affine map first, §7.1's ablations after).
FAMILY_ORDER = ("affine", "base", "cubic")

#: Test statuses in the order the outcome table shows them (calib/probes/testrun.py, plus ``no_program``).
STATUS_ORDER = ("ok", "no_program", "syntax", "setup_error", "program_error", "timeout", "died", "error",
                "request_failed", "overflow")
_MISSING = ("request_failed", "overflow")  # a missing generation: no completion, left out of pass@k

#: How many reasons (a condition not applicable, a generation error) the tables list per row.
TOP_REASONS = 3

_CONDITIONS = tuple(CONDITION_NAMES)
_ISO = ("iso", "iso_enc", "iso_dec")
_BIJECTION_DEFAULTS = {"affine_a": 3, "affine_b": 5, "base": 7, "cubic_c": 1}


def label_order(label: str) -> tuple[int, int, int, str]:
    """Sort key of a label: original, syn20, syn40, dead_code, then per family (affine, base, cubic) iso,
    iso_enc, iso_dec; unknown labels last, by name."""
    condition, _, family = label.partition(":")
    if condition in _ISO:
        fam = FAMILY_ORDER.index(family) if family in FAMILY_ORDER else len(FAMILY_ORDER)
        return 1, fam, _ISO.index(condition), label
    if condition in _CONDITIONS and not family:
        return 0, 0, _CONDITIONS.index(condition), label
    return 2, 0, 0, label


def label_name(label: str) -> str:
    """The paper's name of a label: ``Iso-Dec (affine)`` for ``iso_dec:affine``, ``Syn-20`` for ``syn20``."""
    condition, _, family = label.partition(":")
    name = CONDITION_NAMES.get(condition, condition)
    return f"{name} ({family})" if family else name


def _signed(value: int) -> str:
    return f"+ {value}" if value >= 0 else f"− {-value}"


def _minus(value: int) -> str:
    return f"−{-value}" if value < 0 else str(value)


def bijection_formula(family: str, bijection: dict[str, Any]) -> str:
    """The formula of a bijection family with the spec's parameters (``probes.bijection``; paper §5.4, §7.1)."""
    p = {**_BIJECTION_DEFAULTS, **{k: v for k, v in bijection.items() if v is not None}}
    if family == "affine":
        a, b = int(p["affine_a"]), int(p["affine_b"])
        return f"T(t) = {_minus(a)}·t {_signed(b)}, T⁻¹(u) = (u {_signed(-b)}) / {_minus(a)}"
    if family == "base":
        base = int(p["base"])
        example = 25 if base > 5 else 11
        image = int(str(example), base)
        return (f"T(t) = the decimal digits of t read in base {base}, sign kept (T({example}) = {image}); "
                f"T⁻¹(u) = the base-{base} digits of u read in decimal")
    if family == "cubic":
        c = int(p["cubic_c"])
        return f"T(t) = t³ {_signed(c)}, T⁻¹(u) = ∛(u {_signed(-c)})"
    return f"the `{family}` family"


def _describe(label: str, spec: dict[str, Any]) -> str:
    """What the condition of ``label`` does to a task (paper §5.2, §5.4, §7.1–§7.2)."""
    condition, _, family = label.partition(":")
    if condition == "original":
        return "the task as the benchmark states it: prompt, tests and reference solution unchanged"
    if condition in ("syn20", "syn40"):
        p = 20 if condition == "syn20" else 40
        return (f"each non-code, non-connector word of the prompt's natural language replaced by a WordNet synonym "
                f"with probability {p}% (Djiré et al. 2025); tests unchanged")
    if condition == "dead_code":
        return ("semantically irrelevant Python (unused helpers) inserted into the prompt, matched to the token "
                "increase of the Iso contract; task and I/O unchanged: it bounds the prompt-length effect (§7.2)")
    if condition in _ISO:
        side = {"iso": "inputs and outputs encoded: the model decodes its inputs and encodes its outputs",
                "iso_enc": "inputs encoded only: the model must decode them (T⁻¹)",
                "iso_dec": "outputs encoded only: the model must encode its answer (T)"}[condition]
        formula = bijection_formula(family, setting(spec, "probes.bijection", {}) or {})
        return (f"{side}; {formula}. The tests are rewritten through T and an encoding contract is appended to the "
                "prompt; f(x) = y ⇔ T(f(T⁻¹(x′))) = y′, so the algorithm is unchanged")
    return "a condition this version of calib does not describe"


def _rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return frame.to_dicts()


def _stat(values: list[float | None], fn: Any) -> float | None:
    clean = [float(v) for v in values if v is not None and not math.isnan(v)]
    return float(fn(np.asarray(clean))) if clean else None


def _models(run: RunTables, present: set[str]) -> list[dict[str, Any]]:
    """The probed servers in panel order (smallest first), then any other model the tables name."""
    names = probed_models(run.spec)
    names += sorted(present - set(names))
    generations = run.tables["probe_generations"]
    out = []
    for name in names:
        caps = setting(run.manifest, f"servers.{name}", {}) or {}
        table = setting(run.spec, f"servers.{name}", {}) or {}
        used = sorted(set(generations.filter(pl.col("model") == name)["model_name"].drop_nulls().to_list()))
        billions = (setting(run.spec, "models.parameters", {}) or {}).get(name)
        out.append({"server": name, "kind": caps.get("kind") or table.get("kind"),
                    "model": caps.get("model") or table.get("model") or table.get("model_dir"),
                    "models_in_generations": used,
                    "tier": (setting(run.spec, "models.tiers", {}) or {}).get(name),
                    "parameters_billions": None if billions is None else float(billions)})
    return out


def _tasks(run: RunTables) -> dict[str, Any]:
    tasks = run.tables["tasks"]
    left = tasks.filter(pl.col("reference_passed").fill_null(False).not_())
    statuses = left.group_by("reference_status").len().sort(["len", "reference_status"], descending=[True, False])
    return {"source": setting(run.spec, "probes.tasks", "mbpp"), "limit": setting(run.spec, "probes.limit", 0),
            "sources": sorted(set(tasks["source"].drop_nulls().to_list()))[:5], "total": tasks.height,
            "used": tasks.height - left.height, "left_out": left.height,
            "left_out_statuses": [{"status": s, "count": n} for s, n in statuses.rows()],
            "left_out_ids": sorted(left["task_id"].cast(pl.String).to_list())}


def _applicability(run: RunTables, labels: list[str], used: set[str]) -> tuple[list[dict[str, Any]], list[dict]]:
    # a task whose reference fails its own tests is left out of every condition (its rows say nothing of T)
    prompts = run.tables["prompts"].filter(pl.col("task_id").is_in(list(used)))
    rows, failures = [], []
    for label in labels:
        mine = prompts.filter(pl.col("label") == label)
        ok = mine.filter(pl.col("applicable").fill_null(False))
        not_ok = mine.filter(pl.col("applicable").fill_null(False).not_())
        reasons = not_ok.with_columns(pl.col("reason").fill_null("no reason recorded")).group_by("reason").len()
        reasons = reasons.sort(["len", "reason"], descending=[True, False])
        failed = ok.filter(pl.col("reference_passed").eq(False))
        failures += [{"label": label, "task_id": t, "prompt_id": p} for t, p in
                     failed.select("task_id", "prompt_id").sort("task_id").rows()]
        rows.append({"label": label, "prompts": mine.height, "tasks": mine["task_id"].n_unique(),
                     "applicable": ok.height, "not_applicable": not_ok.height,
                     "reasons": [{"reason": r, "count": n} for r, n in reasons.rows()],
                     "reference_passed": int(ok["reference_passed"].eq(True).sum()),
                     "reference_failed": failed.height,
                     "reference_unknown": int(ok["reference_passed"].is_null().sum()),
                     "original_passes": (int(ok["original_passes"].eq(True).sum())
                                         if "original_passes" in ok.columns else 0),
                     "mean_prompt_tokens": _stat(ok["prompt_tokens"].to_list(), np.mean),
                     "mean_added_tokens": _stat(ok["added_tokens"].to_list(), np.mean)})
    return rows, failures


def _pass_rows(run: RunTables, models: list[str], labels: list[str]) -> list[dict[str, Any]]:
    rows = _rows(run.tables["pass_at_k"])
    return sorted(rows, key=lambda r: (r["k"], models.index(r["model"]) if r["model"] in models else len(models),
                                       label_order(r["label"])))


def _grid(rows: list[dict[str, Any]], k: int) -> dict[str, dict[str, dict[str, Any]]]:
    keys = ("estimate", "low", "high", "n_problems", "original", "difference", "difference_low", "difference_high",
            "relative_change", "problems_missing", "dropped_failed", "dropped_overflow")
    grid: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r["k"] == k:
            grid.setdefault(r["model"], {})[r["label"]] = {key: r.get(key) for key in keys}
    return grid


def _check_pass_at_1(run: RunTables, rows: list[dict[str, Any]], problems: list[str]) -> None:
    """Recompute pass@1 (the mean over problems of c/n; Chen et al. 2021, eq. 1 at k = 1) from test_results."""
    results = run.tables["test_results"].filter(pl.col("status").is_in(_MISSING).not_())  # completed only
    per_task = results.group_by("model", "label", "task_id").agg(
        pl.len().alias("n"), pl.col("passed").fill_null(False).cast(pl.Int64).sum().alias("c"))
    by_group = per_task.group_by("model", "label").agg(
        (pl.col("c") / pl.col("n")).mean().alias("estimate"), pl.len().alias("n_problems"))
    found = {(m, lab): (e, n) for m, lab, e, n in by_group.select("model", "label", "estimate", "n_problems").rows()}
    for r in rows:
        if r["k"] != 1 or r["estimate"] is None:
            continue
        mine = found.get((r["model"], r["label"]))
        if mine is None:
            problems.append(f"{r['model']}, {r['label']}: pass@1 without test results")
        elif abs(mine[0] - r["estimate"]) > 1e-9 or mine[1] != r["n_problems"]:
            problems.append(f"{r['model']}, {r['label']}: pass@1 {r['estimate']:.6f} over {r['n_problems']} problems "
                            f"in pass_at_k, {mine[0]:.6f} over {mine[1]} in test_results")


def _outcomes(run: RunTables, models: list[str], labels: list[str]) -> tuple[list[dict], list[dict]]:
    results = run.tables["test_results"]
    out = []
    for model in models:
        for label in labels:
            mine = results.filter((pl.col("model") == model) & (pl.col("label") == label))
            if not mine.height:
                continue
            counts = dict(mine.group_by("status").len().rows())
            order = [s for s in STATUS_ORDER if s in counts] + sorted(s for s in counts if s not in STATUS_ORDER)
            out.append({"model": model, "label": label, "generations": mine.height,
                        "passed": int(mine["passed"].fill_null(False).sum()),
                        "statuses": [{"status": s, "count": int(counts[s])} for s in order]})
    errors = []
    generations = run.tables["probe_generations"]
    for model in models:
        mine = generations.filter((pl.col("model") == model) & pl.col("error").is_not_null())
        top = mine.group_by("error").len().sort(["len", "error"], descending=[True, False])
        errors.append({"model": model, "generations": generations.filter(pl.col("model") == model).height,
                       "with_error": mine.height,
                       "errors": [{"error": e, "count": n} for e, n in top.head(TOP_REASONS).rows()]})
    return out, errors


def _opcodes(run: RunTables, models: list[str], labels: list[str],
             grid: dict[str, dict[str, dict[str, Any]]]) -> tuple[list[dict], dict[str, dict[str, dict]]]:
    """Per (model, label): JSD and entropy statistics over problems; also the per-problem values for figures."""
    opcodes = run.tables["opcodes"]
    rows, values = [], {}
    for model in models:
        for label in labels:
            mine = opcodes.filter((pl.col("model") == model) & (pl.col("label") == label))
            if not mine.height:
                continue
            v = {key: [float(x) for x in mine[key].to_list() if x is not None and not math.isnan(x)]
                 for key in ("jsd", "passing_jsd", "entropy", "passing_entropy")}
            values.setdefault(model, {})[label] = v
            change = grid.get(model, {}).get(label, {})
            rows.append({"model": model, "label": label, "problems": mine.height,
                         "programs": int(mine["programs"].fill_null(0).sum()),
                         "passing": int(mine["passing"].fill_null(0).sum()),
                         "jsd_problems": len(v["jsd"]), "jsd_median": _stat(v["jsd"], np.median),
                         "jsd_mean": _stat(v["jsd"], np.mean), "passing_jsd_problems": len(v["passing_jsd"]),
                         "passing_jsd_median": _stat(v["passing_jsd"], np.median),
                         "passing_jsd_mean": _stat(v["passing_jsd"], np.mean),
                         "entropy_median": _stat(v["entropy"], np.median),
                         "passing_entropy_median": _stat(v["passing_entropy"], np.median),
                         "pass_at_1_difference": change.get("difference")})
    return rows, values


def _auc(seen: list[float], unseen: list[float]) -> float | None:
    """AUC of seen vs unseen scores with ties counting one half (paper §5.3)."""
    if not seen or not unseen:
        return None
    wins = sum(1.0 if s > u else 0.5 if s == u else 0.0 for s in seen for u in unseen)
    return wins / (len(seen) * len(unseen))


def _codec(run: RunTables, models: list[str], problems: list[str]) -> dict[str, Any] | None:
    scores = run.tables.get("codec_scores")
    if scores is None or not scores.height:
        return None
    order = {m: i for i, m in enumerate(models)}
    rows = sorted(_rows(scores), key=lambda r: (order.get(r["model"], len(order)), not r["seen"], r["dataset"]))
    per_model = []
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        seen = [r["score"] for r in mine if r["seen"] and r["score"] is not None]
        unseen = [r["score"] for r in mine if not r["seen"] and r["score"] is not None]
        aucs = sorted({r["auc"] for r in mine if r["auc"] is not None})
        recomputed = _auc(seen, unseen)
        if aucs and recomputed is not None and any(abs(a - recomputed) > 1e-9 for a in aucs):
            problems.append(f"{model}: CoDeC AUC {aucs[0]:.4f} in codec_scores, {recomputed:.4f} from its scores")
        seen_mean = float(np.mean(seen)) if seen else None
        unseen_mean = float(np.mean(unseen)) if unseen else None
        per_model.append({"model": model, "datasets": len(mine), "seen_mean": seen_mean, "unseen_mean": unseen_mean,
                          "gap": None if seen_mean is None or unseen_mean is None else seen_mean - unseen_mean,
                          "auc": aucs[0] if aucs else recomputed})
    codec = run.tables.get("codec")
    errors = []
    if codec is not None and codec.height:
        failed = codec.filter(pl.col("error").is_not_null()).group_by("model", "dataset").len()
        errors = [{"model": m, "dataset": d, "count": n} for m, d, n in failed.sort("model", "dataset").rows()]
    return {"scores": rows, "models": per_model, "errors": errors,
            "n_context": setting(run.spec, "probes.codec.n_context", 3)}


def _settings(spec: dict[str, Any]) -> dict[str, Any]:
    keys = {"tasks": "mbpp", "limit": 0, "conditions": [], "families": ["affine"], "style": "mbpp", "n": 5,
            "k": [1], "temperature": 0.0, "max_tokens": 512, "bootstrap": 10_000, "confidence": 0.95,
            "test_timeout": 5.0}
    out = {key: setting(spec, f"probes.{key}", default) for key, default in keys.items()}
    out["bijection"] = {**_BIJECTION_DEFAULTS, **(setting(spec, "probes.bijection", {}) or {})}
    return out


def probes_summary(run: RunTables) -> tuple[dict[str, Any], dict[str, Any]]:
    """The probes report's summary.json content, and the per-problem opcode values its figures draw."""
    t = run.tables
    present = set()
    for name in ("pass_at_k", "test_results", "opcodes"):
        present |= set(t[name]["model"].drop_nulls().to_list())
    models = _models(run, present)
    names = [m["server"] for m in models]
    labels = sorted({*t["prompts"]["label"].drop_nulls().to_list(), *t["pass_at_k"]["label"].drop_nulls().to_list(),
                     *t["test_results"]["label"].drop_nulls().to_list()}, key=label_order)
    tasks = _tasks(run)
    used = set(t["tasks"].filter(pl.col("reference_passed").fill_null(False))["task_id"].to_list())
    applicability, failures = _applicability(run, labels, used)
    problems: list[str] = []
    pass_rows = _pass_rows(run, names, labels)
    _check_pass_at_1(run, pass_rows, problems)
    grid = _grid(pass_rows, 1)
    outcomes, generation_errors = _outcomes(run, names, labels)
    opcode_rows, values = _opcodes(run, names, labels, grid)
    pairs = t.get("model_pairs")
    pair_rows = [] if pairs is None else sorted(
        _rows(pairs), key=lambda r: (label_order(r["label"]), r["k"], names.index(r["model_a"])
                                     if r["model_a"] in names else len(names), r["model_b"]))
    results = t["test_results"]
    summary = {
        "summary_version": PROBES_SUMMARY_VERSION,
        "kind": "probes",
        "study": study_facts(run),
        "settings": _settings(run.spec),
        "procedure": {"tasks": tasks, "models": models,
                      "labels": [{"label": lab, "name": label_name(lab), "description": _describe(lab, run.spec)}
                                 for lab in labels]},
        "labels": labels,
        "ks": sorted({int(r["k"]) for r in pass_rows}),
        "pass_at_1": grid,
        "pass_at_k": pass_rows,
        "model_pairs": pair_rows,
        "applicability": applicability,
        "reference_failures": failures,
        "opcodes": opcode_rows,
        "outcomes": outcomes,
        "generation_errors": generation_errors,
        "codec": _codec(run, names, problems),
        "truncation": truncation_rows(t["probe_generations"], names, labels, setting(run.spec, "probes.confidence",
                                                                                    0.95)),
        "dropped": dropped_rows(pass_rows, pair_rows),
        "counts": {"tasks": tasks["total"], "tasks_used": tasks["used"],
                   "prompts": sum(a["prompts"] for a in applicability),
                   "applicable_prompts": sum(a["applicable"] for a in applicability),
                   "generations": t["probe_generations"].height, "test_results": results.height,
                   "tested": results.filter(pl.col("status").is_in(_MISSING).not_()).height,
                   "passed": int(results["passed"].fill_null(False).sum())},
        "consistency": problems,
        "provenance": provenance(run),
        "methods": methods_record(run),
    }
    return summary, values


def probes_report(run: RunTables) -> tuple[dict[str, Any], list[Any]]:
    """The probes report: its summary (summary.json) and its blocks."""
    summary, values = probes_summary(run)
    return summary, probes_blocks(summary, values)
