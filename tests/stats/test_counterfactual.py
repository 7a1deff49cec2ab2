"""Tests for calib.stats.counterfactual: counterfactual textual / functional rates and overlaps."""

from __future__ import annotations

import json

import polars as pl
import pytest
from statsmodels.stats.proportion import proportion_confint

from calib.stats.counterfactual import (
    WIDE_SCHEMA,
    TargetReferenceTable,
    counterfactual_rates,
    wide_from_long,
)
from calib.stats.intervals import ProportionInterval, paired_difference

# Hand-built table, τ_text = 0.75, τ_func = 0.8 ("similar" is >=, "not similar" is <).
#
#  id    text_T  text_R  func_T  func_R   text flags T/R  conclusive  func flags T/R
#  s1    0.90    0.10    0.95    0.10     T  -            yes         T  -
#  s2    0.20    0.10    0.85    0.30     -  -            yes         T  -
#  s3    0.30    0.20    1.00    0.90     -  -            yes         T  R
#  s4    0.80    0.80    0.90    0.90     T  R            yes         T  R
#  s5    0.75    0.7499  0.50    0.10     T  -   (=τ)     yes         -  -
#  s6    0.10    0.75    0.80    0.7999   -  R   (=τ)     yes         T  -   (=τ)
#  s7    0.60    0.10    null    null     -  -            no
#  s8    0.95    0.20    null    0.50     T  -            no (one null)
#  s9    0.10    0.10    0.10    0.85     -  -            yes         -  R
#  s10   0.76    0.74    0.79    0.20     T  -            yes         -  -
#
# Textual table (all 10): n11 = {s4} = 1, n10 = {s1, s5, s8, s10} = 4, n01 = {s6} = 1,
#   n00 = {s2, s3, s7, s9} = 4. Textual rate = n10/n = 4/10.
# Conclusive: s1-s6, s9, s10 = 8; inconclusive: s7, s8 = 2.
# Functional table (8 conclusive): n11 = {s3, s4} = 2, n10 = {s1, s2, s6} = 3, n01 = {s9} = 1,
#   n00 = {s5, s10} = 2.
# Functionally memorized = func n10 with text_T < 0.75: {s2, s6} (s1 has text_T 0.9) -> 2/8.
# functional_missed_by_text = 2 of the 3 func counterfactual flags {s1, s2, s6} -> 2/3.
# text_not_functional: conclusive textual counterfactual flags {s1, s5, s10} (s8 is inconclusive);
#   with func_T < 0.8: {s5, s10} -> 2/3.
HAND = pl.DataFrame(
    {
        "sample_id": [f"s{i}" for i in range(1, 11)],
        "text_target": [0.90, 0.20, 0.30, 0.80, 0.75, 0.10, 0.60, 0.95, 0.10, 0.76],
        "text_reference": [0.10, 0.10, 0.20, 0.80, 0.7499, 0.75, 0.10, 0.20, 0.10, 0.74],
        "func_target": [0.95, 0.85, 1.00, 0.90, 0.50, 0.80, None, None, 0.10, 0.79],
        "func_reference": [0.10, 0.30, 0.90, 0.90, 0.10, 0.7999, None, 0.50, 0.85, 0.20],
    }
)


def _check_cp(interval: ProportionInterval | None, k: int, n: int, confidence: float = 0.95) -> None:
    # Reference: statsmodels.stats.proportion.proportion_confint(k, n, alpha=1 - confidence,
    # method="beta") (Clopper–Pearson).
    assert interval is not None
    low, high = proportion_confint(k, n, alpha=1 - confidence, method="beta")
    assert (interval.k, interval.n) == (k, n)
    assert interval.estimate == pytest.approx(k / n)
    assert interval.low == pytest.approx(low, abs=1e-12)
    assert interval.high == pytest.approx(high, abs=1e-12)
    assert interval.confidence == confidence
    assert interval.method == "clopper-pearson"


def test_hand_built_counts() -> None:
    r = counterfactual_rates(HAND)
    assert (r.tau_text, r.tau_func, r.confidence) == (0.75, 0.8, 0.95)
    assert (r.n_samples, r.n_conclusive, r.n_inconclusive) == (10, 8, 2)
    assert r.textual_table == TargetReferenceTable("text", 0.75, n11=1, n10=4, n01=1, n00=4)
    assert r.functional_table == TargetReferenceTable("func", 0.8, n11=2, n10=3, n01=1, n00=2)
    _check_cp(r.textual, 4, 10)
    _check_cp(r.functional, 2, 8)
    _check_cp(r.functional_missed_by_text, 2, 3)
    _check_cp(r.text_not_functional, 2, 3)


