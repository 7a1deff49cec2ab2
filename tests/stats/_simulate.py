"""Shared pieces of the simulation validity suite (docs/statistics.md, "Validity suite").

Every validity test draws replicates from a known truth with a seeded ``numpy.random.Generator``,
applies calib's own function (or a vectorised path checked equal to it on a subset) and compares an
observed coverage or error rate with the nominal level, allowing a Monte-Carlo tolerance of
``Z_MC`` binomial standard errors.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

#: Replicates of the default run (at least 10^4, the issue's floor) and of ``-m validity_large``.
DEFAULT_REPLICATES = 10_000
LARGE_REPLICATES = 100_000

#: Monte-Carlo tolerance in binomial standard errors. A one-sided 3-SE check fails a procedure
#: whose true rate sits exactly at the nominal level with probability Phi(-3) = 0.13 %; every test is
#: seeded, so a given seed either passes or fails for good.
Z_MC = 3.0

#: p-value below which a Kolmogorov–Smirnov test counts as a rejection of the stated law.
KS_LEVEL = 1e-3

#: Parametrisation shared by the tests: the default replicate count, and 10^5 under the marker.
REPLICATES = [
    pytest.param(DEFAULT_REPLICATES, id="1e4"),
    pytest.param(LARGE_REPLICATES, id="1e5", marks=pytest.mark.validity_large),
]


#: When set, every check appends its figure to this file as a JSON line (benchmarks/validity.py).
FIGURES_ENV = "CALIB_VALIDITY_FIGURES"


def record(what: str, observed: float, target: float, replicates: int | None, relation: str) -> None:
    """Append one observed figure to $CALIB_VALIDITY_FIGURES, if set (nothing otherwise)."""
    path = os.environ.get(FIGURES_ENV)
    if path:
        line = {"check": what, "observed": float(observed), "relation": relation, "target": float(target),
                "replicates": replicates}
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


def mc_tolerance(rate: float, replicates: int, z: float = Z_MC) -> float:
    """Z_MC binomial standard errors of an observed rate: z * sqrt(rate (1 - rate) / R)."""
    return z * math.sqrt(rate * (1.0 - rate) / replicates)


def mean_tolerance(values: NDArray[np.float64], z: float = Z_MC) -> float:
    """Z_MC standard errors of the mean of ``values`` (sample sd / sqrt(R)), for bounded non-binary
    per-replicate quantities such as the false discovery proportion."""
    return z * float(np.std(values, ddof=1)) / math.sqrt(values.size)


def assert_at_least(observed: float, nominal: float, replicates: int, what: str, allowance: float = 0.0) -> None:
    """Coverage check: observed >= nominal - Z_MC * sqrt(nominal (1 - nominal) / R) - allowance.

    ``allowance`` is non-zero only for methods whose coverage is correct to a stated order, not exact
    (the percentile bootstrap: 1/n, docs/statistics.md "Validity suite").
    """
    tol = mc_tolerance(nominal, replicates)
    record(what, observed, nominal - allowance, replicates, ">=")
    assert observed >= nominal - tol - allowance, (
        f"{what}: observed {observed:.4f} < nominal {nominal:g} - MC tolerance {tol:.4f}"
        + (f" - allowance {allowance:.4f}" if allowance else "")
        + f" over {replicates} replicates"
    )


def assert_at_most(observed: float, level: float, replicates: int, what: str) -> None:
    """Error-rate check: observed <= level + Z_MC * sqrt(level (1 - level) / R)."""
    tol = mc_tolerance(level, replicates)
    record(what, observed, level, replicates, "<=")
    assert observed <= level + tol, (
        f"{what}: observed {observed:.5f} > level {level:.5g} + MC tolerance {tol:.5f} "
        f"over {replicates} replicates"
    )


def wilson(
    k: NDArray[np.float64], n: NDArray[np.float64], z: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Wilson score limits for arrays of k out of n, exactly 0 at k = 0 and 1 at k = n."""
    p = k / n
    z2 = z * z
    centre = (2 * k + z2) / (2 * (n + z2))
    half = z * np.sqrt(z2 + 4 * k * (1 - p)) / (2 * (n + z2))
    low = np.where(k == 0, 0.0, np.maximum(0.0, centre - half))
    high = np.where(k == n, 1.0, np.minimum(1.0, centre + half))
    return low, high


def newcombe_vectorized(
    tables: NDArray[np.int64], z: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Newcombe's method 10 for an (m, 4) array of paired tables (n11, n10, n01, n00), each with
    n >= 1; the formula of docs/statistics.md written with numpy, checked equal to
    ``calib.stats.paired_difference`` table by table in the tests before it is used."""
    a, b, c, d = (tables[:, j].astype(np.float64) for j in range(4))
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n, z)
    l2, u2 = wilson(a + c, n, z)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    numerator = np.where(cross > 0, np.maximum(cross - n / 2.0, 0.0), cross)
    phi = np.where(margins == 0, 0.0, numerator / np.sqrt(np.where(margins == 0, 1.0, margins)))
    theta = (b - c) / n
    delta = np.sqrt(np.maximum(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    eps = np.sqrt(np.maximum(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return np.maximum(-1.0, theta - delta), np.minimum(1.0, theta + eps)


def clopper_pearson_vectorized(
    k: NDArray[np.int64], n: NDArray[np.int64], confidence: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Clopper–Pearson limits for arrays of k out of n: the Beta quantiles of docs/statistics.md,
    checked equal to ``calib.stats.clopper_pearson`` in the tests before it is used."""
    gamma = 1.0 - confidence
    with np.errstate(invalid="ignore"):
        low = np.where(k == 0, 0.0, stats.beta.ppf(gamma / 2.0, k, n - k + 1))
        high = np.where(k == n, 1.0, stats.beta.ppf(1.0 - gamma / 2.0, k + 1, n - k))
    return low, high


def bootstrap_means(
    values: NDArray[np.float64], n_resamples: int, seed: int, confidence: float, block: int = 500
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Percentile bootstrap limits of the mean for each row of ``values`` (R, n) at once.

    ``calib.stats.bootstrap_ci`` draws the resample indices from ``default_rng(seed)`` as one
    (n_resamples, n) matrix (one chunk for the sizes used here), the same for every call with that
    seed, so the resampled means of every replicate are ``values @ W.T`` with W the (n_resamples, n)
    matrix of resample counts / n. The tests check the limits equal calib's on a subset.
    """
    r, n = values.shape
    idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    weights = np.zeros((n_resamples, n))
    np.add.at(weights, (np.repeat(np.arange(n_resamples), n), idx.ravel()), 1.0 / n)
    gamma = 1.0 - confidence
    low, high = np.empty(r), np.empty(r)
    for start in range(0, r, block):
        thetas = values[start : start + block] @ weights.T
        low[start : start + block], high[start : start + block] = np.quantile(
            thetas, [gamma / 2.0, 1.0 - gamma / 2.0], axis=1
        )
    return low, high
