"""Tests for comparing runs: McNemar's exact test of paired proportions and multiplicity adjustment.

``calib compare-runs`` (docs/compare-runs.md) compares the rates of several runs. Two runs that judged the
same samples give a paired 2×2 table, tested with McNemar's exact (conditional binomial) test on the
discordant pairs; the p-values of every comparison are then adjusted together, by Holm's step-down
method (family-wise error) or by Benjamini–Hochberg (false discovery rate). Two runs that differ in how
they executed the same samples (``execute.executor``) are compared by how often their verdicts agree
beyond chance: Cohen's κ with its large-sample interval (:func:`cohen_kappa`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from calib.stats._checks import check_count, check_finite_array

__all__ = ["ADJUSTMENTS", "Kappa", "adjust_p_values", "cohen_kappa", "holm", "mcnemar_exact"]

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


@dataclass(frozen=True)
class Kappa:
    """Cohen's κ of a square agreement table with its standard error and two-sided interval."""

    kappa: float | None  # None when chance agreement is 1 (both raters used one and the same category)
    std_error: float | None
    low: float | None
    high: float | None
    confidence: float
    n: int
    observed: float | None  # share of agreement p_o
    expected: float | None  # chance agreement p_e

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cohen_kappa(table: ArrayLike, confidence: float = 0.95) -> Kappa:
    """Cohen's κ = (p_o − p_e)/(1 − p_e) of a k×k table (rows: rater a, columns: rater b) and its interval.

    p_o is the share on the diagonal, p_e = Σ_i p_i. p_.i the agreement expected by chance from the
    margins. The standard error is the large-sample one of Fleiss, Cohen & Everitt (1969), valid for κ ≠ 0:
    var(κ) = [Σ_i p_ii (1 − (p_i. + p_.i)(1 − κ))² + (1 − κ)² Σ_{i≠j} p_ij (p_.i + p_j.)²
    − (κ − p_e (1 − κ))²] / ((1 − p_e)² n), and the interval is κ ± z σ (clipped to [−1, 1]). Where p_e = 1
    (both raters put every item in one and the same category) κ is undefined: every field but ``n`` and
    ``observed`` is None. Checked against statsmodels' ``cohens_kappa`` and scikit-learn's
    ``cohen_kappa_score``.

    References
    ----------
    J. Cohen (1960). A coefficient of agreement for nominal scales. *Educational and Psychological
    Measurement* 20(1):37–46; J. L. Fleiss, J. Cohen and B. S. Everitt (1969). Large sample standard errors
    of kappa and weighted kappa. *Psychological Bulletin* 72(5):323–327.

    Raises
    ------
    ValueError
        When ``table`` is not square, holds a negative or non-integral count, or is all zeros, or
        ``confidence`` is not in (0, 1).
    """
    t = np.asarray(table, dtype=np.float64)
    if t.ndim != 2 or t.shape[0] != t.shape[1] or t.shape[0] < 1:
        raise ValueError(f"table must be a square k×k array of counts, got shape {t.shape}")
    if not np.isfinite(t).all() or (t < 0).any() or (t != np.round(t)).any():
        raise ValueError("table must hold non-negative whole counts")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    n = int(t.sum())
    if n == 0:
        raise ValueError("table is empty (no item rated by both)")
    p = t / n
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    observed, expected = float(np.trace(p)), float(rows @ cols)
    if expected >= 1.0 - 1e-15:
        return Kappa(None, None, None, None, confidence, n, observed, expected)
    kappa = (observed - expected) / (1.0 - expected)
    diag = np.diag(p)
    a = float((diag * (1.0 - (rows + cols) * (1.0 - kappa)) ** 2).sum())
    off = p * (cols[:, None] + rows[None, :]) ** 2  # p_ij (p_.i + p_j.)²
    b = (1.0 - kappa) ** 2 * float(off.sum() - np.trace(off))
    c = (kappa - expected * (1.0 - kappa)) ** 2
    variance = max(0.0, (a + b - c) / ((1.0 - expected) ** 2 * n))
    se = float(np.sqrt(variance))
    z = float(stats.norm.ppf(0.5 + confidence / 2.0))
    return Kappa(float(kappa), se, max(-1.0, kappa - z * se), min(1.0, kappa + z * se), confidence, n, observed,
                 expected)
