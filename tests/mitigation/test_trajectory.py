"""The trajectory's rules on planted scores (calib/study/mitigation/trajectory.py): the audit's counterfactual rule,
Clopper-Pearson against statsmodels, and a missing completion never counted as mitigated."""

from __future__ import annotations

import polars as pl
import pytest
from statsmodels.stats.proportion import proportion_confint

from calib.study.mitigation.tables import CHECKPOINTS_SCHEMA, MITIGATION_SCORES_SCHEMA
from calib.study.mitigation.trajectory import trajectory


def _row(point, sid, verdict, text, func=None, conclusive=True, which="memorized"):
    return {"point": point, "sample_id": sid, "set": which, "verdict": verdict, "text": text, "func": func,
            "conclusive": conclusive}


def test_planted_points():
    rows = [
        # s1 textual: the target reproduces it, the reference does not; the checkpoint still does
        _row("target", "s1", "textual", 0.9, 0.9), _row("reference", "s1", "textual", 0.1, 0.0),
        _row("npo@1", "s1", "textual", 0.8, 0.5),
        # s2 functional: the checkpoint keeps the behaviour with other text: still functionally memorized
        _row("target", "s2", "functional", 0.5, 1.0), _row("reference", "s2", "functional", 0.1, 0.1),
        _row("npo@1", "s2", "functional", 0.2, 0.9),
        # s3 functional, but the reference reproduces it functionally too: never counterfactually memorized
        _row("target", "s3", "functional", 0.5, 1.0), _row("reference", "s3", "functional", 0.3, 0.9),
        _row("npo@1", "s3", "functional", 0.3, 1.0),
        # s4: the checkpoint's completion is missing: unscored, not "mitigated"
        _row("target", "s4", "textual", 1.0, 1.0), _row("reference", "s4", "textual", 0.0, 0.0),
        _row("npo@1", "s4", "textual", None, None),
        # s5: inconclusive execution: only the textual rule applies
        _row("target", "s5", "textual", 0.2, None, False), _row("reference", "s5", "textual", 0.0, None, False),
        _row("npo@1", "s5", "textual", 0.1, None, False),
        # retain prompts
        _row("target", "r1", None, 1.0, None, None, "retain"), _row("reference", "r1", None, 0.2, None, None, "retain"),
        _row("npo@1", "r1", None, 0.6, None, None, "retain"), _row("npo@1", "r2", None, 0.4, None, None, "retain"),
        _row("target", "r2", None, 1.0, None, None, "retain"),
    ]
    scores = pl.DataFrame(rows, schema=MITIGATION_SCORES_SCHEMA)
    checkpoints = pl.DataFrame([{"method": "npo", "epoch": 1, "point": "npo@1", "folder": "x", "pairs": 4,
                                 "left_out": 0, "learning_rate": 1e-3, "loss": 1.0, "pairs_fingerprint": "f"}],
                               schema=CHECKPOINTS_SCHEMA)
    t = {r["point"]: r for r in trajectory(scores, checkpoints, tau_text=0.75, tau_func=0.8,
                                          confidence=0.95).iter_rows(named=True)}
    assert [t[p]["memorized"] for p in ("target", "reference", "npo@1")] == [3, 0, 2]  # target: s1, s2, s4
    assert (t["npo@1"]["n"], t["npo@1"]["unscored"], t["target"]["unscored"]) == (4, 1, 0)
    assert (t["npo@1"]["textual"], t["npo@1"]["functional"], t["npo@1"]["n_conclusive"]) == (1, 2, 3)
    low, high = proportion_confint(2, 4, alpha=0.05, method="beta")
    assert (t["npo@1"]["memorized_low"], t["npo@1"]["memorized_high"]) == (pytest.approx(low), pytest.approx(high))
    # the paper's axis: SIM_text over textual items (s1 0.8, s5 0.1), SIM_func over conclusive functional (0.9, 1.0)
    assert t["npo@1"]["memorization"] == pytest.approx((0.8 + 0.1 + 0.9 + 1.0) / 4)
    assert t["npo@1"]["retain_agreement"] == pytest.approx(0.5) and t["npo@1"]["utility"] == pytest.approx(0.5)
    assert t["reference"]["utility"] == pytest.approx(0.2)
    # without a holdout there is no benchmark: utility is retain agreement alone
    assert t["npo@1"]["benchmark_n"] is None and t["npo@1"]["pass_at_1"] is None
    assert t["npo@1"]["retain_utility"] == pytest.approx(0.5)


def test_held_out_benchmark_pass_at_1_and_the_aggregate():
    rows = [_row("target", "r1", None, 1.0, None, None, "retain"), _row("reference", "r1", None, 0.3, None, None,
                                                                       "retain"),
            _row("npo@1", "r1", None, 0.6, None, None, "retain")]
    for p in ("target", "reference", "npo@1"):
        rows.append(_row(p, "s1", "textual", 0.9, 0.9))  # one forget item per point
    # held out: h1..h4 conclusive, h5 inconclusive (no tests), h6 with a missing completion at npo@1
    plan = {"target": [1.0, 1.0, 1.0, 0.5], "reference": [0.0, 0.2, 0.0, 0.0], "npo@1": [1.0, 0.99, 1.0, 0.0]}
    for p, funcs in plan.items():
        rows += [_row(p, f"h{i}", "functional", 0.5, f, True, "heldout") for i, f in enumerate(funcs, 1)]
        rows.append(_row(p, "h5", "textual", 0.9, None, False, "heldout"))
        rows.append(_row(p, "h6", "functional", None if p == "npo@1" else 0.8, None if p == "npo@1" else 1.0, True,
                         "heldout"))
    scores = pl.DataFrame(rows, schema=MITIGATION_SCORES_SCHEMA)
    checkpoints = pl.DataFrame([{"method": "npo", "epoch": 1, "point": "npo@1", "folder": "x", "pairs": 1,
                                 "left_out": 0, "learning_rate": 1e-3, "loss": 1.0, "pairs_fingerprint": "f"}],
                               schema=CHECKPOINTS_SCHEMA)
    t = {r["point"]: r for r in trajectory(scores, checkpoints, tau_text=0.75, tau_func=0.8,
                                          confidence=0.9).iter_rows(named=True)}
    # held-out rows never enter the forget set's numbers
    assert [t[p]["n"] for p in t] == [1, 1, 1]
    # a task passes only when every output equals x's (SIM_func = 1): target h1-h3 + h6, reference h6, npo@1 h1, h3
    # (its h6 is unscored)
    assert [(t[p]["benchmark_passed"], t[p]["benchmark_n"]) for p in ("target", "reference", "npo@1")] == [
        (4, 5), (1, 5), (2, 4)]
    low, high = proportion_confint(2, 4, alpha=0.1, method="beta")  # Clopper-Pearson (statsmodels)
    assert (t["npo@1"]["pass_low"], t["npo@1"]["pass_high"]) == (pytest.approx(low), pytest.approx(high))
    assert t["npo@1"]["benchmark_utility"] == pytest.approx((2 / 4) / (4 / 5))
    # the aggregate: the mean of the normalized measures (paper App. H.2); the target's is 1 by construction
    assert t["npo@1"]["utility"] == pytest.approx((0.6 + (2 / 4) / (4 / 5)) / 2)
    assert t["reference"]["utility"] == pytest.approx((0.3 + (1 / 5) / (4 / 5)) / 2)
    assert t["target"]["utility"] == pytest.approx(1.0)
