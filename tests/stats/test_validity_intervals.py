"""Validity suite, intervals: coverage of every proportion interval calib reports, by simulation.

Clopper–Pearson (exact: its coverage is also computed at a fine grid of p and must never drop below
the nominal level), Newcombe's paired difference (approximate: simulated coverage at stated settings,
and its exact mean and minimum over a grid), and the counterfactual rates (Clopper–Pearson on counts
whose denominators are themselves random) with their target-minus-reference differences. Each test
simulates from a known truth and compares with the nominal level allowing Z_MC binomial standard
errors (tests/stats/_simulate.py); docs/statistics.md, "Validity suite", lists the figures.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats
from scipy.special import gammaln

from calib.stats import clopper_pearson, counterfactual_rates, paired_difference

from ._simulate import REPLICATES, assert_at_least, clopper_pearson_vectorized, newcombe_vectorized, record

CONFIDENCE = 0.95
Z95 = float(stats.norm.ppf(0.975))


def _cp_table(n: int, confidence: float = CONFIDENCE) -> np.ndarray:
    """calib's Clopper–Pearson limits for every k in 0..n, shape (n + 1, 2): the interval is a
    function of k alone, so looking it up is exactly calling calib on each replicate."""
    return np.array([(r.low, r.high) for r in (clopper_pearson(k, n, confidence) for k in range(n + 1))])


def _wald_table(n: int, confidence: float = CONFIDENCE) -> np.ndarray:
    """The textbook Wald interval p̂ ± z sqrt(p̂(1 − p̂)/n), the deliberately wrong interval."""
    z = stats.norm.ppf(0.5 + confidence / 2)
    p = np.arange(n + 1) / n
    half = z * np.sqrt(p * (1 - p) / n)
    return np.column_stack([p - half, p + half])


def _simulated_coverage(table: np.ndarray, n: int, p: float, replicates: int, seed: int) -> float:
    k = np.random.default_rng(seed).binomial(n, p, size=replicates)
    return float(np.mean((table[k, 0] <= p) & (p <= table[k, 1])))


def _exact_coverage(table: np.ndarray, n: int, ps: np.ndarray) -> np.ndarray:
    """Coverage at each p: sum over k of Binomial(n, p).pmf(k) * 1[low_k <= p <= high_k]."""
    pmf = stats.binom.pmf(np.arange(n + 1)[None, :], n, ps[:, None])
    inside = (table[None, :, 0] <= ps[:, None]) & (ps[:, None] <= table[None, :, 1])
    return (pmf * inside).sum(axis=1)


def _p_grid(table: np.ndarray) -> np.ndarray:
    """2,000 evenly spaced p plus each limit and the points just outside it, where the coverage of
    an interval family jumps and attains its infimum."""
    limits = table.ravel()
    near = np.concatenate([limits, limits - 1e-9, limits + 1e-9, np.linspace(0, 1, 2001)[1:-1]])
    return np.unique(near[(near > 0) & (near < 1)])


# --- Clopper–Pearson ------------------------------------------------------------------------------

CP_SETTINGS = [(10, 0.05), (10, 0.5), (50, 0.01), (50, 0.2), (200, 0.003), (200, 0.5), (1000, 0.001)]


@pytest.mark.parametrize("replicates", REPLICATES)
@pytest.mark.parametrize(("n", "p"), CP_SETTINGS)
def test_clopper_pearson_simulated_coverage(n: int, p: float, replicates: int) -> None:
    cov = _simulated_coverage(_cp_table(n), n, p, replicates, seed=n)
    assert_at_least(cov, CONFIDENCE, replicates, f"Clopper-Pearson n={n} p={p}")


@pytest.mark.parametrize(("n", "confidence"), [(5, 0.95), (20, 0.95), (50, 0.9), (100, 0.99), (300, 0.95)])
def test_clopper_pearson_is_exact_over_a_grid_of_p(n: int, confidence: float) -> None:
    """Exactness: the minimum coverage over p in (0, 1), not only the average, is >= the nominal."""
    table = _cp_table(n, confidence)
    coverage = _exact_coverage(table, n, _p_grid(table))
    record(f"Clopper-Pearson n={n} exact minimum coverage over p", coverage.min(), confidence, None, ">=")
    assert coverage.min() >= confidence - 1e-9, f"n={n}: minimum coverage {coverage.min():.5f}"


def test_the_same_checks_fail_the_wald_interval() -> None:
    """The suite can fail: the Wald interval at n = 20, p = 0.05 covers about 64 % of the time."""
    n, p, replicates = 20, 0.05, 10_000
    cov = _simulated_coverage(_wald_table(n), n, p, replicates, seed=n)
    with pytest.raises(AssertionError, match="observed 0.6"):  # 0.6 is the observed coverage
        assert_at_least(cov, CONFIDENCE, replicates, "Wald n=20 p=0.05 (deliberately wrong)")
    table = _wald_table(n)
    assert _exact_coverage(table, n, _p_grid(table)).min() < 0.5  # far from exact


# --- Newcombe's paired difference -----------------------------------------------------------------


def _all_tables(n: int) -> np.ndarray:
    return np.array([(a, b, c, n - a - b - c) for a in range(n + 1) for b in range(n + 1 - a)
                     for c in range(n + 1 - a - b)])


def test_vectorized_newcombe_equals_calib_on_every_table_of_20() -> None:
    tables = _all_tables(20)
    low, high = newcombe_vectorized(tables, Z95)
    ref = np.array([(r.low, r.high) for r in (paired_difference(*map(int, t)) for t in tables)])
    np.testing.assert_allclose(low, ref[:, 0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(high, ref[:, 1], rtol=0, atol=1e-12)


# (n, P(both), P(model 1 only), P(model 2 only)): sparse to dense discordance, fixed before running.
NEWCOMBE_SETTINGS = [(30, 0.3, 0.1, 0.05), (50, 0.1, 0.05, 0.05), (100, 0.02, 0.03, 0.01),
                     (200, 0.3, 0.1, 0.05), (40, 0.4, 0.2, 0.1), (500, 0.001, 0.004, 0.001)]


@pytest.mark.parametrize("replicates", REPLICATES)
@pytest.mark.parametrize(("n", "p11", "p10", "p01"), NEWCOMBE_SETTINGS)
def test_newcombe_simulated_coverage(n: int, p11: float, p10: float, p01: float, replicates: int) -> None:
    rng = np.random.default_rng(n)
    tables = rng.multinomial(n, [p11, p10, p01, 1 - p11 - p10 - p01], size=replicates)
    low, high = newcombe_vectorized(tables, Z95)
    for i in range(200):  # the vectorised path is calib's interval, replicate by replicate
        ref = paired_difference(*map(int, tables[i]))
        assert (low[i], high[i]) == pytest.approx((ref.low, ref.high), abs=1e-12)
    theta = p10 - p01
    cov = float(np.mean((low <= theta) & (theta <= high)))
    assert_at_least(cov, CONFIDENCE, replicates, f"Newcombe n={n} p=({p11}, {p10}, {p01})")


def test_newcombe_exact_coverage_over_a_grid() -> None:
    """Method 10 is approximate: averaged over a grid of cell probabilities its exact coverage is at
    least nominal, and no grid point falls below 0.92 (the worst, 0.931, is n = 50 with P(both) =
    0.45, P(only 1) = 0.05, P(only 2) = 0.01). Newcombe (1998) judged the method by the same two
    figures, mean and minimum coverage."""
    n = 50
    tables = _all_tables(n)
    low, high = newcombe_vectorized(tables, Z95)
    # Multinomial pmf = exp(log n! - sum log n_i! + sum n_i log p_i), summing to 1 over the tables.
    log_coefficient = gammaln(n + 1) - gammaln(tables + 1).sum(axis=1)
    grid = [0.01, 0.05, 0.1, 0.2, 0.3, 0.45]
    coverages = []
    for p11 in grid:
        for p10 in grid:
            for p01 in grid:
                if p11 + p10 + p01 >= 0.99:
                    continue
                pmf = np.exp(log_coefficient + tables @ np.log([p11, p10, p01, 1 - p11 - p10 - p01]))
                theta = p10 - p01
                coverages.append(pmf[(low <= theta) & (theta <= high)].sum())
    cov = np.array(coverages)
    record("Newcombe n=50 exact mean coverage over the grid", cov.mean(), CONFIDENCE, None, ">=")
    record("Newcombe n=50 exact minimum coverage over the grid", cov.min(), 0.92, None, ">=")
    assert cov.mean() >= CONFIDENCE, cov.mean()
    assert cov.min() >= 0.92, cov.min()


# --- Counterfactual rates -------------------------------------------------------------------------

# A latent "memorized" state drives the target's flags; the reference never saw the data.
# Cells are the 32 combinations of (target text, reference text, target func, reference func,
# conclusive), bit i of the cell index being the i-th of those flags.
P_MEMORIZED, P_CONCLUSIVE = 0.15, 0.7
TARGET = {True: (0.5, 0.9), False: (0.05, 0.1)}  # P(text flag), P(func flag) given memorized or not
REFERENCE = (0.04, 0.08)


def _cell_probabilities() -> np.ndarray:
    probs = np.zeros(32)
    for cell in range(32):
        tt, tr, ft, fr, cc = ((cell >> i) & 1 for i in range(5))
        total = 0.0
        for mem, pm in ((True, P_MEMORIZED), (False, 1 - P_MEMORIZED)):
            pt, pf = TARGET[mem]
            total += pm * (pt if tt else 1 - pt) * (pf if ft else 1 - pf)
        rt, rf = REFERENCE
        total *= (rt if tr else 1 - rt) * (rf if fr else 1 - rf)
        probs[cell] = total * (P_CONCLUSIVE if cc else 1 - P_CONCLUSIVE)
    return probs


def _masks() -> dict[str, np.ndarray]:
    bits = np.array([[(cell >> i) & 1 for i in range(5)] for cell in range(32)], dtype=bool)
    tt, tr, ft, fr, cc = bits.T
    return {"tt": tt, "tr": tr, "ft": ft, "fr": fr, "cc": cc}


def _rate_events() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(numerator cells, denominator cells) of each counterfactual rate, as in calib.stats.counterfactual."""
    m = _masks()
    everything = np.ones(32, dtype=bool)
    functional = m["cc"] & m["ft"] & ~m["fr"] & ~m["tt"]
    textual_cf_conclusive = m["cc"] & m["tt"] & ~m["tr"]
    return {
        "textual": (m["tt"] & ~m["tr"], everything),
        "functional": (functional, m["cc"]),
        "functional_missed_by_text": (functional, m["cc"] & m["ft"] & ~m["fr"]),
        "text_not_functional": (textual_cf_conclusive & ~m["ft"], textual_cf_conclusive),
    }


