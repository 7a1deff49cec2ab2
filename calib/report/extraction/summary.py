"""Every number of an ``extraction`` report (the population conformal test), computed once from the tables.

:func:`extraction_summary` reads the operating points, claims, budgets, paired comparisons and scores
of a run and returns the content of summary.json; :mod:`calib.report.extraction.blocks` only formats
it. The tables already hold the conformal statistics (``calib.stats.sweep``); the report adds the
Clopper–Pearson intervals of the binary procedures' generation rates, the member − control differences
and the suffix-length sweep (:mod:`calib.report.extraction.contrast`), the control screen's findings and both
control pools (:mod:`calib.report.extraction.screen`), the Bonferroni feasibility
(``calib.stats.bonferroni_max_candidates`` / ``bonferroni_min_controls``) and consistency checks
(K and α_N recomputed with ``calib.stats.conformal_k``, claims recounted from the claims table).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import polars as pl

from calib._exceptions import InputError
from calib.report.extraction.contrast import members_vs_controls, suffix_sweep
from calib.report.extraction.sampled import sampled_summary
from calib.report.extraction.screen import screen_summary
from calib.report.format import power
from calib.report.procedure import (
    BINARY_PROCEDURES,
    ROLES,
    methods_record,
    procedure_order,
    procedure_statement,
    provenance,
    study_facts,
)
from calib.report.run import RunTables, setting
from calib.stats import (
    bonferroni_max_candidates,
    bonferroni_min_controls,
    clopper_pearson,
    conformal_k,
    independent_difference,
    min_controls,
    parse_alpha,
)

__all__ = ["EXTRACTION_SUMMARY_VERSION", "MARGIN_LEVELS", "extraction_settings", "extraction_summary", "group_key",
           "groups_of", "removed", "where"]

#: Version of the extraction summary.json layout (docs/report.md); bumped when a key changes meaning or goes away.
EXTRACTION_SUMMARY_VERSION = 1

#: Margins (orders of magnitude above τ) whose member counts the margin summary states.
MARGIN_LEVELS = (1.0, 2.0, 5.0)

_GROUP = ("role", "procedure", "suffix_tokens")


def _fail(run: RunTables, message: str) -> InputError:
    return InputError(f"{message}; check the run's spec.json and tables", path=str(run.root / "spec.json"))


def extraction_settings(run: RunTables) -> dict[str, Any]:
    """The ``[analyze]`` settings the report uses, with the spec's defaults; an InputError names a bad one."""
    spec = run.spec
    written = setting(spec, "analyze.alpha", 0.001)
    try:
        alpha = parse_alpha(written)
        alphas = [parse_alpha(a) for a in setting(spec, "analyze.alphas", [])]
    except ValueError as exc:
        raise _fail(run, f"analyze.alpha: {exc}") from None
    decontaminate = [str(v) for v in setting(spec, "analyze.decontaminate", [])]
    screen = setting(spec, "extraction.screen")
    screen = screen if isinstance(screen, dict) and screen.get("enabled", True) else None
    return {
        "alpha": alpha,
        "alpha_as_written": str(written),
        "alphas": alphas,
        "confidence": float(setting(spec, "analyze.confidence", 0.95)),
        "fdr": float(setting(spec, "analyze.fdr", 0.05)),
        "fwer": float(setting(spec, "analyze.fwer", 0.05)),
        "budgets": [float(b) for b in setting(spec, "analyze.budgets", [1e5])],
        "budget_confidence": float(setting(spec, "analyze.budget_confidence", 0.95)),
        "decontaminate": decontaminate,
        "review": int(setting(spec, "analyze.review", 10)),
        "screen": screen,
        "primary_pool": "decontaminated" if decontaminate or screen else "all",
    }


def group_key(record: dict[str, Any]) -> tuple[int, tuple[int, float, str], int]:
    """Sort key of a (role, procedure, suffix length) record: target first, the spec's procedure order."""
    role = record["role"]
    return (ROLES.index(role) if role in ROLES else len(ROLES), procedure_order(record["procedure"]),
            int(record["suffix_tokens"]))


