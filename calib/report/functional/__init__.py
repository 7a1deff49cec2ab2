"""The ``functional`` study's report: rates of functional and textual memorization, proxies, duplication, examples.

:func:`functional_report` is what the ``functional`` :class:`~calib.study.kinds.StudyKind` renders with:
:func:`~calib.report.functional.analysis.analyze_run` derives every number from the run's tables and
:func:`~calib.report.functional.sections.report_blocks` lays them out (docs/report.md).
"""

from __future__ import annotations

from typing import Any

from calib.report.functional.analysis import analyze_run
from calib.report.functional.sections import report_blocks
from calib.report.run import RunData

__all__ = ["functional_report"]


def functional_report(run: RunData) -> tuple[dict[str, Any], list[Any]]:
    """The summary (summary.json) and the report's blocks of a functional run."""
    analysis = analyze_run(run)
    summary = {"summary_version": analysis.summary["summary_version"], "kind": "functional", **analysis.summary}
    return summary, report_blocks(analysis)
