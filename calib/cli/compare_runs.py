"""``calib compare-runs``: one report over several run directories (docs/compare-runs.md).

Reads each ``RUN/tables/*.parquet`` and ``RUN/spec.json``, compares the runs' headline rates (paired where
the runs audited the same samples, independent otherwise, p-values adjusted across the comparisons) and
writes ``report.html``, ``report.md``, ``comparison.json`` and ``comparisons.parquet``. No server or
executor is contacted.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

__all__ = ["compare_runs"]


@click.command("compare-runs")
@click.argument("runs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--out", "out", type=click.Path(path_type=Path), default=None,
              help="Folder for report.html, report.md, comparison.json and comparisons.parquet "
                   "(default: FIRST_RUN/report/compare-runs).")
@click.option("--pairs", "pairing", type=click.Choice(["baseline", "all"]), default="baseline", show_default=True,
              help="baseline: the first run against each other one; all: every pair of runs.")
@click.option("--adjust", type=click.Choice(["holm", "bh"]), default="holm", show_default=True,
              help="Multiplicity adjustment across all comparisons: Holm (family-wise error) or "
                   "Benjamini-Hochberg (false discovery rate).")
@click.option("--json", "as_json", is_flag=True,
              help="Print exactly one JSON object: comparison.json's content with the written files under \"files\".")
def compare_runs(runs: tuple[Path, ...], out: Path | None, pairing: str, adjust: str, as_json: bool) -> None:
    """Compare the headline rates of two or more functional, extraction or probes runs (RUN...: run directories).

    Prints the path of report.md. Fewer than two runs, a path that is not a run directory or lacks a
    table, runs of different kinds or operating points end with one line and exit code 2.
    """
    from calib.report.compare import compare_runs as compare
    from calib.report.compare import write_comparison

    result = compare(list(runs), pairing=pairing, adjust=adjust)
    paths = write_comparison(result, out if out is not None else runs[0] / "report" / "compare-runs")
    if as_json:
        click.echo(json.dumps({**result, "files": {key: str(path) for key, path in paths.items()}},
                              allow_nan=False))
        return
    click.echo(str(paths["markdown"]))