def _frame(cell_counts: np.ndarray) -> pl.DataFrame:
    """The wide per-sample table whose samples fall in the given cells (0.9 = similar, 0.1 = not)."""
    cells = np.repeat(np.arange(32), cell_counts)
    def sim(bit: int) -> list[float]:
        return [0.9 if (c >> bit) & 1 else 0.1 for c in cells]
    conclusive = [(c >> 4) & 1 for c in cells]
    return pl.DataFrame({
        "sample_id": [f"s{i}" for i in range(cells.size)],
        "text_target": sim(0),
        "text_reference": sim(1),
        "func_target": [v if ok else None for v, ok in zip(sim(2), conclusive)],
        "func_reference": [v if ok else None for v, ok in zip(sim(3), conclusive)],
    }, schema={"sample_id": pl.String, "text_target": pl.Float64, "text_reference": pl.Float64,
               "func_target": pl.Float64, "func_reference": pl.Float64})


def test_vectorized_clopper_pearson_equals_calib() -> None:
    ks = np.array([k for n in (1, 2, 5, 17, 300) for k in range(n + 1)])
    ns = np.array([n for n in (1, 2, 5, 17, 300) for _ in range(n + 1)])
    low, high = clopper_pearson_vectorized(ks, ns, CONFIDENCE)
    ref = np.array([(r.low, r.high) for r in (clopper_pearson(int(k), int(n)) for k, n in zip(ks, ns))])
    np.testing.assert_allclose(low, ref[:, 0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(high, ref[:, 1], rtol=0, atol=1e-12)


N_SAMPLES = 300


def test_counterfactual_counts_reproduce_calib_on_a_subset() -> None:
    """The count-level path used below gives counterfactual_rates' own intervals, replicate by replicate."""
    counts = np.random.default_rng(7).multinomial(N_SAMPLES, _cell_probabilities(), size=40)
    events = _rate_events()
    for row in counts:
        rates = counterfactual_rates(_frame(row))
        for name, (num, den) in events.items():
            expected = clopper_pearson(int(row[num].sum()), int(row[den].sum()))
            got = getattr(rates, name)
            assert (got.k, got.n, got.low, got.high) == (expected.k, expected.n, expected.low, expected.high)
        m = _masks()
        table = [int(row[m["tt"] & m["tr"]].sum()), int(row[m["tt"] & ~m["tr"]].sum()),
                 int(row[~m["tt"] & m["tr"]].sum()), int(row[~m["tt"] & ~m["tr"]].sum())]
        assert rates.textual_table.difference() == paired_difference(*table)
        c = m["cc"]
        table = [int(row[m["ft"] & m["fr"] & c].sum()), int(row[m["ft"] & ~m["fr"] & c].sum()),
                 int(row[~m["ft"] & m["fr"] & c].sum()), int(row[~m["ft"] & ~m["fr"] & c].sum())]
        assert rates.functional_table.difference() == paired_difference(*table)
        low, high = newcombe_vectorized(np.array([table]), Z95)
        ref = rates.functional_table.difference()
        assert (low[0], high[0]) == pytest.approx((ref.low, ref.high), abs=1e-12)


@pytest.mark.parametrize("replicates", REPLICATES)
def test_counterfactual_rate_intervals_cover_the_true_rates(replicates: int) -> None:
    probs = _cell_probabilities()
    counts = np.random.default_rng(11).multinomial(N_SAMPLES, probs, size=replicates)
    for name, (num, den) in _rate_events().items():
        truth = probs[num].sum() / probs[den].sum()
        ks, ns = counts[:, num].sum(axis=1), counts[:, den].sum(axis=1)
        assert ns.min() > 0  # no replicate without a denominator (calib would report None)
        low, high = clopper_pearson_vectorized(ks, ns, CONFIDENCE)
        cov = float(np.mean((low <= truth) & (truth <= high)))
        assert_at_least(cov, CONFIDENCE, replicates, f"counterfactual {name} (truth {truth:.4f})")

    m = _masks()
    for label, t, r, within in (("text", m["tt"], m["tr"], np.ones(32, dtype=bool)),
                                ("func", m["ft"], m["fr"], m["cc"])):
        cells = [t & r & within, t & ~r & within, ~t & r & within, ~t & ~r & within]
        tables = np.column_stack([counts[:, c].sum(axis=1) for c in cells])
        theta = (probs[t & within].sum() - probs[r & within].sum()) / probs[within].sum()
        low, high = newcombe_vectorized(tables, Z95)
        cov = float(np.mean((low <= theta) & (theta <= high)))
        assert_at_least(cov, CONFIDENCE, replicates, f"target - reference {label} (truth {theta:.4f})")
