"""What the audit cost per sample (functional-memorization paper, Table 1): seconds, executor runs, tokens.

The execute stage records, on each row of the executions table, the cost of its sample's comparison (one
comparison runs x and both candidates, so the values are per sample, the same on each of its rows):
``runs`` (executions of x and the candidates), and for the ``llm`` and ``agent`` executors the
``input_tokens`` and ``output_tokens`` of their chat requests; the wall-clock ``seconds`` of each comparison
are the run's ``sample_cost`` events (events.jsonl; the last one of a sample counts): time is not part of
the tables, which a repeated run writes byte for byte the same. This module summarizes them per
executor (the sandbox, a native executor per language, llm, agent) and over all executed samples: count,
mean, median, 90th percentile (numpy's linear interpolation) and total. Generation tokens are not stored
per sample; the tokens the target's and reference's servers reported (``manifest.json`` ``spending``, the
last ``calib study`` invocation, HTTP servers only) are given per role with their mean per generated sample.
A run written before these columns existed has ``cost.recorded`` false and no statistics.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from calib.report.document import Block, Heading, Paragraph, Table
from calib.report.format import DASH, fixed, number
from calib.report.functional.samples import ROLES
from calib.report.run import RunData, setting

__all__ = ["COST_COLUMNS", "TABLE_COST_COLUMNS", "cost_blocks", "cost_summary", "describe", "sample_seconds"]

#: What the cost section states per sample.
COST_COLUMNS = ("seconds", "runs", "input_tokens", "output_tokens")
#: The executions table's cost columns (the seconds are events).
TABLE_COST_COLUMNS = ("runs", "input_tokens", "output_tokens")


def describe(values: np.ndarray) -> dict[str, Any] | None:
    """``n, mean, median, p90, total`` of ``values`` (nulls left out); None when there is none."""
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None
    return {"n": int(values.size), "mean": float(values.mean()), "median": float(np.median(values)),
            "p90": float(np.percentile(values, 90)), "total": float(values.sum())}


def sample_seconds(root: Path) -> dict[str, float]:
    """sample id -> the seconds of its last ``sample_cost`` event in ``root``/events.jsonl (unreadable lines
    are skipped: the log is appended to by every invocation and may end in a partial line)."""
    out: dict[str, float] = {}
    path = Path(root) / "events.jsonl"
    if not path.is_file():
        return out
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") == "sample_cost" and \
                    isinstance(event.get("sample_id"), str) and isinstance(event.get("seconds"), int | float):
                out[event["sample_id"]] = float(event["seconds"])
    return out


def _per_sample(executions: pl.DataFrame, seconds: dict[str, float]) -> pl.DataFrame:
    """One row per executed sample: its executor and cost (the first of its rows; all carry the same)."""
    columns = [pl.col(c).cast(pl.Float64) for c in TABLE_COST_COLUMNS]
    rows = (executions.select(pl.col("sample_id").cast(pl.String), pl.col("executor").cast(pl.String), *columns)
            .unique("sample_id", keep="first", maintain_order=True))
    rows = rows.with_columns(pl.col("sample_id").replace_strict(seconds, default=None, return_dtype=pl.Float64)
                             .alias("seconds"))
    return rows.filter(pl.col("runs").is_not_null() | pl.col("seconds").is_not_null())


def _stats(rows: pl.DataFrame) -> dict[str, Any]:
    return {"samples": rows.height, **{c: describe(rows[c].fill_null(np.nan).to_numpy()) for c in COST_COLUMNS}}


def _generation(run: RunData) -> list[dict[str, Any]]:
    generated = run.generations.filter(pl.col("text").is_not_null() | pl.col("error").is_not_null())
    out = []
    for role in ROLES:
        server = setting(run.spec, f"models.{role}")
        if server is None:
            continue
        spent = setting(run.manifest, f"spending.servers.{server}")
        n = int((generated["role"] == role).sum())
        entry: dict[str, Any] = {"role": role, "server": server, "samples": n, "recorded": spent is not None,
                                 "input_tokens": None, "output_tokens": None, "per_sample": None,
                                 "shared_with": [other for other in ("execute.server", "data.judge.server")
                                                 if setting(run.spec, other) == server]}
        if spent is not None:
            entry["input_tokens"] = int(spent.get("input_tokens") or 0)
            entry["output_tokens"] = int(spent.get("output_tokens") or 0)
            entry["per_sample"] = None if n == 0 else {
                "input_tokens": entry["input_tokens"] / n, "output_tokens": entry["output_tokens"] / n}
        out.append(entry)
    return out


def cost_summary(run: RunData) -> dict[str, Any]:
    """summary.json ``cost`` (see the module docstring and docs/report.md)."""
    recorded = all(c in run.executions.columns for c in TABLE_COST_COLUMNS)
    summary: dict[str, Any] = {"recorded": recorded, "executors": [], "total": None, "generation": _generation(run)}
    if not recorded:
        return summary
    rows = _per_sample(run.executions, sample_seconds(run.root))
    summary["executors"] = [{"executor": name, **_stats(rows.filter(pl.col("executor") == name))}
                            for name in sorted(rows["executor"].drop_nulls().unique().to_list())]
    summary["total"] = _stats(rows)
    return summary


# --- the report section ---------------------------------------------------------------------------------------
def _cell(stats: dict[str, Any] | None, digits: int) -> str:
    if stats is None:
        return DASH
    return (f"{fixed(stats['mean'], digits)} / {fixed(stats['median'], digits)} / {fixed(stats['p90'], digits)}"
            f" / {fixed(stats['total'], digits)}")


def _row(label: str, s: dict[str, Any]) -> tuple[str, ...]:
    return (label, number(s["samples"]), _cell(s["seconds"], 2), _cell(s["runs"], 1), _cell(s["input_tokens"], 0),
            _cell(s["output_tokens"], 0))


def _generation_rows(generation: list[dict[str, Any]]) -> tuple[tuple[str, ...], ...]:
    rows = []
    for g in generation:
        shared = f" (also {', '.join(f'`{k}`' for k in g['shared_with'])})" if g["shared_with"] else ""
        if not g["recorded"]:
            rows.append((g["role"], f"`{g['server']}`{shared}", number(g["samples"]), DASH, DASH,
                         "not reported (an in-process or local server counts no tokens)"))
            continue
        per = g["per_sample"] or {}
        rows.append((g["role"], f"`{g['server']}`{shared}", number(g["samples"]),
                     f"{number(g['input_tokens'])} / {number(g['output_tokens'])}",
                     f"{fixed(per.get('input_tokens'), 1)} / {fixed(per.get('output_tokens'), 1)}", ""))
    return tuple(rows)


def cost_blocks(summary: dict[str, Any]) -> list[Block]:
    """The "Cost" section from summary.json ``cost``."""
    cost = summary.get("cost")
    if cost is None:
        return []
    blocks: list[Block] = [Heading(2, "Cost per sample", "cost")]
    if not cost["recorded"]:
        return blocks + [Paragraph("The executions table has no cost columns (`runs`, `input_tokens`, "
                                   "`output_tokens`): it was written by an older calib; run `calib study SPEC` "
                                   "again to record them.")]
    blocks.append(Paragraph(
        "As in the functional-memorization paper's Table 1: what executing one sample cost (x and both candidates "
        "in one comparison), per executor and over all executed samples, as mean / median / 90th percentile / "
        "total. Seconds are wall clock from when the sample got a worker (samples run concurrently, so the total "
        "exceeds the stage's duration; the run's `sample_cost` events, — where none was logged); runs are the "
        "executor's executions; tokens are those the `llm` or `agent` executor's chat requests reported (— for "
        "executors that ask no model)."))
    rows = [_row(f"`{e['executor']}`", e) for e in cost["executors"]]
    if len(cost["executors"]) > 1:
        rows.append(_row("all executors", cost["total"]))
    header = ("executor", "samples", "seconds", "runs", "input tokens", "output tokens")
    blocks.append(Table(header, tuple(rows), "cost-table", "Execution cost per sample: mean / median / p90 / total."))
    if cost["generation"]:
        blocks.append(Paragraph(
            "Generation: the tokens each role's server reported over the last `calib study` invocation "
            "(`manifest.json` `spending`; requests answered from the cache cost none), and their mean per "
            "generated sample. A server that also executes or judges counts those requests too."))
        blocks.append(Table(("role", "server", "generated", "input / output tokens", "per sample", "note"),
                            _generation_rows(cost["generation"]), "cost-generation-table"))
    return blocks
