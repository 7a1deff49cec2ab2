"""The report's threshold-sensitivity section (summary.json ``sensitivity``; functional-memorization paper, Figure 24).

Every number is read from the summary; :mod:`calib.report.functional.sensitivity` computes them.
"""

from __future__ import annotations

from typing import Any

from calib.report.document import Block, Figure, Heading, Paragraph, Table
from calib.report.format import DASH, number, pct, setting_pct
from calib.report.functional.figures import sensitivity_figure
from calib.report.functional.rates import RATE_LABELS

__all__ = ["SHOWN_RATES", "sensitivity_section"]

#: The rates the section's tables and figure show (summary.json keeps all of RATE_LABELS).
SHOWN_RATES = ("text_target", "text_reference", "text_counterfactual", "func_target", "func_reference",
               "func_memorized")


def _cell(interval: dict[str, Any] | None) -> str:
    return DASH if interval is None else f"{pct(interval['estimate'])} {interval['k']}/{interval['n']}"


def _value(sweep: dict[str, Any], value: float) -> str:
    text = setting_pct(value) if sweep["parameter"] == "coverage" else number(value)
    return f"**{text}** (run)" if value == sweep["run_value"] else text


def _table(sweep: dict[str, Any]) -> Table:
    rows = []
    for point in sweep["points"]:
        # members and controls when the run has both, else every sample
        shown = [g for g in point["groups"] if g["membership"] is not None] or point["groups"]
        rows += [(_value(sweep, point["value"]), g["label"], str(g["n_scored"]), str(g["n_conclusive"]),
                  *(_cell(g["rates"][k]) for k in SHOWN_RATES)) for g in shown]
    header = (sweep["symbol"], "group", "scored", "conclusive", *(RATE_LABELS[k] for k in SHOWN_RATES))
    return Table(header, tuple(rows), f"sensitivity-{sweep['parameter'].replace('_', '-')}-table",
                 f"Rates as {sweep['symbol']} ({sweep['label']}) varies: estimate k/n.")


def sensitivity_section(summary: dict[str, Any]) -> list[Block]:
    """Heading, explanation, figure and one table per swept parameter."""
    sens = summary["sensitivity"]
    op = sens["operating_point"]
    text = ("As in Figure 24 of the functional-memorization paper: the rates when one threshold moves while the others"
            f" stay at the run's operating point (τ_text = {number(op['tau_text'])}, τ_func = "
            f"{number(op['tau_func'])}, C = {setting_pct(op['coverage'])}, N_in = {number(op['min_valid'])}), "
            "recomputed from the stored similarities and executions (nothing is executed again). A sample the run "
            "judged inconclusive has no SIM_func, so C and N_in looser than the run's cannot be computed: their "
            "grids start at the run's values, and a stricter value only turns conclusive samples inconclusive.")
    if sens["samples_without_coverage"]:
        text += (f" {sens['samples_without_coverage']} conclusive sample(s) were executed without line coverage "
                 "(native executors): the C sweep leaves them as the run judged them.")
    blocks: list[Block] = [Heading(2, "Threshold sensitivity", "sensitivity"), Paragraph(text)]
    svg = sensitivity_figure(sens["sweeps"], SHOWN_RATES, {k: RATE_LABELS[k] for k in SHOWN_RATES})
    if svg is not None:
        blocks.append(Figure("sensitivity", svg, "Rates (%) as one threshold varies; dotted: the run's value; solid: "
                                                 "members (or all samples), dashed: controls."))
    blocks += [_table(sweep) for sweep in sens["sweeps"].values()]
    return blocks
