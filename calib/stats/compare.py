"""Tests for comparing runs: McNemar's exact test of paired proportions and multiplicity adjustment.

``calib compare-runs`` (docs/compare-runs.md) compares the rates of several runs. Two runs that judged the
same samples give a paired 2×2 table, tested with McNemar's exact (conditional binomial) test on the
discordant pairs; the p-values of every comparison are then adjusted together, by Holm's step-down
method (family-wise error) or by Benjamini–Hochberg (false discovery rate).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from calib.stats._checks import check_count, check_finite_array

__all__ = ["ADJUSTMENTS", "adjust_p_values", "holm", "mcnemar_exact"]

#: The multiplicity adjustments :func:`adjust_p_values` knows: name -> what it controls.
ADJUSTMENTS: dict[str, str] = {"holm": "family-wise error (Holm 1979)",
                               "bh": "false discovery rate (Benjamini & Hochberg 1995)"}


def mcnemar_exact(n10: int, n01: int) -> float:
    """Two-sided p-value of McNemar's exact test that two paired proportions are equal.

    Under p1 = p2 each discordant pair (flagged by one run only) falls either way with probability 1/2,
    so ``n10`` given ``n10 + n01`` is Binomial(n10 + n01, 1/2); the p-value is the two-sided exact
    binomial test (:func:`scipy.stats.binomtest`). With no discordant pair it is 1.

    Parameters
    ----------
    n10, n01 : int
        Items flagged by the first run only, and by the second only.

    Raises
    ------
    ValueError
        Naming ``n10`` or ``n01`` when it is not a non-negative integer.

    References
    ----------
    Q. McNemar (1947). Note on the sampling error of the difference between correlated proportions or
    percentages. *Psychometrika* 12(2):153–157; A. Agresti (2013), *Categorical Data Analysis*, 3rd ed.,
    §11.1.
    """
    b, c = check_count("n10", n10), check_count("n01", n01)
    if b + c == 0:
        return 1.0
    return float(stats.binomtest(b, b + c, 0.5, alternative="two-sided").pvalue)


def _p_values(p_values: ArrayLike) -> NDArray[np.float64]:
    p = np.asarray(p_values, dtype=np.float64) if np.ndim(p_values) == 1 else check_finite_array("p_values", p_values)
    bad = ~((p >= 0) & (p <= 1))  # NaN too
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"p_values[{i}] is {float(p[i])!r}; p-values must lie in [0, 1]")
    return p


def holm(p_values: ArrayLike) -> NDArray[np.float64]:
    """Holm's step-down adjusted p-values: reject every hypothesis whose adjusted p-value is at most δ.

    With the m p-values sorted, p_(1) <= ... <= p_(m), the adjusted value of p_(i) is
    max over j <= i of min(1, (m − j + 1) p_(j)); this controls the family-wise error at δ under any
    dependence between the tests (Holm 1979). Computed by statsmodels' ``multipletests(method="holm")``;
    returned in the input order.

    References
    ----------
    S. Holm (1979). A simple sequentially rejective multiple test procedure. *Scandinavian Journal of
    Statistics* 6(2):65–70.
    """
    return adjust_p_values(p_values, "holm")


#: calib's method names -> statsmodels' ``multipletests`` names.
_STATSMODELS = {"holm": "holm", "bh": "fdr_bh"}


def adjust_p_values(p_values: ArrayLike, method: str = "holm") -> NDArray[np.float64]:
    """Adjusted p-values of a family of tests by ``method``: ``"holm"`` (:func:`holm`) or ``"bh"``.

    ``"bh"`` gives the Benjamini–Hochberg adjusted values (q-values): the adjusted value of p_(i) is
    min over j >= i of min(1, m p_(j) / j), which controls the false discovery rate for independent or
    positively dependent (PRDS) tests (Benjamini & Hochberg 1995, JRSS-B 57(1):289–300). Both are
    statsmodels' ``multipletests`` (``holm``, ``fdr_bh``), in the input order.

    Raises
    ------
    ValueError
        When ``method`` is not one of :data:`ADJUSTMENTS`, or a p-value is outside [0, 1].
    """
    if method not in ADJUSTMENTS:
        raise ValueError(f"method must be one of {', '.join(ADJUSTMENTS)}, got {method!r}")
    p = _p_values(p_values)
    if p.size == 0:
        return p
    from statsmodels.stats.multitest import multipletests

    return np.asarray(multipletests(p, method=_STATSMODELS[method])[1], dtype=np.float64)
