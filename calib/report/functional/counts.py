"""Counts the report states: the filter funnel, and why samples are unscored or inconclusive.

Counts come from the tables; the manifest adds what only the study runner saw (the functions found
before sampling) and is recorded as written.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from calib.report.functional.samples import ROLES
from calib.report.run import RunData, setting

__all__ = ["funnel", "judge_summary", "nothing_measured", "reason_counts", "sample_counts"]


def _tally(values: list[str | None], *, missing: str) -> list[dict[str, Any]]:
    """``[{"reason", "count"}]`` most frequent first, then alphabetically; null becomes ``missing``."""
    counts: dict[str, int] = {}
    for value in values:
        key = missing if value is None or not str(value).strip() else str(value).strip()
        counts[key] = counts.get(key, 0) + 1
    return [{"reason": k, "count": v} for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def sample_counts(frame: pl.DataFrame) -> dict[str, int]:
    """``samples, unscored, scored, conclusive, inconclusive`` of the per-sample table, and the verdicts."""
    scored = int(frame["scored"].sum())
    conclusive = int(frame["conclusive"].sum())
    verdicts = {v: int((frame["verdict"] == v).sum()) for v in ("functional", "textual", "none", "inconclusive",
                                                              "unscored")}
    return {"samples": frame.height, "unscored": frame.height - scored, "scored": scored,
            "conclusive": conclusive, "inconclusive": scored - conclusive, "verdicts": verdicts}


def _functions(run: RunData) -> int | None:
    """Functions found before sampling: the manifest's count, else the rows of tables/functions.parquet."""
    count = setting(run.manifest, "counts.functions")
    if count is not None:
        return int(count)
    path = run.root / "tables" / "functions.parquet"
    try:
        return int(pl.scan_parquet(path).select(pl.len()).collect().item()) if path.is_file() else None
    except Exception:  # an unreadable optional table only costs this one count
        return None


def judge_summary(run: RunData, confidence: float = 0.95) -> dict[str, Any] | None:
    """The ``[data.judge]`` filter (functional-memorization paper §4): what it judged and kept; None without it.

    ``judged`` functions were drawn in a seeded order until ``want`` passed (severity >= ``threshold``);
    ``pass_rate`` is passed / judged with its Clopper–Pearson interval, ``severities`` the count of each
    severity label 1-10, ``unparsable`` and ``failed`` the answers without one (counted as not passed).
    """
    from calib.stats import clopper_pearson

    table = run.judgments
    if table is None:
        return None
    judged, passed = table.height, int(table["passed"].fill_null(False).sum())
    errors = table["error"].fill_null("")
    counts = table.filter(pl.col("severity").is_not_null())["severity"].value_counts().sort("severity")
    want = setting(run.spec, "data.limit", 0) or None
    return {"server": setting(run.spec, "data.judge.server"), "threshold": setting(run.spec, "data.judge.threshold", 5),
            "prompt": setting(run.manifest, "judge.prompt") or setting(run.spec, "data.judge.prompt")
            or "judge_meaningful_logic.v1 (shipped)", "want": want, "judged": judged, "passed": passed,
            "pass_rate": clopper_pearson(passed, judged, confidence).to_dict() if judged else None,
            "severities": {str(s): int(n) for s, n in counts.iter_rows()},
            "unparsable": int((errors == "judge_unparsable").sum()),
            "failed": int(errors.str.starts_with("request_failed").sum()),
            "exhausted": want is not None and passed < want}


def funnel(run: RunData, frame: pl.DataFrame) -> list[dict[str, Any]]:
    """The filter funnel: ``[{"stage", "count", "note"}]`` from functions found to conclusive executions.

    ``functions`` (found before sampling) comes from ``manifest.json``, else from the ``functions``
    table the extraction stage writes (null when neither has it); every other count from the tables.
    """
    gens = run.generations.filter(pl.col("sample_id").is_in(frame["sample_id"].implode()))
    rows: list[dict[str, Any]] = [
        {"stage": "functions", "count": _functions(run), "note": "functions that passed the data filters"},
    ]
    if run.judgments is not None:
        passed = int(run.judgments["passed"].fill_null(False).sum())
        rows += [{"stage": "judged", "count": run.judgments.height,
                  "note": "functions the [data.judge] judge rated, drawn in a seeded order until data.limit passed"},
                 {"stage": "judge_passed", "count": passed, "note": "functions the judge rated at least the threshold"}]
    rows.append({"stage": "samples", "count": frame.height, "note": "functions audited (samples table)"})
    for role in ROLES:
        mine = gens.filter(pl.col("role") == role)
        rows.append({"stage": f"generated_{role}", "count": mine.filter(pl.col("text").is_not_null())
                    ["sample_id"].n_unique(), "note": f"samples with a {role} completion"})
        rows.append({"stage": f"parsed_{role}", "count": mine.filter(pl.col("function").is_not_null())
                    ["sample_id"].n_unique(), "note": f"samples whose {role} completion holds a function"})
    rows += [
        {"stage": "scored", "count": int(frame["scored"].sum()), "note": "samples with SIM_text of both completions"},
        {"stage": "executed", "count": int(frame["x_conclusive"].is_not_null().sum()),
         "note": "samples whose x was executed"},
        {"stage": "x_conclusive", "count": int(frame["x_conclusive"].fill_null(False).sum()),
         "note": "executions of x that met the validity criteria"},
        {"stage": "conclusive", "count": int(frame["conclusive"].sum()),
         "note": "scored samples with a conclusive execution and SIM_func of both completions"},
    ]
    return rows