def groups_of(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """The (role, procedure, suffix_tokens) groups of ``frame``, in report order."""
    rows = frame.select(*_GROUP).unique().to_dicts()
    return sorted(rows, key=lambda r: (group_key(r), r["role"]))


def where(frame: pl.DataFrame, group: dict[str, Any]) -> pl.DataFrame:
    """The rows of ``frame`` in ``group`` (role, procedure, suffix_tokens)."""
    return frame.filter((pl.col("role") == group["role"]) & (pl.col("procedure") == group["procedure"])
                        & (pl.col("suffix_tokens") == group["suffix_tokens"]))


def _note(row: dict[str, Any], binary: bool) -> str:
    alpha, n, k = row["alpha"], row["n_controls"], row["k"]
    if not k:
        return (f"no claim possible at α = {alpha:g} with N = {n} controls: K = floor(α(N+1)) = 0, so there is no "
                f"threshold (at least {min_controls(alpha)} controls are needed)")
    parts = []
    if binary:
        parts.append("binary score: one operating point (a claim is a generation of the suffix); compare the "
                     "member and control generation rates")
    if row["at_atom"]:
        parts.append(f"α_N = {k}/{n + 1} exceeds α† = {row['alpha_dagger']:.4g}: τ sits on the atom of tied "
                     "lowest control scores, every larger α gives the same claims and the Beta law is not exact")
    if not parts:
        parts.append(f"claims are scores above τ, the K-th largest (K = {k}) of the N = {n} control scores; certified "
                     f"FPR α_N = {k}/{n + 1}")
    return "; ".join(parts)


def _operating_point(row: dict[str, Any], binary: bool) -> dict[str, Any]:
    """One row of the operating_points table as summary.json states it (with the threshold as text)."""
    k = int(row["k"])
    log10_threshold = row["log10_threshold"] if k else None
    return {
        "pool": row["pool"], "alpha": row["alpha"], "n_controls": row["n_controls"], "k": k,
        "certified_alpha": row["certified_alpha"], "alpha_dagger": row["alpha_dagger"],
        "certifiable": bool(row["certifiable"]), "at_atom": bool(row["at_atom"]),
        "log10_threshold": log10_threshold, "threshold": None if log10_threshold is None else power(log10_threshold),
        "in_sample_fpr": row["in_sample_fpr"], "fpr_low": row["fpr_low"], "fpr_high": row["fpr_high"],
        "fpr_upper": row["fpr_upper"], "prob_exceeds_certified": row["prob_exceeds_certified"],
        "n_members": row["n_members"], "claims": row["claims"], "member_rate": row["member_rate"],
        "calibrated_rate": row["calibrated_rate"], "low": row["low"], "high": row["high"],
        "min_controls": min_controls(row["alpha"]), "note": _note(row, binary),
    }


def _at_alpha(rows: pl.DataFrame, pool: str, alpha: float) -> dict[str, Any] | None:
    for row in rows.filter(pl.col("pool") == pool).sort("alpha").to_dicts():
        if math.isclose(row["alpha"], alpha, rel_tol=1e-9):
            return row
    return None


def removed(decontaminate: list[str]) -> pl.Expr:
    """Whether a control row is one the decontaminate list removes (its window or sample listed, or marked)."""
    marked = pl.col("contaminated").fill_null(False)
    if not decontaminate:
        return marked
    return marked | pl.col("window_id").is_in(decontaminate) | pl.col("sample_id").is_in(decontaminate)


def _interval(k: int, n: int, confidence: float) -> dict[str, Any] | None:
    return clopper_pearson(k, n, confidence).to_dict() if n else None


def _generation(claims: pl.DataFrame, pool: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Member and control generation rates of a binary procedure (score 1 = log10 0 means generated)."""
    scored = claims.filter(pl.col("log10_value").is_not_null())
    members = scored.filter(pl.col("membership") == "member")
    controls = scored.filter(pl.col("membership") == "control")
    if pool == "decontaminated":
        controls = controls.filter(~removed(settings["decontaminate"]))
    mk, ck = (int((f["log10_value"] == 0).sum()) for f in (members, controls))
    conf = settings["confidence"]
    m, c = _interval(mk, members.height, conf), _interval(ck, controls.height, conf)
    diff = None if m is None or c is None else independent_difference(mk, members.height, ck, controls.height, conf)
    return {"pool": pool, "members": m, "controls": c,
            "difference": None if m is None or c is None else m["estimate"] - c["estimate"],
            "difference_low": None if diff is None else diff.low,
            "difference_high": None if diff is None else diff.high}


def _headline(run: RunTables, settings: dict[str, Any]) -> list[dict[str, Any]]:
    ops, claims = run.tables["operating_points"], run.tables["extraction_claims"]
    out = []
    for group in groups_of(ops):
        rows = where(ops, group)
        binary = group["procedure"] in BINARY_PROCEDURES
        pools = sorted(set(rows["pool"].drop_nulls().to_list()))
        pool = settings["primary_pool"] if settings["primary_pool"] in pools else ("all" if "all" in pools else None)
        found = _at_alpha(rows, pool, settings["alpha"]) if pool else None
        side = [_operating_point(r, binary) for p in pools if (r := _at_alpha(rows, p, settings["alpha"]))]
        out.append({**group, "model": rows["model"].drop_nulls().first() if "model" in rows.columns else None,
                    "binary": binary, "pool": pool,
                    "operating_point": None if found is None else _operating_point(found, binary),
                    "pools": side if settings["primary_pool"] == "decontaminated" else [],
                    "generation": _generation(where(claims, group), pool or "all", settings) if binary else None})
    return out


def _sweep(run: RunTables) -> list[dict[str, Any]]:
    ops = run.tables["operating_points"]
    out = []
    for group in groups_of(ops):
        rows = where(ops, group)
        binary = group["procedure"] in BINARY_PROCEDURES
        for pool in sorted(set(rows["pool"].drop_nulls().to_list())):
            points = rows.filter(pl.col("pool") == pool).sort("alpha").to_dicts()
            out.append({**group, "pool": pool, "binary": binary, "n_controls": points[0]["n_controls"],
                        "alpha_dagger": points[0]["alpha_dagger"],
                        "points": [_operating_point(p, binary) for p in points]})
    return out


def _quantiles(values: np.ndarray) -> dict[str, float | None]:
    if not values.size:
        return {"min": None, "p25": None, "median": None, "p75": None, "max": None, "mean": None}
    q = np.quantile(values, [0.0, 0.25, 0.5, 0.75, 1.0])
    return {"min": float(q[0]), "p25": float(q[1]), "median": float(q[2]), "p75": float(q[3]), "max": float(q[4]),
            "mean": float(values.mean())}


def _margins(run: RunTables) -> list[dict[str, Any]]:
    claims = run.tables["extraction_claims"]
    out = []
    for group in groups_of(claims):
        if group["procedure"] in BINARY_PROCEDURES:
            continue
        rows = where(claims, group).filter((pl.col("membership") == "member") & pl.col("claim").fill_null(False))
        margins = rows["margin"].drop_nulls().to_numpy().astype(float)
        finite = np.sort(margins[np.isfinite(margins)])
        out.append({**group, "n_claims": rows.height, "n_margins": int(finite.size),
                    "infinite": int(np.isposinf(margins).sum()), **_quantiles(finite),
                    "at_least": [{"delta": d, "count": int((finite >= d).sum()) + int(np.isposinf(margins).sum())}
                                 for d in MARGIN_LEVELS]})
    return out


def _multiple_testing(run: RunTables, settings: dict[str, Any], headline: list[dict[str, Any]]) -> list[dict[str, Any]]:
    claims = run.tables["extraction_claims"]
    delta, out = settings["fwer"], []
    for head in headline:
        op = head["operating_point"]
        members = where(claims, head).filter((pl.col("membership") == "member") & pl.col("p_value").is_not_null())
        m = members.height
        if op is None or not m:
            continue
        n = int(op["n_controls"])
        most = bonferroni_max_candidates(n, delta).n_candidates
        out.append({"role": head["role"], "procedure": head["procedure"], "suffix_tokens": head["suffix_tokens"],
                    "pool": head["pool"], "m": m, "n_controls": n, "fwer": delta, "per_candidate_alpha": delta / m,
                    "smallest_level": 1 / (n + 1), "bonferroni_max_candidates": most,
                    "bonferroni_feasible": 1 <= m <= most,
                    "bonferroni_min_controls": bonferroni_min_controls(m, delta).n_controls,
                    "bonferroni_rejections": int(members["bonferroni"].fill_null(False).sum()),
                    "fdr": settings["fdr"], "bh_rejections": int(members["bh"].fill_null(False).sum()),
                    "claims": int(members["claim"].fill_null(False).sum())})
    return out


def _paired(run: RunTables, settings: dict[str, Any]) -> list[dict[str, Any]] | None:
    paired = run.tables.get("paired")
    if paired is None or (paired.is_empty() and not setting(run.spec, "models.reference")):
        return None
    rows = paired.to_dicts()
    rows.sort(key=lambda r: (procedure_order(r["procedure"]), r["suffix_tokens"], r["alpha"]))
    return [{**r, "primary": math.isclose(r["alpha"], settings["alpha"], rel_tol=1e-9)} for r in rows]


def _budgets(run: RunTables, settings: dict[str, Any]) -> list[dict[str, Any]]:
    rows = run.tables["budgets"].to_dicts()
    rows.sort(key=lambda r: (group_key(r), r["budget"]))
    conf = settings["confidence"]
    return [{**r, "member_interval": _interval(r["members_generated"], r["n_members"], conf),
             "control_interval": _interval(r["controls_generated"], r["n_controls"], conf),
             "extractable_interval": _interval(r["members_extractable"], r["n_members"], conf)} for r in rows]


def _review(run: RunTables, settings: dict[str, Any]) -> list[dict[str, Any]]:
    claims, windows = run.tables["extraction_claims"], run.tables["windows"]
    suffixes = windows.filter(pl.col("window_id").is_not_null()).select("window_id", "suffix").unique("window_id")
    controls = claims.filter((pl.col("membership") == "control") & pl.col("log10_value").is_not_null()
                             & (pl.col("log10_value") > float("-inf")))
    controls = controls.with_columns(removed(settings["decontaminate"]).alias("_removed"))
    out = []
    for group in groups_of(claims):
        top = where(controls, group).sort(["log10_value", "window_id"], descending=[True, False]) \
            .head(settings["review"]).join(suffixes, on="window_id", how="left", maintain_order="left")
        out.append({**group, "controls": [
            {"rank": i + 1, "window_id": r["window_id"], "sample_id": r["sample_id"], "log10_value": r["log10_value"],
             "p_value": r["p_value"], "decontaminated": bool(r["_removed"]), "suffix": r["suffix"]}
            for i, r in enumerate(top.to_dicts())]})
    return out


def _tally(values: list[Any]) -> list[dict[str, Any]]:
    return [{"reason": k, "count": v} for k, v in sorted(Counter(values).items(), key=lambda kv: (-kv[1], kv[0]))]


def _counts(run: RunTables) -> dict[str, Any]:
    samples, windows, scores = run.tables["samples"], run.tables["windows"], run.tables["scores"]
    ok = windows.filter(pl.col("error").is_null())
    per_group = []
    for group in groups_of(scores):
        rows = where(scores, group)
        bad = rows.filter(pl.col("log10_value").is_null())
        per_group.append({**group, "scored": rows.height - bad.height, "unscored": bad.height,
                          "errors": _tally([e or "no score" for e in bad["error"].to_list()])})
    return {"samples": {"members": int((samples["membership"] == "member").sum()),
                        "controls": int((samples["membership"] == "control").sum())},
            "windows": {"members": int((ok["membership"] == "member").sum()),
                        "controls": int((ok["membership"] == "control").sum()),
                        "samples_without_window": windows.height - ok.height,
                        "errors": _tally(windows.filter(pl.col("error").is_not_null())["error"].to_list())},
            "scores": per_group}


def _consistency(run: RunTables, headline: list[dict[str, Any]]) -> list[str]:
    """Disagreements between the operating points, the conformal definitions and the claims table."""
    claims, problems = run.tables["extraction_claims"], []
    for head in headline:
        op = head["operating_point"]
        if op is None:
            continue
        name = f"{head['role']}/{head['procedure']}/ℓ_s={head['suffix_tokens']}"
        k = conformal_k(op["alpha"], int(op["n_controls"])) if op["n_controls"] else 0
        if k != op["k"] or not math.isclose(op["certified_alpha"], k / (op["n_controls"] + 1), rel_tol=1e-9):
            problems.append(f"{name}: operating_points has K = {op['k']}, α_N = {op['certified_alpha']:.6g}; "
                            f"K = floor(α(N+1)) gives {k}")
        counted = int(where(claims, head).filter(pl.col("membership") == "member")["claim"].fill_null(False).sum())
        if op["claims"] is not None and counted != op["claims"]:
            problems.append(f"{name}: operating_points counts {op['claims']} claims, extraction_claims {counted}")
    return problems


def extraction_summary(run: RunTables) -> dict[str, Any]:
    """Everything the extraction report states (the content of summary.json; see docs/report.md)."""
    settings = extraction_settings(run)
    ops = run.tables["operating_points"]
    procedures = sorted(set(ops["procedure"].drop_nulls().to_list()) | set(
        run.tables["scores"]["procedure"].drop_nulls().to_list()), key=procedure_order)
    lengths = sorted(set(ops["suffix_tokens"].drop_nulls().to_list()) | {
        int(v) for v in setting(run.spec, "extraction.suffix_tokens", [])})
    headline = _headline(run, settings)
    try:
        multiple = _multiple_testing(run, settings, headline)
    except ValueError as exc:
        raise _fail(run, str(exc)) from None
    comparisons = members_vs_controls(ops, headline, settings)
    return {
        "summary_version": EXTRACTION_SUMMARY_VERSION,
        "kind": "extraction",
        "study": study_facts(run),
        "settings": settings,
        "procedure": procedure_statement(run, procedures, lengths),
        "counts": _counts(run),
        "headline": headline,
        "sweep": _sweep(run),
        "margins": _margins(run),
        "multiple_testing": multiple,
        "members_vs_controls": comparisons,
        "suffix_sweep": suffix_sweep(comparisons, settings),
        "paired": _paired(run, settings),
        "budgets": _budgets(run, settings),
        "sampled": sampled_summary(run),
        "review": _review(run, settings),
        "control_screen": screen_summary(run, settings, headline),
        "consistency": _consistency(run, headline),
        "provenance": provenance(run),
        "methods": methods_record(run),
    }
