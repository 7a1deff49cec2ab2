"""The one validity rule (calib/executors/validity.py; docs/architecture.md, "Execution semantics")."""

from __future__ import annotations

import math

import pytest

from calib.executors import ExecutorConfig
from calib.executors.validity import CRITERIA, criteria_of, validity

PAPER = ExecutorConfig()  # N = 10, N_in = 8, C = 0.8, 2 distinct outputs (the paper's §3)


def test_the_papers_thresholds_decide_at_their_edges():
    assert validity(PAPER, valid_inputs=8, distinct_outputs=2, coverage=0.8).conclusive
    for facts in ({"valid_inputs": 7, "distinct_outputs": 2, "coverage": 0.8},
                  {"valid_inputs": 8, "distinct_outputs": 1, "coverage": 0.8},
                  {"valid_inputs": 8, "distinct_outputs": 2, "coverage": 0.79}):
        verdict = validity(PAPER, **facts)
        assert not verdict.conclusive and len(verdict.problems) == 1, facts


def test_every_failed_criterion_is_named_in_order_with_the_commonest_invalid_reason():
    verdict = validity(PAPER, valid_inputs=3, distinct_outputs=1, coverage=0.5,
                       invalid_reasons=["timeout", "missing_name", "timeout"])
    assert verdict.reason == ("valid_inputs 3 < 8 (mostly timeout); coverage 0.50 < 0.8; "
                              "distinct_outputs 1 < 2")
    assert validity(PAPER, valid_inputs=0, distinct_outputs=0, coverage=1.0).problems[0].endswith("(mostly none found)")


@pytest.mark.parametrize("coverage", [None, math.nan])
def test_an_unmeasured_criterion_is_not_applied_and_says_so(coverage):
    verdict = validity(PAPER, valid_inputs=10, distinct_outputs=3, coverage=coverage)
    assert verdict.conclusive and verdict.criteria == ("valid_inputs", "distinct_outputs")
    measured = validity(PAPER, valid_inputs=10, distinct_outputs=3, coverage=0.1)
    assert not measured.conclusive and measured.criteria == CRITERIA


def test_criteria_per_executor_kind():
    assert criteria_of("sandbox") == criteria_of("llm") == criteria_of("agent") == CRITERIA
    assert criteria_of("native-c") == criteria_of("native-cpp") == criteria_of("native-java") == CRITERIA
    assert criteria_of("native-rust") == criteria_of("native-go") == CRITERIA
