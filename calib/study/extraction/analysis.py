"""The extraction study's analysis stages: calibrate (operating points), claims, budgets, paired comparisons."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from calib._exceptions import CalibError
from calib.study.extraction.common import is_probabilistic
from calib.study.extraction.screen import screened_out
from calib.study.resources import ROLES
from calib.study.runner import RunOptions, Stage, StageContext
from calib.study.spec import StudySpec
from calib.study.tables import (
    BUDGETS_SCHEMA,
    EXTRACTION_CLAIMS_SCHEMA,
    OPERATING_POINTS_SCHEMA,
    PAIRED_SCHEMA,
)

__all__ = ["analysis_settings", "budget_grid", "budgets_stage", "calibrate_stage", "claims_stage", "decontaminating",
           "finite", "paired_stage"]

# Conformal calibration needs finite scores; a zero probability (log10 = -inf) sorts below every real
# log10 probability (> -400 for any double, > -1e5 for any sequence a server can score) as this does.
_ZERO = -1e300


# --- analysis helpers ---------------------------------------------------------------------------
def finite(log10: Sequence[float]) -> np.ndarray:
    arr = np.asarray(log10, dtype=float)
    return np.where(np.isneginf(arr), _ZERO, arr)


def _unfinite(value: float | None) -> float | None:
    if value is None:
        return None
    return -math.inf if value <= _ZERO / 2 else float(value)


def _alphas(spec: StudySpec) -> list[float]:
    from calib.stats import parse_alpha

    levels = {parse_alpha(a) for a in spec.analyze.alphas} | {parse_alpha(spec.analyze.alpha)}
    return sorted(levels)


def _groups(ctx: StageContext) -> list[dict[str, Any]]:
    """Scored windows grouped by (role, procedure, suffix length), members and controls apart."""
    windows = ctx.table("windows").filter(pl.col("error").is_null()).select("window_id", "membership", "kind")
    scores = ctx.table("scores").filter(pl.col("log10_value").is_not_null())
    joined = scores.join(windows, on="window_id", how="inner")
    drop = set(ctx.spec.analyze.decontaminate) | screened_out(ctx)  # the manual list and the control screen
    joined = joined.with_columns(
        (pl.col("sample_id").is_in(list(drop)) | pl.col("window_id").is_in(list(drop))).alias("contaminated"))
    out = []
    for (role, procedure, suffix), part in joined.sort("window_id").group_by(
            ["role", "procedure", "suffix_tokens"], maintain_order=True):
        members = part.filter(pl.col("membership") == "member")
        controls = part.filter(pl.col("membership") == "control")
        out.append({"role": role, "procedure": procedure, "suffix_tokens": suffix, "model": part["model"][0],
                    "members": members, "controls": controls})
    out.sort(key=lambda g: (ROLES.index(g["role"]) if g["role"] in ROLES else 9, g["procedure"], g["suffix_tokens"]))
    return out


def decontaminating(spec: StudySpec) -> bool:
    """Whether the analysis has a ``decontaminated`` pool: a manual list, or the control screen."""
    return bool(spec.analyze.decontaminate) or spec.extraction.screening()


def _pools(spec: StudySpec, controls: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """The full pool, and the decontaminated one (the manual list and the screen's flags removed)."""
    pools = [("all", controls)]
    if decontaminating(spec):
        pools.append(("decontaminated", controls.filter(~pl.col("contaminated"))))
    return pools


def _primary_pool(spec: StudySpec, controls: pl.DataFrame) -> pl.DataFrame:
    return _pools(spec, controls)[-1][1]


# --- operating points ---------------------------------------------------------------------------
def analysis_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    settings: dict[str, Any] = {"analyze": spec.analyze.model_dump(mode="json", include={
        "alpha", "alphas", "confidence", "fdr", "fwer", "budgets", "budget_confidence", "decontaminate"})}
    if spec.study.kind == "extraction" and spec.extraction.screening():  # without a screen, fingerprints as before
        settings["screen"] = spec.extraction.screen.model_dump(mode="json")
    return settings


async def _operating_points(ctx: StageContext) -> pl.DataFrame:
    from calib.stats import alpha_dagger, sweep

    spec = ctx.spec
    frames = []
    for g in _groups(ctx):
        members = finite(g["members"]["log10_value"].to_list())
        for pool, controls in _pools(spec, g["controls"]):
            if controls.height == 0 or members.size == 0:
                ctx.event("operating_point_skipped", role=g["role"], procedure=g["procedure"], pool=pool,
                          reason=f"{controls.height} controls, {members.size} members scored")
                continue
            values = finite(controls["log10_value"].to_list())
            table = sweep(values, _alphas(spec), members=members, confidence=spec.analyze.confidence)
            table = table.with_columns(
                pl.col("threshold").map_elements(_unfinite, return_dtype=pl.Float64).alias("log10_threshold"),
                pl.lit(g["role"]).alias("role"), pl.lit(g["model"]).alias("model"),
                pl.lit(g["procedure"]).alias("procedure"), pl.lit(g["suffix_tokens"]).alias("suffix_tokens"),
                pl.lit(pool).alias("pool"), pl.lit(values.size).alias("n_controls"),
                pl.lit(alpha_dagger(values)).alias("alpha_dagger"))
            frames.append(table.select(list(OPERATING_POINTS_SCHEMA)).cast(OPERATING_POINTS_SCHEMA))
    if not frames:
        raise CalibError("no (model, procedure, suffix length) has both member and control scores; see the "
                         "scores table's error column and events.jsonl")
    return pl.concat(frames)


# --- per-window claims --------------------------------------------------------------------------
async def _claims(ctx: StageContext) -> pl.DataFrame:
    from calib.stats import benjamini_hochberg, calibrate, p_values

    spec, a = ctx.spec, ctx.spec.analyze
    frames = []
    for g in _groups(ctx):
        pool = _primary_pool(spec, g["controls"])
        if pool.height == 0 or g["members"].height == 0:
            continue
        controls = finite(pool["log10_value"].to_list())
        cal = calibrate(controls, a.alpha)
        probabilistic = is_probabilistic(g["procedure"])
        parts = []
        for side in (g["members"], g["controls"]):
            if side.height == 0:
                continue
            scores = finite(side["log10_value"].to_list())
            if side is g["members"]:
                p = p_values(controls, scores)
            else:  # a control against the other controls of the pool (itself left out when it is in the pool)
                in_pool = ~side["contaminated"].to_numpy()
                ordered = np.sort(controls)
                at_least = controls.size - np.searchsorted(ordered, scores, side="left")
                n = controls.size - in_pool.astype(int)
                p = (1.0 + at_least - in_pool.astype(int)) / (n + 1.0)
            claim = cal.claims(scores) if cal.threshold is not None else None
            margin = None
            if cal.threshold is not None and probabilistic and cal.threshold > _ZERO / 2:
                margin = [None if s <= _ZERO / 2 else float(s - cal.threshold) for s in scores]
            parts.append(side.select("window_id", "sample_id", "membership", "kind", "role", "procedure",
                                     "suffix_tokens", "log10_value", "contaminated").with_columns(
                pl.Series("p_value", p, dtype=pl.Float64),
                pl.Series("margin", margin if margin is not None else [None] * side.height, dtype=pl.Float64),
                pl.Series("claim", claim.tolist() if claim is not None else [None] * side.height,
                          dtype=pl.Boolean)))
        frame = pl.concat(parts)
        members = frame.filter(pl.col("membership") == "member")
        bh = benjamini_hochberg(members["p_value"].to_numpy(), a.fdr)
        m = members.height
        frame = frame.join(members.select("window_id", pl.Series("bh", bh.rejected.tolist(), dtype=pl.Boolean),
                                          (pl.col("p_value") <= a.fwer / m).alias("bonferroni")),
                           on="window_id", how="left")
        frames.append(frame.select(list(EXTRACTION_CLAIMS_SCHEMA)).cast(EXTRACTION_CLAIMS_SCHEMA))
    return pl.concat(frames) if frames else pl.DataFrame(schema=EXTRACTION_CLAIMS_SCHEMA)


# --- budgets ------------------------------------------------------------------------------------
def budget_grid(budgets: Sequence[float]) -> list[float]:
    """Query budgets of the budgets table: powers of ten from 1 to 10^12 plus the spec's budgets."""
    return sorted({float(10 ** i) for i in range(13)} | {float(b) for b in budgets})


async def _budgets(ctx: StageContext) -> pl.DataFrame:
    from calib.stats import log10_min_probability_within

    a = ctx.spec.analyze
    claims = ctx.table("extraction_claims")
    rows = []
    for g in _groups(ctx):
        if not is_probabilistic(g["procedure"]):
            continue
        members = g["members"]
        controls = _primary_pool(ctx.spec, g["controls"])
        mine = claims.filter((pl.col("role") == g["role"]) & (pl.col("procedure") == g["procedure"])
                             & (pl.col("suffix_tokens") == g["suffix_tokens"]) & (pl.col("membership") == "member"))
        claimed = mine.filter(pl.col("claim").fill_null(False))["window_id"].to_list()
        for budget in budget_grid(a.budgets):
            floor = log10_min_probability_within(budget, a.budget_confidence)
            gen_members = members.filter(pl.col("log10_value") >= floor)
            gen_controls = int((controls["log10_value"] >= floor).sum())
            extractable = int(gen_members["window_id"].is_in(claimed).sum())
            n_m, n_c = members.height, controls.height
            rows.append({"role": g["role"], "procedure": g["procedure"], "suffix_tokens": g["suffix_tokens"],
                         "budget": budget, "confidence": a.budget_confidence, "log10_min_probability": floor,
                         "n_members": n_m, "members_generated": gen_members.height, "n_controls": n_c,
                         "controls_generated": gen_controls, "members_extractable": extractable,
                         "member_rate": gen_members.height / n_m if n_m else None,
                         "control_rate": gen_controls / n_c if n_c else None,
                         "extractable_rate": extractable / n_m if n_m else None})
    return pl.DataFrame(rows, schema=BUDGETS_SCHEMA)


# --- paired comparison --------------------------------------------------------------------------
async def _paired(ctx: StageContext) -> pl.DataFrame:
    from calib.stats import calibrate, paired_difference

    spec = ctx.spec
    rows: list[dict[str, Any]] = []
    if spec.models.reference is None:
        return pl.DataFrame(rows, schema=PAIRED_SCHEMA)
    groups = {(g["role"], g["procedure"], g["suffix_tokens"]): g for g in _groups(ctx)}
    for (role, procedure, suffix), target in groups.items():
        reference = groups.get(("reference", procedure, suffix))
        if role != "target" or reference is None:
            continue
        t_members = target["members"].select("sample_id", "window_id", "log10_value")
        r_members = reference["members"].select("window_id", pl.col("log10_value").alias("ref"))
        both = t_members.join(r_members, on="window_id", how="inner")
        if both.height == 0:
            continue
        t_pool = finite(_primary_pool(spec, target["controls"])["log10_value"].to_list())
        r_pool = finite(_primary_pool(spec, reference["controls"])["log10_value"].to_list())
        if t_pool.size == 0 or r_pool.size == 0:
            continue
        t_scores, r_scores = finite(both["log10_value"].to_list()), finite(both["ref"].to_list())
        for alpha in _alphas(spec):
            t_cal, r_cal = calibrate(t_pool, alpha), calibrate(r_pool, alpha)
            if t_cal.threshold is None or r_cal.threshold is None:
                continue
            t_claim, r_claim = t_cal.claims(t_scores), r_cal.claims(r_scores)
            n11 = int(np.count_nonzero(t_claim & r_claim))
            n10 = int(np.count_nonzero(t_claim & ~r_claim))
            n01 = int(np.count_nonzero(~t_claim & r_claim))
            n00 = int(both.height - n11 - n10 - n01)
            diff = paired_difference(n11, n10, n01, n00, spec.analyze.confidence)
            rows.append({"procedure": procedure, "suffix_tokens": suffix, "alpha": alpha,
                         "certified_alpha_target": t_cal.certified_alpha,
                         "certified_alpha_reference": r_cal.certified_alpha, "n": both.height, "both": n11,
                         "target_only": n10, "reference_only": n01, "neither": n00, "difference": diff.estimate,
                         "low": diff.low, "high": diff.high})
    return pl.DataFrame(rows, schema=PAIRED_SCHEMA)


_GROUPED = ("windows", "scores")
calibrate_stage = Stage("calibrate", _GROUPED, "operating_points", "1", analysis_settings, _operating_points)
claims_stage = Stage("claims", _GROUPED, "extraction_claims", "1", analysis_settings, _claims)
budgets_stage = Stage("budgets", (*_GROUPED, "extraction_claims"), "budgets", "1", analysis_settings, _budgets)
paired_stage = Stage("paired", _GROUPED, "paired", "1", analysis_settings, _paired)
