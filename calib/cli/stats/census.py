"""``calib stats census``: coverage of a document by windows scoring above its control's threshold."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np

from calib._exceptions import InputError
from calib.cli._scorefiles import TABLE_SUFFIXES, column_values, read_scores, read_table
from calib.cli.stats._output import Count, Probability, emit, json_option, pct, translate_errors
from calib.stats.census import census as run_census

SCORE_COLUMNS = ("score", "log10_score")


def _score_column(columns: list[str], path: Path, log10: bool) -> tuple[str, bool]:
    """Pick the score column: ``score`` (probabilities, or log10 with --log10) or ``log10_score``."""
    if "score" in columns:
        return "score", log10
    if "log10_score" in columns:
        return "log10_score", True
    raise InputError(f"needs a 'score' or 'log10_score' column; it has {', '.join(map(repr, columns))}",
                     path=str(path))


def _read_windows(path: Path, log10: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    table = read_table(path)
    for name in ("start", "end"):
        if name not in table.columns:
            raise InputError(f"needs columns 'start', 'end' (character offsets) and 'score'; "
                             f"'{name}' is missing", path=str(path))
    column, is_log10 = _score_column(table.columns, path, log10)
    starts = column_values(table, "start", path, what="start offset")
    ends = column_values(table, "end", path, what="end offset")
    return starts, ends, column_values(table, column, path), is_log10


def _read_controls(path: Path, log10: bool) -> tuple[np.ndarray, bool]:
    from calib.cli._scorefiles import _suffix

    if _suffix(path) in TABLE_SUFFIXES:
        table = read_table(path)
        column, is_log10 = _score_column(table.columns, path, log10)
        return column_values(table, column, path), is_log10
    return read_scores(path), log10


def _summary(r: dict) -> str:
    lines = [
        f"threshold 1e{r['log10_threshold']} (largest control window 10^{r['max_control_score_log10']:.3f}, "
        f"rounded up to a power of ten)",
        f"{r['windows_above']} of {r['n_windows']} windows above it; coverage {pct(r['coverage'])} "
        f"({r['covered_characters']} of {r['document_length']} characters)",
    ]
    if r["budget"] is not None:
        lines.append(f"within {r['budget']:.6g} queries at {pct(r['budget_confidence'])}: coverage "
                     f"{pct(r['coverage_within_budget'])} ({r['windows_within_budget']} windows)")
    return "\n".join(lines)


@click.command("census")
@click.option("--scores", type=click.Path(path_type=Path), required=True,
              help="The document's windows: a table with start, end (character offsets) and score.")
@click.option("--controls", type=click.Path(path_type=Path), required=True,
              help="The matched control's (decontaminated) window scores: a table or one score per line.")
@click.option("--budget", type=float, default=None, help="Query budget n (may be written 1e20).")
@click.option("--budget-confidence", type=Probability(), default=0.95, show_default=True,
              help="Wanted probability of generating a window within the budget.")
@click.option("--length", "document_length", type=Count(minimum=1), default=None,
              help="Document length in characters (default: the largest window end).")
@click.option("--log10", "log10", is_flag=True,
              help="Scores in a 'score' column or a plain file are log10 probabilities.")
@json_option
@translate_errors
def census(scores: Path, controls: Path, budget: float | None, budget_confidence: float,
           document_length: int | None, log10: bool, as_json: bool) -> None:
    """Census of one document against a matched control: threshold, coverage, coverage within budget."""
    starts, ends, values, doc_log10 = _read_windows(scores, log10)
    control_values, control_log10 = _read_controls(controls, log10)
    if doc_log10 != control_log10:
        raise InputError("one file holds probabilities and the other log10 probabilities; use the same "
                         "scale (a 'log10_score' column or --log10 for both)", path=str(controls))
    if budget is not None and (not np.isfinite(budget) or budget < 1 or not float(budget).is_integer()):
        raise InputError(f"--budget must be a whole number of queries >= 1, got {budget:g}")
    result = run_census(starts, ends, values, control_values, log10=doc_log10, document_length=document_length,
                        budget=None if budget is None else int(budget), budget_confidence=budget_confidence)
    emit(result.to_dict(), as_json, _summary)
