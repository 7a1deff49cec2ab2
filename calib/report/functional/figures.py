"""The functional report's figures as SVG text, drawn with matplotlib's SVG backend (no display, no pyplot state).

- ``rates``: the paper's Figure 2 for this run: the seven rates of each group (all samples, members,
  controls) as bars with Clopper–Pearson whiskers;
- ``roc``: the paper's Figure 3(b): every evaluated metric's ROC curve on log-log axes;
- ``duplication``: the paper's Figure 4: textual and semantic-only near-duplicate counts per group;
- ``sensitivity``: the paper's Figure 24: the rates as one of τ_text, τ_func, C, N_in varies;
- ``agreement``: the paper's Figure 3(a): Pearson's r between every similarity metric and SIM_func.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from calib.report.figures import COLORS, RC, to_svg
from calib.report.functional.rates import RATE_LABELS
from calib.stats import RocCurve

__all__ = ["agreement_figure", "duplication_figure", "rates_figure", "roc_figure", "sensitivity_figure"]


def rates_figure(groups: Sequence[Mapping[str, Any]]) -> str | None:
    """Figure 2: bars of every rate of :data:`RATE_LABELS` per group, with interval whiskers (percent).

    Returns the SVG text, or None when no group has a rate.
    """
    keys = list(RATE_LABELS)
    drawn = [g for g in groups if any(g["rates"][k] is not None for k in keys)]
    if not drawn:
        return None
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(10.0, 4.4))
        ax = fig.add_subplot()
        width = 0.8 / len(drawn)
        x = np.arange(len(keys))
        for i, group in enumerate(drawn):
            rates = [group["rates"][k] for k in keys]
            est = np.array([np.nan if r is None else 100 * r["estimate"] for r in rates])
            low = np.array([0.0 if r is None else 100 * (r["estimate"] - r["low"]) for r in rates])
            high = np.array([0.0 if r is None else 100 * (r["high"] - r["estimate"]) for r in rates])
            ax.bar(x + (i - (len(drawn) - 1) / 2) * width, est, width * 0.92, yerr=np.vstack([low, high]),
                   capsize=2, color=COLORS[i % len(COLORS)], label=f"{group['label']} (n = {group['n_scored']})",
                   error_kw={"elinewidth": 0.8})
        ax.set_xticks(x, [textwrap.fill(RATE_LABELS[k], 14, break_long_words=False) for k in keys])
        ax.set_ylabel("samples (%)")
        ax.axvline(2.5, color="#999999", linewidth=0.6, linestyle=":")
        ax.legend(frameon=False, loc="upper left")
        return to_svg(fig)


def roc_figure(curves: Mapping[str, RocCurve], levels: Sequence[float]) -> str | None:
    """Figure 3(b): the ROC curve of each metric on log-log axes, chance line and the FPR levels.

    Returns the SVG text, or None when no metric could be evaluated.
    """
    if not curves:
        return None
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(5.6, 4.6))
        ax = fig.add_subplot()
        floor = min(1.0 / max(c.n_negative, 1) for c in curves.values()) / 2
        for i, (name, curve) in enumerate(curves.items()):
            fpr, tpr, _ = curve.log_points()
            if fpr.size:
                # markers only while they stay legible (one point per distinct score)
                ax.plot(fpr, tpr, marker="." if fpr.size <= 100 else None, markersize=3, linewidth=1.2,
                        color=COLORS[i % len(COLORS)], label=name)
            else:
                ax.plot([], [], color=COLORS[i % len(COLORS)], label=f"{name} (no point with FPR, TPR > 0)")
        ax.plot([floor, 1.0], [floor, 1.0], color="#999999", linewidth=0.8, linestyle="--", label="chance")
        for level in levels:
            ax.axvline(level, color="#cccccc", linewidth=0.6, linestyle=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(floor, 1.05)
        ax.set_ylim(floor, 1.05)
        ax.set_xlabel("false positive rate")
        ax.set_ylabel("true positive rate")
        ax.legend(frameon=False, loc="lower right", fontsize=8)
        return to_svg(fig)


#: The most samples of one group the duplication figure draws as dots (a seeded choice; boxes and means use all).
MAX_DOTS = 400


def duplication_figure(groups: Sequence[tuple[str, Any, Any]], panels: Sequence[str]) -> str | None:
    """Figure 4: one panel per kind of near-duplicate count, a box, the samples and the mean per group.

    ``groups`` holds ``(label, counts of panel 0, counts of panel 1)`` per group; ``panels`` names the two
    panels. A panel whose counts exceed 50 uses a symmetric-log axis (linear up to 1). Returns the SVG
    text, or None when no group has a sample.
    """
    if not any(len(group[1]) for group in groups):
        return None
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(9.0, 3.8))
        axes = fig.subplots(1, len(panels))
        for p, (ax, title) in enumerate(zip(np.atleast_1d(axes), panels)):
            rng = np.random.default_rng(p)  # a fixed jitter and choice of dots, so the bytes repeat
            values = [np.asarray(group[1 + p], dtype=np.float64) for group in groups]
            drawn = [i for i, v in enumerate(values) if v.size]
            ax.boxplot([values[i] for i in drawn], positions=drawn, widths=0.5, showfliers=False,
                       medianprops={"color": "#333333"}, boxprops={"color": "#666666"},
                       whiskerprops={"color": "#666666"}, capprops={"color": "#666666"})
            for i in drawn:
                v = values[i]
                dots = v if v.size <= MAX_DOTS else v[np.sort(rng.choice(v.size, MAX_DOTS, replace=False))]
                ax.scatter(i + rng.uniform(-0.18, 0.18, dots.size), dots, s=6, alpha=0.45, linewidths=0,
                           color=COLORS[i % len(COLORS)], zorder=2)
                ax.scatter([i], [v.mean()], marker="D", s=28, color="#c44e52", edgecolors="white", linewidths=0.6,
                           zorder=3, label="mean" if i == drawn[0] else None)
            ax.set_xticks(range(len(groups)), [textwrap.fill(f"{g[0]} (n = {len(g[1 + p])})", 18,
                                                             break_long_words=False) for g in groups])
            ax.set_xlim(-0.6, len(groups) - 0.4)
            if max((float(v.max()) for v in values if v.size), default=0.0) > 50:
                ax.set_yscale("symlog", linthresh=1.0)
            ax.set_ylim(bottom=-0.5 if ax.get_yscale() == "linear" else 0.0)
            ax.set_title(f"{title} near-duplicates")
            if p == 0:
                ax.set_ylabel("near-duplicates per function")
            ax.legend(frameon=False, loc="best", fontsize=8)
        return to_svg(fig)


def _sweep_series(sweep: Mapping[str, Any], key: str, membership: str | None) -> np.ndarray:
    values = []
    for point in sweep["points"]:
        group = next((g for g in point["groups"] if g["membership"] == membership), None)
        rate = None if group is None else group["rates"][key]
        values.append(np.nan if rate is None else 100 * rate["estimate"])
    return np.array(values, dtype=np.float64)


def sensitivity_figure(sweeps: Mapping[str, Mapping[str, Any]], keys: Sequence[str],
                       labels: Mapping[str, str]) -> str | None:
    """Figure 24: one panel per swept parameter, each rate of ``keys`` against the parameter's value.

    Members (or all samples when the run has no membership split) solid, controls dashed; a dotted line
    at the run's value. Returns the SVG text, or None when there is no sweep.
    """
    if not sweeps:
        return None
    first = next(iter(sweeps.values()))["points"][0]["groups"]
    split = any(g["membership"] == "member" for g in first)
    styles = [("member", "-", "members"), ("control", "--", "controls")] if split else [(None, "-", "all")]
    with matplotlib.rc_context(RC):
        # a fixed layout with the legend in the right third: a layout engine would measure every text again
        fig = Figure(figsize=(10.0, 6.4))
        fig.subplots_adjust(left=0.07, right=0.64, bottom=0.09, top=0.97, wspace=0.3, hspace=0.38)
        axes = np.atleast_1d(fig.subplots(2, 2)).ravel()
        for ax, sweep in zip(axes, sweeps.values()):
            x = np.array([p["value"] for p in sweep["points"]], dtype=np.float64)
            for i, key in enumerate(keys):
                for membership, style, who in styles:
                    ax.plot(x, _sweep_series(sweep, key, membership), linestyle=style, marker=".", markersize=3,
                            linewidth=1.1, color=COLORS[i % len(COLORS)],
                            label=f"{labels[key]} ({who})" if ax is axes[0] else None)
            ax.axvline(sweep["run_value"], color="#999999", linewidth=0.8, linestyle=":")
            ax.set_xlabel(f"{sweep['symbol']} ({sweep['label']})")
            ax.set_ylabel("samples (%)")
            ax.set_ylim(-2, 102)
        for ax in axes[len(sweeps):]:
            ax.set_visible(False)
        fig.legend(frameon=False, loc="center left", bbox_to_anchor=(0.655, 0.5), fontsize=7)
        return to_svg(fig, tight=False)


def agreement_figure(variables: Sequence[str], matrix: Sequence[Sequence[float | None]]) -> str | None:
    """Figure 3(a): a heat map of the correlation ``matrix`` between ``variables``, values written in the cells.

    Returns the SVG text, or None when no pair of different variables has a correlation.
    """
    size = len(variables)
    values = np.array([[np.nan if v is None else v for v in row] for row in matrix], dtype=np.float64)
    if size < 2 or np.all(np.isnan(values[~np.eye(size, dtype=bool)])):
        return None
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(1.2 + 0.75 * size, 0.9 + 0.65 * size), layout="constrained")
        ax = fig.add_subplot()
        edges = np.arange(size + 1) - 0.5  # vector cells (imshow would embed a raster image in the SVG)
        image = ax.pcolormesh(edges, edges, np.ma.masked_invalid(values), cmap="RdBu_r", vmin=-1.0, vmax=1.0)
        ax.invert_yaxis()
        ax.set_aspect("equal")
        for i in range(size):
            for j in range(size):
                text = "–" if np.isnan(values[i, j]) else f"{values[i, j]:.2f}"
                ax.text(j, i, text, ha="center", va="center", fontsize=7,
                        color="white" if abs(np.nan_to_num(values[i, j])) > 0.6 else "black")
        ax.set_xticks(range(size), variables, rotation=45, ha="right")
        ax.set_yticks(range(size), variables)
        bar = fig.colorbar(image, ax=ax, shrink=0.8, label="Pearson r")
        bar.solids.set_rasterized(False)  # vector, like the cells
        bar.solids.set_edgecolor("face")
        return to_svg(fig)
