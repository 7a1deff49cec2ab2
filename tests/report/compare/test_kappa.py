"""Cohen's κ of calib.stats.compare against statsmodels (``cohens_kappa``, Fleiss–Cohen–Everitt 1969 standard
error) and scikit-learn (``cohen_kappa_score`` from the rated items), and its refusals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa

from calib.stats import cohen_kappa


def _items(table: np.ndarray) -> tuple[list[int], list[int]]:
    """The rated items behind ``table``: one (a, b) pair per count, for scikit-learn."""
    a, b = [], []
    for i, j in np.ndindex(table.shape):
        a += [i] * int(table[i, j])
        b += [j] * int(table[i, j])
    return a, b


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [2, 3])
def test_kappa_and_interval_equal_statsmodels_and_sklearn(seed, k):
    rng = np.random.default_rng(seed)
    # agreement-heavy tables of 30-200 items: a diagonal boost over uniform noise
    table = rng.integers(0, 8, size=(k, k)) + np.diag(rng.integers(5, 60, size=k))
    found = cohen_kappa(table, 0.95)
    ref = sm_kappa(table)  # its interval is the 95% one
    assert found.kappa == pytest.approx(ref.kappa, abs=1e-12)
    assert found.std_error == pytest.approx(ref.std_kappa, abs=1e-12)
    assert found.low == pytest.approx(max(-1.0, ref.kappa_low), abs=1e-12)
    assert found.high == pytest.approx(min(1.0, ref.kappa_upp), abs=1e-12)
    assert found.kappa == pytest.approx(cohen_kappa_score(*_items(table)), abs=1e-12)
    assert found.n == table.sum() and found.observed == pytest.approx(np.trace(table) / table.sum())


def test_other_confidence_levels_use_statsmodels_standard_error():
    table = np.array([[40, 6, 2], [5, 22, 4], [1, 3, 17]])
    ref = sm_kappa(table)
    for confidence in (0.8, 0.99):
        z = stats.norm.ppf(0.5 + confidence / 2)
        found = cohen_kappa(table, confidence)
        assert (found.low, found.high) == (pytest.approx(ref.kappa - z * ref.std_kappa, abs=1e-12),
                                           pytest.approx(ref.kappa + z * ref.std_kappa, abs=1e-12))


def test_closed_forms():
    # perfect agreement: κ = 1; independent raters with equal margins: p_o = p_e, κ = 0
    assert cohen_kappa([[7, 0], [0, 3]]).kappa == pytest.approx(1.0)
    assert cohen_kappa([[25, 25], [25, 25]]).kappa == pytest.approx(0.0, abs=1e-15)
    # one category only for both raters: chance agreement is 1 and κ undefined
    one = cohen_kappa([[9, 0], [0, 0]])
    assert one.kappa is None and one.low is None and one.observed == 1.0 and one.n == 9


@pytest.mark.parametrize("table,message", [([[1, 2, 3]], "square"), ([[1, -1], [0, 2]], "non-negative whole"),
                                           ([[0.5, 1], [0, 2]], "non-negative whole"), ([[0, 0], [0, 0]], "empty")])
def test_bad_tables_are_refused(table, message):
    with pytest.raises(ValueError, match=message):
        cohen_kappa(table)
    with pytest.raises(ValueError, match="confidence"):
        cohen_kappa([[1, 0], [0, 1]], confidence=1.0)
