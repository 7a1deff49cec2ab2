"""Tests for calib.stats.regression.logistic_regression.

Reference values come from sources independent of statsmodels: the closed-form MLE of a logistic
regression on one binary predictor (a 2x2 table; Agresti, Categorical Data Analysis, 3rd ed., 2013,
Sections 3.1 and 5.1) and a Newton–Raphson fit written in this file.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings

import numpy as np
import polars as pl
import pytest
import statsmodels.api as sm
from scipy import special, stats

from calib.stats.regression import Coefficient, LogisticFit, logistic_regression


def table_data(a: int, b: int, c: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Flags and a binary predictor with cells a = (x=1, y=1), b = (x=1, y=0), c = (x=0, y=1),
    d = (x=0, y=0)."""
    x = np.array([1] * (a + b) + [0] * (c + d), dtype=float)
    y = np.array([1] * a + [0] * b + [1] * c + [0] * d, dtype=bool)
    return x, y


def newton_logit(x: np.ndarray, y: np.ndarray, tol: float = 1e-13):
    """Hand-rolled Newton–Raphson for the logit MLE (McCullagh & Nelder 1989, Section 4.4): returns
    (beta, standard errors from the inverse Fisher information, maximised log-likelihood)."""
    beta = np.zeros(x.shape[1])
    for _ in range(100):
        p = special.expit(x @ beta)
        info = x.T @ (x * (p * (1 - p))[:, None])
        step = np.linalg.solve(info, x.T @ (y - p))
        beta = beta + step
        if np.max(np.abs(step)) < tol:
            break
    else:  # pragma: no cover
        raise AssertionError("reference Newton-Raphson did not converge")
    p = special.expit(x @ beta)
    info = x.T @ (x * (p * (1 - p))[:, None])
    se = np.sqrt(np.diag(np.linalg.inv(info)))
    ll = float(np.sum(y * np.log(p) + (1 - y) * np.log1p(-p)))
    return beta, se, ll


def duplicate_counts(seed: int, n: int = 600):
    """Data shaped like the paper's Section 5.3 regression: Poisson duplicate counts."""
    rng = np.random.default_rng(seed)
    textual = rng.poisson(1.0, size=n).astype(float)
    semantic = rng.poisson(12.0, size=n).astype(float)
    eta = -3.0 + 0.4 * textual + 0.08 * semantic
    flags = rng.random(n) < special.expit(eta)
    return flags, textual, semantic


# --------------------------------------------------------------------------- closed form (2x2 table)


@pytest.mark.parametrize(("a", "b", "c", "d"), [(30, 20, 15, 45), (3, 17, 9, 71), (1, 1, 1, 1)])
def test_single_binary_predictor_matches_the_closed_form(a, b, c, d):
    x, y = table_data(a, b, c, d)
    fit = logistic_regression(y, {"dup": x})
    # Closed form (Agresti 2013, Sections 3.1, 5.1): the model is saturated on the 2x2 table, so
    #   intercept = logit(c / (c + d)) = ln(c / d),   slope = ln(ad / bc) (the log odds ratio),
    #   SE(slope) = sqrt(1/a + 1/b + 1/c + 1/d),     SE(intercept) = sqrt(1/c + 1/d).
    # For (30, 20, 15, 45): slope = ln(1350/300) = ln 4.5 = 1.5040774, SE = 0.4082483 ... etc.
    expected = {
        "intercept": (math.log(c / d), math.sqrt(1 / c + 1 / d)),
        "dup": (math.log(a * d / (b * c)), math.sqrt(1 / a + 1 / b + 1 / c + 1 / d)),
    }
    q = stats.norm.isf(0.025)
    for name, (estimate, se) in expected.items():
        coef = fit.coefficient(name)
        z = estimate / se
        assert coef.estimate == pytest.approx(estimate, abs=1e-6)
        assert coef.std_error == pytest.approx(se, abs=1e-6)
        assert coef.z == pytest.approx(z, abs=1e-6)
        assert coef.p_value == pytest.approx(2 * stats.norm.sf(abs(z)), abs=1e-6)
        assert coef.ci_low == pytest.approx(estimate - q * se, abs=1e-6)
        assert coef.ci_high == pytest.approx(estimate + q * se, abs=1e-6)
    # Saturated log-likelihood: sum over cells of count * ln(cell share in its row).
    ll = a * math.log(a / (a + b)) + b * math.log(b / (a + b))
    ll += c * math.log(c / (c + d)) + d * math.log(d / (c + d))
    n1, n0 = a + c, b + d
    ll_null = n1 * math.log(n1 / (n1 + n0)) + n0 * math.log(n0 / (n1 + n0))
    assert fit.log_likelihood == pytest.approx(ll, abs=1e-8)
    assert fit.pseudo_r2 == pytest.approx(1 - ll / ll_null, abs=1e-8)
    assert (fit.n, fit.n_positive, fit.converged, fit.method) == (a + b + c + d, a + c, True, "logit-mle")


