"""How the similarity metrics agree with each other and with execution (functional-memorization paper §5.2, Fig. 3(a)).

The paper correlates every similarity metric and SIM_func (continuous, in [0, 1]) over the target model's
generations with Pearson's r. Here the correlation matrix covers the conclusive (sample, role) pairs of
:func:`~calib.report.functional.proxies.proxy_pairs` (target and reference completions pooled, as the
proxy table's first evaluation), with Pearson's r (the paper's) and Spearman's ρ (Pearson's r of average
ranks, insensitive to the metrics' different scales). Each cell uses the pairs on which both variables have a
finite value (its ``n``); a cell is null when fewer than 3 pairs remain or either variable is constant there.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from calib.report.functional.samples import FUNC_METRIC, ROLES
from calib.report.run import RunData

__all__ = ["MIN_PAIRS", "correlation", "metric_agreement", "metric_columns"]

#: The fewest pairs a correlation is computed on.
MIN_PAIRS = 3


def metric_columns(run: RunData, pairs: pl.DataFrame, metrics: list[str]) -> pl.DataFrame:
    """``pairs`` (``sample_id, role, sim_func``) with one Float64 column per metric (null: no finite value)."""
    out = pairs
    for metric in metrics:
        values = (run.similarities.filter(pl.col("metric") == metric)
                  .select(pl.col("sample_id").cast(pl.String), pl.col("role").cast(pl.String),
                          pl.col("value").cast(pl.Float64).alias(metric))
                  .unique(subset=["sample_id", "role"], keep="first", maintain_order=True))
        out = out.join(values, on=["sample_id", "role"], how="left", maintain_order="left")
        out = out.with_columns(pl.when(pl.col(metric).is_finite()).then(pl.col(metric)).alias(metric))
    return out


def correlation(x: np.ndarray, y: np.ndarray) -> float | None:
    """Pearson's r of two equal-length arrays (centred dot product over the norms), clipped to [-1, 1]; None
    below :data:`MIN_PAIRS` values or where either is constant."""
    if x.size < MIN_PAIRS or np.ptp(x) == 0.0 or np.ptp(y) == 0.0:
        return None
    xc, yc = x - x.mean(), y - y.mean()
    r = float(xc @ yc / math.sqrt(float(xc @ xc) * float(yc @ yc)))
    return min(1.0, max(-1.0, r))


def metric_agreement(run: RunData, pairs: pl.DataFrame, metrics: list[str]) -> dict[str, Any]:
    """The correlation matrices of ``metrics`` and SIM_func over ``pairs`` (see the module docstring).

    Returns ``roles, n_pairs, variables`` (the metrics, then ``sim_func``), ``pearson``, ``spearman``
    (square matrices in the order of ``variables``; null where undefined) and ``n`` (pairs behind each cell).
    """
    variables = [*metrics, FUNC_METRIC]
    frame = metric_columns(run, pairs, metrics)
    columns = {v: frame[v].to_numpy().astype(np.float64) if frame.height else np.empty(0) for v in variables}
    size = len(variables)
    pearson: list[list[float | None]] = [[None] * size for _ in range(size)]
    spearman: list[list[float | None]] = [[None] * size for _ in range(size)]
    counts = [[0] * size for _ in range(size)]
    for i, a in enumerate(variables):
        for j in range(i, size):
            x, y = columns[a], columns[variables[j]]
            both = ~np.isnan(x) & ~np.isnan(y)
            xs, ys = x[both], y[both]
            r = correlation(xs, ys)
            rho = correlation(stats.rankdata(xs), stats.rankdata(ys)) if r is not None else None
            pearson[i][j] = pearson[j][i] = r
            spearman[i][j] = spearman[j][i] = rho
            counts[i][j] = counts[j][i] = int(both.sum())
    present = set(pairs["role"].to_list())
    roles = [role for role in ROLES if role in present]
    return {"roles": roles, "n_pairs": pairs.height, "variables": variables, "pearson": pearson,
            "spearman": spearman, "n": counts}
