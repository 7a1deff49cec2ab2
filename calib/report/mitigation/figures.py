"""The mitigation report's figure: memorization against utility per checkpoint (the paper's Figure 44).

Each method is a line from the target (epoch 0) through its checkpoints in epoch order; the target, the
reference and the ideal point (the target's utility with the reference's memorization) are marked. SVG text
from matplotlib's SVG backend (no pyplot), with the report's fixed hash salt: the same table gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib
from matplotlib.figure import Figure

from calib.report.figures import COLORS, RC, to_svg

__all__ = ["trajectory_figure"]


def trajectory_figure(points: Sequence[dict[str, Any]]) -> str | None:
    """Memorization (y) against utility (x); None when no point has both values."""
    have = [p for p in points if p.get("memorization") is not None and p.get("utility") is not None]
    if not have:
        return None
    target = next((p for p in have if p["method"] == "target"), None)
    reference = next((p for p in have if p["method"] == "reference"), None)
    methods = list(dict.fromkeys(p["method"] for p in have if p["method"] not in ("target", "reference")))
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(6.4, 4.4))
        ax = fig.add_subplot()
        for i, method in enumerate(methods):
            line = ([target] if target else []) + sorted((p for p in have if p["method"] == method),
                                                         key=lambda p: p["epoch"])
            ax.plot([p["utility"] for p in line], [p["memorization"] for p in line], "-o", markersize=4,
                    color=COLORS[i % len(COLORS)], label=method)
            last = line[-1]
            ax.annotate(f"epoch {last['epoch']}", (last["utility"], last["memorization"]), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
        if target:
            ax.plot([target["utility"]], [target["memorization"]], "s", color="black", markersize=7, label="target")
        if reference:
            ax.plot([reference["utility"]], [reference["memorization"]], "D", color="#8c8c8c", markersize=7,
                    label="reference")
        if target and reference:
            ax.plot([target["utility"]], [reference["memorization"]], "*", color="#c44e52", markersize=12,
                    label="ideal")
        ax.set_xlabel("utility (normalized to the target)")
        ax.set_ylabel("memorization (SIM_text / SIM_func on the memorized set)")
        ax.legend(frameon=False, fontsize=8)
        return to_svg(fig)
