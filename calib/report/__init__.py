"""The audit report of a study: HTML, Markdown and summary.json from a run directory.

``write_report(RUN)`` reads ``RUN/tables/*.parquet``, ``RUN/spec.json`` and ``RUN/manifest.json`` and
writes ``RUN/report/`` for the study's kind: ``functional`` (counterfactual functional memorization),
``extraction`` (the population conformal test) or ``census`` (single documents against matched
controls); docs/report.md describes every section and every key of summary.json. Every rate and
interval comes from :mod:`calib.stats`.
"""

from calib.report.functional.analysis import SUMMARY_VERSION, Analysis, analyze_run
from calib.report.run import RunData, RunTables, load_run
from calib.report.write import write_report

__all__ = ["Analysis", "RunData", "RunTables", "SUMMARY_VERSION", "analyze_run", "load_run", "write_report"]
