"""The member-minus-control difference of an extraction report (extraction paper App. D.1), by hand and
against statsmodels.

The hand run (``_synthetic.write_run``): one suffix length ℓ_s = 10, 10 members and 19 controls.
``base`` controls score log10 = −20, −19, ..., −2; members −1, −1.5, −2.5, −2.9, −3, −5, −8, −10,
−15, −30. At α = 0.1: K = floor(0.1 · 20) = 2, τ = −3 (the 2nd largest control), one control (−2) and
four members (−1, −1.5, −2.5, −2.9; −3 ties τ and is not flagged) score above τ: member rate 4/10,
in-sample control rate 1/19, α_N = 2/20, calibrated rate 0.4 − 0.1 = 0.3. At α = 0.05: K = 1, τ = −2,
no control and two members above. At α = 0.2: K = 4, τ = −5, three controls and five members above.
``greedy`` (binary): 3 of 10 members and 2 of 19 controls generate the suffix (score 1, log10 0).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import confint_proportions_2indep

from calib.report import write_report
from tests.report.extraction._synthetic import write_run
from tests.report.extraction.test_extraction_report import N_MEMBERS, build_run

CONTROLS = [float(v) for v in range(-20, -1)]
MEMBERS = [-1.0, -1.5, -2.5, -2.9, -3.0, -5.0, -8.0, -10.0, -15.0, -30.0]
GREEDY = ([0.0] * 3 + [-math.inf] * 7, [0.0] * 2 + [-math.inf] * 17)
# α -> (K, member flags, control flags)
BY_HAND = {0.05: (1, 2, 0), 0.1: (2, 4, 1), 0.2: (4, 5, 3)}


def _newcombe(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """statsmodels' Newcombe hybrid score interval of p1 − p2 (independent samples), 95 %."""
    low, high = confint_proportions_2indep(k1, n1, k2, n2, method="newcomb", compare="diff", alpha=0.05)
    return float(low), float(high)


def _render(root: Path, decontaminate: list[str] | None = None) -> dict[str, Any]:
    run = write_run(root, {("target", "base", 10): (MEMBERS, CONTROLS), ("target", "greedy", 10): GREEDY},
                    alpha=0.1, alphas=[0.05, 0.1, 0.2], decontaminate=decontaminate)
    paths = write_report(run)
    return {"summary": json.loads(paths["summary"].read_text()), "md": paths["markdown"].read_text()}


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _render(tmp_path_factory.mktemp("hand"))


def test_hand_counts_at_every_level(hand):
    rows = {r["alpha"]: r for r in hand["summary"]["members_vs_controls"] if r["procedure"] == "base"}
    assert sorted(rows) == sorted(BY_HAND)
    for alpha, (k, members, controls) in BY_HAND.items():
        r = rows[alpha]
        assert (r["k"], r["member_flags"], r["n_members"], r["control_flags"], r["n_controls"]) == (
            k, members, 10, controls, 19), alpha
        assert r["certified_alpha"] == pytest.approx(k / 20)
        assert r["difference"] == pytest.approx(members / 10 - controls / 19)
        assert (r["difference_low"], r["difference_high"]) == pytest.approx(_newcombe(members, 10, controls, 19))
        # the calibrated rate and the members' Clopper–Pearson band (scipy's Beta quantiles) shifted by α_N
        low = stats.beta.ppf(0.025, members, 10 - members + 1) if members else 0.0
        high = stats.beta.ppf(0.975, members + 1, 10 - members)
        assert r["calibrated_rate"] == pytest.approx(members / 10 - k / 20)
        assert (r["calibrated_low"], r["calibrated_high"]) == pytest.approx((low - k / 20, high - k / 20))
        assert (r["member_low"], r["member_high"]) == pytest.approx((low, high))
        assert r["primary"] is (alpha == 0.1) and r["pool"] == "all" and not r["binary"]
    r = rows[0.1]
    assert (r["member_rate"], r["control_rate"], r["calibrated_rate"]) == pytest.approx((0.4, 1 / 19, 0.3))
    assert r["p_value"] == pytest.approx(stats.fisher_exact([[4, 6], [1, 18]]).pvalue)
    assert r["log10_threshold"] == -3.0