def test_other_confidence_and_thresholds() -> None:
    # τ_text = 0.9: text flags T = {s1 0.90, s8 0.95}, R = {} -> textual rate 2/10. τ_func = 0.95:
    # func T = {s1 0.95, s3 1.00}, R = {} -> func n10 = 2 among 8; memorized needs text_T < 0.9:
    # {s3} -> 1/8; missed_by_text 1/2. Conclusive textual flags {s1}, func_T 0.95 >= 0.95 -> 0/1.
    r = counterfactual_rates(HAND, tau_text=0.9, tau_func=0.95, confidence=0.9)
    _check_cp(r.textual, 2, 10, 0.9)
    _check_cp(r.functional, 1, 8, 0.9)
    _check_cp(r.functional_missed_by_text, 1, 2, 0.9)
    _check_cp(r.text_not_functional, 0, 1, 0.9)
    assert r.functional_table == TargetReferenceTable("func", 0.95, n11=0, n10=2, n01=0, n00=6)


def test_exactly_at_threshold_is_similar() -> None:
    table = pl.DataFrame(
        {
            "sample_id": ["at", "below"],
            "text_target": [0.75, 0.7499999],
            "text_reference": [0.7499999, 0.75],
            "func_target": [0.8, 0.7999999],
            "func_reference": [0.7999999, 0.8],
        }
    )
    r = counterfactual_rates(table)
    # "at": text T only (0.75 >= 0.75) and func T only, but text_T is not < 0.75 -> not functional.
    # "below": text R only, func R only.
    assert r.textual_table == TargetReferenceTable("text", 0.75, n11=0, n10=1, n01=1, n00=0)
    assert r.functional_table == TargetReferenceTable("func", 0.8, n11=0, n10=1, n01=1, n00=0)
    assert (r.textual.k, r.functional.k) == (1, 0)
    assert (r.functional_missed_by_text.k, r.functional_missed_by_text.n) == (0, 1)
    assert (r.text_not_functional.k, r.text_not_functional.n) == (0, 1)


def test_all_inconclusive() -> None:
    table = HAND.with_columns(pl.lit(None).alias("func_target"), pl.lit(None).alias("func_reference"))
    assert table["func_target"].dtype == pl.Null
    r = counterfactual_rates(table)
    assert (r.n_conclusive, r.n_inconclusive) == (0, 10)
    _check_cp(r.textual, 4, 10)
    assert r.functional is None
    assert r.functional_missed_by_text is None
    assert r.text_not_functional is None
    assert r.functional_table.n == 0
    json.dumps(r.to_dict())


def test_empty_denominators_give_none() -> None:
    # No sample is a counterfactual flag of either kind: both overlaps are undefined.
    table = pl.DataFrame(
        {
            "sample_id": ["a", "b"],
            "text_target": [0.1, 0.9],
            "text_reference": [0.1, 0.9],
            "func_target": [0.1, 0.9],
            "func_reference": [0.1, 0.9],
        }
    )
    r = counterfactual_rates(table)
    _check_cp(r.textual, 0, 2)
    _check_cp(r.functional, 0, 2)
    assert r.functional_missed_by_text is None
    assert r.text_not_functional is None


def test_table_methods() -> None:
    t = counterfactual_rates(HAND).functional_table
    frame = t.to_frame()
    assert frame.schema == pl.Schema(
        {"target_similar": pl.Boolean, "reference_similar": pl.Boolean, "count": pl.Int64}
    )
    assert frame.rows() == [(True, True, 2), (True, False, 3), (False, True, 1), (False, False, 2)]
    assert t.n == 8
    _check_cp(t.target_rate(), 5, 8)  # n11 + n10
    _check_cp(t.reference_rate(), 3, 8)  # n11 + n01
    assert t.difference() == paired_difference(2, 3, 1, 2)
    assert t.difference().estimate == pytest.approx((3 - 1) / 8)


def test_result_is_json_ready() -> None:
    data = json.loads(json.dumps(counterfactual_rates(HAND).to_dict()))
    assert data["textual"]["k"] == 4
    assert data["functional_table"] == {
        "similarity": "func", "tau": 0.8, "n11": 2, "n10": 3, "n01": 1, "n00": 2
    }


