"""Writing the report: report.html, report.md, summary.json and figures/, each file atomically."""

from __future__ import annotations

import functools
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from calib.report._analysis import analyze_run
from calib.report._document import Figure, Group, to_html, to_markdown
from calib.report._run import load_run
from calib.report._sections import report_blocks

__all__ = ["write_report"]


@functools.cache
def _umask() -> int:
    """The process umask: read from /proc where it can be (os.umask can only be read by setting it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        # mkstemp makes the file private; a report is as readable as any file the user writes
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
        _atomic_write(out / "figures" / f"{figure.name}.svg", figure.svg)
    # a figure an earlier rendering drew but this one does not (e.g. no ROC any more) must not linger
    for stale in (out / "figures").glob("*.svg") if (out / "figures").is_dir() else ():
        if stale.stem not in analysis.summary["figures"]:
            stale.unlink(missing_ok=True)
    title = f"calib report: {analysis.summary['study'].get('name') or 'study'}"
    paths = {"html": out / "report.html", "markdown": out / "report.md", "summary": out / "summary.json"}
    _atomic_write(paths["markdown"], to_markdown(blocks))
    _atomic_write(paths["html"], to_html(blocks, title=title))
    summary = json.dumps(_json_ready(analysis.summary), indent=2, ensure_ascii=False, allow_nan=False)
    _atomic_write(paths["summary"], summary + "\n")
    return paths
