"""Multiple testing: Bonferroni planning (extraction paper App. C.5) and Benjamini–Hochberg."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from calib.stats.conformal import conformal_k
from calib.stats.multiple import benjamini_hochberg, bonferroni_max_candidates, bonferroni_min_controls


def test_bonferroni_numbers_from_the_paper():
    # App. C.5: with 5,000 controls, 5 % FWER supports at most 250 candidates and 0.1 % at most 5;
    # 0.1 % across 5,000 candidates takes about five million controls.
    assert bonferroni_max_candidates(5000, 0.05).n_candidates == 250
    assert bonferroni_max_candidates(5000, 0.001).n_candidates == 5
    plan = bonferroni_min_controls(5000, 0.001)
    assert plan.n_controls == 4_999_999  # closed form: ceil(m / delta) - 1
    assert plan.per_candidate_alpha == pytest.approx(2e-7)


@pytest.mark.parametrize("n,delta", [(5000, 0.05), (999, 0.01), (10, 0.5), (123456, 0.003)])
def test_bonferroni_both_ways_agree_with_k(n, delta):
    m = bonferroni_max_candidates(n, delta).n_candidates
    assert conformal_k(delta / m, n) >= 1  # each candidate's level delta/m is certifiable ...
    assert conformal_k(delta / (m + 1), n) == 0  # ... and one candidate more is not
    need = bonferroni_min_controls(m, delta).n_controls
    assert need <= n and conformal_k(delta / m, need - 1) == 0


def test_bonferroni_supports_no_candidate_with_too_few_controls():
    plan = bonferroni_max_candidates(10, 0.05)
    assert plan.n_candidates == 0 and np.isnan(plan.per_candidate_alpha)


def test_benjamini_hochberg_matches_statsmodels():
    rng = np.random.default_rng(2)
    p = np.concatenate([rng.uniform(size=80), rng.uniform(0, 0.002, size=20)])
    p = np.round(p, 3) + 1e-4  # ties, as conformal p-values have
    for fdr in (0.01, 0.05, 0.2):
        bh = benjamini_hochberg(p, fdr)
        # Reference: statsmodels multipletests(method="fdr_bh") (Benjamini & Hochberg 1995).
        reject, adjusted, _, _ = multipletests(p, alpha=fdr, method="fdr_bh")
        np.testing.assert_array_equal(bh.rejected, reject)
        np.testing.assert_allclose(bh.adjusted, adjusted, rtol=1e-12)
        assert bh.n_rejected == reject.sum()


def test_benjamini_hochberg_step_up_by_hand():
    # m = 4, delta = 0.05: critical values 0.0125, 0.025, 0.0375, 0.05. Sorted p: 0.01, 0.03, 0.035, 0.2.
    # Largest i with p_(i) <= i*delta/m is i = 3 (0.035 <= 0.0375), so the three smallest are rejected
    # although 0.03 > 0.025 (step-up).
    bh = benjamini_hochberg([0.2, 0.035, 0.01, 0.03], 0.05)
    assert bh.rejected.tolist() == [False, True, True, True]
    assert bh.p_threshold == 0.035


def test_benjamini_hochberg_rejects_bad_p_values():
    with pytest.raises(ValueError, match=r"p_values\[1\]"):
        benjamini_hochberg([0.1, 0.0], 0.05)
    with pytest.raises(ValueError, match=r"fdr"):
        benjamini_hochberg([0.1], 1.0)
