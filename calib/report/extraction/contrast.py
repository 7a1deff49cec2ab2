"""Members against controls, and the suffix-length sweep, of an ``extraction`` report (summary and blocks).

- ``members_vs_controls`` (Cooper et al., "Extractable Memorization From First Principles", App. D.1):
  at each operating point, the member flag rate (scores > τ) minus the in-sample control flag rate
  (#{controls > τ}/N) with Newcombe's interval for two independent proportions
  (``calib.stats.independent_difference``), beside the calibrated rate (member rate − α_N) and its
  Clopper–Pearson band shifted down by α_N. A binary procedure has one operating point: its row is the
  member and control **generation** rates (score 1).
- ``suffix_sweep`` (App. D.3): the same quantities at the primary α against the suffix length ℓ_s, one
  line per procedure, drawn as one figure when the run scored two or more lengths.

Everything is read from the operating points (claims, in-sample FPR, α_N, the shifted band) and the
headline's generation counts: nothing is re-scored.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from calib.report.document import Block, Figure, Heading, Paragraph, Table
from calib.report.extraction.figures import suffix_sweep_figure
from calib.report.extraction.screen import screen_blocks
from calib.report.format import DASH, pct, pct_range, setting_pct
from calib.report.procedure import ROLES, procedure_order
from calib.stats import clopper_pearson, independent_difference

__all__ = ["members_vs_controls", "members_vs_controls_blocks", "suffix_sweep", "suffix_sweep_blocks"]


def _bounds(k: int, n: int, confidence: float) -> tuple[float | None, float | None]:
    if not n:
        return None, None
    interval = clopper_pearson(k, n, confidence)
    return interval.low, interval.high


def _row(base: dict[str, Any], member: tuple[int, int], control: tuple[int, int], confidence: float,
         op: dict[str, Any] | None) -> dict[str, Any]:
    """One comparison: member flags k of n against control flags k of N, and the operating point's band."""
    (mk, mn), (ck, cn) = member, control
    diff = independent_difference(mk, mn, ck, cn, confidence)
    member_low, member_high = _bounds(mk, mn, confidence)
    control_low, control_high = _bounds(ck, cn, confidence)
    return {**base, "n_members": mn, "member_flags": mk, "member_rate": mk / mn, "member_low": member_low,
            "member_high": member_high, "n_controls": cn, "control_flags": ck, "control_rate": ck / cn,
            "control_low": control_low, "control_high": control_high, "difference": diff.estimate,
            "difference_low": diff.low, "difference_high": diff.high, "p_value": diff.p_value,
            "confidence": confidence,
            "k": None if op is None else op["k"],
            "certified_alpha": None if op is None else op["certified_alpha"],
            "log10_threshold": None if op is None else op["log10_threshold"],
            "calibrated_rate": None if op is None else op["calibrated_rate"],
            "calibrated_low": None if op is None else op["low"],
            "calibrated_high": None if op is None else op["high"]}


