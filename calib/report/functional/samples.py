"""The per-sample table the report counts: SIM_text and SIM_func of both completions, status and verdict.

Built from the primary tables (``similarities`` for SIM_text, ``executions`` for SIM_func) through
:func:`calib.stats.wide_from_long`, so the report re-derives every verdict from the measurements and
can check the ``claims`` table against them. A sample is

- **unscored** when a completion has no SIM_text (no generation, no parsable function, or the text
  metric could not score it); it is left out of every rate;
- **conclusive** when it is scored, the execution of x met the validity criteria and both completions
  have a SIM_func; otherwise **inconclusive** (left out of functional counts, never a non-match).
"""

from __future__ import annotations

import polars as pl

from calib._exceptions import InputError
from calib.executors.base import NO_GENERATION
from calib.report.run import RunData
from calib.stats import wide_from_long

__all__ = ["FUNC_METRIC", "ROLES", "VERDICTS", "sample_table", "x_executions"]

ROLES = ("target", "reference")
#: The name SIM_func takes in the long table handed to :func:`calib.stats.wide_from_long`.
FUNC_METRIC = "sim_func"
#: Verdicts in the order the report lists them (examples too).
VERDICTS = ("functional", "textual", "none", "inconclusive", "unscored")
# The execution row that speaks for x: x's own row when the runner recorded one, else a completion
# that was compared (it has per-input matches; a role without a completion gets a row without them,
# whose reason is about the missing completion), target before reference. The validity facts of x
# are the same on every row of one sample.
_ROLE_PRIORITY = {"truth": 0, "target": 1, "reference": 2}


def x_executions(run: RunData) -> pl.DataFrame:
    """One row per executed sample: ``sample_id, executor, x_conclusive, x_reason, valid_inputs,
    coverage, distinct_outputs`` from the row of role truth, else of a compared completion (target,
    then reference), else of a completion that was not compared (``[execute] candidates_when_inconclusive``
    off), else any (a role without a completion: its reason is that, not x's)."""
    ex = run.executions.with_columns(
        pl.col("role").replace_strict(_ROLE_PRIORITY, default=3, return_dtype=pl.Int64).alias("_priority"),
        (pl.col("matches").list.len().fill_null(0) == 0).alias("_not_compared"),
        (pl.col("reason") == NO_GENERATION).fill_null(False).alias("_no_completion"))
    ex = ex.with_columns(pl.when(pl.col("role") == "truth").then(False).otherwise(pl.col("_not_compared"))
                         .alias("_not_compared"))
    return (ex.sort("sample_id", "_not_compared", "_no_completion", "_priority", "role")
            .unique(subset="sample_id", keep="first", maintain_order=True)
            .select("sample_id", "executor", pl.col("conclusive").alias("x_conclusive"),
                    pl.col("reason").alias("x_reason"), "valid_inputs", "coverage", "distinct_outputs"))


def _long(run: RunData, text_metric: str) -> pl.DataFrame:
    text = run.similarities.filter((pl.col("metric") == text_metric) & pl.col("role").is_in(ROLES)).select(
        pl.col("sample_id").cast(pl.String), pl.col("role").cast(pl.String), pl.col("metric").cast(pl.String),
        pl.col("value").cast(pl.Float64))
    func = run.executions.filter(pl.col("role").is_in(ROLES)).select(
        pl.col("sample_id").cast(pl.String), pl.col("role").cast(pl.String), pl.lit(FUNC_METRIC).alias("metric"),
        pl.when(pl.col("conclusive")).then(pl.col("sim_func")).cast(pl.Float64).alias("value"))
    return pl.concat([text, func])


def _wide(run: RunData, text_metric: str) -> pl.DataFrame:
    try:
        return wide_from_long(_long(run, text_metric), text_metric=text_metric, func_metric=FUNC_METRIC)
    except ValueError as exc:
        raise InputError(f"{exc} (similarities or executions table); re-run `calib study SPEC`",
                         path=str(run.root / "tables")) from None


def _parsed(run: RunData) -> pl.DataFrame:
    gens = run.generations.filter(pl.col("role").is_in(ROLES) & pl.col("function").is_not_null())
    return pl.DataFrame({"sample_id": run.samples["sample_id"]}).with_columns(
        *[pl.col("sample_id").is_in(gens.filter(pl.col("role") == role)["sample_id"].implode()).alias(f"parsed_{role}")
          for role in ROLES])


