"""The ``mitigation`` study kind: post-training the target away from an audit's memorized functions, and what it
costs (docs/mitigation.md; the functional-memorization paper's Appendix H).

The kind registers itself here; its stages (:mod:`calib.study.mitigation.stages`) and its report
(:mod:`calib.report.mitigation`) are imported when first used.
"""

from __future__ import annotations

from typing import Any

from calib.study.kinds import KINDS, Needs, StudyKind

__all__ = ["KIND"]


def _stages(spec: Any) -> tuple[Any, ...]:
    from calib.study.mitigation.stages import MITIGATION_STAGES

    return MITIGATION_STAGES


def _tables() -> dict[str, Any]:
    from calib.study.mitigation.tables import MITIGATION_TABLES

    return MITIGATION_TABLES


def _report(run: Any) -> tuple[dict[str, Any], list[Any]]:
    from calib.report.mitigation import mitigation_report

    return mitigation_report(run)


def _needs(spec: Any) -> dict[str, list[str]]:
    """The target is sampled (DPO-target) and post-trained; a rewriter must chat."""
    needs = Needs()
    needs.add(spec.models.target, "complete")
    if spec.mitigation is not None and spec.mitigation.rewriter is not None:
        needs.add(spec.mitigation.rewriter, "chat")
    return needs


def _empty(summary: dict[str, Any]) -> str | None:
    points = summary.get("points") or []
    if not any(p.get("n") for p in points if p.get("method") not in ("target", "reference")):
        return "no checkpoint was measured on the memorized set (see events.jsonl)"
    return None


#: The ``mitigation`` kind's record.
KIND = KINDS.register("mitigation")(StudyKind("mitigation", "mitigation", _stages, _tables, _report,
                                              needs=_needs, empty=_empty))
