"""``compare_runs`` on three synthetic functional runs: every rate, interval and p-value against an
independent computation (statsmodels, scipy) from the samples' definitions."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from calib.report import analyze_run, load_run
from calib.report.compare import compare_runs
from tests.report._fake_run import DEFAULT
from tests.report.compare._runs import CONFLICT, expected_flags, samples_b, samples_c, write_runs

RATES = {"reproduced": "scored", "textual": "scored", "functional": "conclusive"}
MEMBERSHIP = {"members": "member", "controls": "control"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_runs(tmp_path_factory.mktemp("compare"))


@pytest.fixture(scope="module")
def flags() -> dict[str, dict[str, dict[str, Any]]]:
    return {"a": expected_flags(DEFAULT), "b": expected_flags(samples_b(), "b"), "c": expected_flags(samples_c())}


@pytest.fixture(scope="module")
def result(runs: dict[str, Path]) -> dict[str, Any]:
    return compare_runs([runs["a"], runs["b"], runs["c"]], pairing="all")


def _counted(run: dict[str, dict[str, Any]], population: str, rate: str) -> dict[str, dict[str, Any]]:
    return {sid: f for sid, f in run.items() if f["membership"] == MEMBERSHIP[population] and f[RATES[rate]]}


def _paired_newcombe(n11: int, n10: int, n01: int, n00: int, alpha: float = 0.05) -> tuple[float, float]:
    """Newcombe (1998, "Improved confidence intervals for the difference between binomial proportions based on
    paired data", Statistics in Medicine 17:2635-2650), method 10: Wilson limits of each margin (statsmodels)
    combined with the corrected phi coefficient, in closed form."""
    n = n11 + n10 + n01 + n00
    p1, p2 = (n11 + n10) / n, (n11 + n01) / n
    l1, u1 = proportion_confint(n11 + n10, n, alpha=alpha, method="wilson")
    l2, u2 = proportion_confint(n11 + n01, n, alpha=alpha, method="wilson")
    margins = (n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)
    cross = n11 * n00 - n10 * n01
    phi = 0.0 if margins == 0 else (max(cross - n / 2, 0.0) if cross > 0 else cross) / math.sqrt(margins)
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    return max(-1.0, low), min(1.0, high)


def test_each_runs_rates_match_its_own_report_and_the_definitions(runs, flags, result):
    for name in ("a", "b", "c"):
        groups = {g["membership"]: g for g in analyze_run(load_run(runs[name])).summary["groups"] if g["kind"] is None}
        keys = {"reproduced": "text_target", "textual": "text_counterfactual", "functional": "func_memorized"}
        for row in (r for r in result["rates"] if r["run"] == name):
            counted = _counted(flags[name], row["population"], row["rate"])
            assert row["n"] == len(counted)
            assert row["interval"]["k"] == sum(f[row["rate"]] for f in counted.values())
            assert row["interval"] == groups[MEMBERSHIP[row["population"]]]["rates"][keys[row["rate"]]]


def test_runs_sharing_samples_get_newcombe_paired_intervals_and_mcnemar(flags, result):
    paired = [c for c in result["comparisons"] if c["design"] == "paired"]
    assert {(c["run_a"], c["run_b"]) for c in paired} == {("a", "b")}
    assert len(paired) == 6
    for c in paired:
        a, b = _counted(flags["a"], c["population"], c["rate"]), _counted(flags["b"], c["population"], c["rate"])
        both = [sid for sid in a if sid in b and a[sid]["x"] == b[sid]["x"]]
        assert (c["n_a"], c["n_b"], c["n_paired"]) == (len(a), len(b), len(both))
        assert (c["dropped_a"], c["dropped_b"]) == (len(a) - len(both), len(b) - len(both))
        rate = c["rate"]
        n11 = sum(b[s][rate] and a[s][rate] for s in both)
        n10 = sum(b[s][rate] and not a[s][rate] for s in both)
        n01 = sum(not b[s][rate] and a[s][rate] for s in both)
        n00 = len(both) - n11 - n10 - n01
        d = c["difference"]
        assert (d["n11"], d["n10"], d["n01"], d["n00"]) == (n11, n10, n01, n00)
        assert d["estimate"] == pytest.approx((n10 - n01) / len(both), abs=1e-12)
        low, high = _paired_newcombe(n11, n10, n01, n00)
        assert (d["low"], d["high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
        assert c["p_value"] == pytest.approx(mcnemar([[n11, n10], [n01, n00]], exact=True).pvalue, abs=1e-12)
    # the members' functional rate: two flipped off, four flipped on (s00, s01 / s23-s26)
    func = next(c for c in paired if c["population"] == "members" and c["rate"] == "functional")
    assert (func["difference"]["n10"], func["difference"]["n01"]) == (4, 2)


def test_shared_and_dropped_samples_are_counted(flags, result):
    by = {(c["population"], c["rate"]): c for c in result["comparisons"] if c["run_b"] == "b"}
    # members: s00-s28 in both (s29 only in a); controls: s30-s39 but s38 names another function in b
    assert by["members", "textual"]["shared"] == 29 and by["members", "textual"]["conflicting_ids"] == 0
    assert by["controls", "textual"]["shared"] == 9 and by["controls", "textual"]["conflicting_ids"] == 1
    # a scored s29 (absent from b) and s28 (unscored in b); s20-s22 are unscored in both
    assert (by["members", "textual"]["n_a"], by["members", "textual"]["dropped_a"]) == (27, 2)
    assert flags["b"][CONFLICT]["membership"] == "control"


def test_runs_sharing_no_sample_get_independent_intervals_and_fisher(flags, result):
    independent = [c for c in result["comparisons"] if c["design"] == "independent"]
    assert {(c["run_a"], c["run_b"]) for c in independent} == {("a", "c"), ("b", "c")}
    for c in independent:
        a = _counted(flags[c["run_a"]], c["population"], c["rate"])
        b = _counted(flags[c["run_b"]], c["population"], c["rate"])
        ka, kb = sum(f[c["rate"]] for f in a.values()), sum(f[c["rate"]] for f in b.values())
        d = c["difference"]
        assert (d["k1"], d["n1"], d["k2"], d["n2"]) == (kb, len(b), ka, len(a))
        low, high = confint_proportions_2indep(kb, len(b), ka, len(a), method="newcomb", compare="diff", alpha=0.05)
        assert (d["low"], d["high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
        fisher = stats.fisher_exact([[kb, len(b) - kb], [ka, len(a) - ka]]).pvalue
        assert c["p_value"] == pytest.approx(fisher, abs=1e-12)
        assert c["shared"] == 0 and c["n_paired"] == 0


@pytest.mark.parametrize("adjust,method", [("holm", "holm"), ("bh", "fdr_bh")])
def test_p_values_are_adjusted_across_all_comparisons(runs, adjust, method):
    result = compare_runs([runs["a"], runs["b"], runs["c"]], pairing="all", adjust=adjust)
    tested = [c for c in result["comparisons"] if c["p_value"] is not None]
    assert len(tested) == 18  # 3 pairs x 2 populations x 3 rates
    reject, expected, _, _ = multipletests([c["p_value"] for c in tested], alpha=0.05, method=method)
    np.testing.assert_allclose([c["p_adjusted"] for c in tested], expected, rtol=0, atol=1e-12)
    assert [c["significant"] for c in tested] == list(reject)
    assert any(c["p_adjusted"] > c["p_value"] for c in tested)


def test_baseline_pairing_compares_the_first_run_with_each_other(runs):
    result = compare_runs([runs["b"], runs["a"], runs["c"]])
    assert result["pairing"] == "baseline"
    assert {(c["run_a"], c["run_b"]) for c in result["comparisons"]} == {("b", "a"), ("b", "c")}
    assert [r["label"] for r in result["runs"]] == ["b", "a", "c"]
    assert [(r["members"], r["controls"]) for r in result["runs"]] == [(29, 10), (30, 10), (29, 10)]
