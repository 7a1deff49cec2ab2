"""calib.stats.compare against statsmodels: McNemar's exact test, Holm and Benjamini-Hochberg adjustment."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from calib.stats.compare import adjust_p_values, holm, mcnemar_exact


@pytest.mark.parametrize("n10,n01", [(0, 0), (0, 1), (1, 0), (4, 2), (2, 4), (10, 1), (7, 7), (0, 25), (31, 12)])
def test_mcnemar_exact_is_statsmodels_exact_mcnemar(n10, n01):
    # the diagonal cells do not enter the exact test; any values will do
    expected = mcnemar([[5, n10], [n01, 3]], exact=True).pvalue
    assert mcnemar_exact(n10, n01) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("method,reference", [("holm", "holm"), ("bh", "fdr_bh")])
def test_adjustment_is_statsmodels_multipletests(seed, method, reference):
    rng = np.random.default_rng(seed)
    p = np.round(rng.uniform(0, 0.2, size=12) ** 2, 3)  # rounding makes ties
    p[0] = 1.0
    expected = multipletests(p, method=reference)[1]
    np.testing.assert_allclose(adjust_p_values(p, method), expected, rtol=0, atol=1e-12)


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.04 times 3, 2, 1 -> 0.03, 0.04, 0.04 (monotone)
    np.testing.assert_allclose(holm([0.04, 0.01, 0.02]), [0.04, 0.03, 0.04])
    assert holm([]).size == 0


@pytest.mark.parametrize("bad,message", [(([0.1, 1.5], "holm"), "p_values[1] is 1.5"),
                                         (([0.1, float("nan")], "bh"), "p_values[1] is nan"),
                                         (([0.1], "bonferroni"), "method must be one of holm, bh")])
def test_bad_arguments_name_the_value(bad, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        adjust_p_values(*bad)
    with pytest.raises(ValueError, match="n10 must be an integer >= 0"):
        mcnemar_exact(-1, 3)
