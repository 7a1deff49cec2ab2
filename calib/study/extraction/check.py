"""What ``calib check`` asks of an extraction or census study's servers, and what the study measures."""

from __future__ import annotations

from typing import Any

__all__ = ["describe", "needs", "nothing_measured"]


def needs(spec: Any) -> dict[str, list[str]]:
    """Server name -> the capabilities beyond completion (``calib.servers.base.Capabilities`` fields)."""
    from calib.study.kinds import Needs

    need = Needs()
    add = need.add
    # windows are cut with the target's tokenizer; every model scores them by teacher forcing
    add(spec.models.target, "tokenize")
    for name in (spec.models.target, spec.models.reference):
        if name is None:
            continue
        add(name, "scoring")
        add(name, "tokenize")
        if any(float(t) != 1.0 for t in spec.extraction.temperatures) and "base" in spec.extraction.procedures:
            add(name, "full_distribution")
        if any(p in spec.extraction.procedures for p in ("near_verbatim_greedy", "near_verbatim")):
            add(name, "complete")  # the near-verbatim procedures generate the suffix greedily
    return need


def nothing_measured(summary: dict[str, Any]) -> str | None:
    """Why the finished extraction or census run scored no window (its summary.json says), or None."""
    from calib.report.extraction.empty import nothing_measured as why

    return why(summary)


def describe(spec: Any) -> dict[str, Any]:
    """What the study measures: its extraction procedures."""
    return {"procedures": list(spec.extraction.procedures)}
