"""Writing the report: report.html, report.md, summary.json and figures/, each file atomically."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any

from calib._exceptions import InputError
from calib._files import atomic_write_text
from calib.report.document import Figure, Group, Markup, Paragraph, to_html, to_markdown
from calib.report.run import RunData, load_run

__all__ = ["BUILTIN_REPORTS", "Render", "builtin_report", "json_ready", "write_report"]

#: A study kind's report: ``render(run)`` -> (summary, blocks) for a loaded run (:func:`calib.report.load_run`).
Render = Callable[[Any], tuple[dict[str, Any], list[Any]]]

#: The renderer of each built-in study kind, as ``module:function`` (imported when used). The study
#: layer's :class:`calib.study.kinds.StudyKind` records name the same functions; a plugin kind's
#: renderer reaches :func:`write_report` through ``report_of`` (``calib report`` and the report
#: stage pass the registry's).
BUILTIN_REPORTS: dict[str, str] = {
    "functional": "calib.report.functional:functional_report",
    "extraction": "calib.report.extraction:extraction_report",
    "census": "calib.report.extraction:census_report",
    "probes": "calib.report.probes:probes_report",
}


def builtin_report(kind: str) -> Render:
    """The renderer of the built-in study kind ``kind``.

    Raises
    ------
    KeyError
        When ``kind`` is not a built-in kind (a plugin kind's report needs ``report_of``).
    """
    if kind not in BUILTIN_REPORTS:
        raise KeyError(f"built-in kinds: {', '.join(BUILTIN_REPORTS)}; a plugin kind's report is rendered by "
                       "`calib report RUN` with the plugin installed")
    module, name = BUILTIN_REPORTS[kind].split(":")
    return getattr(import_module(module), name)


def json_ready(value: Any) -> Any:
    """``value`` with NaN and infinite floats as null (JSON has neither; a table may hold a NaN)."""
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
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


def _placeholders(blocks: list[Any], found: dict[str, Markup], prefix: str) -> list[Any]:
    """``blocks`` with each :class:`Markup` replaced by a paragraph holding a unique placeholder."""
    out: list[Any] = []
    for block in blocks:
        if isinstance(block, Markup):
            token = f"@@{prefix}-{len(found)}@@"
            found[token] = block
            out.append(Paragraph(token))
        elif isinstance(block, Group):
            out.append(Group(block.css_class, block.anchor, tuple(_placeholders(list(block.blocks), found, prefix))))
        else:
            out.append(block)
    return out


def _render(blocks: list[Any], title: str) -> tuple[str, str]:
    """Markdown and HTML of ``blocks``; prepared :class:`Markup` goes in as it is (it has no block of its own)."""
    found: dict[str, Markup] = {}
    # the placeholder must occur nowhere else (a document's own text could hold anything)
    text, prefix = repr(blocks), "calib-markup"
    while prefix in text:
        prefix += "-"
    plain = _placeholders(blocks, found, prefix)
    markdown, page = to_markdown(plain), to_html(plain, title=title)
    for token, markup in found.items():
        markdown = markdown.replace(f"{token}\n", f"{markup.markdown}\n", 1)
        page = page.replace(f"<p>{token}</p>", markup.html, 1)
    return markdown, page


def _content(run_dir: str | Path, report_of: Callable[[str], Render]) -> tuple[Path, dict[str, Any], list[Any]]:
    """The run directory, the summary and the blocks of the report of the study kind in ``run_dir``."""
    run = load_run(run_dir)
    kind = "functional" if isinstance(run, RunData) else run.kind
    try:
        render = report_of(kind)
    except KeyError as exc:
        reason = exc.args[0] if exc.args else "no renderer"
        raise InputError(f"study.kind = {kind!r} is not a study kind the report renders ({reason}); install the "
                         "package that defines the kind, then run `calib report RUN` again",
                         path=str(run.root / "spec.json")) from None
    summary, blocks = render(run)
    return run.root, summary, blocks


def _check_folder(folder: Path) -> None:
    """Raise a one-line InputError when ``folder`` exists as something other than a folder."""
    if folder.exists() and not folder.is_dir():
        raise InputError("is a file, where the report's folder goes; move or delete it, then run "
                         "`calib report RUN` again", path=str(folder))


def write_report(run_dir: str | Path, *, report_of: Callable[[str], Render] | None = None) -> dict[str, Path]:
    """Render the audit report of the study in ``run_dir`` from its tables.

    The study kind (``spec.json`` ``study.kind``) decides the report: ``functional`` (counterfactual
    functional memorization), ``extraction`` (the population conformal test), ``census`` (single
    documents against matched controls) or ``probes`` (scale-aware diagnostics: pass@k under
    perturbations and I/O isomorphisms, opcode divergence, CoDeC); docs/report.md describes each.

    Writes ``RUN/report/report.html`` (self-contained: inline CSS and SVG), ``RUN/report/report.md``
    (figures as ``figures/NAME.svg``), ``RUN/report/summary.json`` (every number the report states)
    and ``RUN/report/figures/*.svg``. Rendering the same tables again gives the same bytes.

    Parameters
    ----------
    run_dir : str or Path
        A run directory written by ``calib study SPEC``.
    report_of : callable, optional
        ``report_of(kind)``: the renderer of a study kind (the study registry's, as ``calib report``
        and the report stage pass it), raising ``KeyError`` for a kind it does not know; by default
        the built-in kinds' (:data:`BUILTIN_REPORTS`).

    Returns
    -------
    dict
        ``{"html": Path, "markdown": Path, "summary": Path}``.

    Raises
    ------
    InputError
        One line, when the directory, ``spec.json`` or a table is missing or unreadable, when no
        renderer knows the study kind, or when ``RUN/report`` (or ``RUN/report/figures``) exists as a file.
    """
    root, summary, blocks = _content(run_dir, report_of or builtin_report)
    out = root / "report"
    _check_folder(out)
    _check_folder(out / "figures")
    figures = _figures(blocks)
    summary["figures"] = {f.name: f"figures/{f.name}.svg" for f in figures}
    for figure in figures:
        atomic_write_text(out / "figures" / f"{figure.name}.svg", figure.svg)
    # a figure an earlier rendering drew but this one does not (e.g. no ROC any more) must not linger
    for stale in (out / "figures").glob("*.svg") if (out / "figures").is_dir() else ():
        if stale.stem not in summary["figures"]:
            stale.unlink(missing_ok=True)
    title = f"calib report: {summary['study'].get('name') or 'study'}"
    paths = {"html": out / "report.html", "markdown": out / "report.md", "summary": out / "summary.json"}
    markdown, page = _render(blocks, title)
    atomic_write_text(paths["markdown"], markdown)
    atomic_write_text(paths["html"], page)
    text = json.dumps(json_ready(summary), indent=2, ensure_ascii=False, allow_nan=False)
    atomic_write_text(paths["summary"], text + "\n")
    return paths
