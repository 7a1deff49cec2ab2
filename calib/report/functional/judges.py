"""Agreement between a study's several judges, and between its several embedding models (paper §5.2).

The functional-memorization paper compares LLM judges (LLaMA-3.3-70B-Instruct and Claude Sonnet-4.6 on the
same prompts) and embedding models (Qwen3-Embedding at three sizes, Nomic-Embed-Code) as proxies of
execution. A study that names several servers in ``measure.judge_server`` or ``measure.embedding_server``
records each further server's metrics as ``METRIC@SERVER`` beside the first server's plain ``METRIC``
(docs/metrics.md, "Several judges and embedding models"); a *family* is one metric on every server
(``judge_functional``, ``judge_functional@b``, ...).

For each family with at least two members, every pair of members is compared over the (sample, completion)
pairs of the similarities table where both have a finite value (target and reference completions pooled;
no execution needed), with its ``n``:

* Pearson's r and Spearman's ρ (Pearson's r of average ranks), null below :data:`MIN_PAIRS` pairs or
  where either is constant;
* for judges, Cohen's κ of the two judges' score levels: calib's judge metrics have no threshold of their
  own (a score in [0, 1]), so each score is rounded to the nearest tenth, giving the ordinal levels 0, 0.1,
  ..., 1, and κ is quadratic-weighted over those 11 levels (``sklearn.metrics.cohen_kappa_score(...,
  weights="quadratic", labels=range(11))``; Cohen 1968), null below :data:`MIN_PAIRS` pairs or where
  it is undefined (both judges give one level throughout).
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from calib.report.functional.agreement import MIN_PAIRS, correlation
from calib.report.functional.methods import server_names
from calib.report.functional.samples import ROLES
from calib.report.run import RunData, setting

__all__ = ["KAPPA_LEVELS", "SUFFIX", "families", "judges_agreement", "score_levels"]

#: Joins a metric's name and a further server's (calib.study.sections.functional.SERVER_SUFFIX).
SUFFIX = "@"
#: The ordinal levels a judge's score is rounded to for Cohen's κ: 0, 0.1, ..., 1.
KAPPA_LEVELS = 11


def score_levels(values: np.ndarray) -> np.ndarray:
    """Scores in [0, 1] as the integer levels 0..10 (the nearest tenth, halves up); out-of-range values clipped."""
    return np.clip(np.floor(np.asarray(values, dtype=np.float64) * (KAPPA_LEVELS - 1) + 0.5), 0,
                   KAPPA_LEVELS - 1).astype(np.int64)


def families(metrics: list[str], spec: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Judge and embedding metrics measured on several servers: base metric -> its members in server order.

    Each member is ``{"metric": NAME, "server": SERVER}``; the first is the plain name (the first server of
    ``measure.judge_server`` / ``measure.embedding_server``). Families of one member are left out.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for name in metrics:
        base, _, server = name.partition(SUFFIX)
        if not (base.startswith("judge_") or base == "embedding"):
            continue
        if not server:
            key = "measure.judge_server" if base.startswith("judge_") else "measure.embedding_server"
            first = server_names(setting(spec, key))
            server = first[0] if first else None
        out.setdefault(base, []).append({"metric": name, "server": server})
    return {base: members for base, members in out.items() if len(members) > 1}


def _pairs(run: RunData, names: list[str]) -> pl.DataFrame:
    """One row per (sample, role) with a Float64 column per metric of ``names`` (null: no finite value)."""
    sims = (run.similarities
            .filter(pl.col("metric").is_in(names) & pl.col("role").is_in(ROLES)
                    & pl.col("sample_id").is_in(run.samples["sample_id"].implode()))
            .select(pl.col("sample_id").cast(pl.String), pl.col("role").cast(pl.String),
                    pl.col("metric").cast(pl.String), pl.col("value").cast(pl.Float64))
            .unique(subset=["sample_id", "role", "metric"], keep="first", maintain_order=True))
    wide = sims.pivot(on="metric", index=["sample_id", "role"], values="value") if sims.height else pl.DataFrame(
        schema={"sample_id": pl.String(), "role": pl.String()})
    for name in names:
        if name not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(name))
        wide = wide.with_columns(pl.when(pl.col(name).is_finite()).then(pl.col(name)).alias(name))
    return wide.sort("sample_id", "role")


def _kappa(x: np.ndarray, y: np.ndarray) -> float | None:
    from sklearn.metrics import cohen_kappa_score

    if x.size < MIN_PAIRS:
        return None
    a, b = score_levels(x), score_levels(y)
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return None  # one level throughout: chance agreement is total, κ is 0/0
    kappa = float(cohen_kappa_score(a, b, weights="quadratic", labels=list(range(KAPPA_LEVELS))))
    return None if math.isnan(kappa) else kappa


def _compare(frame: pl.DataFrame, a: str, b: str, judges: bool) -> dict[str, Any]:
    x = frame[a].to_numpy().astype(np.float64) if frame.height else np.empty(0)
    y = frame[b].to_numpy().astype(np.float64) if frame.height else np.empty(0)
    both = ~np.isnan(x) & ~np.isnan(y)
    xs, ys = x[both], y[both]
    r = correlation(xs, ys)
    rho = correlation(stats.rankdata(xs), stats.rankdata(ys)) if xs.size >= MIN_PAIRS else None
    record: dict[str, Any] = {"a": a, "b": b, "n": int(both.sum()), "pearson_r": r, "spearman_rho": rho}
    if judges:
        record["kappa"] = _kappa(xs, ys)
    return record


def judges_agreement(run: RunData, metrics: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Pairwise agreement within each judge family and each embedding family (see the module docstring).

    Returns ``{"judges": [...], "embeddings": [...]}``: one record per family, ``metric`` (the base name),
    ``members`` (``metric, server``), ``n_pairs`` (the (sample, completion) pairs where any member has a
    value) and ``pairs``: one record per two members ``a, b, n, pearson_r, spearman_rho`` and, for judges,
    ``kappa`` (quadratic-weighted over the 11 score levels). Both lists are empty when no metric was
    measured on several servers.
    """
    out: dict[str, list[dict[str, Any]]] = {"judges": [], "embeddings": []}
    for base, members in families(metrics, run.spec).items():
        names = [m["metric"] for m in members]
        frame = _pairs(run, names)
        judges = base.startswith("judge_")
        any_value = frame.select(pl.any_horizontal(pl.col(n).is_not_null() for n in names)).to_series() \
            if frame.height else pl.Series([], dtype=pl.Boolean)
        record = {"metric": base, "members": members, "n_pairs": int(any_value.sum()),
                  "pairs": [_compare(frame, a, b, judges) for a, b in combinations(names, 2)]}
        out["judges" if judges else "embeddings"].append(record)
    return out
