"""Which executions row speaks for x in the report (calib.report.functional.samples.x_executions): a compared
completion's, else one not compared (``[execute] candidates_when_inconclusive = false``), and a role without a
completion only when nothing else is there, since its reason is that, not x's."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from calib.executors import EXECUTIONS_SCHEMA, NO_GENERATION
from calib.report.functional.samples import x_executions
from calib.report.run import RunData


def _row(sample: str, role: str, reason: str, matches: list[bool | None], conclusive: bool = False) -> dict:
    return {"sample_id": sample, "role": role, "executor": "sandbox", "valid_inputs": 9, "coverage": 0.5,
            "distinct_outputs": 3, "conclusive": conclusive, "reason": reason, "sim_func": None, "matches": matches,
            "warnings": []}


def _x(rows: list[dict]) -> dict[str, str]:
    executions = pl.DataFrame(rows, schema=EXECUTIONS_SCHEMA)
    empty = pl.DataFrame()
    run = RunData(root=Path("."), spec={}, manifest={}, samples=empty, generations=empty, executions=executions,
                  similarities=empty, claims=empty)
    table = x_executions(run)
    return dict(zip(table["sample_id"].to_list(), table["x_reason"].to_list(), strict=True))


def test_a_role_without_a_completion_does_not_speak_for_x_when_the_other_was_not_compared():
    x = _x([_row("a", "target", NO_GENERATION, []), _row("a", "reference", "coverage 0.5 < 0.8", []),
            _row("b", "target", "coverage 0.5 < 0.8", []), _row("b", "reference", "coverage 0.5 < 0.8", []),
            _row("c", "target", NO_GENERATION, []), _row("c", "reference", NO_GENERATION, [])])
    assert x == {"a": "coverage 0.5 < 0.8", "b": "coverage 0.5 < 0.8", "c": NO_GENERATION}


def test_a_compared_completion_speaks_for_x_first():
    x = _x([_row("a", "target", "other", []), _row("a", "reference", "coverage 0.5 < 0.8", [None, True]),
            _row("b", "target", NO_GENERATION, []), _row("b", "reference", "", [True, True], conclusive=True)])
    assert x == {"a": "coverage 0.5 < 0.8", "b": ""}
