"""The ``probes`` study kind: scale-aware diagnostics (docs/probes.md).

The kind registers itself here; its stages (:mod:`calib.study.probes.stages`) and its report
(:mod:`calib.report.probes`) are imported when first used.
"""

from __future__ import annotations

from typing import Any

from calib.study.kinds import KINDS, StudyKind

__all__ = ["KIND"]


def _stages(spec: Any) -> tuple[Any, ...]:
    from calib.study.probes.stages import PROBES_STAGES

    return PROBES_STAGES


def _tables() -> dict[str, Any]:
    from calib.study.probes.tables import PROBES_TABLES

    return PROBES_TABLES


def _report(run: Any) -> tuple[dict[str, Any], list[Any]]:
    from calib.report.probes import probes_report

    return probes_report(run)


def _needs(spec: Any) -> dict[str, list[str]]:
    from calib.study.probes.check import needs

    return needs(spec)


def _describe(spec: Any) -> dict[str, Any]:
    from calib.study.probes.check import describe

    return describe(spec)


async def _estimate(spec: Any, resources: Any, caps: dict[str, Any]) -> Any:
    from calib.study.probes.estimate import estimate

    return await estimate(spec, resources, caps)


def _empty(summary: dict[str, Any]) -> str | None:
    from calib.study.probes.check import nothing_measured

    return nothing_measured(summary)


#: The ``probes`` kind's record.
KIND = KINDS.register("probes")(StudyKind("probes", "probes", _stages, _tables, _report,
                                                        needs=_needs, describe=_describe, empty=_empty,
                                                        estimate=_estimate))
