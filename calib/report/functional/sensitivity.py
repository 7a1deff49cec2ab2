"""Threshold sensitivity: the rates when one of τ_text, τ_func, C or N_in moves (functional-memorization paper,
§3 "Agentic execution-based testing" and Figure 24).

Each sweep varies ONE parameter over a grid while the others stay at the run's operating point, and
recomputes every rate of :data:`~calib.report.functional.rates.RATE_LABELS` (all samples, and members and
controls apart when both are present) from the stored tables only, through the same
:func:`~calib.report.functional.rates.group_rates` as the main rates: nothing is executed again.

- τ_text and τ_func relabel the stored SIM_text and SIM_func (grid 0.1, 0.2, …, 1 and the run's value).
- C and N_in re-judge which samples are conclusive from the executions table (x's ``coverage`` and
  ``valid_inputs``; :mod:`calib.executors.validity`). A sample the run judged inconclusive has no SIM_func,
  so only values **at least as strict** as the run's can be computed: the grids run from the run's C up to 1
  and from the run's N_in up to N (``execute.n_inputs``). At a stricter value a conclusive sample stays
  conclusive when it still meets it. An executor kind that measures no line coverage
  (:func:`calib.executors.validity.criteria_of`; every kind measures it now) is left out of the C sweep:
  it applies only to samples whose executor measured it, the others stay as the run judged them
  (``samples_without_coverage`` counts the conclusive ones).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from calib.executors.validity import criteria_of
from calib.report.functional.rates import RATE_LABELS, group_rates
from calib.report.run import RunData, setting

__all__ = ["LOOSER", "PARAMETERS", "TAU_GRID", "threshold_sensitivity"]

#: The swept parameters: summary key -> (symbol, what it is).
PARAMETERS: dict[str, tuple[str, str]] = {
    "tau_text": ("τ_text", "textual similarity threshold"),
    "tau_func": ("τ_func", "functional similarity threshold"),
    "coverage": ("C", "minimum line coverage of x's valid inputs"),
    "min_valid": ("N_in", "minimum number of valid input states"),
}
#: The grid of τ_text and τ_func (the run's value is added).
TAU_GRID = tuple(round(0.1 * i, 1) for i in range(1, 11))
#: The step of the C grid, from the run's C up to 1.
COVERAGE_STEP = 0.05
#: The most N_in values a sweep shows (evenly spaced integers from the run's N_in to N when there are more).
MAX_N_IN = 11
#: Why the C and N_in grids stop at the run's values (summary.json ``sensitivity.looser``).
LOOSER = ("not computable: a sample the run judged inconclusive has no SIM_func, so C and N_in looser than the "
          "run's are not shown")


def _coverage_grid(run_c: float) -> list[float]:
    steps = math.floor(round((1.0 - run_c) / COVERAGE_STEP, 9))
    return sorted({run_c, *(round(run_c + COVERAGE_STEP * (i + 1), 6) for i in range(steps)), 1.0})


def _n_in_grid(run_n: int, n_inputs: int) -> list[int]:
    top = max(run_n, n_inputs)
    if top - run_n + 1 <= MAX_N_IN:
        return list(range(run_n, top + 1))
    return sorted({int(round(v)) for v in np.linspace(run_n, top, MAX_N_IN)})


def _measured_coverage(frame: pl.DataFrame) -> pl.Expr:
    executors = [e for e in frame["executor"].unique().to_list() if e is not None]
    with_coverage = [e for e in executors if "coverage" in criteria_of(e)]
    return (pl.col("executor").is_in(with_coverage) & pl.col("coverage").is_not_null()
            & pl.col("coverage").is_not_nan())


def _restrict(frame: pl.DataFrame, still: pl.Expr) -> pl.DataFrame:
    """Samples that stop being conclusive lose their SIM_func (what counterfactual_rates counts conclusive by)."""
    keep = pl.col("conclusive") & still.fill_null(False)
    return frame.with_columns(keep.alias("conclusive"),
                              *[pl.when(keep).then(pl.col(c)).alias(c) for c in ("func_target", "func_reference")])


def _groups(frame: pl.DataFrame) -> list[tuple[str, str | None, pl.DataFrame]]:
    memberships = [m for m in ("member", "control") if m in set(frame["membership"].to_list())]
    others = sorted({m for m in frame["membership"].to_list() if m is not None} - set(memberships))
    memberships += others
    parts = [("all", None, frame)]
    if len(memberships) > 1:
        parts += [(m, m, frame.filter(pl.col("membership") == m)) for m in memberships]
    return parts


def _point(frame: pl.DataFrame, value: float, at_run: bool, analyze: dict[str, Any]) -> dict[str, Any]:
    groups = []
    for label, membership, part in _groups(frame):
        g = group_rates(part, label=label, membership=membership, kind=None, analyze=analyze)
        groups.append({"label": label, "membership": membership, "n_scored": g["n_scored"],
                       "n_conclusive": g["n_conclusive"], "rates": g["rates"]})
    return {"value": value, "at_run": at_run, "groups": groups}


def _sweep(parameter: str, run_value: float, values: list[Any], points: list[dict[str, Any]]) -> dict[str, Any]:
    symbol, what = PARAMETERS[parameter]
    return {"parameter": parameter, "symbol": symbol, "label": what, "run_value": run_value, "values": values,
            "looser": LOOSER if parameter in ("coverage", "min_valid") else None, "points": points}


def threshold_sensitivity(run: RunData, frame: pl.DataFrame, analyze: dict[str, Any]) -> dict[str, Any]:
    """The four sweeps over ``frame`` (:func:`~calib.report.functional.samples.sample_table`); docs/report.md
    ``sensitivity`` lists the keys."""
    run_c = float(setting(run.spec, "execute.coverage", 0.8))
    run_n = int(setting(run.spec, "execute.min_valid", 8))
    n_inputs = int(setting(run.spec, "execute.n_inputs", 10))
    operating = {"tau_text": analyze["tau_text"], "tau_func": analyze["tau_func"], "coverage": run_c,
                 "min_valid": run_n}
    measured = _measured_coverage(frame)
    sweeps: dict[str, dict[str, Any]] = {}
    for key in ("tau_text", "tau_func"):
        grid = sorted({*TAU_GRID, operating[key]})
        points = [_point(frame, v, v == operating[key], {**analyze, key: v}) for v in grid]
        sweeps[key] = _sweep(key, operating[key], grid, points)
    c_grid = _coverage_grid(run_c)
    sweeps["coverage"] = _sweep("coverage", run_c, c_grid, [
        _point(_restrict(frame, ~measured | (pl.col("coverage") >= c)), c, c == run_c, analyze) for c in c_grid])
    n_grid = _n_in_grid(run_n, n_inputs)
    sweeps["min_valid"] = _sweep("min_valid", run_n, n_grid, [
        _point(_restrict(frame, pl.col("valid_inputs") >= n), n, n == run_n, analyze) for n in n_grid])
    without = frame.filter(pl.col("conclusive") & ~measured.fill_null(False)).height
    return {"operating_point": operating, "confidence": analyze["confidence"], "rates": list(RATE_LABELS),
            "samples_without_coverage": without, "sweeps": sweeps}
