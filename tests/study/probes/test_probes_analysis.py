"""pass@k of a probes study with missing generations, and the budget a problem's conditions share.

The analysis functions run on test_results rows written here: n = 5 generations asked per (model,
label, task), some of them missing (status ``request_failed`` or ``overflow``). pass@k of a cell is
the unbiased estimator on the completed generations only, computed here in closed form with
math.comb (Chen et al. 2021, eq. 1); a cell with fewer than k completed is missing, and its problem is
dropped from the paired comparisons it is in, counted by cause.
"""

from __future__ import annotations

import math

import polars as pl
import pytest

from calib.study.probes.analysis import model_pairs_table, pass_at_k_table
from calib.study.probes.generate import shared_budgets
from calib.study.probes.tables import PROBE_PROMPTS_SCHEMA, TEST_RESULTS_SCHEMA

ASKED = 5
#: (model, label, task) -> (passing, failing, missing request_failed, missing overflow); passing + ... = ASKED
CELLS = {
    ("a", "original", "t1"): (3, 2, 0, 0), ("a", "original", "t2"): (1, 2, 2, 0),
    ("a", "original", "t3"): (0, 5, 0, 0), ("a", "original", "t4"): (2, 3, 0, 0),
    ("a", "syn20", "t1"): (2, 3, 0, 0), ("a", "syn20", "t2"): (1, 0, 4, 0),  # one completed: no pass@2 cell
    ("a", "syn20", "t3"): (0, 0, 0, 5), ("a", "syn20", "t4"): (1, 1, 3, 0),  # t3 overflowed
    ("b", "original", "t1"): (5, 0, 0, 0), ("b", "original", "t2"): (0, 0, 5, 0),  # t2 failed entirely
    ("b", "original", "t3"): (1, 4, 0, 0), ("b", "original", "t4"): (4, 1, 0, 0),
    ("b", "syn20", "t1"): (4, 1, 0, 0), ("b", "syn20", "t2"): (2, 2, 1, 0),
    ("b", "syn20", "t3"): (2, 3, 0, 0), ("b", "syn20", "t4"): (3, 0, 2, 0),
}


def _results() -> pl.DataFrame:
    rows = []
    for (model, label, task), counts in CELLS.items():
        assert sum(counts) == ASKED
        statuses = ["ok"] * (counts[0] + counts[1]) + ["request_failed"] * counts[2] + ["overflow"] * counts[3]
        for i, status in enumerate(statuses):
            missing = status != "ok"
            rows.append({"prompt_id": f"{label}/{task}", "task_id": task, "label": label, "model": model,
                         "sample_index": i, "status": status, "passed": None if missing else i < counts[0],
                         "tests_passed": None, "tests_total": 1, "errors": [], "seconds": 0.0})
    return pl.DataFrame(rows, schema=TEST_RESULTS_SCHEMA)


def _prompts() -> pl.DataFrame:
    rows = [{"prompt_id": f"{label}/t{i}", "task_id": f"t{i}", "label": label, "condition": label, "family": None,
             "applicable": True} for label in ("original", "syn20") for i in range(1, 5)]
    return pl.DataFrame(rows, schema=PROBE_PROMPTS_SCHEMA)


def _closed_form(model: str, label: str, k: int) -> dict[str, float]:
    """task -> 1 − C(n − c, k)/C(n, k) on the completed n (Chen et al. 2021, eq. 1); cells with n < k left out."""
    out = {}
    for (m, lab, task), (passing, failing, _, _) in CELLS.items():
        n = passing + failing
        if (m, lab) == (model, label) and n >= k:
            out[task] = 1.0 - math.comb(n - passing, k) / math.comb(n, k)
    return out


@pytest.mark.parametrize("k", [1, 2])
def test_pass_at_k_is_the_unbiased_estimator_on_the_completed_generations(k):
    table = pass_at_k_table(_results(), _prompts(), ks=(1, 2), resamples=200, confidence=0.95, seed=0)
    for model in ("a", "b"):
        base = _closed_form(model, "original", k)
        for label in ("original", "syn20"):
            values = _closed_form(model, label, k)
            row = table.filter((pl.col("model") == model) & (pl.col("label") == label) & (pl.col("k") == k)).row(
                0, named=True)
            assert row["n_problems"] == len(values) and row["problems_missing"] == 4 - len(values)
            assert row["estimate"] == pytest.approx(sum(values.values()) / len(values))
            missing = sum(c[2] + c[3] for key, c in CELLS.items() if key[:2] == (model, label))
            assert row["generations_missing"] == missing
            common = [t for t in values if t in base]
            assert row["difference"] == pytest.approx(sum(values[t] - base[t] for t in common) / len(common))


def test_problems_with_a_missing_cell_are_dropped_from_the_comparison_by_cause():
    table = pass_at_k_table(_results(), _prompts(), ks=(1, 2), resamples=200, confidence=0.95, seed=0)

    def dropped(model: str, label: str, k: int) -> tuple[int | None, int | None]:
        row = table.filter((pl.col("model") == model) & (pl.col("label") == label) & (pl.col("k") == k))
        return row["dropped_failed"][0], row["dropped_overflow"][0]

    assert dropped("a", "original", 1) == (None, None)  # the original is not compared with itself
    assert dropped("a", "syn20", 1) == (0, 1)  # t3 overflowed under syn20
    assert dropped("a", "syn20", 2) == (1, 1)  # and t2 has one completed syn20 generation, fewer than k = 2
    assert dropped("b", "syn20", 1) == (1, 0)  # t2's original requests all failed
    pairs = model_pairs_table(_results(), ("a", "b"), ks=(1, 2), resamples=200, confidence=0.95, seed=0)
    row = pairs.filter((pl.col("label") == "syn20") & (pl.col("k") == 2)).row(0, named=True)
    assert (row["dropped_failed"], row["dropped_overflow"], row["n_problems"]) == (1, 1, 2)  # t2 (a), t3 (a)
    a, b = _closed_form("a", "syn20", 2), _closed_form("b", "syn20", 2)
    assert row["difference"] == pytest.approx(sum(b[t] - a[t] for t in ("t1", "t4")) / 2)


def test_a_problems_conditions_share_the_smallest_room_and_a_prompt_without_room_overflows():
    rooms = {"o1": ("t1", 300), "d1": ("t1", 240), "s1": ("t1", 290),  # t1: dead code leaves the least room
             "o2": ("t2", 500), "d2": ("t2", 0), "s2": ("t2", 450)}  # t2: dead code fills the context
    assert shared_budgets(rooms) == {"o1": 240, "d1": 240, "s1": 240, "o2": 450, "d2": 0, "s2": 450}
    assert shared_budgets({"o": ("t", -3)}) == {"o": 0}
