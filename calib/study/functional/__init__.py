"""The ``functional`` study kind: functional memorization against a counterfactual reference (docs/study-spec.md).

The kind registers itself here; its stages (:mod:`calib.study.functional.stages`) and its report
(:mod:`calib.report.functional`) are imported when first used.
"""

from __future__ import annotations

from typing import Any

from calib.study.kinds import KINDS, StudyKind

__all__ = ["KIND"]


def _stages(spec: Any) -> tuple[Any, ...]:
    from calib.study.functional.stages import functional_stages

    return functional_stages(spec)


def _tables() -> dict[str, Any]:
    from calib.study.tables import TABLES

    return TABLES


def _report(run: Any) -> tuple[dict[str, Any], list[Any]]:
    from calib.report.functional import functional_report

    return functional_report(run)


def _needs(spec: Any) -> dict[str, list[str]]:
    from calib.study.functional.check import needs

    return needs(spec)


def _describe(spec: Any) -> dict[str, Any]:
    from calib.study.functional.check import describe

    return describe(spec)


async def _estimate(spec: Any, resources: Any, caps: dict[str, Any]) -> Any:
    from calib.study.functional.estimate import estimate

    return await estimate(spec, resources, caps)


def _empty(summary: dict[str, Any]) -> str | None:
    from calib.study.functional.check import nothing_measured

    return nothing_measured(summary)


#: The ``functional`` kind's record.
KIND = KINDS.register("functional")(StudyKind("functional", None, _stages, _tables, _report,
                                                            needs=_needs, describe=_describe, empty=_empty,
                                                            estimate=_estimate))
