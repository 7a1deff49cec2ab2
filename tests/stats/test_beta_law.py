"""The Beta law of the realized FPR, against the extraction paper's App. C.4 numbers and scipy."""

from __future__ import annotations

import pytest
from scipy import stats as st

from calib.stats.beta_law import fpr_law, plan_controls
from calib.stats.conformal import conformal_k


def test_law_at_the_papers_operating_point():
    # Extraction paper App. C.1/C.4.3: N = 5000, alpha = 0.1 %: Beta(5, 4996), mean alpha_N,
    # 95 % central interval [0.032 %, 0.205 %], 90 % bound 0.16 %, 95 % bound 0.18 %,
    # and alpha* exceeds the certified level for 44 % of control samples.
    law = fpr_law(5000, 0.001)
    assert (law.k, law.n) == (5, 5000)
    assert law.mean == pytest.approx(5 / 5001)
    assert law.interval[0] == pytest.approx(0.00032, abs=5e-6)
    assert law.interval[1] == pytest.approx(0.00205, abs=5e-6)
    assert law.upper["0.9"] == pytest.approx(0.0016, abs=5e-5)
    assert law.upper["0.95"] == pytest.approx(0.0018, abs=5e-5)
    assert law.prob_exceeds_certified == pytest.approx(0.44, abs=0.005)
    # The same numbers straight from scipy.stats.beta(5, 4996).
    assert law.interval[0] == pytest.approx(st.beta.ppf(0.025, 5, 4996), rel=1e-12)
    assert law.upper["0.99"] == pytest.approx(st.beta.ppf(0.99, 5, 4996), rel=1e-12)


def test_law_at_k_one():
    # App. C.4.3: at K = 1 alpha_N ~ 0.02 %, alpha* <= alpha_N for only 63 % of draws, 90 % bound 0.05 %.
    law = fpr_law(5000, "1/5001")
    assert law.k == 1 and law.certified_alpha == pytest.approx(0.0002, rel=1e-3)
    assert 1 - law.prob_exceeds_certified == pytest.approx(0.63, abs=0.005)
    assert law.upper["0.9"] == pytest.approx(0.0005, abs=5e-5)
    # Beta(1, N) is closed-form: P(alpha* <= x) = 1 - (1 - x)^N.
    assert law.upper_quantile(0.9) == pytest.approx(1 - 0.1 ** (1 / 5000), rel=1e-9)


def test_law_confidence_changes_the_interval():
    law = fpr_law(1000, 0.01, confidence=0.8)
    assert law.interval == pytest.approx(tuple(st.beta.ppf([0.1, 0.9], 10, 991)), rel=1e-12)


def test_law_with_an_atom_marks_where_it_is_exact():
    law = fpr_law(1000, 0.05, alpha_dagger=0.104)  # alpha_N = 50/1001 < 0.104: exact
    assert law.exact and law.prob_at_or_above_dagger == pytest.approx(st.beta.sf(0.104, 50, 951))
    # Beta-binomial identity: P(Beta(K, N-K+1) >= a) = P(Binomial(N, a) <= K - 1).
    assert law.prob_at_or_above_dagger == pytest.approx(st.binom.cdf(49, 1000, 0.104), rel=1e-9)
    assert not fpr_law(1000, 0.2, alpha_dagger=0.104).exact


def test_law_when_k_is_zero():
    law = fpr_law(10, 0.05)
    assert not law.certifiable and law.mean is None and law.prob_exceeds_certified is None


@pytest.mark.parametrize("kwargs", [dict(n=0, alpha=0.1), dict(n=10, alpha=1.0), dict(n=10, alpha=0.1, confidence=1.0)])
def test_law_rejects_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        fpr_law(**kwargs)


@pytest.mark.parametrize("alpha,upper,confidence", [(0.001, 0.0015, 0.95), (0.001, 0.002, 0.9), (0.01, 0.012, 0.95),
                                                    (0.05, 0.3, 0.99)])
def test_planned_controls_are_the_fewest_that_meet_the_bound(alpha, upper, confidence):
    plan = plan_controls(alpha, upper, confidence)

    def meets(n):
        k = conformal_k(alpha, n)
        return k >= 1 and st.beta.ppf(confidence, k, n - k + 1) <= upper

    assert meets(plan.n_controls)
    assert plan.achieved_upper <= upper
    assert plan.k == conformal_k(alpha, plan.n_controls)
    # Brute force over every smaller N (independent of the block search in plan_controls).
    first = next(n for n in range(1, plan.n_controls + 1) if meets(n))
    assert first == plan.n_controls


def test_plan_rejects_an_upper_bound_below_alpha():
    with pytest.raises(ValueError, match="upper must exceed alpha"):
        plan_controls(0.01, 0.005)
