"""Seeded percentile bootstrap over items, resampled in bounded chunks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._checks import check_confidence, check_count, check_finite_array
from .result import Result

__all__ = ["BootstrapInterval", "bootstrap_ci"]

# Resampled values materialised at once (indices plus gathered data, 8 bytes each): 2**22 keeps a
# chunk near 64 MiB, so 10,000 resamples of 100,000 items run in ~240 chunks instead of one 8 GB array.
_CHUNK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class BootstrapInterval(Result):
    """A percentile bootstrap interval for a scalar statistic of ``n`` items.

    Attributes
    ----------
    estimate : float
        The statistic on the original data.
    low, high : float
        The γ/2 and 1 − γ/2 quantiles (γ = 1 − confidence) of the resampled statistics.
    n : int
        Items (rows of the data).
    n_resamples : int
        Bootstrap resamples drawn.
    confidence : float
        The confidence level.
    seed : int
        Seed of ``numpy.random.default_rng``; the same data, statistic and seed give the same result.
    method : str
        ``"percentile"``.
    """

    estimate: float
    low: float
    high: float
    n: int
    n_resamples: int
    confidence: float
    seed: int
    method: str


def _mean_over_items(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return x.mean(axis=-1)


def _as_items(data: ArrayLike) -> NDArray[np.float64]:
    """Return ``data`` as a float array of items along axis 0 (1-D or 2-D, finite, non-empty)."""
    try:
        arr = np.asarray(data, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"data must be an array of numbers: {exc}") from exc
    if arr.ndim == 1:
        if arr.size == 0:
            raise ValueError("data is empty; the bootstrap needs at least one item")
        return check_finite_array("data", arr)
    if arr.ndim != 2:
        raise ValueError(f"data must be 1-D (items) or 2-D (items × columns), got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"data is empty (shape {arr.shape}); the bootstrap needs at least one item")
    finite = np.isfinite(arr)
    if not finite.all():
        i, j = np.argwhere(~finite)[0]
        raise ValueError(f"data[{i}, {j}] is {arr[i, j]!r}; values must be finite numbers")
    return arr


def _evaluate(
    statistic: Callable[..., Any], samples: NDArray[np.float64], vectorized: bool
) -> NDArray[np.float64]:
    """The statistic of each resample in ``samples`` (leading axis = resample), as a 1-D array."""
    b = samples.shape[0]
    if vectorized:
        out = np.asarray(statistic(samples), dtype=np.float64)
        if out.shape != (b,):
            raise ValueError(
                f"statistic must return one value per resample, shape ({b},), for input of shape "
                f"{samples.shape}, got shape {out.shape}; reduce every axis but the first "
                "(e.g. lambda x: x.mean(axis=-1)) or pass vectorized=False"
            )
    else:
        out = np.empty(b, dtype=np.float64)
        for i in range(b):
            value = np.asarray(statistic(samples[i]), dtype=np.float64)
            if value.size != 1:
                raise ValueError(
                    f"statistic must return a single number per resample, got shape {value.shape}"
                )
            out[i] = value.item()
    if not np.isfinite(out).all():
        raise ValueError("statistic returned a non-finite value (nan or inf) on a resample")
    return out


def bootstrap_ci(
    data: ArrayLike,
    statistic: Callable[..., Any] | None = None,
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    vectorized: bool = True,
) -> BootstrapInterval:
    """Percentile bootstrap confidence interval for a statistic of i.i.d. items.

    Each resample draws n items (rows of ``data``) with replacement; the interval is the γ/2 and
    1 − γ/2 quantiles (γ = 1 − confidence, linear interpolation) of the statistic over
    ``n_resamples`` resamples (Efron & Tibshirani 1993, ch. 13). Indices come from
    ``numpy.random.default_rng(seed)`` and are drawn in chunks of bounded size; the chunking does not
    change the result.

    The statistic contract:

    * ``vectorized=True`` (default): ``statistic`` receives a batch of resamples with a leading
      resample axis, shape ``(b, n)`` for 1-D data or ``(b, n, d)`` for 2-D data, and returns an
      array of shape ``(b,)``, one value per resample, e.g. ``lambda x: x.mean(axis=-1)`` for 1-D
      data or ``lambda x: x[..., 0].sum(axis=-1) / x[..., 1].sum(axis=-1)`` for a ratio of columns.
      ``b`` varies between calls (it is the chunk size).
    * ``vectorized=False``: ``statistic`` receives one resample, shape ``(n,)`` or ``(n, d)``, and
      returns one number; slower (a Python call per resample).

    The estimate is the statistic of the original data, evaluated through the same contract (a batch
    of one, ``data[None]``, when vectorised). Without a statistic, 1-D data get the mean; 2-D data
    need an explicit statistic.

    Parameters
    ----------
    data : array_like
        Items: shape ``(n,)`` or ``(n, d)``, finite numbers (booleans count as 0/1), n >= 1.
    statistic : callable, optional
        See the contract above. Default: the mean over items (1-D data only).
    n_resamples : int, default 10_000
        Resamples, >= 1.
    confidence : float, default 0.95
        Confidence level in (0, 1).
    seed : int, default 0
        Seed (>= 0) for ``numpy.random.default_rng``.
    vectorized : bool, default True
        Whether ``statistic`` takes a batch of resamples (see above).

    Returns
    -------
    BootstrapInterval
        ``method == "percentile"``. For n = 1 or constant data every resample equals the data, so
        ``low == high == estimate`` (for statistics that depend only on the values).

    Raises
    ------
    ValueError
        Naming ``data``, ``statistic``, ``n_resamples``, ``confidence`` or ``seed``.

    References
    ----------
    B. Efron (1979). Bootstrap methods: another look at the jackknife. *Annals of Statistics*
    7(1):1–26. B. Efron and R. J. Tibshirani (1993). *An Introduction to the Bootstrap*. Chapman &
    Hall, ch. 13 ("the percentile interval").
    """
    arr = _as_items(data)
    n_resamples = check_count("n_resamples", n_resamples, minimum=1)
    conf = check_confidence(confidence)
    seed = check_count("seed", seed)
    if statistic is None:
        if arr.ndim != 1:
            raise ValueError(
                f"statistic is required for 2-D data (shape {arr.shape}); the default mean is "
                "defined for 1-D data only"
            )
        statistic, vectorized = _mean_over_items, True
    elif not callable(statistic):
        raise ValueError(f"statistic must be callable, got {statistic!r}")

    estimate = float(_evaluate(statistic, arr[None, ...], vectorized)[0])

    n = arr.shape[0]
    per_resample = arr.size  # gathered values per resample (n, or n·d)
    chunk = max(1, _CHUNK_ELEMENTS // per_resample)
    rng = np.random.default_rng(seed)
    thetas = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        # Row-by-row draws from one generator: chunks of any size consume the stream identically.
        idx = rng.integers(0, n, size=(b, n))
        thetas[start : start + b] = _evaluate(statistic, arr[idx], vectorized)

    gamma = 1.0 - conf
    low, high = np.quantile(thetas, [gamma / 2.0, 1.0 - gamma / 2.0])
    return BootstrapInterval(
        estimate=estimate,
        low=float(low),
        high=float(high),
        n=n,
        n_resamples=n_resamples,
        confidence=conf,
        seed=seed,
        method="percentile",
    )
