"""``calib compare-runs`` over synthetic extraction runs: rates, paired and independent differences and
refusals, every number against an independent computation (statsmodels, scipy, closed forms) from the
planted scores.

Each run scores 30 members and 60 controls of (target, base, ℓs = 32) with α = 0.05: N = 60 controls
give K = ⌊0.05 · 61⌋ = 3 and τ = the 3rd largest control score (the extraction paper §3), so the two
controls above τ are claimed and a member is claimed exactly when it was planted high (−5, above every
control) rather than low (−40, below every control). Run b claims other members than run a on the same
windows; run c holds run b's scores under windows whose text differs (another tokenizer), so it shares
no window with a.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from calib._exceptions import InputError
from calib.report.compare import compare_runs, write_comparison
from calib.report.compare.extraction_render import EXTRACTION_COMPARISON_SCHEMA
from tests.report.compare.test_compare_functional import _paired_newcombe
from tests.report.extraction._synthetic import write_run

GROUP = ("target", "base", 32)
CONTROLS = [-20.0 - 0.1 * i for i in range(60)]  # distinct; the top two lie above τ (the 3rd largest)
CLAIMED = {"a": set(range(12)), "b": set(range(6, 20))}  # the members planted high in each run


def _members(run: str) -> list[float]:
    return [-5.0 if i in CLAIMED[run] else -40.0 for i in range(30)]


def _write(root: Path, run: str, *, alpha: float | str = 0.05, extra: bool = False) -> Path:
    scores = {GROUP: (_members(run), CONTROLS)}
    if extra:  # a suffix length the other runs did not score
        scores[("target", "base", 64)] = (_members(run), CONTROLS)
    return write_run(root, scores, alpha=alpha, alphas=[0.01, 0.05])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("compare-extraction")
    out = {"a": _write(base / "a", "a"), "b": _write(base / "b", "b", extra=True), "c": _write(base / "c", "b")}
    windows = out["c"] / "tables" / "windows.parquet"  # the same ids, other text: another tokenizer's windows
    pl.read_parquet(windows).with_columns(pl.col("prefix") + " (cut by another tokenizer)").write_parquet(windows)
    return out


def _find(result: dict[str, Any], run_a: str, run_b: str, population: str, rate: str) -> dict[str, Any]:
    (c,) = [c for c in result["comparisons"] if (c["run_a"], c["run_b"], c["population"], c["rate"])
            == (run_a, run_b, population, rate) and (c["role"], c["procedure"], c["suffix_tokens"]) == GROUP]
    return c


def test_each_run_claims_the_planted_members_and_k_minus_one_controls(runs):
    result = compare_runs([runs["a"], runs["b"]])
    rates = {(r["run"], r["population"], r["rate"]): r for r in result["rates"] if r["suffix_tokens"] == 32}
    for run in ("a", "b"):
        member = rates[(run, "members", "claim")]["interval"]
        assert (member["k"], member["n"]) == (len(CLAIMED[run]), 30)
        low, high = proportion_confint(len(CLAIMED[run]), 30, alpha=0.05, method="beta")  # Clopper–Pearson
        assert (member["low"], member["high"]) == pytest.approx((low, high), abs=1e-9)
        control = rates[(run, "controls", "claim")]
        assert (control["interval"]["k"], control["interval"]["n"]) == (3 - 1, 60)  # K − 1 controls above τ
        assert control["certified_alpha"] == pytest.approx(3 / 61)  # α_N = K/(N + 1)
        assert control["n_controls"] == 60 and control["pool"] == "all" and control["model"] == "tiny-target"
        # BH at 0.05 over the members' conformal p-values (1 + #controls >= s)/(N + 1), by statsmodels
        p = [(1 + (0 if i in CLAIMED[run] else 60)) / 61 for i in range(30)]
        assert rates[(run, "members", "bh")]["interval"]["k"] == int(multipletests(p, 0.05, "fdr_bh")[0].sum())


def test_runs_scoring_the_same_windows_are_paired(runs):
    result = compare_runs([runs["a"], runs["b"]])
    c = _find(result, "a", "b", "members", "claim")
    a, b = CLAIMED["a"], CLAIMED["b"]
    n11, n10, n01 = len(a & b), len(b - a), len(a - b)  # model 1 of the paired table is run b
    n00 = 30 - n11 - n10 - n01
    assert (c["design"], c["shared"], c["n_paired"], c["conflicting_ids"]) == ("paired", 30, 30, 0)
    d = c["difference"]
    assert (d["n11"], d["n10"], d["n01"], d["n00"]) == (n11, n10, n01, n00)
    assert d["estimate"] == pytest.approx((len(b) - len(a)) / 30)
    assert (d["low"], d["high"]) == pytest.approx(_paired_newcombe(n11, n10, n01, n00), abs=1e-9)
    assert c["p_value"] == pytest.approx(mcnemar([[n11, n10], [n01, n00]], exact=True).pvalue, abs=1e-12)
    controls = _find(result, "a", "b", "controls", "claim")  # the same control scores: no discordant pair
    assert controls["difference"]["estimate"] == 0 and controls["p_value"] == 1.0


def test_windows_with_other_text_are_not_shared_and_compared_as_independent(runs):
    result = compare_runs([runs["a"], runs["c"]])
    c = _find(result, "a", "c", "members", "claim")
    assert (c["design"], c["shared"], c["conflicting_ids"]) == ("independent", 0, 30)
    ka, kb = len(CLAIMED["a"]), len(CLAIMED["b"])
    low, high = confint_proportions_2indep(kb, 30, ka, 30, method="newcomb", compare="diff", alpha=0.05)
    assert (c["difference"]["low"], c["difference"]["high"]) == pytest.approx((low, high), abs=1e-9)
    assert c["p_value"] == pytest.approx(stats.fisher_exact([[kb, 30 - kb], [ka, 30 - ka]]).pvalue, abs=1e-12)


@pytest.mark.parametrize(("adjust", "method"), [("holm", "holm"), ("bh", "fdr_bh")])
def test_p_values_are_adjusted_across_all_comparisons_and_unshared_groups_listed(runs, adjust, method):
    result = compare_runs([runs["a"], runs["b"], runs["c"]], pairing="all", adjust=adjust)
    tested = [c for c in result["comparisons"] if c["p_value"] is not None]
    assert len(tested) == 3 * 3  # three pairs x (members claim, members BH, controls claim)
    expected = multipletests([c["p_value"] for c in tested], alpha=0.05, method=method)[1]
    assert [c["p_adjusted"] for c in tested] == pytest.approx(list(expected), abs=1e-12)
    assert {(u["run_a"], u["run_b"], u["only_in"], u["suffix_tokens"]) for u in result["unmatched"]} == {
        ("a", "b", "b", 64), ("b", "c", "b", 64)}


def test_the_report_and_table_are_written(runs, tmp_path):
    result = compare_runs([runs["a"], runs["b"]])
    paths = write_comparison(result, tmp_path / "out")
    table = pl.read_parquet(paths["table"])
    assert table.columns == list(EXTRACTION_COMPARISON_SCHEMA)
    row = table.filter((pl.col("population") == "members") & (pl.col("rate") == "claim")).row(0, named=True)
    assert (row["k_a"], row["k_b"], row["n_paired"]) == (12, 14, 30)
    text = paths["markdown"].read_text()
    assert "3 extraction runs" not in text and "2 extraction runs" in text
    assert "target · base · ℓs=32" in text and "+6.7 pp" in text  # (14 − 12)/30
    assert "only in `b`" in text  # ℓs = 64 scored by b alone
    saved = json.loads(paths["comparison"].read_text())
    assert saved["kind"] == "extraction" and saved["operating_point"]["analyze.alpha"] == 0.05


def test_runs_at_other_levels_are_refused_and_equal_levels_written_otherwise_are_not(runs, tmp_path):
    other = _write(tmp_path / "other", "a", alpha=0.01)
    with pytest.raises(InputError, match=r"runs a and other differ in analyze.alpha \(0.05 vs 0.01\)"):
        compare_runs([runs["a"], other])
    same = _write(tmp_path / "same", "a", alpha="1/20")  # 0.05 written as a fraction
    result = compare_runs([runs["a"], same])
    assert _find(result, "a", "same", "members", "claim")["difference"]["estimate"] == 0
