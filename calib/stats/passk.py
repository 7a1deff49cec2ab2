"""pass@k with a bootstrap over problems, and the Jensen–Shannon divergence of two histograms."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import rel_entr

from ._checks import check_count
from .bootstrap import bootstrap_ci
from .result import Result

__all__ = ["PassAtK", "jensen_shannon", "pass_at_k", "pass_at_k_summary"]


@dataclass(frozen=True)
class PassAtK(Result):
    """pass@k over a set of problems with a percentile bootstrap interval over problems.

    Attributes
    ----------
    estimate : float
        Mean over problems of the unbiased per-problem pass@k.
    low, high : float
        Percentile bootstrap limits (problems resampled with replacement).
    k : int
        Attempts allowed per problem.
    n_problems : int
        Problems.
    n_resamples : int
        Bootstrap resamples.
    confidence : float
        The confidence level.
    seed : int
        Bootstrap seed.
    method : str
        ``"unbiased-percentile-bootstrap"``.
    """

    estimate: float
    low: float
    high: float
    k: int
    n_problems: int
    n_resamples: int
    confidence: float
    seed: int
    method: str


def _pass_at_k_unchecked(n: int, c: int, k: int) -> float:
    if n - c < k:
        # Every k-subset of the n samples holds a correct one.
        return 1.0
    # Chen et al. (2021), Fig. 3: 1 - C(n-c, k)/C(n, k) = 1 - prod_{i=n-c+1}^{n} (1 - k/i), which
    # avoids the huge binomial coefficients of the closed form.
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator of pass@k for one problem: n samples drawn, c of them correct.

    pass@k = 1 − C(n − c, k) / C(n, k), the probability that a k-subset drawn without replacement
    from the n samples contains at least one correct sample (Chen et al. 2021, eq. 1), computed with
    their numerically stable product 1 − ∏_{i=n−c+1}^{n} (1 − k/i) (their Fig. 3).

    Parameters
    ----------
    n : int
        Samples generated for the problem, n >= 1.
    c : int
        Correct samples, 0 <= c <= n.
    k : int
        Attempts, 1 <= k <= n.

    Returns
    -------
    float
        A value in [0, 1]; 0 when c = 0, 1 when n − c < k.

    Raises
    ------
    ValueError
        Naming ``n``, ``c`` or ``k`` when out of range.

    References
    ----------
    M. Chen et al. (2021). Evaluating large language models trained on code. arXiv:2107.03374,
    section 2.1, eq. (1) and Fig. 3.
    """
    n = check_count("n", n, minimum=1)
    c = check_count("c", c)
    k = check_count("k", k, minimum=1)
    if c > n:
        raise ValueError(f"c must be an integer in [0, n] = [0, {n}], got {c}")
    if k > n:
        raise ValueError(f"k must be an integer in [1, n] = [1, {n}], got {k}; draw at least k samples")
    return _pass_at_k_unchecked(n, c, k)


def _int_array(name: str, values: ArrayLike) -> NDArray[np.int64]:
    """``values`` as a 1-D int64 array of non-negative integers; errors name ``name[i]``."""
    arr = np.atleast_1d(np.asarray(values))
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must hold integers, got dtype {arr.dtype}")
    as_float = arr.astype(np.float64)
    bad = ~np.isfinite(as_float) | (as_float < 0) | (as_float != np.round(as_float))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name}[{i}] must be an integer >= 0, got {arr[i]!r}")
    return arr.astype(np.int64)