def test_a_binary_procedure_compares_generation_rates(hand):
    rows = [r for r in hand["summary"]["members_vs_controls"] if r["procedure"] == "greedy"]
    assert len(rows) == 1
    r = rows[0]
    assert r["binary"] and r["alpha"] is None and r["calibrated_rate"] is None and r["certified_alpha"] is None
    assert (r["member_flags"], r["n_members"], r["control_flags"], r["n_controls"]) == (3, 10, 2, 19)
    assert (r["difference_low"], r["difference_high"]) == pytest.approx(_newcombe(3, 10, 2, 19))
    gen = next(h for h in hand["summary"]["headline"] if h["procedure"] == "greedy")["generation"]
    assert gen["difference"] == pytest.approx(3 / 10 - 2 / 19)
    assert (gen["difference_low"], gen["difference_high"]) == pytest.approx(_newcombe(3, 10, 2, 19))


def test_the_section_sits_beside_the_paired_comparison_and_says_what_each_interval_includes(hand):
    md = hand["md"]
    assert md.index("## Multiple testing") < md.index("## Members vs controls") < md.index("## Target vs reference")
    section = md[md.index("## Members vs controls"):md.index("## Target vs reference")]
    assert "includes the sampling of the members and of the controls" in section
    assert "not that τ was chosen on those same controls" in section
    assert "holds the control set and its threshold fixed" in section
    # the primary level in bold, and the hand numbers: 40.0% (4/10), 5.3% (1/19), 34.7%, 30.0%
    assert "**0.1**" in section and "40.0% (4/10)" in section and "5.3% (1/19)" in section
    low, high = _newcombe(4, 10, 1, 19)
    assert f"34.7% [{100 * low:.1f}%, {100 * high:.1f}%]" in section
    assert "30.0% [" in section and "generation" in section


def test_the_decontaminated_pool_is_primary_and_both_pools_are_kept(tmp_path):
    out = _render(tmp_path, decontaminate=["c018"])  # c018 scores −2, the top control
    rows = {(r["pool"], r["alpha"]): r for r in out["summary"]["members_vs_controls"] if r["procedure"] == "base"}
    clean = rows[("decontaminated", 0.1)]
    # N = 18: K = floor(0.1 · 19) = 1, τ = −3 (the largest left), no control and four members above it
    assert (clean["n_controls"], clean["k"], clean["control_flags"], clean["member_flags"]) == (18, 1, 0, 4)
    assert clean["primary"] and not rows[("all", 0.1)]["primary"]
    assert (clean["difference_low"], clean["difference_high"]) == pytest.approx(_newcombe(4, 10, 0, 18))
    section = out["md"][out["md"].index("## Members vs controls"):out["md"].index("## Target vs reference")]
    assert "(0/18)" in section and "(1/19)" not in section  # the table shows the primary pool


@pytest.fixture(scope="module")
def population(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = build_run(tmp_path_factory.mktemp("population"))
    paths = write_report(root)
    return {"summary": json.loads(paths["summary"].read_text()), "root": root}


def test_every_row_of_a_population_run_matches_statsmodels(population):
    rows = population["summary"]["members_vs_controls"]
    assert rows and {r["role"] for r in rows} == {"target", "reference"}
    for r in rows:
        assert (r["difference_low"], r["difference_high"]) == pytest.approx(
            _newcombe(r["member_flags"], r["n_members"], r["control_flags"], r["n_controls"]))
        assert r["difference_low"] <= r["difference"] <= r["difference_high"]
    # the control flags recounted from the controls' scores of the primary pool, at every certifiable α
    import polars as pl

    scores = pl.read_parquet(population["root"] / "tables" / "scores.parquet").filter(
        (pl.col("role") == "target") & (pl.col("procedure") == "base") & pl.col("log10_value").is_not_null())
    controls = scores.filter(pl.col("sample_id").str.starts_with("c") & ~pl.col("sample_id").is_in(["c000", "c001"]))
    members = scores.filter(pl.col("sample_id").str.starts_with("m"))["log10_value"].to_numpy()
    values = np.sort(controls["log10_value"].to_numpy())[::-1]
    mine = [r for r in rows if (r["role"], r["procedure"], r["pool"]) == ("target", "base", "decontaminated")]
    assert len(mine) >= 5
    for r in mine:
        k = math.floor(r["alpha"] * (values.size + 1) + 1e-9)
        tau = values[k - 1]
        assert (r["k"], r["n_controls"], r["n_members"]) == (k, values.size, N_MEMBERS)
        assert r["control_flags"] == int((values > tau).sum()) and r["member_flags"] == int((members > tau).sum())
