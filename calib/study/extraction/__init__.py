"""The ``extraction`` and ``census`` study kinds: matched-control conformal tests and single-document census.

Both kinds share their samples, windows and scores stages (:mod:`calib.study.extraction.samples`,
:mod:`calib.study.extraction.scoring`) and their ``[extraction]`` section, so one package serves
both and registers both names. Stages (:mod:`calib.study.extraction.stages`) and reports
(:mod:`calib.report.extraction`) are imported when first used.
"""

from __future__ import annotations

from typing import Any

from calib.study.kinds import KINDS, StudyKind

__all__ = ["CENSUS", "EXTRACTION"]


def _extraction_stages(spec: Any) -> tuple[Any, ...]:
    from calib.study.extraction.stages import extraction_stages

    return extraction_stages(spec)


def _census_stages(spec: Any) -> tuple[Any, ...]:
    from calib._exceptions import InputError
    from calib.study.extraction.stages import CENSUS_STAGES

    if spec.extraction.screen is not None:
        raise InputError("extraction.screen: the control screen runs in extraction studies; a census removes "
                         "verified control windows with analyze.decontaminate (remove [extraction.screen])")

    return CENSUS_STAGES


def _extraction_tables() -> dict[str, Any]:
    from calib.study.tables import EXTRACTION_TABLES

    return EXTRACTION_TABLES


def _census_tables() -> dict[str, Any]:
    from calib.study.tables import CENSUS_TABLES

    return CENSUS_TABLES


def _extraction_report(run: Any) -> tuple[dict[str, Any], list[Any]]:
    from calib.report.extraction import extraction_report

    return extraction_report(run)


def _census_report(run: Any) -> tuple[dict[str, Any], list[Any]]:
    from calib.report.extraction import census_report

    return census_report(run)


def _needs(spec: Any) -> dict[str, list[str]]:
    from calib.study.extraction.check import needs

    return needs(spec)


def _describe(spec: Any) -> dict[str, Any]:
    from calib.study.extraction.check import describe

    return describe(spec)


async def _estimate(spec: Any, resources: Any, caps: dict[str, Any]) -> Any:
    from calib.study.extraction.estimate import estimate

    return await estimate(spec, resources, caps)


def _empty(summary: dict[str, Any]) -> str | None:
    from calib.study.extraction.check import nothing_measured

    return nothing_measured(summary)


#: The ``extraction`` kind's record.
EXTRACTION = KINDS.register("extraction")(
    StudyKind("extraction", "extraction", _extraction_stages, _extraction_tables, _extraction_report,
              needs=_needs, describe=_describe, empty=_empty, estimate=_estimate))
#: The ``census`` kind's record.
CENSUS = KINDS.register("census")(StudyKind("census", "census", _census_stages, _census_tables, _census_report,
                                                         needs=_needs, describe=_describe, empty=_empty,
                                                         estimate=_estimate))
