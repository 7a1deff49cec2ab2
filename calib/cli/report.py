"""``calib report``: re-render the audit report of a run directory from its tables.

Reads ``RUN/tables/*.parquet``, ``RUN/spec.json`` and ``RUN/manifest.json`` and writes
``RUN/report/report.html``, ``report.md``, ``summary.json`` and ``figures/`` (docs/report.md). No
server or executor is contacted.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

__all__ = ["report"]


@click.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True,
              help='Print exactly one JSON object: {"html": PATH, "markdown": PATH, "summary": PATH}.')
def report(run_dir: Path, as_json: bool) -> None:
    """Write RUN_DIR/report/ (report.html, report.md, summary.json, figures/) from RUN_DIR's tables.

    Prints the paths of the three files. A missing run directory, spec.json or table ends with one
    line and exit code 2.
    """
    from calib.report import write_report
    from calib.study.kinds import study_kind

    paths = write_report(run_dir, report_of=lambda kind: study_kind(kind).report)
    if as_json:
        click.echo(json.dumps({key: str(path) for key, path in paths.items()}))
        return
    for key, path in paths.items():
        click.echo(f"{key}: {path}")