def test_tiny_table_has_null_slope():
    # a = b = c = d = 1 (n = 4): odds ratio 1, so slope 0 with SE 2, intercept 0 with SE sqrt(2).
    x, y = table_data(1, 1, 1, 1)
    fit = logistic_regression(y, {"dup": x})
    assert fit.coefficient("dup").estimate == pytest.approx(0.0, abs=1e-9)
    assert fit.coefficient("dup").std_error == pytest.approx(2.0, abs=1e-9)
    assert fit.coefficient("dup").p_value == pytest.approx(1.0, abs=1e-9)
    assert fit.coefficient("intercept").std_error == pytest.approx(math.sqrt(2.0), abs=1e-9)


def test_confidence_sets_the_wald_interval():
    x, y = table_data(30, 20, 15, 45)
    coef = logistic_regression(y, {"dup": x}, confidence=0.9).coefficient("dup")
    q = stats.norm.isf(0.05)  # 1.6448536
    assert coef.ci_low == pytest.approx(coef.estimate - q * coef.std_error, abs=1e-12)
    assert coef.ci_high == pytest.approx(coef.estimate + q * coef.std_error, abs=1e-12)


# ------------------------------------------------------------------------ Newton–Raphson reference


@pytest.mark.parametrize("seed", [0, 1])
def test_two_predictors_match_hand_rolled_newton(seed):
    flags, textual, semantic = duplicate_counts(seed)
    fit = logistic_regression(flags, {"textual_dups": textual, "semantic_dups": semantic})
    design = np.column_stack([np.ones(flags.size), textual, semantic])
    beta, se, ll = newton_logit(design, flags.astype(float))
    assert [c.name for c in fit.coefficients] == ["intercept", "textual_dups", "semantic_dups"]
    for coef, b, s in zip(fit.coefficients, beta, se):
        assert coef.estimate == pytest.approx(b, abs=1e-6)
        assert coef.std_error == pytest.approx(s, abs=1e-6)
        assert coef.z == pytest.approx(b / s, abs=1e-6)
        assert coef.p_value == pytest.approx(2 * stats.norm.sf(abs(b / s)), abs=1e-6)
    assert fit.log_likelihood == pytest.approx(ll, abs=1e-6)
    assert fit.converged


def test_without_intercept_matches_hand_rolled_newton():
    flags, textual, semantic = duplicate_counts(5)
    centred = semantic - semantic.mean()
    fit = logistic_regression(
        flags, np.column_stack([textual, centred]), names=["t", "s"], add_intercept=False
    )
    beta, se, ll = newton_logit(np.column_stack([textual, centred]), flags.astype(float))
    assert [c.name for c in fit.coefficients] == ["t", "s"]
    np.testing.assert_allclose([c.estimate for c in fit.coefficients], beta, atol=1e-6)
    np.testing.assert_allclose([c.std_error for c in fit.coefficients], se, atol=1e-6)
    assert fit.log_likelihood == pytest.approx(ll, abs=1e-6)


def test_convergence_failure_becomes_a_flag_not_a_warning(monkeypatch):
    # Cap Newton at one iteration: statsmodels then emits a ConvergenceWarning, which must end up in
    # ``converged`` rather than reach the caller.
    original = sm.Logit.fit

    def one_step(self, *args, **kwargs):
        kwargs["maxiter"] = 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(sm.Logit, "fit", one_step)
    flags, textual, semantic = duplicate_counts(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = logistic_regression(flags, {"textual_dups": textual, "semantic_dups": semantic})
    assert fit.converged is False


def test_no_warnings_escape():
    flags, textual, semantic = duplicate_counts(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        logistic_regression(flags, {"textual_dups": textual, "semantic_dups": semantic})


# ------------------------------------------------------------------------------ input shapes, output


def test_array_predictors_with_default_and_given_names():
    flags, textual, semantic = duplicate_counts(3, n=200)
    by_mapping = logistic_regression(flags, {"a": textual, "b": semantic})
    by_matrix = logistic_regression(flags, np.column_stack([textual, semantic]))
    named = logistic_regression(flags, np.column_stack([textual, semantic]), names=("a", "b"))
    frame = pl.DataFrame({"a": textual, "b": semantic})
    by_polars = logistic_regression(flags, frame)
    assert [c.name for c in by_matrix.coefficients] == ["intercept", "x1", "x2"]
    assert named.coefficients == by_mapping.coefficients == by_polars.coefficients
    one = logistic_regression(flags, textual)  # a 1-D array is one predictor
    assert [c.name for c in one.coefficients] == ["intercept", "x1"]


def test_accessor_frame_and_dict():
    x, y = table_data(30, 20, 15, 45)
    fit = logistic_regression(y.astype(int), {"dup": x})
    assert isinstance(fit, LogisticFit)
    assert isinstance(fit.coefficient("dup"), Coefficient)
    with pytest.raises(KeyError, match="'intercept', 'dup'"):
        fit.coefficient("semantic_dups")
    frame = fit.to_frame()
    assert frame.columns == ["name", "estimate", "std_error", "z", "p_value", "ci_low", "ci_high"]
    assert frame["name"].to_list() == ["intercept", "dup"]
    assert frame["estimate"][1] == pytest.approx(math.log(4.5), abs=1e-6)
    data = fit.to_dict()
    json.dumps(data)
    assert data["coefficients"][1]["name"] == "dup"
    with pytest.raises(dataclasses.FrozenInstanceError):
        fit.n = 3  # type: ignore[misc]


# ------------------------------------------------------------------------------------- edge cases


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ([0, 0, 0, 0], "all flags are 0: the regression is undefined"),
        ([True] * 4, "all flags are 1: the regression is undefined"),
        ([0, 1, 2, 1], r"flags\[2\] is 2"),
        ([0, 1, float("nan"), 1], r"flags\[2\] is nan"),
        ([0, 1, 1], "has 4 values but flags has 3"),
    ],
)
def test_bad_flags(flags, message):
    with pytest.raises(ValueError, match=message):
        logistic_regression(flags, {"dup": [1.0, 2.0, 3.0, 4.0]})