def pass_at_k_summary(
    n: int | ArrayLike,
    c: ArrayLike,
    k: int,
    *,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> PassAtK:
    """pass@k over problems with a percentile bootstrap interval over problems.

    The estimate is the mean over problems i of the unbiased pass@k(n_i, c_i, k) (Chen et al. 2021,
    eq. 1); the interval resamples problems with replacement (``bootstrap_ci`` with the mean of the
    per-problem values), so it covers the uncertainty from the choice of problems, treated as i.i.d.
    draws from a population of problems, plus the sampling of attempts within them.

    Parameters
    ----------
    n : int or array_like of int
        Samples per problem, one value for all problems or one per problem, each >= k.
    c : array_like of int
        Correct samples per problem, 0 <= c_i <= n_i; its length is the number of problems.
    k : int
        Attempts, k >= 1.
    confidence : float, default 0.95
        Confidence level in (0, 1).
    n_resamples : int, default 10_000
        Bootstrap resamples.
    seed : int, default 0
        Bootstrap seed.

    Returns
    -------
    PassAtK
        With one problem the interval collapses to the estimate (there is nothing to resample).

    Raises
    ------
    ValueError
        Naming the problem index when k > n_i or c_i > n_i, or the parameter that is out of range.

    References
    ----------
    M. Chen et al. (2021). Evaluating large language models trained on code. arXiv:2107.03374,
    eq. (1). B. Efron and R. J. Tibshirani (1993). *An Introduction to the Bootstrap*, ch. 13.
    """
    k = check_count("k", k, minimum=1)
    cs = _int_array("c", c)
    if cs.size == 0:
        raise ValueError("c is empty; pass@k needs at least one problem")
    ns = _int_array("n", n)
    if ns.size == 1:
        ns = np.full(cs.shape, ns[0])
    elif ns.shape != cs.shape:
        raise ValueError(
            f"n must be one number or one per problem: got {ns.size} values for {cs.size} problems"
        )
    for i, (ni, ci) in enumerate(zip(ns.tolist(), cs.tolist())):
        if ni < 1:
            raise ValueError(f"problem {i}: n[{i}] must be >= 1 sample, got {ni}")
        if ci > ni:
            raise ValueError(f"problem {i}: c[{i}]={ci} correct exceeds n[{i}]={ni} samples")
        if k > ni:
            raise ValueError(
                f"problem {i}: k={k} exceeds n[{i}]={ni} samples; pass@k needs n >= k for every "
                "problem (draw more samples or lower k)"
            )
    per_problem = np.array(
        [_pass_at_k_unchecked(ni, ci, k) for ni, ci in zip(ns.tolist(), cs.tolist())]
    )
    boot = bootstrap_ci(per_problem, n_resamples=n_resamples, confidence=confidence, seed=seed)
    return PassAtK(
        estimate=boot.estimate,
        low=boot.low,
        high=boot.high,
        k=k,
        n_problems=int(cs.size),
        n_resamples=boot.n_resamples,
        confidence=boot.confidence,
        seed=boot.seed,
        method="unbiased-percentile-bootstrap",
    )


def _weights(name: str, values: Any) -> NDArray[np.float64]:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a sequence of counts or a dict of counts: {exc}") from exc
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty; a distribution needs at least one outcome")
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name}[{i}] is {arr[i]!r}; counts must be finite and >= 0")
    if not arr.any():
        raise ValueError(f"{name} is all zeros; it must have a positive total to be normalised")
    return arr


def _mapping_counts(name: str, counts: Mapping[Any, Any], keys: list[Any]) -> list[float]:
    out = []
    for key in keys:
        value = counts.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"{name}[{key!r}] must be a number, got {value!r}")
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name}[{key!r}] is {value!r}; counts must be finite and >= 0")
        out.append(float(value))
    return out


def jensen_shannon(
    p_counts: ArrayLike | Mapping[str, float], q_counts: ArrayLike | Mapping[str, float]
) -> float:
    """Jensen–Shannon divergence, in bits, between two histograms over the same support.

    With P and Q the counts normalised to probabilities and M = (P + Q)/2,

        JS(P, Q) = ½ KL(P ‖ M) + ½ KL(Q ‖ M),   KL(P ‖ M) = Σ_x P(x) log2(P(x)/M(x)),

    with 0·log 0 = 0; equivalently H(M) − ½H(P) − ½H(Q) (Lin 1991, the JS divergence with equal
    weights π1 = π2 = ½). In base 2 it lies in [0, 1]: 0 for equal distributions, 1 for disjoint
    supports. It is the square of scipy's ``jensenshannon`` distance with ``base=2``.

    Parameters
    ----------
    p_counts, q_counts : array_like or dict
        Non-negative finite counts (or probabilities), not all zero: two 1-D sequences of the same
        length, or two dicts from outcome (e.g. opcode) to count, compared over the union of their
        keys with a missing key counting 0.

    Returns
    -------
    float
        The divergence in bits, in [0, 1].

    Raises
    ------
    ValueError
        Naming ``p_counts`` or ``q_counts`` for a negative, non-finite or all-zero histogram, and
        for a length mismatch or a dict paired with a sequence.

    References
    ----------
    J. Lin (1991). Divergence measures based on the Shannon entropy. *IEEE Transactions on
    Information Theory* 37(1):145–151.
    """
    p_is_map, q_is_map = isinstance(p_counts, Mapping), isinstance(q_counts, Mapping)
    if p_is_map != q_is_map:
        raise ValueError(
            "p_counts and q_counts must both be dicts (outcome -> count) or both be sequences, got "
            f"{type(p_counts).__name__} and {type(q_counts).__name__}"
        )
    if p_is_map:
        keys = list(dict.fromkeys([*p_counts, *q_counts]))  # type: ignore[misc]
        p_raw: Any = _mapping_counts("p_counts", p_counts, keys)  # type: ignore[arg-type]
        q_raw: Any = _mapping_counts("q_counts", q_counts, keys)  # type: ignore[arg-type]
    else:
        p_raw, q_raw = p_counts, q_counts
    p = _weights("p_counts", p_raw)
    q = _weights("q_counts", q_raw)
    if p.shape != q.shape:
        raise ValueError(
            f"p_counts and q_counts must have the same length (one count per outcome), got "
            f"{p.size} and {q.size}"
        )
    p = p / p.sum()
    q = q / q.sum()
    m = 0.5 * (p + q)
    js = 0.5 * (rel_entr(p, m).sum() + rel_entr(q, m).sum()) / math.log(2.0)
    # Rounding can leave the sum a few ulps outside the exact range [0, 1].
    return float(min(1.0, max(0.0, js)))
