"""The ``extraction`` and ``census`` studies' reports (docs/report.md).

``extraction``: the population conformal test (:mod:`calib.report.extraction.summary` derives the
numbers, :mod:`calib.report.extraction.blocks` lays them out); ``census``: single documents against
matched controls (:mod:`calib.report.extraction.census`). Both share the figures of
:mod:`calib.report.extraction.figures` and the references they cite.
"""

from __future__ import annotations

from typing import Any

from calib.report.extraction.blocks import extraction_blocks
from calib.report.extraction.census import census_report
from calib.report.extraction.summary import extraction_summary
from calib.report.run import RunTables

__all__ = ["census_report", "extraction_report"]


def extraction_report(run: RunTables) -> tuple[dict[str, Any], list[Any]]:
    """The summary (summary.json) and the report's blocks of an extraction run."""
    summary = extraction_summary(run)
    return summary, extraction_blocks(run, summary)