def test_complete_separation_names_the_predictor():
    flags = [0, 0, 0, 1, 1, 1]
    expected = r"'sem' separates the flags \(no flag 0 has sem above 3 and no flag 1 has sem below 4\)"
    with pytest.raises(ValueError, match=expected):
        logistic_regression(flags, {"text": [0, 1, 0, 1, 0, 1], "sem": [1, 2, 3, 4, 5, 6]})


def test_reversed_separation_names_the_predictor():
    with pytest.raises(ValueError, match=r"no flag 0 has x1 below 3 and no flag 1 has x1 above 2"):
        logistic_regression([1, 1, 0, 0, 0], [1.0, 2.0, 3.0, 4.0, 5.0])


def test_quasi_complete_separation_from_an_empty_cell():
    # 2x2 table with b = 0: every x = 1 has flag 1, so the odds ratio is infinite (no MLE) even though
    # flag 1 also occurs at x = 0. Newton's method would stop at a huge, meaningless slope.
    x, y = table_data(10, 0, 5, 20)
    with pytest.raises(ValueError, match=r"'dup' separates the flags \(no flag 0 has dup above 0 .*does not exist"):
        logistic_regression(y, {"dup": x})


def test_separation_by_a_combination_of_predictors():
    # Neither predictor separates alone, but a + b >= 2 is exactly flag 1.
    a = np.array([0, 1, 0, 1, 2, 0, 2, 1, 0, 3], dtype=float)
    b = np.array([0, 0, 1, 1, 0, 2, 1, 2, 3, 0], dtype=float)
    with pytest.raises(ValueError, match=r"separable: a combination of 'a', 'b'"):
        logistic_regression(a + b >= 2, {"a": a, "b": b})


def test_two_observations_are_separated():
    with pytest.raises(ValueError, match="separates"):
        logistic_regression([0, 1], {"dup": [0.0, 1.0]})


def test_fewer_observations_than_coefficients():
    with pytest.raises(ValueError, match="3 coefficients need at least 3 observations"):
        logistic_regression([0, 1], {"a": [0.0, 1.0], "b": [2.0, 5.0]})


def test_constant_predictor_is_named():
    with pytest.raises(ValueError, match=r"predictor 'sem' is constant \(every value is 4.0\)"):
        logistic_regression([0, 1, 0, 1], {"text": [0, 1, 1, 0], "sem": [4, 4, 4, 4]})


def test_collinear_predictor_is_named():
    with pytest.raises(ValueError, match=r"predictor 'double' is a linear combination of"):
        logistic_regression(
            [0, 1, 1, 0, 1], {"text": [1, 2, 3, 4, 5], "double": [2, 4, 6, 8, 10]}
        )


def test_zero_column_without_intercept_is_named():
    with pytest.raises(ValueError, match=r"predictor 'z' is all zeros"):
        logistic_regression([0, 1, 1, 0], {"t": [1, 2, 1, 2], "z": [0, 0, 0, 0]}, add_intercept=False)


@pytest.mark.parametrize(
    ("predictors", "kwargs", "message"),
    [
        ({"sem": [1.0, float("nan"), 3.0, 4.0]}, {}, r"predictors\['sem'\]\[1\] is .*nan"),
        ({"sem": [1.0, 2.0, 3.0]}, {}, r"predictors\['sem'\] has 3 values but flags has 4"),
        ({"sem": [1.0, 2.0, 3.0, 4.0]}, {"names": ["x"]}, "names must not be given"),
        ([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 9.0]], {"names": ["a"]}, "names has 1 entries"),
        ([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 9.0]], {"names": ["a", "a"]}, "distinct"),
        ({"intercept": [1.0, 2.0, 3.0, 4.0]}, {}, "a predictor is named 'intercept'"),
        ({}, {}, "predictors is empty"),
        (np.zeros((4, 2, 2)), {}, "2-D array"),
        ({"sem": [1.0, 2.0, 3.0, 4.0]}, {"confidence": 1.5}, "confidence must lie in"),
    ],
)
def test_bad_predictors(predictors, kwargs, message):
    with pytest.raises(ValueError, match=message):
        logistic_regression([0, 1, 0, 1], predictors, **kwargs)
