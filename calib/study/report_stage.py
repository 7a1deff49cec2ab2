"""The report stage every study kind ends with: the manifest's ``finished_at``, then ``calib report``."""

from __future__ import annotations

import asyncio

from calib.study.runner import StageContext

__all__ = ["report_done", "write_report_stage"]


async def write_report_stage(ctx: StageContext) -> None:
    """Write ``RUN/report/`` from the run's tables with the kind's registered renderer."""
    from calib.report import write_report
    from calib.study.kinds import study_kind
    from calib.study.rundir import now_iso

    ctx.save_manifest(finished_at=now_iso())  # the report states when the audit's work ended
    await asyncio.to_thread(write_report, ctx.run.root, report_of=lambda kind: study_kind(kind).report)
    return None


def report_done(run: object) -> bool:
    """Whether the run directory already holds a report (the report stage writes no table)."""
    return (run.report / "report.html").is_file()  # type: ignore[attr-defined]
