"""One report over several run directories: ``calib compare-runs RUN... [--out DIR]`` (docs/compare-runs.md).

:func:`compare_runs` reads the runs, refuses runs of different kinds or operating points, and computes
each run's headline rates and the difference of every compared pair; :func:`write_comparison` writes
``report.html``, ``report.md``, ``comparison.json`` and ``comparisons.parquet``. Each study kind compared has
its module: functional runs (:mod:`calib.report.compare.functional`; runs that executed the same samples also
get their executor agreement, :mod:`calib.report.compare.agreement`), extraction runs
(:mod:`calib.report.compare.extraction`) and probes runs (:mod:`calib.report.compare.probes`). Every interval
and test comes from :mod:`calib.stats`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from calib._exceptions import InputError
from calib._files import atomic_write, atomic_write_text
from calib.report.compare.agreement import agreement_blocks, executor_agreement
from calib.report.compare.extraction import compare_extraction
from calib.report.compare.extraction_render import extraction_blocks, extraction_table
from calib.report.compare.functional import PAIRINGS, POPULATIONS, compare_functional, run_pairs
from calib.report.compare.render import COMPARISON_SCHEMA, comparison_blocks, comparison_table
from calib.report.compare.runs import ComparedRun, check_operating_points, load_runs, model_of
from calib.report.document import to_html, to_markdown
from calib.report.run import setting
from calib.report.write import json_ready
from calib.stats.compare import ADJUSTMENTS

__all__ = ["COMPARISON_SCHEMA", "COMPARISON_VERSION", "PAIRINGS", "compare_runs", "write_comparison"]

#: Version of the comparison.json layout (docs/compare-runs.md).
COMPARISON_VERSION = 1


def _run_record(run: ComparedRun) -> dict[str, Any]:
    samples = run.data.samples  # type: ignore[union-attr]
    membership = samples["membership"].cast(pl.String)
    return {"label": run.label, "path": str(run.root), "study": setting(run.spec, "study.name"),
            "target": model_of(run.spec, "target"), "reference": model_of(run.spec, "reference"),
            "organism_seed": setting(run.spec, "organism.seed") if setting(run.spec, "data.source") == "organism"
            else None, "samples": samples.height,
            **{population: int((membership == value).sum()) for population, value in POPULATIONS.items()}}


def compare_runs(paths: list[str | Path], *, pairing: str = "baseline", adjust: str = "holm") -> dict[str, Any]:
    """Compare the runs in ``paths`` (the content of comparison.json).

    Parameters
    ----------
    paths
        Two or more run directories of one study kind (functional, extraction or probes) and one operating point.
    pairing
        ``"baseline"``: the first run against each other one; ``"all"``: every pair.
    adjust
        The multiplicity adjustment across all comparisons: ``"holm"`` or ``"bh"``.

    Raises
    ------
    InputError
        One line naming the run (and key and values) when a path is not a run directory or lacks a table,
        when fewer than two runs are given, or when the runs' kinds or operating points differ.
    """
    if pairing not in PAIRINGS:
        raise InputError(f"pairing must be one of {', '.join(PAIRINGS)}, got {pairing!r}")
    if adjust not in ADJUSTMENTS:
        raise InputError(f"adjust must be one of {', '.join(ADJUSTMENTS)}, got {adjust!r}")
    runs = load_runs(paths)
    point = check_operating_points(runs)
    kind = runs[0].kind
    try:
        if kind == "extraction":
            found = compare_extraction(runs, point, pairing=pairing, adjust=adjust)
        elif kind == "probes":
            from calib.report.compare.probes import compare_probes

            found = compare_probes(runs, point, pairing=pairing, adjust=adjust)
        else:
            found = _functional(runs, point, pairing, adjust)
    except ValueError as exc:
        raise InputError(f"{exc}; check the runs' tables and spec.json") from None
    confidence = point["probes.confidence"] if kind == "probes" else point["analyze.confidence"]
    return {"comparison_version": COMPARISON_VERSION, "kind": kind, "operating_point": point,
            "confidence": float(confidence), "pairing": pairing, "adjust": adjust, **found}


def _functional(runs: list[ComparedRun], point: dict[str, Any], pairing: str, adjust: str) -> dict[str, Any]:
    analyze = {key.split(".", 1)[1]: value for key, value in point.items() if key.startswith("analyze.")}
    found = compare_functional(runs, analyze, pairing=pairing, adjust=adjust)
    found["agreement"] = executor_agreement(runs, run_pairs(len(runs), pairing), analyze)
    return {"runs": [_run_record(r) for r in runs], **found}


def _blocks_and_table(result: dict[str, Any]) -> tuple[list[Any], pl.DataFrame]:
    """The report's blocks and the comparisons table of ``result``'s study kind."""
    if result["kind"] == "extraction":
        return extraction_blocks(result), extraction_table(result["comparisons"])
    if result["kind"] == "probes":
        from calib.report.compare.probes import probes_blocks, probes_table

        return probes_blocks(result), probes_table(result["comparisons"])
    blocks = comparison_blocks(result)
    blocks[-2:-2] = agreement_blocks(result)  # before the Method heading and its bullets
    return blocks, comparison_table(result["comparisons"])


def write_comparison(result: dict[str, Any], out: str | Path) -> dict[str, Path]:
    """Write ``report.html``, ``report.md``, ``comparison.json`` and ``comparisons.parquet`` into ``out``.

    Returns ``{"html", "markdown", "comparison", "table"}`` -> path. Each file is written atomically.

    Raises
    ------
    InputError
        When ``out`` exists as a file.
    """
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise InputError("is a file, where the comparison's folder goes; move it or give another --out",
                         path=str(folder))
    blocks, table = _blocks_and_table(result)
    paths = {"html": folder / "report.html", "markdown": folder / "report.md",
             "comparison": folder / "comparison.json", "table": folder / "comparisons.parquet"}
    atomic_write_text(paths["markdown"], to_markdown(blocks))
    atomic_write_text(paths["html"], to_html(blocks, title=f"calib compare-runs: {len(result['runs'])} runs"))
    text = json.dumps(json_ready(result), indent=2, ensure_ascii=False, allow_nan=False)
    atomic_write_text(paths["comparison"], text + "\n")
    atomic_write(paths["table"], table.write_parquet, suffix=".parquet")
    return paths