def _criteria(run: RunData, inconclusive: pl.DataFrame) -> list[dict[str, Any]]:
    """Inconclusive samples per validity criterion x failed (one sample may fail several), from the facts."""
    n_in = setting(run.spec, "execute.min_valid", 8)
    cover = setting(run.spec, "execute.coverage", 0.8)
    n_out = setting(run.spec, "execute.min_distinct", 2)
    executed = inconclusive.filter(pl.col("x_conclusive").is_not_null() & ~pl.col("x_conclusive"))
    failed = [(f"valid input states < N_in = {n_in}", executed.filter(pl.col("valid_inputs") < n_in).height),
              (f"line coverage < C = {100 * cover:.10g}%", executed.filter(pl.col("coverage") < cover).height),
              (f"distinct output states < N_out = {n_out}", executed.filter(pl.col("distinct_outputs") < n_out).height)]
    met_all = executed.filter((pl.col("valid_inputs") >= n_in) & (pl.col("coverage") >= cover)
                              & (pl.col("distinct_outputs") >= n_out)).height
    failed.append(("not executed, or no SIM_func for a completion", inconclusive.height - executed.height + met_all))
    return [{"reason": reason, "count": count} for reason, count in failed if count]


def reason_counts(run: RunData, frame: pl.DataFrame) -> dict[str, Any]:
    """Why samples are unscored or inconclusive, generation errors per role, metric failures per metric.

    Returns ``unscored``, ``inconclusive`` (``[{"reason", "count"}]`` over samples, the reasons as
    recorded), ``inconclusive_criteria`` (inconclusive samples per validity criterion x failed, from
    ``valid_inputs``, ``coverage`` and ``distinct_outputs`` against the spec's N_in, C and N_out),
    ``generation_errors`` (role -> tally of ``generations.error``) and ``similarity_failures``
    (metric -> tally of ``similarities.reason`` over rows whose value is null, e.g. unparsable judge
    replies).
    """
    unscored = frame.filter(~pl.col("scored"))["reason"].to_list()
    inconclusive_rows = frame.filter(pl.col("scored") & ~pl.col("conclusive"))
    inconclusive = inconclusive_rows["reason"].to_list()
    errors = {}
    for role in sorted(set(run.generations["role"].drop_nulls().to_list()), key=lambda r: (r not in ROLES, r)):
        failed = run.generations.filter((pl.col("role") == role) & pl.col("error").is_not_null())
        if failed.height:
            errors[role] = _tally(failed["error"].to_list(), missing="no message")
    failures = {}
    nulls = run.similarities.filter(pl.col("value").is_null() | pl.col("value").is_nan())
    for metric in sorted(set(nulls["metric"].drop_nulls().to_list())):
        failures[metric] = _tally(nulls.filter(pl.col("metric") == metric)["reason"].to_list(),
                                  missing="no reason recorded")
    return {"unscored": _tally(unscored, missing="unscored"),
            "inconclusive": _tally(inconclusive, missing="inconclusive"),
            "inconclusive_criteria": _criteria(run, inconclusive_rows),
            "generation_errors": errors, "similarity_failures": failures}


def nothing_measured(summary: dict[str, Any]) -> str | None:
    """Why a functional run scored no sample, in one sentence naming the dominant cause; None if it scored one.

    The cause is the most frequent reason samples are unscored and, when generations failed, the most
    frequent generation error (the role with the most failed generations): a chat-only host, an outage
    or a quota shows there.
    """
    counts = summary.get("counts") or {}
    if counts.get("scored"):
        return None
    n = int(counts.get("samples") or 0)
    if n == 0:
        return "no sample was audited: the data gave no function (see the funnel in the Methods section)"
    reasons = summary.get("reasons") or {}
    text = f"none of the {n} samples was scored"
    unscored = reasons.get("unscored") or []
    if unscored:
        text += f"; most often: {unscored[0]['reason']} ({unscored[0]['count']} of {n})"
    failed = [(role, tally[0]) for role, tally in (reasons.get("generation_errors") or {}).items() if tally]
    if failed:
        role, top = max(failed, key=lambda item: item[1]["count"])
        text += f"; the {role} model's generations failed, most often with: {top['reason']} ({top['count']})"
    return text

