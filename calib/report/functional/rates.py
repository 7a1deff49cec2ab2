"""Counterfactual rates per group of samples (functional-memorization paper §5.1–5.2, Figure 2).

Every number comes from :func:`calib.stats.counterfactual_rates` on the group's scored samples and
from the Clopper–Pearson intervals of its target/reference tables; nothing is re-derived here.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from calib.stats import CounterfactualRates, TargetReferenceTable, clopper_pearson, counterfactual_rates

__all__ = ["RATE_LABELS", "group_rates", "rate_groups"]

#: The rates of Figure 2, in the order the report shows them: key -> label.
RATE_LABELS: dict[str, str] = {
    "text_target": "near-verbatim, target",
    "text_reference": "near-verbatim, reference",
    "text_counterfactual": "textual, counterfactual (target only)",
    "func_target": "functional, target",
    "func_reference": "functional, reference",
    "func_counterfactual": "functional, counterfactual (target only)",
    "func_memorized": "functionally memorized (counterfactual, low text)",
}
_WIDE = ("sample_id", "text_target", "text_reference", "func_target", "func_reference")


def _interval(value: Any) -> dict[str, Any] | None:
    return None if value is None else value.to_dict()


def _table_counts(table: TargetReferenceTable) -> dict[str, int]:
    return {"n": table.n, "n11": table.n11, "n10": table.n10, "n01": table.n01, "n00": table.n00}


def _figure_rates(result: CounterfactualRates) -> dict[str, dict[str, Any] | None]:
    conf = result.confidence
    text, func = result.textual_table, result.functional_table
    has_func = func.n > 0
    return {
        "text_target": text.target_rate(conf).to_dict(),
        "text_reference": text.reference_rate(conf).to_dict(),
        "text_counterfactual": result.textual.to_dict(),
        "func_target": func.target_rate(conf).to_dict() if has_func else None,
        "func_reference": func.reference_rate(conf).to_dict() if has_func else None,
        "func_counterfactual": clopper_pearson(func.n10, func.n, conf).to_dict() if has_func else None,
        "func_memorized": _interval(result.functional),
    }


def group_rates(frame: pl.DataFrame, *, label: str, membership: str | None, kind: str | None,
                analyze: dict[str, Any]) -> dict[str, Any]:
    """The rates of one group of samples (rows of the per-sample table).

    Returns a dict with ``label, membership, kind`` (null: every value), the counts ``n_samples,
    n_unscored, n_scored, n_conclusive, n_inconclusive``, ``rates`` (key of :data:`RATE_LABELS` ->
    Clopper–Pearson interval or null), ``overlaps`` (``func_flags_missed_by_text``,
    ``text_flags_not_functional``) and ``tables`` (the 2×2 target/reference counts ``text`` and ``func``).
    """
    scored = frame.filter(pl.col("scored"))
    out: dict[str, Any] = {"label": label, "membership": membership, "kind": kind, "n_samples": frame.height,
                           "n_unscored": frame.height - scored.height, "n_scored": scored.height}
    if scored.height == 0:
        return {**out, "n_conclusive": 0, "n_inconclusive": 0, "rates": dict.fromkeys(RATE_LABELS),
                "overlaps": {"func_flags_missed_by_text": None, "text_flags_not_functional": None}, "tables": None}
    result = counterfactual_rates(scored.select(_WIDE), tau_text=analyze["tau_text"], tau_func=analyze["tau_func"],
                                  confidence=analyze["confidence"])
    return {**out, "n_conclusive": result.n_conclusive, "n_inconclusive": result.n_inconclusive,
            "rates": _figure_rates(result),
            "overlaps": {"func_flags_missed_by_text": _interval(result.functional_missed_by_text),
                         "text_flags_not_functional": _interval(result.text_not_functional)},
            "tables": {"text": _table_counts(result.textual_table), "func": _table_counts(result.functional_table)}}


def _values(frame: pl.DataFrame, column: str) -> list[str]:
    # member before control, then any other value alphabetically
    order = {"member": 0, "control": 1}
    return sorted((v for v in frame[column].unique().to_list() if v is not None), key=lambda v: (order.get(v, 2), v))


def rate_groups(frame: pl.DataFrame, analyze: dict[str, Any]) -> list[dict[str, Any]]:
    """Rates of every sample, of each membership, and of each kind (overall and per membership).

    Groups with no sample are left out, and so are membership groups when there is only one
    membership; the first group is always ``all``.
    """
    groups = [group_rates(frame, label="all", membership=None, kind=None, analyze=analyze)]
    memberships = _values(frame, "membership")
    # a single membership (e.g. a corpus of members only) would repeat the "all" group
    for membership in memberships if len(memberships) > 1 else ():
        part = frame.filter(pl.col("membership") == membership)
        groups.append(group_rates(part, label=membership, membership=membership, kind=None, analyze=analyze))
    for kind in _values(frame, "kind"):
        part = frame.filter(pl.col("kind") == kind)
        groups.append(group_rates(part, label=f"kind {kind}", membership=None, kind=kind, analyze=analyze))
        if len(memberships) > 1:
            for membership in memberships:
                sub = part.filter(pl.col("membership") == membership)
                if sub.height:
                    groups.append(group_rates(sub, label=f"kind {kind}, {membership}", membership=membership,
                                              kind=kind, analyze=analyze))
    return groups
