"""Worked examples: x beside the target and reference completions, every similarity, every input's match.

``report.examples`` samples are shown: functionally memorized first, then textually memorized, then
the rest (not memorized, inconclusive, unscored); within each, members before controls, then highest
target SIM_func and lowest target SIM_text (functional) or highest target SIM_text (textual); ties by
sample id, so the choice is deterministic.

When the run has a duplicates table (a spec with ``[dedup]``), each memorized example (verdict ``textual``
or ``functional``) also names its closest training duplicates, as the functional-memorization paper's
Figure 43: the textual near-duplicate of highest Jaccard and the semantic-only one of highest cosine (ties
by corpus id), with its source, score, copies and the start of its text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from calib.report.functional.samples import ROLES, VERDICTS
from calib.report.run import RunData

__all__ = ["DUPLICATE_KINDS", "Example", "closest_duplicates", "select_examples"]

#: The kinds of closest duplicate an example shows, as the duplicates table names them.
DUPLICATE_KINDS = ("textual", "semantic")


@dataclass(frozen=True)
class Example:
    """One worked example: its numbers (``record``, also in summary.json) and its code."""

    record: dict[str, Any]
    x: str
    completions: dict[str, str | None]  # role -> the completed function (or raw text); None when absent
    language: str
    duplicate_texts: dict[str, str | None] = field(default_factory=dict)  # kind -> the duplicate's text excerpt


def _order(frame: pl.DataFrame) -> pl.DataFrame:
    rank = {v: i for i, v in enumerate(VERDICTS)}
    keyed = frame.with_columns(
        pl.col("verdict").replace_strict(rank, default=len(VERDICTS), return_dtype=pl.Int64).alias("_rank"),
        pl.when(pl.col("verdict") == "functional").then(-pl.col("func_target"))
        .when(pl.col("verdict") == "textual").then(-pl.col("text_target")).otherwise(0.0).alias("_first"),
        pl.when(pl.col("verdict") == "functional").then(pl.col("text_target")).otherwise(0.0).alias("_second"),
        (pl.col("membership") != "member").fill_null(True).alias("_not_member"))
    return keyed.sort("_rank", "_not_member", "_first", "_second", "sample_id", nulls_last=True)


def _similarities(run: RunData, sample_id: str) -> dict[str, dict[str, float | None]]:
    rows = run.similarities.filter(pl.col("sample_id") == sample_id).sort("role", "metric")
    out: dict[str, dict[str, float | None]] = {}
    for row in rows.iter_rows(named=True):
        out.setdefault(row["role"], {})[row["metric"]] = row["value"]
    return out


def _executions(run: RunData, sample_id: str) -> dict[str, dict[str, Any]]:
    rows = run.executions.filter(pl.col("sample_id") == sample_id)
    return {row["role"]: {"sim_func": row["sim_func"], "conclusive": row["conclusive"], "reason": row["reason"],
                          "matches": row["matches"]} for row in rows.iter_rows(named=True)}


def _completion(run: RunData, sample: dict[str, Any], role: str) -> tuple[str | None, dict[str, Any]]:
    """What was compared with x: the parsed function, else the signature followed by the raw completion."""
    rows = run.generations.filter((pl.col("sample_id") == sample["sample_id"]) & (pl.col("role") == role))
    if not rows.height:
        return None, {"model": None, "finish_reason": None, "error": "no generation"}
    row = rows.row(0, named=True)
    code = row["function"]
    if code is None and row["text"] is not None:
        code = (sample.get("signature") or "") + row["text"]
    return code, {"model": row["model"], "finish_reason": row["finish_reason"], "error": row["error"]}


def closest_duplicates(pairs: pl.DataFrame, sample_id: str) -> dict[str, dict[str, Any] | None]:
    """kind -> the sample's closest duplicate of that kind (highest similarity, ties by corpus id), or None.

    Each is ``corpus_id, source, similarity, copies, text`` (``source`` and ``text`` null in a duplicates
    table written before they were kept).
    """
    rows = pairs.filter(pl.col("sample_id").cast(pl.String) == sample_id)
    out: dict[str, dict[str, Any] | None] = {}
    for kind in DUPLICATE_KINDS:
        part = rows.filter(pl.col("kind") == kind).sort(["similarity", "corpus_id"], descending=[True, False])
        if not part.height:
            out[kind] = None
            continue
        best = part.row(0, named=True)
        out[kind] = {"corpus_id": best["corpus_id"], "source": best.get("corpus_source"),
                     "similarity": best["similarity"], "copies": best["copies"], "text": best.get("corpus_text")}
    return out


def _example(run: RunData, row: dict[str, Any], samples: dict[str, dict[str, Any]]) -> Example:
    sid = row["sample_id"]
    sample = samples[sid]
    completions, generation = {}, {}
    for role in ROLES:
        completions[role], generation[role] = _completion(run, sample, role)
    record = {
        "sample_id": sid, "verdict": row["verdict"], "membership": row["membership"], "kind": row["kind"],
        "language": sample["language"], "source": sample["source"], "reason": row["reason"],
        "text_target": row["text_target"], "text_reference": row["text_reference"],
        "execution": {"executor": row["executor"], "conclusive": row["x_conclusive"], "reason": row["x_reason"],
                      "valid_inputs": row["valid_inputs"], "coverage": row["coverage"],
                      "distinct_outputs": row["distinct_outputs"]},
        "generation": generation, "similarities": _similarities(run, sid), "executions": _executions(run, sid),
    }
    texts: dict[str, str | None] = {}
    record["duplicates"] = None
    if run.duplicates is not None and row["verdict"] in ("textual", "functional"):
        closest = closest_duplicates(run.duplicates, sid)
        texts = {kind: d["text"] for kind, d in closest.items() if d is not None}
        record["duplicates"] = {kind: None if d is None else {k: v for k, v in d.items() if k != "text"}
                                for kind, d in closest.items()}
    return Example(record=record, x=sample["function"] or "", completions=completions,
                   language=sample["language"] or "", duplicate_texts=texts)


def select_examples(run: RunData, frame: pl.DataFrame, count: int) -> list[Example]:
    """The first ``count`` samples of the per-sample table in example order (see the module docstring)."""
    if count <= 0 or frame.height == 0:
        return []
    chosen = _order(frame).head(count)
    ids = chosen["sample_id"].to_list()
    samples = {r["sample_id"]: r for r in run.samples.filter(pl.col("sample_id").is_in(ids)).iter_rows(named=True)}
    return [_example(run, row, samples) for row in chosen.iter_rows(named=True)]
