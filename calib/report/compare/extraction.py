"""Comparing extraction runs: each run's claim rates per (role, procedure, suffix length), and their differences.

An extraction run claims a window when its score exceeds the conformal threshold τ calibrated on the
controls at the run's target level α (``analyze.alpha``; the extraction paper §3, D.1), and discovers it
when Benjamini–Hochberg at ``analyze.fdr`` rejects its p-value among the members. The compared rates are
the members' claim rate, their discovery rate and the controls' claim rate (the empirical false-positive
rate), each with its Clopper–Pearson interval, for every (role, procedure, ℓ_s) both runs scored. Two runs
that scored the same windows (the same ``window_id`` of the same sample with the same prefix and suffix
text: a window cut with another tokenizer is another window) are compared on the windows both counted,
with Newcombe's paired interval and McNemar's exact test; otherwise as independent samples (Newcombe's
hybrid interval, Fisher's exact test). The p-values of all comparisons are adjusted together.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from calib.report.compare.differences import adjust_comparisons, independent_body, paired_body
from calib.report.compare.functional import run_pairs
from calib.report.compare.runs import ComparedRun, model_of
from calib.report.run import setting
from calib.stats import clopper_pearson

__all__ = ["EXTRACTION_RATES", "GROUP_KEYS", "compare_extraction", "window_flags"]

#: The compared rates: key -> (label, the populations it is defined for).
EXTRACTION_RATES: dict[str, tuple[str, tuple[str, ...]]] = {
    "claim": ("claimed (score > τ at α)", ("members", "controls")),
    "bh": ("discovered (Benjamini–Hochberg)", ("members",)),
}

#: The populations: key -> the ``membership`` value of the claims table.
POPULATIONS: dict[str, str] = {"members": "member", "controls": "control"}

#: What a compared group is: the model's role, the scoring procedure and the suffix length ℓ_s.
GROUP_KEYS = ("role", "procedure", "suffix_tokens")


def window_flags(run: ComparedRun) -> pl.DataFrame:
    """One row per scored window of ``run`` and group: its group, ``membership``, ``text`` and the flags.

    ``text`` is the window's prefix and suffix (a window is shared only when its text is the same);
    ``claim`` and ``bh`` are null where the run could not decide (no threshold at α: K = 0; BH: controls).
    """
    tables = run.data.tables  # type: ignore[union-attr]
    windows = tables["windows"]
    prefix = pl.col("prefix") if "prefix" in windows.columns else pl.lit("")
    text = windows.select("window_id", pl.concat_str([prefix.fill_null(""), pl.lit("\x00"),
                                                      pl.col("suffix").fill_null("")]).alias("text"))
    claims = tables["extraction_claims"].select("window_id", "sample_id", "membership", *GROUP_KEYS, "claim", "bh")
    return claims.join(text, on="window_id", how="left")


def _models(run: ComparedRun) -> dict[str, str]:
    """role -> the model that role scored with (the operating points table)."""
    points = run.data.tables["operating_points"]  # type: ignore[union-attr]
    return dict(points.select("role", "model").unique("role", keep="first").iter_rows())


def _primary(run: ComparedRun, alpha: float) -> dict[tuple[Any, ...], dict[str, Any]]:
    """group -> the operating point of the claims (α = ``alpha``, the decontaminated pool where there is one)."""
    points = run.data.tables["operating_points"]  # type: ignore[union-attr]
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in points.filter(pl.col("alpha").is_not_null()).iter_rows(named=True):
        if not np.isclose(row["alpha"], alpha, rtol=1e-9, atol=0.0):
            continue
        key = tuple(row[k] for k in GROUP_KEYS)
        if key not in out or row["pool"] == "decontaminated":
            out[key] = row
    return out


def _counted(flags: pl.DataFrame, group: tuple[Any, ...], population: str, rate: str) -> pl.DataFrame:
    """The windows of ``group`` and ``population`` on which the run decided ``rate``."""
    where = [pl.col(k) == v for k, v in zip(GROUP_KEYS, group, strict=True)]
    return flags.filter(*where, pl.col("membership") == POPULATIONS[population], pl.col(rate).is_not_null())


def _groups(flags: pl.DataFrame) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in flags.select(*GROUP_KEYS).unique(maintain_order=True).iter_rows()]


def _rate(run: str, flags: pl.DataFrame, group: tuple[Any, ...], population: str, rate: str, models: dict[str, str],
          point: dict[str, Any] | None, confidence: float) -> dict[str, Any]:
    part = _counted(flags, group, population, rate)
    k = int(part[rate].sum())
    return {"run": run, **dict(zip(GROUP_KEYS, group, strict=True)), "model": models.get(group[0]),
            "population": population, "rate": rate, "label": EXTRACTION_RATES[rate][0], "n": part.height,
            "pool": point["pool"] if point else None, "n_controls": point["n_controls"] if point else None,
            "certified_alpha": point["certified_alpha"] if point else None,
            "interval": clopper_pearson(k, part.height, confidence).to_dict() if part.height else None}


def _compare(a: pl.DataFrame, b: pl.DataFrame, rate: str, confidence: float) -> dict[str, Any]:
    """rate(b) − rate(a): paired on the windows both runs counted when they share windows, else independent."""
    joined = a.join(b, on="window_id", how="inner", suffix="_b")
    same = joined.filter((pl.col("sample_id") == pl.col("sample_id_b")) & pl.col("text").eq_missing(pl.col("text_b")))
    out: dict[str, Any] = {"shared": same.height, "conflicting_ids": joined.height - same.height,
                           "n_a": a.height, "n_b": b.height}
    if same.height:
        return {**out, "design": "paired", "n_paired": same.height, "dropped_a": a.height - same.height,
                "dropped_b": b.height - same.height,
                **paired_body(same[rate].to_numpy(), same[f"{rate}_b"].to_numpy(), confidence)}
    out.update(design="independent", n_paired=0, dropped_a=0, dropped_b=0)
    if a.height == 0 or b.height == 0:
        return {**out, "difference": None, "p_value": None, "test": None,
                "note": f"no decided window in {'either run' if a.height == b.height else 'one run'}"}
    return {**out, **independent_body(int(a[rate].sum()), a.height, int(b[rate].sum()), b.height, confidence)}


def compare_extraction(runs: list[ComparedRun], point: dict[str, Any], *, pairing: str = "baseline",
                       adjust: str = "holm") -> dict[str, Any]:
    """The rates of every run and the comparisons of the pairs of ``pairing``, p-values adjusted by ``adjust``.

    ``point`` is the runs' shared operating point (``analyze.alpha``, ``analyze.confidence``,
    ``analyze.fdr``). Returns ``{"runs", "rates", "comparisons", "unmatched"}`` (docs/compare-runs.md,
    "Extraction runs"); a comparison's ``difference`` is rate(b) − rate(a), run a being the earlier run
    on the command line. ``unmatched`` lists the groups a compared pair does not share.
    """
    confidence, alpha = float(point["analyze.confidence"]), float(point["analyze.alpha"])
    flags = [window_flags(run) for run in runs]
    models = [_models(run) for run in runs]
    primary = [_primary(run, alpha) for run in runs]
    rates = [_rate(run.label, f, group, population, rate, m, p.get(group), confidence)
             for run, f, m, p in zip(runs, flags, models, primary, strict=True) for group in _groups(f)
             for rate, (_, populations) in EXTRACTION_RATES.items() for population in populations]
    comparisons: list[dict[str, Any]] = []
    unmatched: list[dict[str, Any]] = []
    for i, j in run_pairs(len(runs), pairing):
        groups_a, groups_b = _groups(flags[i]), _groups(flags[j])
        for label, only in ((runs[i].label, [g for g in groups_a if g not in groups_b]),
                            (runs[j].label, [g for g in groups_b if g not in groups_a])):
            unmatched += [{"run_a": runs[i].label, "run_b": runs[j].label, "only_in": label,
                           **dict(zip(GROUP_KEYS, g, strict=True))} for g in only]
        for group in (g for g in groups_a if g in groups_b):
            for rate, (label, populations) in EXTRACTION_RATES.items():
                for population in populations:
                    a, b = (_counted(flags[i], group, population, rate), _counted(flags[j], group, population, rate))
                    if a.height == 0 and b.height == 0:
                        continue
                    comparisons.append({
                        "run_a": runs[i].label, "run_b": runs[j].label, **dict(zip(GROUP_KEYS, group, strict=True)),
                        "model_a": models[i].get(group[0]), "model_b": models[j].get(group[0]),
                        "population": population, "rate": rate, "label": label,
                        "certified_alpha_a": (primary[i].get(group) or {}).get("certified_alpha"),
                        "certified_alpha_b": (primary[j].get(group) or {}).get("certified_alpha"),
                        **_compare(a, b, rate, confidence)})
    adjust_comparisons(comparisons, adjust, confidence)
    return {"runs": [_run_record(run, f) for run, f in zip(runs, flags, strict=True)], "rates": rates,
            "comparisons": comparisons, "unmatched": unmatched}


def _run_record(run: ComparedRun, flags: pl.DataFrame) -> dict[str, Any]:
    windows = flags.unique("window_id")
    membership = windows["membership"]
    return {"label": run.label, "path": str(run.root), "study": setting(run.spec, "study.name"),
            "target": model_of(run.spec, "target"), "reference": model_of(run.spec, "reference"),
            "organism_seed": setting(run.spec, "organism.seed") if setting(run.spec, "data.source") == "organism"
            else None, "windows": windows.height,
            **{population: int((membership == value).sum()) for population, value in POPULATIONS.items()}}
