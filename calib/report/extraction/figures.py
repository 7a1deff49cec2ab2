"""The figures of the extraction and census reports, as SVG text (matplotlib's SVG backend, no pyplot).

- ``calibration``: calibrated memorization rate vs certified FPR α_N (log x) with the member
  Clopper–Pearson band shifted down by α_N (extraction paper Figures 4, 14; App. D.1);
- ``scores``: member and control log10-score histograms with the threshold at the primary α (App. D.2);
- ``margins``: histograms of the claimed members' margins log10(score/τ) (App. D.5);
- ``budgets``: member, control and extractable generation rates vs query budget (log x; App. F.2);
- ``suffix-sweep``: member, control and calibrated rates vs suffix length, one line per procedure (App. D.3);
- ``coverage``: census coverage within and beyond the query budget per document (Figure 7);
- ``margin_profile``: census margin along a document, the best covering window per character (App. E.2);
- ``coverage_delta``: census coverage vs the margin Δ above each document's threshold (§5, App. E.2).

Same determinism as :mod:`calib.report.figures`: fixed hash salt, no date.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from calib.report.figures import COLORS, RC, to_svg

__all__ = ["budget_figure", "calibration_figure", "coverage_delta_figure", "coverage_figure", "margin_figure",
           "margin_profile_figure", "score_figure", "suffix_sweep_figure"]

#: The most points a margin profile draws (per-character margins are reduced to the maximum per bin).
PROFILE_POINTS = 1500

#: A margin profile draws margins below this at this value (zero scores would flatten the rest).
PROFILE_FLOOR = -10.0


def _color(i: int) -> str:
    return COLORS[i % len(COLORS)]


def _grid(n: int, *, width: float = 9.0, height: float = 2.8, columns: int = 2) -> tuple[Figure, list[Any]]:
    cols = min(columns, n)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(width if cols > 1 else width * 0.62, height * rows))
    axes = [fig.add_subplot(rows, cols, i + 1) for i in range(n)]
    return fig, axes


def calibration_figure(series: Sequence[Mapping[str, Any]], primary: float | None) -> str | None:
    """Calibrated rate (percentage points) vs certified FPR α_N on a log axis, one line and band per series.

    Each series has ``label`` and the lists ``certified``, ``rate``, ``low``, ``high`` (shares) of its
    certifiable operating points. ``primary`` is α_N at the primary level (a dotted line). None when
    no series has a point.
    """
    drawn = [s for s in series if len(s["certified"])]
    if not drawn:
        return None
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(6.4, 4.0))
        ax = fig.add_subplot()
        for i, s in enumerate(drawn):
            x = np.asarray(s["certified"], dtype=float)
            ax.fill_between(x, 100 * np.asarray(s["low"], dtype=float), 100 * np.asarray(s["high"], dtype=float),
                            color=_color(i), alpha=0.18, linewidth=0)
            ax.plot(x, 100 * np.asarray(s["rate"], dtype=float), marker=".", markersize=4, linewidth=1.2,
                    color=_color(i), label=s["label"])
        ax.axhline(0.0, color="#999999", linewidth=0.6)
        if primary:
            ax.axvline(primary, color="#777777", linewidth=0.8, linestyle=":", label="α_N at the primary α")
        ax.set_xscale("log")
        ax.set_xlabel("certified FPR α_N")
        ax.set_ylabel("calibrated memorization rate (percentage points)")
        ax.legend(frameon=False, fontsize=8)
        return to_svg(fig)


def score_figure(panels: Sequence[Mapping[str, Any]]) -> str | None:
    """Histograms of member and control log10 scores, one panel per (role, suffix length).

    Each panel has ``title``, ``members`` and ``controls`` (log10 scores; −inf for a zero score, which
    is counted in the legend, not drawn) and ``threshold`` (log10 τ or None). Bar heights are shares of
    all scored windows of that membership, zeros included. None when no panel has a finite score.
    """
    drawn = []
    for p in panels:
        members, controls = (np.asarray(p[k], dtype=float) for k in ("members", "controls"))
        if np.isfinite(members).any() or np.isfinite(controls).any():
            drawn.append((p, members, controls))
    if not drawn:
        return None
    with matplotlib.rc_context(RC):
        fig, axes = _grid(len(drawn))
        for ax, (p, members, controls) in zip(axes, drawn):
            finite = np.concatenate([members[np.isfinite(members)], controls[np.isfinite(controls)]])
            lo, hi = float(finite.min()), float(finite.max())
            bins = np.linspace(lo - 0.5, hi + 0.5, 41) if hi - lo < 1e-9 else np.linspace(lo, hi, 41)
            for i, (name, values) in enumerate((("members", members), ("controls", controls))):
                ok = values[np.isfinite(values)]
                zeros = int(np.isneginf(values).sum())
                label = f"{name} (n = {values.size}" + (f"; {zeros} score 0)" if zeros else ")")
                if values.size:
                    ax.hist(ok, bins=bins, weights=np.full(ok.size, 1.0 / values.size), histtype="step",
                            linewidth=1.2, color=_color(i), label=label)
            threshold = p.get("threshold")
            if threshold is not None and math.isfinite(threshold):
                ax.axvline(threshold, color="#c44e52", linewidth=0.9, linestyle="--", label="τ at the primary α")
            ax.set_title(p["title"], fontsize=9)
            ax.set_xlabel("log10 score")
            ax.set_ylabel("share of windows")
            ax.legend(frameon=False, fontsize=7, loc="best")
        fig.tight_layout()
        return to_svg(fig)


def margin_figure(panels: Sequence[Mapping[str, Any]]) -> str | None:
    """Histograms of the claimed members' finite margins, one panel per procedure, one line per series.

    Each panel has ``title`` and ``series``: a list of ``label`` and ``values``. None without a margin.
    """
    drawn = [p for p in panels if any(len(s["values"]) for s in p["series"])]
    if not drawn:
        return None
    with matplotlib.rc_context(RC):
        fig, axes = _grid(len(drawn))
        for ax, p in zip(axes, drawn):
            values = np.concatenate([np.asarray(s["values"], dtype=float) for s in p["series"]])
            top = max(float(values.max()), 1e-3)
            bins = np.linspace(0.0, top, 31)
            for i, s in enumerate(p["series"]):
                if len(s["values"]):
                    ax.hist(np.asarray(s["values"], dtype=float), bins=bins, histtype="step", linewidth=1.2,
                            color=_color(i), label=f"{s['label']} ({len(s['values'])} claims)")
            ax.set_title(p["title"], fontsize=9)
            ax.set_xlabel("margin log10(score / τ)")
            ax.set_ylabel("claimed members")
            ax.legend(frameon=False, fontsize=7)
        fig.tight_layout()
        return to_svg(fig)


def budget_figure(panels: Sequence[Mapping[str, Any]]) -> str | None:
    """Generation rates (%) vs query budget on a log axis, one panel per procedure.

    Each panel has ``title`` and ``series``: ``label`` and the lists ``budget``, ``members``,
    ``controls``, ``extractable`` (shares). One colour per series label; members solid, controls
    dashed, extractable (claimed at the primary α and generated within the budget) dotted; one legend
    below the panels. None without a point.
    """
    drawn = [p for p in panels if any(len(s["budget"]) for s in p["series"])]
    if not drawn:
        return None
    styles = (("members", "-", "members"), ("controls", "--", "controls"),
              ("extractable", ":", "extractable members (claimed and generated)"))
    labels = list(dict.fromkeys(s["label"] for p in drawn for s in p["series"]))
    with matplotlib.rc_context(RC):
        fig, axes = _grid(len(drawn))
        for ax, p in zip(axes, drawn):
            for s in p["series"]:
                x = np.asarray(s["budget"], dtype=float)
                for key, style, _ in styles:
                    y = np.array([np.nan if v is None else 100 * v for v in s[key]], dtype=float)
                    ax.plot(x, y, linestyle=style, marker=".", markersize=4, linewidth=1.1,
                            color=_color(labels.index(s["label"])))
            ax.set_xscale("log")
            ax.set_title(p["title"], fontsize=9)
            ax.set_xlabel("query budget n")
            ax.set_ylabel("generated within n (%)")
        handles = [Line2D([], [], color=_color(i), linewidth=1.2, label=label) for i, label in enumerate(labels)]
        handles += [Line2D([], [], color="#555555", linestyle=style, linewidth=1.1, label=what)
                    for _, style, what in styles]
        fig.tight_layout()
        fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, frameon=False, fontsize=7)
        return to_svg(fig)


def _percent(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else 100 * v for v in values], dtype=float)


def suffix_sweep_figure(series: Sequence[Mapping[str, Any]], alpha: str) -> str | None:
    """Three panels against the suffix length ℓ_s: member rate, control rate, calibrated rate (App. D.3).

    Each series has ``procedure``, ``role``, ``binary`` and the lists ``length``, ``member_rate``,
    ``member_low``, ``member_high``, ``control_rate``, ``control_low``, ``control_high``, ``contrast``,
    ``contrast_low``, ``contrast_high`` (shares; None where undefined). The third panel draws the
    calibrated rate of a probabilistic procedure and the member − control difference of a binary one.
    One colour per procedure, the reference dashed; ``alpha`` is the primary level as written. None
    when no series has two lengths.
    """
    drawn = [s for s in series if len(s["length"]) >= 2]
    if not drawn:
        return None
    procedures = list(dict.fromkeys(s["procedure"] for s in drawn))
    panels = (("member", "members flagged (%)"), ("control", "controls flagged, in-sample (%)"),
              ("contrast", "calibrated rate; binary: member − control (pp)"))
    with matplotlib.rc_context(RC):
        fig, axes = _grid(3, width=12.0, height=3.4, columns=3)
        for ax, (key, label) in zip(axes, panels):
            rate = "contrast" if key == "contrast" else f"{key}_rate"
            for s in drawn:
                x = np.asarray(s["length"], dtype=float)
                color = _color(procedures.index(s["procedure"]))
                ax.fill_between(x, _percent(s[f"{key}_low"]), _percent(s[f"{key}_high"]), color=color, alpha=0.12,
                                linewidth=0)
                ax.plot(x, _percent(s[rate]), marker=".", markersize=5, linewidth=1.2, color=color,
                        linestyle="--" if s["role"] == "reference" else "-")
            if key == "contrast":
                ax.axhline(0.0, color="#999999", linewidth=0.6)
            ax.set_xlabel("suffix length ℓ_s (tokens)")
            ax.set_ylabel(label)
        axes[0].set_title(f"at α = {alpha}", fontsize=9, loc="left")
        handles = [Line2D([], [], color=_color(i), linewidth=1.2, label=f"{p} (binary: generation)"
                          if any(s["binary"] for s in drawn if s["procedure"] == p) else p)
                   for i, p in enumerate(procedures)]
        roles = list(dict.fromkeys(s["role"] for s in drawn))
        handles += [Line2D([], [], color="#555555", linestyle="--" if r == "reference" else "-", linewidth=1.1,
                           label=r) for r in roles]
        fig.tight_layout()
        fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(len(handles), 5),
                   frameon=False, fontsize=7)
        return to_svg(fig)


def coverage_figure(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """Horizontal stacked bars: census coverage within the budget and beyond it, per (document, role, procedure).

    Each row has ``label``, ``within`` and ``beyond`` (shares of the document's characters; None
    where there is no census). None when no row has a coverage.
    """
    drawn = [r for r in rows if r["within"] is not None or r["beyond"] is not None]
    if not drawn:
        return None
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(7.0, 0.9 + 0.34 * len(drawn)))
        ax = fig.add_subplot()
        y = np.arange(len(drawn))[::-1]
        within = np.array([100 * (r["within"] or 0.0) for r in drawn])
        beyond = np.array([100 * (r["beyond"] or 0.0) for r in drawn])
        ax.barh(y, within, color=COLORS[0], label="generated within the budget")
        ax.barh(y, beyond, left=within, color=COLORS[1], label="above the threshold, beyond the budget")
        for yi, total in zip(y, within + beyond):
            ax.text(total + 0.8, yi, f"{total:.1f}%", va="center", fontsize=7)
        ax.set_yticks(y, [r["label"] for r in drawn])
        ax.set_xlim(0, max(100.0, float((within + beyond).max()) * 1.02))
        ax.set_xlabel("characters of the document covered (%)")
        ax.legend(frameon=False, fontsize=7, loc="lower right")
        return to_svg(fig)


def _binned_max(values: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    """The maximum of ``values`` (NaN ignored) over ``points`` equal bins of character offsets."""
    n = values.size
    if n <= points:
        return np.arange(n, dtype=float), values
    edges = np.linspace(0, n, points + 1).astype(int)
    filled = np.where(np.isnan(values), -np.inf, values)
    peaks = np.maximum.reduceat(filled, edges[:-1])
    return edges[:-1].astype(float), np.where(np.isneginf(peaks), np.nan, peaks)


def margin_profile_figure(series: Sequence[Mapping[str, Any]]) -> str | None:
    """The margin of the best covering window along a document, one line per series (App. E.2).

    Each series has ``label`` and ``margins`` (one per character; NaN where no window covers it).
    Above 0 a character is covered; long documents are drawn as the maximum per bin, and margins
    below :data:`PROFILE_FLOOR` at the floor.
    """
    drawn = [s for s in series if np.isfinite(np.asarray(s["margins"], dtype=float)).any()]
    if not drawn:
        return None
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(8.0, 2.8))
        ax = fig.add_subplot()
        for i, s in enumerate(drawn):
            x, y = _binned_max(np.asarray(s["margins"], dtype=float), PROFILE_POINTS)
            y = np.maximum(y, PROFILE_FLOOR)  # NaN (no window) stays NaN
            ax.plot(x, y, linewidth=0.9, color=_color(i), label=s["label"], drawstyle="steps-post")
        ax.axhline(0.0, color="#c44e52", linewidth=0.8, linestyle="--", label="threshold (margin 0)")
        ax.set_xlabel("character offset in the document")
        ax.set_ylabel(f"margin log10(score / threshold), ≥ {PROFILE_FLOOR:g}")
        ax.legend(frameon=False, fontsize=7)
        return to_svg(fig)


def coverage_delta_figure(series: Sequence[Mapping[str, Any]]) -> str | None:
    """Coverage (%) vs the margin Δ above the document's own threshold, one step line per series (§5, App. E.2).

    Each series has ``label``, ``deltas`` (increasing) and ``coverage`` (shares, one per Δ). The curve
    never rises: a larger Δ asks more of every window. None when no series has a point.
    """
    drawn = [s for s in series if len(s["deltas"])]
    if not drawn:
        return None
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(6.4, 3.4))
        ax = fig.add_subplot()
        for i, s in enumerate(drawn):
            ax.plot(np.asarray(s["deltas"], dtype=float), 100 * np.asarray(s["coverage"], dtype=float),
                    linewidth=1.2, color=_color(i), label=s["label"], drawstyle="steps-post")
        ax.set_xlabel("Δ: required score 10^Δ × the document's threshold (orders of magnitude)")
        ax.set_ylabel("characters covered (%)")
        ax.set_ylim(bottom=0)
        ax.set_xlim(left=0)
        ax.legend(frameon=False, fontsize=7)
        return to_svg(fig)
