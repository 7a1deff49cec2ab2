"""The seeded percentile bootstrap against scipy.stats.bootstrap and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from calib.stats import bootstrap as bootstrap_module
from calib.stats.bootstrap import BootstrapInterval, bootstrap_ci
from calib.stats.intervals import clopper_pearson


@pytest.fixture(scope="module")
def normal_data() -> np.ndarray:
    return np.random.default_rng(20240601).normal(loc=1.0, scale=1.0, size=100)


def test_same_seed_same_result_different_seed_different(normal_data: np.ndarray) -> None:
    a = bootstrap_ci(normal_data, n_resamples=2000, seed=7)
    b = bootstrap_ci(normal_data, n_resamples=2000, seed=7)
    c = bootstrap_ci(normal_data, n_resamples=2000, seed=8)
    assert a == b
    assert a.to_dict() == b.to_dict()
    assert (a.low, a.high) != (c.low, c.high)
    assert a.estimate == c.estimate


def test_agrees_with_scipy_percentile_bootstrap(normal_data: np.ndarray) -> None:
    r = bootstrap_ci(normal_data, n_resamples=10_000, confidence=0.95, seed=1)
    # Reference: scipy.stats.bootstrap((x,), np.mean, method="percentile", n_resamples=10_000),
    # with its own random stream, so the two agree only up to Monte-Carlo error. The limits' Monte-
    # Carlo sd is about sqrt(0.025·0.975/10^4)/f(q) ≈ 0.003 here; 0.02 is over 4 sd of the difference.
    ref = stats.bootstrap(
        (normal_data,),
        np.mean,
        n_resamples=10_000,
        confidence_level=0.95,
        method="percentile",
        rng=np.random.default_rng(99),
    )
    assert r.estimate == pytest.approx(normal_data.mean(), rel=1e-12)
    assert r.low == pytest.approx(ref.confidence_interval.low, abs=0.02)
    assert r.high == pytest.approx(ref.confidence_interval.high, abs=0.02)


def test_two_column_statistic_agrees_with_scipy_paired_bootstrap() -> None:
    rng = np.random.default_rng(5)
    x = rng.gamma(2.0, size=80)
    y = x + rng.gamma(1.0, size=80)
    data = np.column_stack([x, y])

    def ratio(s: np.ndarray) -> np.ndarray:
        return s[..., 0].sum(axis=-1) / s[..., 1].sum(axis=-1)

    r = bootstrap_ci(data, ratio, n_resamples=5000, seed=3)
    # Reference: scipy.stats.bootstrap((x, y), ratio of sums, paired=True, method="percentile").
    ref = stats.bootstrap(
        (x, y),
        lambda a, b, axis=-1: a.sum(axis=axis) / b.sum(axis=axis),
        paired=True,
        n_resamples=5000,
        method="percentile",
        rng=np.random.default_rng(4),
    )
    assert r.estimate == pytest.approx(x.sum() / y.sum(), rel=1e-12)
    assert r.n == 80
    assert r.low == pytest.approx(ref.confidence_interval.low, abs=0.01)
    assert r.high == pytest.approx(ref.confidence_interval.high, abs=0.01)


def test_per_resample_callable_gives_the_same_resamples(normal_data: np.ndarray) -> None:
    vectorised = bootstrap_ci(normal_data, lambda s: np.median(s, axis=-1), n_resamples=500, seed=2)
    plain = bootstrap_ci(normal_data, np.median, n_resamples=500, seed=2, vectorized=False)
    assert plain == vectorised


def test_chunking_does_not_change_the_result(
    normal_data: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = bootstrap_ci(normal_data, n_resamples=1000, seed=11)
    batch_sizes: list[int] = []

    def mean(s: np.ndarray) -> np.ndarray:
        batch_sizes.append(s.shape[0])
        return s.mean(axis=-1)

    # 7 resamples of 100 items per chunk at most.
    monkeypatch.setattr(bootstrap_module, "_CHUNK_ELEMENTS", 700)
    chunked = bootstrap_ci(normal_data, mean, n_resamples=1000, seed=11)
    assert chunked == whole
    assert batch_sizes[0] == 1  # the estimate, on the original data
    assert max(batch_sizes[1:]) == 7
    assert sum(batch_sizes[1:]) == 1000


def test_bernoulli_data_agree_with_binomial_intervals() -> None:
    k, n = 100, 1000
    data = np.zeros(n)
    data[:k] = 1.0
    r = bootstrap_ci(data, n_resamples=4000, seed=0)
    cp = clopper_pearson(k, n)
    # Reference: Clopper–Pearson (checked against statsmodels in test_intervals.py) and the normal
    # approximation p ± 1.96·sqrt(p(1 − p)/n); the bootstrap of a mean of 0/1 items is close to both.
    p = k / n
    normal_width = 2 * stats.norm.ppf(0.975) * math.sqrt(p * (1 - p) / n)
    assert r.estimate == p
    assert r.low == pytest.approx(cp.low, abs=0.006)
    assert r.high == pytest.approx(cp.high, abs=0.006)
    assert (r.high - r.low) == pytest.approx(normal_width, rel=0.1)


def test_single_item_collapses() -> None:
    r = bootstrap_ci([0.25], n_resamples=100)
    assert (r.estimate, r.low, r.high, r.n) == (0.25, 0.25, 0.25, 1)


def test_constant_data_collapse() -> None:
    r = bootstrap_ci(np.full(50, 3.5), n_resamples=200)
    assert r.estimate == r.low == r.high == 3.5


def test_boolean_items_count_as_zero_one() -> None:
    r = bootstrap_ci([True, False, True, True], n_resamples=100)
    assert r.estimate == 0.75


def test_result_fields(normal_data: np.ndarray) -> None:
    r = bootstrap_ci(normal_data, n_resamples=300, confidence=0.9, seed=4)
    assert isinstance(r, BootstrapInterval)
    assert (r.n, r.n_resamples, r.confidence, r.seed, r.method) == (100, 300, 0.9, 4, "percentile")
    assert r.low <= r.estimate <= r.high
    with pytest.raises(AttributeError):
        r.seed = 5  # type: ignore[misc]
    assert set(r.to_dict()) == {
        "estimate", "low", "high", "n", "n_resamples", "confidence", "seed", "method"
    }


def test_higher_confidence_widens(normal_data: np.ndarray) -> None:
    narrow = bootstrap_ci(normal_data, n_resamples=2000, confidence=0.8)
    wide = bootstrap_ci(normal_data, n_resamples=2000, confidence=0.99)
    assert wide.low < narrow.low < narrow.high < wide.high


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ([], r"^data is empty"),
        ([1.0, 2.0, float("nan")], r"^data\[2\]"),
        ([[1.0, float("inf")]], r"^data\[0, 1\]"),
        (np.zeros((2, 2, 2)), r"^data must be 1-D"),
        (np.zeros((0, 3)), r"^data is empty"),
        (["a", "b"], r"^data must be an array of numbers"),
    ],
)
def test_rejects_bad_data(data: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        bootstrap_ci(data, n_resamples=10)  # type: ignore[arg-type]


def test_two_dimensional_data_need_a_statistic() -> None:
    with pytest.raises(ValueError, match=r"^statistic is required"):
        bootstrap_ci(np.ones((5, 2)), n_resamples=10)


@pytest.mark.parametrize(
    "statistic",
    [
        lambda s: s.mean(),  # scalar, not one value per resample
        lambda s: s,  # not reduced
        lambda s: np.full(s.shape[0], np.nan),
    ],
)
def test_rejects_bad_statistic_output(statistic: object) -> None:
    with pytest.raises(ValueError, match=r"^statistic"):
        bootstrap_ci(np.arange(10.0), statistic, n_resamples=10)  # type: ignore[arg-type]


def test_rejects_non_callable_and_bad_plain_statistic() -> None:
    with pytest.raises(ValueError, match=r"^statistic must be callable"):
        bootstrap_ci(np.arange(10.0), 3, n_resamples=10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^statistic must return a single number"):
        bootstrap_ci(np.arange(10.0), lambda s: s[:2], n_resamples=10, vectorized=False)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_resamples": 0}, "n_resamples"),
        ({"n_resamples": 2.5}, "n_resamples"),
        ({"seed": -1}, "seed"),
        ({"seed": None}, "seed"),
        ({"confidence": 0}, "confidence"),
        ({"confidence": 1}, "confidence"),
        ({"confidence": 1.5}, "confidence"),
        ({"confidence": float("nan")}, "confidence"),
    ],
)
def test_rejects_bad_parameters(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name} "):
        bootstrap_ci(np.arange(10.0), **kwargs)  # type: ignore[arg-type]
