"""Logistic regression of a memorization flag on training-corpus duplication.

The functional-memorization paper (Section 5.3, Appendix G) fits, per language, the joint model
``1[SIM >= tau] ~ beta_text * TextualDups + beta_sem * SemanticDups`` and reads the coefficients,
their standard errors and p-values. The fit is statsmodels' maximum-likelihood ``Logit``; this module
adds what a defensible claim needs around it: checks that the maximum-likelihood estimate exists
(both classes present, a full-rank design, no separation) with errors that name the culprit, and a
frozen result.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, stats

from calib.stats._checks import check_binary, check_confidence, check_finite_array
from calib.stats.result import Result

__all__ = ["Coefficient", "LogisticFit", "logistic_regression"]

INTERCEPT = "intercept"
METHOD = "logit-mle"

# A separating direction found by the linear programme scores at least this much (columns are scaled
# to max |x| = 1); overlapping data score 0 up to the solver's feasibility tolerance (~1e-7).
_SEPARATION_TOL = 1e-6


@dataclass(frozen=True)
class Coefficient(Result):
    """One coefficient of a logistic regression, on the log-odds scale.

    Attributes
    ----------
    name
        The predictor's name (``"intercept"`` for the constant).
    estimate
        Maximum-likelihood estimate; ``exp(estimate)`` is the odds ratio per unit of the predictor.
    std_error
        From the inverse observed information (equal to the expected one for the logit link).
    z
        Wald statistic ``estimate / std_error``.
    p_value
        Two-sided Wald p-value ``2 * Phi(-|z|)``.
    ci_low, ci_high
        Wald interval ``estimate -/+ z_{1-gamma/2} * std_error`` at the fit's confidence.
    """

    name: str
    estimate: float
    std_error: float
    z: float
    p_value: float
    ci_low: float
    ci_high: float


_COEFFICIENT_SCHEMA = {
    "name": pl.String,
    "estimate": pl.Float64,
    "std_error": pl.Float64,
    "z": pl.Float64,
    "p_value": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
}


@dataclass(frozen=True)
class LogisticFit(Result):
    """A fitted logistic regression ``logit P(flag = 1) = x' beta``.

    Attributes
    ----------
    coefficients
        One :class:`Coefficient` per column of the design, the intercept first when one was added.
    n, n_positive
        Observations, and how many have flag 1.
    converged
        Whether Newton–Raphson met its tolerance; when False the estimates are not the MLE.
    log_likelihood
        Maximised log-likelihood.
    pseudo_r2
        McFadden's ``1 - log_likelihood / ll_null``, with ``ll_null`` the intercept-only model's
        log-likelihood ``n1 ln(n1/n) + n0 ln(n0/n)``.
    confidence
        Confidence level of the Wald intervals.
    method
        ``"logit-mle"``.
    """

    coefficients: tuple[Coefficient, ...]
    n: int
    n_positive: int
    converged: bool
    log_likelihood: float
    pseudo_r2: float
    confidence: float
    method: str = METHOD

    def coefficient(self, name: str) -> Coefficient:
        """The coefficient called ``name``; ``KeyError`` listing the available names otherwise."""
        for c in self.coefficients:
            if c.name == name:
                return c
        names = ", ".join(repr(c.name) for c in self.coefficients)
        raise KeyError(f"no coefficient named {name!r}; the fit has {names}")

    def to_frame(self) -> pl.DataFrame:
        """The coefficients as a Polars table with columns ``name``, ``estimate``, ``std_error``,
        ``z``, ``p_value``, ``ci_low``, ``ci_high``."""
        return pl.DataFrame(
            {k: [getattr(c, k) for c in self.coefficients] for k in _COEFFICIENT_SCHEMA},
            schema=_COEFFICIENT_SCHEMA,
        )


def _predictor_columns(
    predictors: Any, names: Sequence[str] | None
) -> tuple[list[str], list[NDArray[np.float64]]]:
    if isinstance(predictors, pl.DataFrame):
        predictors = {c: predictors.get_column(c).to_numpy() for c in predictors.columns}
    if isinstance(predictors, Mapping):
        if names is not None:
            raise ValueError("names must not be given when predictors is a mapping of name -> column")
        cols_names = [str(k) for k in predictors]
        arrays = [check_finite_array(f"predictors[{k!r}]", predictors[k]) for k in predictors]
    else:
        try:
            matrix = np.asarray(predictors, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"predictors must be a mapping of name -> column or a 2-D array of numbers: {exc}"
            ) from exc
        if matrix.ndim == 1:
            matrix = matrix[:, None]
        if matrix.ndim != 2:
            raise ValueError(f"predictors must be a 2-D array (n, k), got shape {matrix.shape}")
        k = matrix.shape[1]
        if names is None:
            cols_names = [f"x{j}" for j in range(1, k + 1)]
        else:
            cols_names = [str(v) for v in names]
            if len(cols_names) != k:
                raise ValueError(
                    f"names has {len(cols_names)} entries but predictors has {k} columns"
                )
        arrays = [
            check_finite_array(f"predictors[{nm!r}]", matrix[:, j])
            for j, nm in enumerate(cols_names)
        ]
    if not cols_names:
        raise ValueError("predictors is empty; give at least one predictor column")
    if len(set(cols_names)) != len(cols_names):
        raise ValueError(f"predictor names must be distinct, got {cols_names}")
    return cols_names, arrays


def _check_full_rank(design: NDArray[np.float64], names: list[str], add_intercept: bool) -> None:
    """Name the first column that is constant or a linear combination of the columns before it."""
    n, p = design.shape
    start = 1 if add_intercept else 0
    for j in range(start, p):
        col = design[:, j]
        if add_intercept and np.ptp(col) == 0.0:
            raise ValueError(
                f"predictor {names[j]!r} is constant (every value is {float(col[0])!r}), so it "
                "cannot be told apart from the intercept: the design is singular; drop the column"
            )
        if not add_intercept and not col.any():
            raise ValueError(
                f"predictor {names[j]!r} is all zeros: the design is singular; drop the column"
            )
    if n < p:
        raise ValueError(
            f"{p} coefficients need at least {p} observations, got n={n}; the design is singular"
        )
    if np.linalg.matrix_rank(design) == p:
        return
    for j in range(1, p + 1):
        if np.linalg.matrix_rank(design[:, :j]) < j:
            others = ", ".join(repr(nm) for nm in names[: j - 1])
            raise ValueError(
                f"predictor {names[j - 1]!r} is a linear combination of {others}: the design is "
                "singular; drop or merge collinear columns"
            )


def _separating_direction(
    design: NDArray[np.float64], y: NDArray[np.bool_]
) -> NDArray[np.float64] | None:
    """A direction b with s_i x_i'b >= 0 for every i and X b != 0 (s_i = +1 for flag 1, -1 for flag 0),
    or None when the classes overlap. Such b exists iff the data are completely or quasi-completely
    separated, i.e. iff the MLE does not exist for a full-rank design (Albert & Anderson 1984).
    Found by the linear programme of Konis (2007): maximise sum_i s_i x_i'b subject to
    s_i x_i'b >= 0 and |b_j| <= 1; the optimum is 0 exactly when the classes overlap.
    """
    scale = np.abs(design).max(axis=0)
    signed = np.where(y, 1.0, -1.0)[:, None] * (design / scale)
    res = optimize.linprog(
        c=-signed.sum(axis=0),
        A_ub=-signed,
        b_ub=np.zeros(signed.shape[0]),
        bounds=[(-1.0, 1.0)] * signed.shape[1],
        method="highs",
    )
    if res.status != 0 or -res.fun <= _SEPARATION_TOL:
        return None
    return np.asarray(res.x) / scale


def _separation_message(
    design: NDArray[np.float64],
    y: NDArray[np.bool_],
    names: list[str],
    direction: NDArray[np.float64],
    add_intercept: bool,
) -> str:
    start = 1 if add_intercept else 0
    tail = (
        "the maximum-likelihood estimate does not exist (Albert & Anderson 1984); drop or coarsen the "
        "predictor, or use a penalised (Firth) fit"
    )
    if add_intercept:
        for j in range(start, design.shape[1]):
            x1 = design[y, j]
            x0 = design[~y, j]
            if x0.max() <= x1.min():
                return (
                    f"predictor {names[j]!r} separates the flags (no flag 0 has {names[j]} above "
                    f"{x0.max():g} and no flag 1 has {names[j]} below {x1.min():g}): {tail}"
                )
            if x1.max() <= x0.min():
                return (
                    f"predictor {names[j]!r} separates the flags (no flag 0 has {names[j]} below "
                    f"{x0.min():g} and no flag 1 has {names[j]} above {x1.max():g}): {tail}"
                )
    weight = np.abs(direction) * np.abs(design).max(axis=0)
    involved = [names[j] for j in range(start, design.shape[1]) if weight[j] > _SEPARATION_TOL]
    which = ", ".join(repr(nm) for nm in involved) or "the predictors"
    return f"the data are separable: a combination of {which} predicts the flags perfectly; {tail}"


def logistic_regression(
    flags: ArrayLike,
    predictors: Mapping[str, ArrayLike] | ArrayLike,
    *,
    names: Sequence[str] | None = None,
    add_intercept: bool = True,
    confidence: float = 0.95,
) -> LogisticFit:
    """Fit ``logit P(flag = 1) = beta_0 + sum_j beta_j x_j`` by maximum likelihood.

    The paper's joint regression is ``logistic_regression(sim >= tau, {"textual_dups": t,
    "semantic_dups": s})`` (functional-memorization paper, Section 5.3 and Appendix G).

    Parameters
    ----------
    flags
        The binary outcome, 0/1 or bool; both values must occur.
    predictors
        A mapping ``name -> column`` (a Polars DataFrame is accepted too), or an ``(n, k)`` array
        (a 1-D array is one predictor) whose columns are named by ``names``
        (default ``x1 .. xk``). Every value must be finite.
    names
        Column names for an array of predictors.
    add_intercept
        Prepend a constant column named ``"intercept"``.
    confidence
        Level of the Wald intervals, default 0.95.

    Returns
    -------
    LogisticFit
        Estimates with Wald standard errors (inverse observed information), z, two-sided p-values
        ``2 Phi(-|z|)`` and Wald intervals.

    Raises
    ------
    ValueError
        Flags all 0 or all 1; a length mismatch; non-finite predictors (naming column and index); a
        singular design (naming the constant or collinear column); complete or quasi-complete
        separation (naming the separating predictor where one does it alone), where the MLE does not
        exist.

    Notes
    -----
    Separation is detected before fitting by the linear programme of Konis (2007), so
    quasi-complete separation (e.g. an empty cell in a 2x2 table) is caught even though Newton's
    method would "converge" to huge, meaningless coefficients. Convergence warnings from statsmodels
    are folded into ``converged``.

    References
    ----------
    Agresti, A. (2013). Categorical Data Analysis, 3rd ed., Wiley. Sections 5.1–5.2 (logistic
    regression, Wald inference) and 6.5 (separation and infinite estimates).
    McCullagh, P. & Nelder, J. A. (1989). Generalized Linear Models, 2nd ed., Chapman & Hall, ch. 4.
    Albert, A. & Anderson, J. A. (1984). On the existence of maximum likelihood estimates in
    logistic regression models. Biometrika 71(1), 1–10.
    Konis, K. (2007). Linear programming algorithms for detecting separated data in binary logistic
    regression models. DPhil thesis, University of Oxford.
    McFadden, D. (1974). Conditional logit analysis of qualitative choice behavior. In Frontiers in
    Econometrics, 105–142.
    """
    level = check_confidence(confidence)
    y = check_binary("flags", flags)
    col_names, columns = _predictor_columns(predictors, names)
    for nm, col in zip(col_names, columns):
        if col.size != y.size:
            raise ValueError(
                f"predictors[{nm!r}] has {col.size} values but flags has {y.size}; they must match"
            )
    n = int(y.size)
    n_pos = int(y.sum())
    if n_pos == 0:
        raise ValueError("all flags are 0: the regression is undefined (it needs both outcomes)")
    if n_pos == n:
        raise ValueError("all flags are 1: the regression is undefined (it needs both outcomes)")
    if add_intercept:
        if INTERCEPT in col_names:
            raise ValueError(
                f"a predictor is named {INTERCEPT!r}; rename it or pass add_intercept=False"
            )
        col_names = [INTERCEPT, *col_names]
        columns = [np.ones(n), *columns]
    design = np.column_stack(columns)
    _check_full_rank(design, col_names, add_intercept)
    direction = _separating_direction(design, y)
    if direction is not None:
        raise ValueError(_separation_message(design, y, col_names, direction, add_intercept))

    # statsmodels (and the pandas it pulls in) loads here, not with calib.stats: a second of start-up otherwise
    from statsmodels.discrete.discrete_model import Logit
    from statsmodels.tools.sm_exceptions import (
        ConvergenceWarning,
        HessianInversionWarning,
        PerfectSeparationError,
        PerfectSeparationWarning,
    )

    endog = y.astype(np.float64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            res = Logit(endog, design).fit(method="newton", maxiter=100, tol=1e-10, disp=False)
        except PerfectSeparationError as exc:  # pragma: no cover - the LP check comes first
            raise ValueError(f"the data are separable: {exc}") from exc
        except np.linalg.LinAlgError as exc:  # pragma: no cover - the rank check comes first
            raise ValueError(f"the design is singular: {exc}") from exc
    converged = bool(res.mle_retvals.get("converged", False))
    for w in caught:
        if issubclass(w.category, PerfectSeparationWarning):  # pragma: no cover - as above
            raise ValueError(f"the data are separable: {w.message}")
        if issubclass(w.category, (ConvergenceWarning, HessianInversionWarning)):
            converged = False
        elif issubclass(w.category, RuntimeWarning):
            # Overflow in exp() during an intermediate Newton step; the final iterate is checked below.
            continue
        else:  # pragma: no cover - pass on what we do not understand
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)

    params = np.asarray(res.params, dtype=np.float64)
    se = np.asarray(res.bse, dtype=np.float64)
    if not (np.isfinite(params).all() and np.isfinite(se).all()):
        converged = False
    z = params / se
    p_values = 2.0 * stats.norm.sf(np.abs(z))
    q = float(stats.norm.isf((1.0 - level) / 2.0))
    coefficients = tuple(
        Coefficient(
            name=nm,
            estimate=float(b),
            std_error=float(s),
            z=float(zz),
            p_value=float(p),
            ci_low=float(b - q * s),
            ci_high=float(b + q * s),
        )
        for nm, b, s, zz, p in zip(col_names, params, se, z, p_values)
    )
    n_neg = n - n_pos
    ll_null = n_pos * math.log(n_pos / n) + n_neg * math.log(n_neg / n)
    llf = float(res.llf)
    return LogisticFit(
        coefficients=coefficients,
        n=n,
        n_positive=n_pos,
        converged=converged,
        log_likelihood=llf,
        pseudo_r2=1.0 - llf / ll_null,
        confidence=level,
    )
