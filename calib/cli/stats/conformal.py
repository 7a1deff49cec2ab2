"""``calib stats conformal``: calibrate a threshold on control scores; rate member claims against it.

The numbers are :func:`calib.stats.conformal_test`'s record, printed as it is but for the ``method`` names
and the FPR law's keys beyond :data:`~calib.cli.stats.beta_law.LAW_KEYS` (as ``calib stats beta-law``).
"""

from __future__ import annotations

from pathlib import Path

import click

from calib.cli._scorefiles import read_scores
from calib.cli.stats._output import confidence_option, emit, json_option, pct, translate_errors
from calib.cli.stats.beta_law import law_record, law_summary
from calib.stats.conformal import conformal_test


def _summary(r: dict) -> str:
    lines = [f"{r['n_controls']} controls, target alpha={r['alpha']:g}: K={r['k']}, "
             f"certified alpha_N={pct(r['certified_alpha'])}"]
    if not r["certifiable"]:
        lines.append(r["note"])
        return "\n".join(lines)
    lines.append(f"threshold: claims are scores > {r['threshold']:.6g}; in-sample FPR {pct(r['in_sample_fpr'])}; "
                 f"alpha_dagger {pct(r['alpha_dagger'])}")
    if r["at_atom"]:
        lines.append(r["note"])
    lines.append(law_summary(r["fpr_law"]).splitlines()[1])
    m = r.get("members")
    if m:
        lines.append(f"members: {m['claims']} of {m['n']} claimed ({pct(m['member_rate'])}); calibrated rate "
                     f"{pct(m['calibrated_rate'])}, {100 * m['confidence']:g}% band "
                     f"[{pct(m['low'])}, {pct(m['high'])}]")
    return "\n".join(lines)


@click.command("conformal")
@click.option("--controls", type=click.Path(path_type=Path), required=True,
              help="Control scores: one per line (.txt) or a .csv/.tsv/.parquet/.jsonl table.")
@click.option("--alpha", required=True, help="Target level: a decimal (0.001) or a fraction k/(N+1) (6/5001).")
@click.option("--members", type=click.Path(path_type=Path), default=None,
              help="Member (candidate) scores, same formats; adds the calibrated memorization rate.")
@click.option("--column", default="score", show_default=True, help="Score column of table files.")
@confidence_option
@json_option
@translate_errors
def conformal(controls: Path, alpha: str, members: Path | None, column: str, confidence: float,
              as_json: bool) -> None:
    """Matched-control conformal test: K, certified alpha, threshold, FPR law, calibrated rate."""
    control_scores = read_scores(controls, column)
    member_scores = None if members is None else read_scores(members, column)
    record = conformal_test(control_scores, alpha, member_scores, confidence=confidence)
    record.pop("method", None)
    record["fpr_law"] = law_record(record["fpr_law"])
    emit(record, as_json, _summary)