def test_extra_columns_and_integer_ids_are_accepted() -> None:
    table = HAND.with_columns(pl.lit("x").alias("language"))
    assert counterfactual_rates(table).textual.k == 4
    table = HAND.with_columns(pl.Series("sample_id", list(range(10))))
    assert counterfactual_rates(table).functional.k == 2


# --- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "match"),
    [
        (HAND.drop("func_target"), r"missing column\(s\) func_target; required columns: sample_id, "
         r"text_target, text_reference, func_target, func_reference"),
        (HAND.clear(), "no rows"),
        (pl.concat([HAND, HAND.head(1)]), "sample_id 's1' appears 2 times"),
        (HAND.with_columns(pl.Series("sample_id", ["a", None] + ["c"] * 8)), "sample_id is null in row 1"),
        (
            HAND.with_columns(pl.Series("func_reference", [0.1, 0.2, 1.2] + [0.1] * 7)),
            "func_reference is 1.2 for sample_id 's3'",
        ),
        (
            HAND.with_columns(pl.Series("text_target", [0.1, float("nan")] + [0.1] * 8)),
            "text_target is nan for sample_id 's2'",
        ),
        (
            HAND.with_columns(pl.Series("text_reference", [0.1, 0.1, -0.5] + [0.1] * 7)),
            "text_reference is -0.5 for sample_id 's3'",
        ),
        (
            HAND.with_columns(pl.Series("text_reference", [0.1] * 4 + [None] + [0.1] * 5)),
            "text_reference is null for sample_id 's5'",
        ),
        (HAND.with_columns(pl.lit("high").alias("func_target")), "func_target must hold numbers"),
        ({"sample_id": ["a"]}, "must be a polars DataFrame"),
    ],
)
def test_bad_table(table, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        counterfactual_rates(table)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tau_text": 0.0}, "tau_text"),
        ({"tau_text": 1.5}, "tau_text"),
        ({"tau_func": "0.8"}, "tau_func"),
        ({"confidence": 1.0}, "confidence"),
    ],
)
def test_bad_parameters(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        counterfactual_rates(HAND, **kwargs)


# --- the long similarities table -------------------------------------------------------------------


def _long_from_wide(wide: pl.DataFrame) -> pl.DataFrame:
    rows = []
    for rec in wide.iter_rows(named=True):
        for prefix, metric in (("text", "bleu"), ("func", "sim_func")):
            for role in ("target", "reference"):
                value = rec[f"{prefix}_{role}"]
                if value is not None:  # an inconclusive execution writes no sim_func row
                    rows.append((rec["sample_id"], role, metric, value))
        rows.append((rec["sample_id"], "target", "codebleu", 0.5))  # other metrics are ignored
        rows.append((rec["sample_id"], "reference_2", "bleu", 0.9))  # other roles are ignored
    return pl.DataFrame(rows, schema=["sample_id", "role", "metric", "value"], orient="row")


def test_wide_from_long_round_trip() -> None:
    wide = wide_from_long(_long_from_wide(HAND))
    assert wide.schema == pl.Schema(WIDE_SCHEMA)
    assert wide.equals(HAND)
    assert counterfactual_rates(wide) == counterfactual_rates(HAND)


def test_wide_from_long_other_metric_names() -> None:
    long = _long_from_wide(HAND).with_columns(
        pl.col("metric").replace({"bleu": "exact", "sim_func": "sim_func_agent"})
    )
    wide = wide_from_long(long, text_metric="exact", func_metric="sim_func_agent")
    assert wide.equals(HAND)


def test_wide_from_long_missing_text_is_rejected_later() -> None:
    long = _long_from_wide(HAND).filter(
        ~((pl.col("sample_id") == "s4") & (pl.col("metric") == "bleu") & (pl.col("role") == "target"))
    )
    wide = wide_from_long(long)
    assert wide.filter(pl.col("sample_id") == "s4")["text_target"].to_list() == [None]
    with pytest.raises(ValueError, match="text_target is null for sample_id 's4'"):
        counterfactual_rates(wide)


def test_wide_from_long_bad_input() -> None:
    long = _long_from_wide(HAND)
    with pytest.raises(ValueError, match=r"missing column\(s\) role; required columns: sample_id, role"):
        wide_from_long(long.drop("role"))
    with pytest.raises(ValueError, match="more than one row for sample_id 's1', role 'target', metric 'bleu'"):
        wide_from_long(pl.concat([long.head(1), long]))
    with pytest.raises(ValueError, match="must differ"):
        wide_from_long(long, text_metric="bleu", func_metric="bleu")
    assert wide_from_long(long.clear()).height == 0
