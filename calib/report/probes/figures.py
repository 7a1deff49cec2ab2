"""The figures of the probes report (scale-aware diagnostics), as SVG text (matplotlib's SVG backend, no pyplot).

- ``pass-at-1``: pass@1 with its bootstrap interval per condition, one colour per model (paper Table 3);
- ``jsd``: the per-problem Jensen–Shannon divergence of each condition's opcode profile from the
  original's, one panel per model, over all and over passing generations (paper Figure 6);
- ``entropy``: the distribution over problems of the opcode entropy per condition, one panel per model
  (paper Figure 5);
- ``codec``: CoDeC contamination scores with their Clopper–Pearson intervals per model, seen and unseen
  datasets apart (paper Figure 4a).

Same determinism as :mod:`calib.report.figures`: fixed hash salt, no date, seeded jitter.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from calib.report.figures import COLORS, RC, to_svg

__all__ = ["codec_figure", "entropy_figure", "jsd_figure", "pass_at_1_figure"]


def _color(i: int) -> str:
    return COLORS[i % len(COLORS)]


def _ticks(names: Sequence[str]) -> list[str]:
    return [textwrap.fill(n, 12, break_long_words=False) for n in names]


def _panels(n: int, *, height: float = 3.0) -> tuple[Figure, list[Any]]:
    cols = min(2, n)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(10.0 if cols > 1 else 6.4, height * rows))
    return fig, [fig.add_subplot(rows, cols, i + 1) for i in range(n)]


def pass_at_1_figure(labels: Sequence[str], names: Sequence[str], series: Sequence[Mapping[str, Any]]) -> str | None:
    """pass@1 (%) per condition with interval whiskers, one colour per model, models side by side.

    ``labels`` and ``names`` give the conditions and their display names (x axis); each series has
    ``model`` and ``cells``, a dict label -> {``estimate``, ``low``, ``high``} (shares; missing or
    None where the model has no value). None when no series has a value.
    """
    drawn = [s for s in series if any((s["cells"].get(lab) or {}).get("estimate") is not None for lab in labels)]
    if not drawn:
        return None
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(max(6.4, 1.0 + 0.9 * len(labels)), 4.0))
        ax = fig.add_subplot()
        x = np.arange(len(labels), dtype=float)
        width = 0.8 / len(drawn)
        for i, s in enumerate(drawn):
            cells = [s["cells"].get(lab) or {} for lab in labels]
            est = np.array([np.nan if c.get("estimate") is None else 100 * c["estimate"] for c in cells])
            low = np.array([np.nan if c.get("low") is None else 100 * c["low"] for c in cells])
            high = np.array([np.nan if c.get("high") is None else 100 * c["high"] for c in cells])
            # an estimate outside its interval (a damaged table; the report flags it) draws no whisker there
            yerr = np.clip(np.vstack([np.nan_to_num(est - low), np.nan_to_num(high - est)]), 0.0, None)
            ax.errorbar(x + (i - (len(drawn) - 1) / 2) * width, est, yerr=yerr, fmt="o", markersize=4, capsize=2,
                        elinewidth=0.9, color=_color(i), label=s["model"])
        ax.set_xticks(x, _ticks(names))
        ax.set_ylim(-2, 102)
        ax.set_ylabel("pass@1 (%)")
        ax.legend(frameon=False, fontsize=8, title="model (smallest first)", title_fontsize=8)
        return to_svg(fig)


def jsd_figure(panels: Sequence[Mapping[str, Any]]) -> str | None:
    """Per-problem JSD (bits) from the original per condition: boxes and dots, all and passing generations.

    Each panel has ``title`` (the model) and ``groups``: a list of ``name``, ``all`` and ``passing``
    (per-problem JSD values). None when no panel has a value.
    """
    drawn = [p for p in panels if any(len(g["all"]) or len(g["passing"]) for g in p["groups"])]
    if not drawn:
        return None
    with matplotlib.rc_context(RC):
        fig, axes = _panels(len(drawn))
        rng = np.random.default_rng(0)
        kinds = (("all", 0, "all generations"), ("passing", 1, "passing generations"))
        for ax, p in zip(axes, drawn):
            groups = p["groups"]
            for key, side, _ in kinds:
                pos = [i + (side - 0.5) * 0.36 for i in range(len(groups))]
                data = [np.asarray(g[key], dtype=float) for g in groups]
                kept = [j for j, d in enumerate(data) if d.size]
                if kept:
                    ax.boxplot([data[j] for j in kept], positions=[pos[j] for j in kept], widths=0.3,
                               showfliers=False, medianprops={"color": "#333333"}, boxprops={"color": "#888888"},
                               whiskerprops={"color": "#888888"}, capprops={"color": "#888888"})
                for j in kept:
                    ax.scatter(pos[j] + rng.uniform(-0.08, 0.08, data[j].size), data[j], s=8, alpha=0.6,
                               linewidths=0, color=_color(side), zorder=3)
            ax.set_xticks(range(len(groups)), _ticks([g["name"] for g in groups]))
            ax.set_xlim(-0.6, len(groups) - 0.4)
            ax.set_ylim(-0.02, 1.02)
            ax.set_title(p["title"], fontsize=9)
            ax.set_ylabel("JSD from original (bits)")
        handles = [Line2D([], [], marker="o", linestyle="", color=_color(side), label=what) for _, side, what in kinds]
        fig.tight_layout()
        fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, frameon=False, fontsize=8)
        return to_svg(fig)


def entropy_figure(panels: Sequence[Mapping[str, Any]]) -> str | None:
    """Distributions over problems of the opcode entropy (bits) per condition, one panel per model.

    Each panel has ``title`` and ``series``: a list of ``name`` and ``values`` (per-problem entropy of
    the pooled opcode profile). Step histograms on shared bins, the original in black. None when no
    panel has a value.
    """
    drawn = [p for p in panels if any(len(s["values"]) for s in p["series"])]
    if not drawn:
        return None
    every = np.concatenate([np.asarray(s["values"], dtype=float) for p in drawn for s in p["series"]])
    lo, hi = float(every.min()), float(every.max())
    bins = np.linspace(lo - 0.5, hi + 0.5, 21) if hi - lo < 1e-9 else np.linspace(lo, hi, 21)
    with matplotlib.rc_context(RC):
        fig, axes = _panels(len(drawn))
        for ax, p in zip(axes, drawn):
            for i, s in enumerate(p["series"]):
                values = np.asarray(s["values"], dtype=float)
                if not values.size:
                    continue
                first = i == 0
                ax.hist(values, bins=bins, histtype="step", linewidth=1.6 if first else 1.1,
                        color="#222222" if first else _color(i - 1), label=f"{s['name']} ({values.size})")
            ax.set_title(p["title"], fontsize=9)
            ax.set_xlabel("opcode entropy (bits)")
            ax.set_ylabel("problems")
            ax.legend(frameon=False, fontsize=7)
        fig.tight_layout()
        return to_svg(fig)


def codec_figure(models: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str | None:
    """CoDeC scores (%) with Clopper–Pearson whiskers per model (x, panel order), seen and unseen datasets apart.

    Each row has ``model``, ``dataset``, ``seen``, ``score``, ``low``, ``high`` (shares). None without a score.
    """
    drawn = [r for r in rows if r["score"] is not None and r["model"] in models]
    if not drawn:
        return None
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(max(5.6, 1.6 + 1.1 * len(models)), 3.8))
        ax = fig.add_subplot()
        datasets = list(dict.fromkeys(r["dataset"] for r in drawn))
        for r in drawn:
            j = datasets.index(r["dataset"])
            x = models.index(r["model"]) + (j - (len(datasets) - 1) / 2) * (0.6 / max(len(datasets), 1))
            est = 100 * r["score"]
            low = est if r["low"] is None else 100 * r["low"]
            high = est if r["high"] is None else 100 * r["high"]
            ax.errorbar([x], [est], yerr=[[max(est - low, 0.0)], [max(high - est, 0.0)]],
                        fmt="o" if r["seen"] else "s", markersize=4, capsize=2, elinewidth=0.9,
                        color=_color(0 if r["seen"] else 1))
        ax.set_xticks(range(len(models)), _ticks(models))
        ax.set_ylim(-2, 102)
        ax.set_ylabel("contamination score (%)")
        handles = [Line2D([], [], marker="o", linestyle="", color=_color(0), label="seen datasets"),
                   Line2D([], [], marker="s", linestyle="", color=_color(1), label="unseen datasets")]
        ax.legend(handles=handles, frameon=False, fontsize=8)
        return to_svg(fig)