def members_vs_controls(ops: pl.DataFrame, headline: list[dict[str, Any]],
                        settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Member minus in-sample control flag rate at every certifiable operating point (summary.json key)."""
    conf, out = settings["confidence"], []
    for head in headline:
        group = {"role": head["role"], "model": head["model"], "procedure": head["procedure"],
                 "suffix_tokens": head["suffix_tokens"]}
        if head["binary"]:
            gen = head["generation"]
            if gen and gen["members"] and gen["controls"]:
                out.append(_row({**group, "binary": True, "pool": gen["pool"], "alpha": None, "primary": True},
                                (gen["members"]["k"], gen["members"]["n"]),
                                (gen["controls"]["k"], gen["controls"]["n"]), conf, None))
            continue
        rows = ops.filter((pl.col("role") == head["role"]) & (pl.col("procedure") == head["procedure"])
                          & (pl.col("suffix_tokens") == head["suffix_tokens"]))
        for op in rows.sort(["pool", "alpha"]).to_dicts():
            if not op["k"] or not op["n_members"] or not op["n_controls"] or op["claims"] is None:
                continue  # K = 0: no threshold, nothing is flagged
            # #{controls > τ} = in_sample_fpr · N exactly (a count over N held as a double)
            flagged = round(op["in_sample_fpr"] * op["n_controls"])
            primary = op["pool"] == head["pool"] and math.isclose(op["alpha"], settings["alpha"], rel_tol=1e-9)
            out.append(_row({**group, "binary": False, "pool": op["pool"], "alpha": op["alpha"], "primary": primary},
                            (int(op["claims"]), int(op["n_members"])), (flagged, int(op["n_controls"])), conf, op))
    return out


_SWEEP_KEYS = ("suffix_tokens", "role", "model", "procedure", "binary", "pool", "alpha", "k", "certified_alpha",
               "log10_threshold", "n_members", "member_flags", "member_rate", "member_low", "member_high",
               "n_controls", "control_flags", "control_rate", "control_low", "control_high", "calibrated_rate",
               "calibrated_low", "calibrated_high", "difference", "difference_low", "difference_high")


def suffix_sweep(comparisons: list[dict[str, Any]], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of ``members_vs_controls`` at the primary α (binary procedures: their one row), every pool,
    ordered by role, procedure, pool and suffix length (summary.json ``suffix_sweep``)."""
    rows = [{k: c[k] for k in _SWEEP_KEYS} for c in comparisons
            if c["binary"] or math.isclose(c["alpha"], settings["alpha"], rel_tol=1e-9)]
    rows.sort(key=lambda r: (ROLES.index(r["role"]) if r["role"] in ROLES else len(ROLES),
                             procedure_order(r["procedure"]), r["pool"], r["suffix_tokens"]))
    return rows


# --- blocks -------------------------------------------------------------------------------------
def _level(value: float | None) -> str:
    return DASH if value is None else f"{100 * value:.4g}%"


def _flags(k: int, n: int, rate: float) -> str:
    return f"{pct(rate)} ({k}/{n})"


def _difference(r: dict[str, Any]) -> str:
    return f"{pct(r['difference'])} {pct_range(r['difference_low'], r['difference_high'])}"


def _calibrated(r: dict[str, Any]) -> str:
    if r["calibrated_rate"] is None:
        return "— (binary: generation rates)"
    return f"{pct(r['calibrated_rate'])} {pct_range(r['calibrated_low'], r['calibrated_high'])}"


def _pool(pool: str) -> str:
    return "decontaminated control pool" if pool == "decontaminated" else "full control pool"


def _alpha(r: dict[str, Any]) -> str:
    if r["alpha"] is None:
        return "generation"
    return f"**{r['alpha']:g}**" if r["primary"] else f"{r['alpha']:g}"


def _explain(conf: str) -> str:
    return (f"Two intervals, for two different questions (extraction paper App. D.1). **Member − control**: the "
            "member flag rate minus the in-sample control flag rate #{controls > τ}/N at the same threshold τ, "
            f"with Newcombe's {conf} hybrid score interval for two independent proportions: it includes the "
            "sampling of the members and of the controls, but not that τ was chosen on those same controls (the "
            "in-sample rate is at most (K−1)/N, below α_N, so the difference runs higher than the calibrated rate). "
            f"**Calibrated rate**: member rate − α_N with the members' {conf} Clopper–Pearson interval shifted down "
            "by α_N: it holds the control set and its threshold fixed, so it includes no uncertainty from drawing "
            "another control sample (the realized FPR's Beta law in the headline covers that). A binary procedure "
            "has one operating point: its row compares the member and control generation rates (score 1), "
            "with no calibrated rate.")


def members_vs_controls_blocks(summary: dict[str, Any]) -> list[Block]:
    """The "Members vs controls" section (beside the paired comparison), then the "Control screen" section of a
    run with ``[extraction.screen]`` (:mod:`calib.report.extraction.screen`: its flags and both control pools)."""
    return _members_vs_controls_blocks(summary) + screen_blocks(summary)


def _members_vs_controls_blocks(summary: dict[str, Any]) -> list[Block]:
    s = summary["settings"]
    conf = setting_pct(s["confidence"])
    rows_in = [r for r in summary["members_vs_controls"] if r["pool"] == s["primary_pool"]]
    blocks: list[Block] = [Heading(2, "Members vs controls", "members-vs-controls"),
                           Paragraph(_explain(conf) + f" Controls: the {_pool(s['primary_pool'])}; bold: the "
                                     "primary α; levels with K = 0 flag nothing and are left out.")]
    if not rows_in:
        return blocks + [Paragraph("No operating point flags anything (K = 0 everywhere, or nothing scored).")]
    rows = tuple((r["role"], f"`{r['procedure']}`", str(r["suffix_tokens"]), _alpha(r),
                  _level(r["certified_alpha"]), _flags(r["member_flags"], r["n_members"], r["member_rate"]),
                  _flags(r["control_flags"], r["n_controls"], r["control_rate"]), _difference(r), _calibrated(r))
                 for r in rows_in)
    blocks.append(Table(("role", "procedure", "ℓ_s", "α", "α_N", "members flagged", "controls flagged (in-sample)",
                         f"member − control [{conf} Newcombe]", f"calibrated rate [{conf} shifted]"), rows,
                        "members-vs-controls-table", "Member minus control flag rates, and the calibrated rate."))
    return blocks


def _figure_series(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keyed: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        keyed.setdefault((r["role"], r["procedure"]), []).append(r)
    series = []
    for (role, proc), part in keyed.items():
        part = sorted(part, key=lambda r: r["suffix_tokens"])
        binary = part[0]["binary"]
        series.append({"procedure": proc, "role": role, "binary": binary,
                       "length": [r["suffix_tokens"] for r in part],
                       **{key: [r[key] for r in part] for key in (
                           "member_rate", "member_low", "member_high", "control_rate", "control_low", "control_high")},
                       "contrast": [r["difference" if binary else "calibrated_rate"] for r in part],
                       "contrast_low": [r["difference_low" if binary else "calibrated_low"] for r in part],
                       "contrast_high": [r["difference_high" if binary else "calibrated_high"] for r in part]})
    return series


def suffix_sweep_blocks(summary: dict[str, Any]) -> list[Block]:
    """The "Suffix lengths" section: one figure across ℓ_s and its table, or one line when ℓ_s is single."""
    s = summary["settings"]
    rows_in = [r for r in summary["suffix_sweep"] if r["pool"] == s["primary_pool"]]
    lengths = sorted({r["suffix_tokens"] for r in rows_in})
    blocks: list[Block] = [Heading(2, "Suffix lengths", "suffix-sweep")]
    if len(lengths) < 2:
        scored = ", ".join(str(v) for v in lengths) or "none with an operating point"
        return blocks + [Paragraph(f"The run scored one suffix length (ℓ_s = {scored}; `extraction.suffix_tokens`): "
                                   "no suffix-length sweep.")]
    conf = setting_pct(s["confidence"])
    blocks.append(Paragraph(
        f"Member and control flag rates and the calibrated memorization rate against the suffix length, at the "
        f"primary α = {s['alpha_as_written']} ({_pool(s['primary_pool'])}; extraction paper App. D.3, which "
        "uses the full pool because contamination is hard to define at one or two tokens). Each length is its own "
        "test: its threshold τ is calibrated on its own control scores, so a binary procedure's rates (greedy "
        "generation, one operating point) are compared through the member − control difference, not through α_N. "
        f"Bands: {conf} Clopper–Pearson for the rates; the calibrated rate's band is the members' interval shifted "
        "down by α_N (control set fixed); the binary procedures' difference has Newcombe's independent interval."))
    svg = suffix_sweep_figure(_figure_series(rows_in), s["alpha_as_written"])
    if svg is not None:
        blocks.append(Figure("suffix-sweep", svg, "Rates against the suffix length ℓ_s: one line per procedure "
                                                  "(target solid, reference dashed)."))
    rows = tuple((r["role"], f"`{r['procedure']}`", str(r["suffix_tokens"]), str(r["n_controls"]),
                  "generation" if r["binary"] else _level(r["certified_alpha"]),
                  _flags(r["member_flags"], r["n_members"], r["member_rate"]),
                  _flags(r["control_flags"], r["n_controls"], r["control_rate"]), _difference(r), _calibrated(r))
                 for r in rows_in)
    blocks.append(Table(("role", "procedure", "ℓ_s", "N", "α_N", "members flagged", "controls flagged (in-sample)",
                         f"member − control [{conf} Newcombe]", f"calibrated rate [{conf} shifted]"), rows,
                        "suffix-sweep-table", "Per suffix length at the primary α."))
    return blocks
