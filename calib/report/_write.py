"""Writing the report: report.html, report.md, summary.json and figures/, each file atomically."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from calib._files import atomic_write_text
from calib.report._analysis import analyze_run
from calib.report._document import Figure, Group, to_html, to_markdown
from calib.report._run import load_run
from calib.report._sections import report_blocks

__all__ = ["write_report"]


def _json_ready(value: Any) -> Any:
    """``value`` with NaN and infinite floats as null (JSON has neither; a table may hold a NaN)."""
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _figures(blocks: list) -> list[Figure]:
    found = []
    for block in blocks:
        if isinstance(block, Figure):
            found.append(block)
        elif isinstance(block, Group):
            found += _figures(list(block.blocks))
    return found


def write_report(run_dir: str | Path) -> dict[str, Path]:
    """Render the audit report of the ``functional`` study in ``run_dir`` from its tables.

    Writes ``RUN/report/report.html`` (self-contained: inline CSS and SVG), ``RUN/report/report.md``
    (figures as ``figures/NAME.svg``), ``RUN/report/summary.json`` (every number the report states)
    and ``RUN/report/figures/*.svg``. Rendering the same tables again gives the same bytes.

    Parameters
    ----------
    run_dir : str or Path
        A run directory written by ``calib study SPEC``.

    Returns
    -------
    dict
        ``{"html": Path, "markdown": Path, "summary": Path}``.

    Raises
    ------
    InputError
        One line, when the directory, ``spec.json`` or a table is missing or unreadable.
    """
    run = load_run(run_dir)
    analysis = analyze_run(run)
    blocks = report_blocks(analysis)
    out = run.root / "report"
    figures = _figures(blocks)
    analysis.summary["figures"] = {f.name: f"figures/{f.name}.svg" for f in figures}
    for figure in figures:
        atomic_write_text(out / "figures" / f"{figure.name}.svg", figure.svg)
    # a figure an earlier rendering drew but this one does not (e.g. no ROC any more) must not linger
    for stale in (out / "figures").glob("*.svg") if (out / "figures").is_dir() else ():
        if stale.stem not in analysis.summary["figures"]:
            stale.unlink(missing_ok=True)
    title = f"calib report: {analysis.summary['study'].get('name') or 'study'}"
    paths = {"html": out / "report.html", "markdown": out / "report.md", "summary": out / "summary.json"}
    atomic_write_text(paths["markdown"], to_markdown(blocks))
    atomic_write_text(paths["html"], to_html(blocks, title=title))
    summary = json.dumps(_json_ready(analysis.summary), indent=2, ensure_ascii=False, allow_nan=False)
    atomic_write_text(paths["summary"], summary + "\n")
    return paths