def _unscored_reason(text_metric: str) -> pl.Expr:
    return (pl.when(~pl.col("parsed_target")).then(pl.lit("no target function (generation failed or unparsable)"))
            .when(~pl.col("parsed_reference")).then(pl.lit("no reference function (generation failed or unparsable)"))
            .when(pl.col("text_target").is_null()).then(pl.lit(f"no {text_metric} score of the target completion"))
            .otherwise(pl.lit(f"no {text_metric} score of the reference completion")))


def _inconclusive_reason() -> pl.Expr:
    given = pl.col("x_reason").fill_null("").str.strip_chars()
    return (pl.when(pl.col("x_conclusive").is_null()).then(pl.lit("not executed"))
            .when(~pl.col("x_conclusive") & (given != "")).then(given)
            .when(~pl.col("x_conclusive")).then(pl.lit("inconclusive (no reason recorded)"))
            .otherwise(pl.lit("no SIM_func for a completion")))


def _verdict(tau_text: float, tau_func: float) -> pl.Expr:
    # The definitions of calib.stats.counterfactual (>= is similar); here only to label each sample.
    text_t, text_r = pl.col("text_target") >= tau_text, pl.col("text_reference") >= tau_text
    func_t, func_r = pl.col("func_target") >= tau_func, pl.col("func_reference") >= tau_func
    return (pl.when(~pl.col("scored")).then(pl.lit("unscored"))
            .when(pl.col("conclusive") & func_t & ~func_r & ~text_t).then(pl.lit("functional"))
            .when(text_t & ~text_r).then(pl.lit("textual"))
            .when(~pl.col("conclusive")).then(pl.lit("inconclusive"))
            .otherwise(pl.lit("none")))


def sample_table(run: RunData, *, text_metric: str, tau_text: float, tau_func: float) -> pl.DataFrame:
    """One row per sample of the ``samples`` table.

    Columns: ``sample_id, membership, kind, text_target, text_reference, func_target, func_reference``
    (the wide table of :func:`calib.stats.counterfactual_rates`), ``parsed_target, parsed_reference``,
    ``executor, x_conclusive, x_reason, valid_inputs, coverage, distinct_outputs`` (null when not
    executed), ``scored``, ``conclusive``, ``reason`` (why unscored or inconclusive, else null) and
    ``verdict`` (one of :data:`VERDICTS`).

    Raises
    ------
    InputError
        When a sample id repeats in ``samples`` or a (sample, role, metric) repeats in the tables.
    """
    ids = run.samples["sample_id"]
    if ids.null_count() or ids.n_unique() != len(ids):
        dup = ids.filter(ids.is_duplicated() | ids.is_null())[0]
        raise InputError(f"sample_id {dup!r} is null or repeated in the samples table; re-run `calib study SPEC`",
                         path=str(run.root / "tables" / "samples.parquet"))
    frame = (run.samples.select(pl.col("sample_id").cast(pl.String), pl.col("membership").cast(pl.String),
                                pl.col("kind").cast(pl.String))
             .join(_wide(run, text_metric), on="sample_id", how="left", maintain_order="left")
             .join(_parsed(run), on="sample_id", how="left", maintain_order="left")
             .join(x_executions(run), on="sample_id", how="left", maintain_order="left"))
    scored = pl.col("text_target").is_not_null() & pl.col("text_reference").is_not_null()
    conclusive = (scored & pl.col("x_conclusive").fill_null(False) & pl.col("func_target").is_not_null()
                  & pl.col("func_reference").is_not_null())
    frame = frame.with_columns(scored.alias("scored"), conclusive.alias("conclusive"))
    # counterfactual_rates counts a sample conclusive when both SIM_func are present: keep them only then.
    frame = frame.with_columns(
        *[pl.when(pl.col("conclusive")).then(pl.col(c)).alias(c) for c in ("func_target", "func_reference")],
        pl.when(~pl.col("scored")).then(_unscored_reason(text_metric))
        .when(~pl.col("conclusive")).then(_inconclusive_reason()).alias("reason"))
    return frame.with_columns(_verdict(tau_text, tau_func).alias("verdict"))
