"""Counterfactual textual and functional memorization rates (docs/architecture.md "The three methods" 1;
functional-memorization paper §3 and §5.1–5.2).

Each training function x is completed by a target model (trained on x) and a reference model (not
trained on x). With SIM_text (BLEU) and SIM_func (execution-verified, the share of matching output
states) of each completion against x:

* x is **textually memorized** when SIM_text(x, x_T) >= τ_text and SIM_text(x, x_R) < τ_text;
* x is **functionally memorized** when SIM_func(x, x_T) >= τ_func, SIM_text(x, x_T) < τ_text and
  SIM_func(x, x_R) < τ_func (§3, conditions 1–3).

"Similar" always means >= τ and "not similar" < τ. SIM_func is null for an inconclusive execution;
functional counts run over conclusive samples only (both SIM_func values present) and the number of
inconclusive samples is reported, never counted as a non-match (docs/architecture.md, "Execution semantics").
Rates carry Clopper–Pearson intervals.

The overlaps of §5.1 ("of functions flagged by execution-based testing, 92.2% are not detected by
textual similarity; conversely, 66.9% of functions flagged by textual similarity are not functionally
equivalent") are reported as ``functional_missed_by_text`` and ``text_not_functional``.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import polars as pl
from numpy.typing import NDArray

from calib.stats._checks import check_confidence, check_probability
from calib.stats.intervals import PairedDifference, ProportionInterval, clopper_pearson, paired_difference
from calib.stats.result import Result

__all__ = [
    "LONG_COLUMNS",
    "WIDE_SCHEMA",
    "CounterfactualRates",
    "TargetReferenceTable",
    "counterfactual_rates",
    "wide_from_long",
]

#: The wide per-sample table :func:`counterfactual_rates` reads (func_* null = inconclusive).
WIDE_SCHEMA: dict[str, type[pl.DataType]] = {
    "sample_id": pl.String,
    "text_target": pl.Float64,
    "text_reference": pl.Float64,
    "func_target": pl.Float64,
    "func_reference": pl.Float64,
}
#: The columns of docs/architecture.md's long ``similarities`` table that :func:`wide_from_long` reads.
LONG_COLUMNS: tuple[str, ...] = ("sample_id", "role", "metric", "value")

_ROLES = ("target", "reference")
_TEXT = ("text_target", "text_reference")
_FUNC = ("func_target", "func_reference")


@dataclass(frozen=True)
class TargetReferenceTable(Result):
    """The paired 2×2 table of target and reference flags on the same samples.

    A sample's target (reference) flag is SIM(x, x_T) >= ``tau`` (SIM(x, x_R) >= ``tau``).

    Attributes
    ----------
    similarity : str
        ``"text"`` (SIM_text, all samples) or ``"func"`` (SIM_func, conclusive samples).
    tau : float
        The similarity threshold.
    n11, n10, n01, n00 : int
        Samples flagged for both models, the target only, the reference only, neither. ``n10`` counts
        the counterfactual flags.
    """

    similarity: str
    tau: float
    n11: int
    n10: int
    n01: int
    n00: int

    @property
    def n(self) -> int:
        """The samples in the table."""
        return self.n11 + self.n10 + self.n01 + self.n00

    def to_frame(self) -> pl.DataFrame:
        """The table in long form: columns ``target_similar`` (bool), ``reference_similar`` (bool),
        ``count`` (int), one row per cell in the order 11, 10, 01, 00."""
        return pl.DataFrame(
            {
                "target_similar": [True, True, False, False],
                "reference_similar": [True, False, True, False],
                "count": [self.n11, self.n10, self.n01, self.n00],
            },
            schema={"target_similar": pl.Boolean, "reference_similar": pl.Boolean, "count": pl.Int64},
        )

    def target_rate(self, confidence: float = 0.95) -> ProportionInterval:
        """Share of samples the target completes similarly, (n11 + n10)/n, Clopper–Pearson.

        Raises ``ValueError`` when the table is empty.
        """
        return clopper_pearson(self.n11 + self.n10, self.n, confidence)

    def reference_rate(self, confidence: float = 0.95) -> ProportionInterval:
        """Share of samples the reference completes similarly, (n11 + n01)/n, Clopper–Pearson.

        Raises ``ValueError`` when the table is empty.
        """
        return clopper_pearson(self.n11 + self.n01, self.n, confidence)

    def difference(self, confidence: float = 0.95) -> PairedDifference:
        """Target rate minus reference rate on the same samples, (n10 − n01)/n, with Newcombe's
        paired interval (see :func:`calib.stats.intervals.paired_difference`)."""
        return paired_difference(self.n11, self.n10, self.n01, self.n00, confidence)


@dataclass(frozen=True)
class CounterfactualRates(Result):
    """Counterfactual memorization rates of one target/reference pair.

    Attributes
    ----------
    tau_text, tau_func : float
        The similarity thresholds (>= is similar).
    confidence : float
        The confidence level of every interval.
    n_samples : int
        Samples in the table.
    n_conclusive, n_inconclusive : int
        Samples with both SIM_func values present, and the rest.
    textual : ProportionInterval
        Textually memorized samples over all samples.
    functional : ProportionInterval or None
        Functionally memorized samples over conclusive samples; ``None`` when none is conclusive.
    textual_table : TargetReferenceTable
        Target/reference SIM_text flags over all samples.
    functional_table : TargetReferenceTable
        Target/reference SIM_func flags over conclusive samples.
    functional_missed_by_text : ProportionInterval or None
        Among conclusive samples with SIM_func(x, x_T) >= τ_func > SIM_func(x, x_R), the share with
        SIM_text(x, x_T) < τ_text (the paper's 92.2 %); ``None`` when there is no such sample.
    text_not_functional : ProportionInterval or None
        Among conclusive samples with SIM_text(x, x_T) >= τ_text > SIM_text(x, x_R), the share with
        SIM_func(x, x_T) < τ_func (the paper's 66.9 %); ``None`` when there is no such sample.
    method : str
        The interval method.
    """

    tau_text: float
    tau_func: float
    confidence: float
    n_samples: int
    n_conclusive: int
    n_inconclusive: int
    textual: ProportionInterval
    functional: ProportionInterval | None
    textual_table: TargetReferenceTable
    functional_table: TargetReferenceTable
    functional_missed_by_text: ProportionInterval | None
    text_not_functional: ProportionInterval | None
    method: str = "clopper-pearson"


def _require_frame(name: str, table: object, required: tuple[str, ...]) -> pl.DataFrame:
    if not isinstance(table, pl.DataFrame):
        raise ValueError(f"{name} must be a polars DataFrame, got {type(table).__name__}")
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise ValueError(
            f"{name} is missing column(s) {', '.join(missing)}; required columns: {', '.join(required)}"
        )
    return table


def _similarities(table: pl.DataFrame, ids: pl.Series, column: str, *, nullable: bool) -> NDArray[np.float64]:
    """Return a similarity column as floats (NaN for null), checking it is numeric and in [0, 1]."""
    series = table[column]
    if not (series.dtype.is_numeric() or series.dtype == pl.Null) or series.dtype == pl.Boolean:
        raise ValueError(f"table column {column} must hold numbers in [0, 1], got dtype {series.dtype}")
    values = series.cast(pl.Float64)
    null = values.is_null().to_numpy()
    arr = values.fill_null(0.0).to_numpy().astype(np.float64)
    bad = ~null & ~((arr >= 0.0) & (arr <= 1.0))
    if not nullable and null.any():
        i = int(np.argmax(null))
        raise ValueError(
            f"table column {column} is null for sample_id {ids[i]!r}; SIM_text is required for every "
            f"sample (null is allowed only in func_target and func_reference, for inconclusive runs)"
        )
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"table column {column} is {float(arr[i])!r} for sample_id {ids[i]!r}; similarities must lie in "
            f"[0, 1]" + (" (null marks an inconclusive execution)" if nullable else "")
        )
    arr[null] = np.nan
    return arr


def _tau(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
    return check_probability(name, value, allow_one=True)


def _proportion(k: int, n: int, confidence: float) -> ProportionInterval | None:
    return clopper_pearson(k, n, confidence) if n > 0 else None


def _count(mask: NDArray[np.bool_]) -> int:
    return int(np.count_nonzero(mask))


def _table(similarity: str, tau: float, t: NDArray[np.bool_], r: NDArray[np.bool_]) -> TargetReferenceTable:
    return TargetReferenceTable(
        similarity=similarity,
        tau=tau,
        n11=_count(t & r),
        n10=_count(t & ~r),
        n01=_count(~t & r),
        n00=_count(~t & ~r),
    )


def counterfactual_rates(
    table: pl.DataFrame,
    *,
    tau_text: float = 0.75,
    tau_func: float = 0.8,
    confidence: float = 0.95,
) -> CounterfactualRates:
    """Counterfactual textual and functional memorization rates with Clopper–Pearson intervals.

    Parameters
    ----------
    table : polars.DataFrame
        One row per sample, in the wide form :data:`WIDE_SCHEMA` (see :func:`wide_from_long`):
        ``sample_id`` (unique), ``text_target`` and ``text_reference`` (SIM_text of the target and
        reference completions against x, e.g. BLEU, in [0, 1], never null), ``func_target`` and
        ``func_reference`` (SIM_func in [0, 1]; null marks an inconclusive execution). Other columns
        are ignored.
    tau_text : float, default 0.75
        τ_text in (0, 1]; SIM_text >= τ_text is textually similar (BLEU 0.75 after Ippolito et al.).
    tau_func : float, default 0.8
        τ_func in (0, 1]; SIM_func >= τ_func is functionally similar.
    confidence : float, default 0.95
        Confidence level of every interval, in (0, 1).

    Returns
    -------
    CounterfactualRates

    Raises
    ------
    ValueError
        When ``table`` is not a DataFrame, lacks a required column (the message lists them), is
        empty, repeats or lacks a ``sample_id``, or holds a similarity that is NaN, outside [0, 1] or
        (for SIM_text) null — naming the column and the first offending ``sample_id`` — and when a
        threshold or ``confidence`` is out of range.

    References
    ----------
    "Detecting Functional Memorization in Code Language Models" (the functional-memorization paper),
    §3 (definition), §5.1 (92.2 % / 66.9 % overlaps), Figure 2 (rates); C. J. Clopper and
    E. S. Pearson (1934), *Biometrika* 26(4):404–413.
    """
    frame = _require_frame("table", table, tuple(WIDE_SCHEMA))
    t_text = _tau("tau_text", tau_text)
    t_func = _tau("tau_func", tau_func)
    conf = check_confidence(confidence)
    if frame.height == 0:
        raise ValueError("table has no rows; at least one sample is needed")
    ids = frame["sample_id"]
    if ids.null_count():
        i = int(np.argmax(ids.is_null().to_numpy()))
        raise ValueError(f"table column sample_id is null in row {i}; every sample needs an id")
    if ids.n_unique() != frame.height:
        dup = ids.filter(ids.is_duplicated())[0]
        raise ValueError(
            f"sample_id {dup!r} appears {int((ids == dup).sum())} times in table; each sample must "
            f"appear once"
        )
    text_t, text_r = (_similarities(frame, ids, c, nullable=False) for c in _TEXT)
    func_t, func_r = (_similarities(frame, ids, c, nullable=True) for c in _FUNC)

    conclusive = ~np.isnan(func_t) & ~np.isnan(func_r)
    # NaN compares False, so inconclusive samples carry no functional flag; every functional count
    # below is also restricted to conclusive samples explicitly.
    text_flag_t, text_flag_r = text_t >= t_text, text_r >= t_text
    func_flag_t, func_flag_r = func_t >= t_func, func_r >= t_func

    textual_table = _table("text", t_text, text_flag_t, text_flag_r)
    functional_table = _table("func", t_func, func_flag_t[conclusive], func_flag_r[conclusive])

    textual_cf = text_flag_t & ~text_flag_r
    functional_cf = conclusive & func_flag_t & ~func_flag_r
    functional_memorized = functional_cf & ~text_flag_t
    textual_cf_conclusive = textual_cf & conclusive

    n_conclusive = _count(conclusive)
    return CounterfactualRates(
        tau_text=t_text,
        tau_func=t_func,
        confidence=conf,
        n_samples=frame.height,
        n_conclusive=n_conclusive,
        n_inconclusive=frame.height - n_conclusive,
        textual=clopper_pearson(_count(textual_cf), frame.height, conf),
        functional=_proportion(_count(functional_memorized), n_conclusive, conf),
        textual_table=textual_table,
        functional_table=functional_table,
        functional_missed_by_text=_proportion(_count(functional_memorized), _count(functional_cf), conf),
        text_not_functional=_proportion(
            _count(textual_cf_conclusive & ~func_flag_t), _count(textual_cf_conclusive), conf
        ),
    )


def wide_from_long(
    similarities: pl.DataFrame, *, text_metric: str = "bleu", func_metric: str = "sim_func"
) -> pl.DataFrame:
    """Pivot docs/architecture.md's long ``similarities`` table into the wide table of :func:`counterfactual_rates`.

    Parameters
    ----------
    similarities : polars.DataFrame
        Columns ``sample_id``, ``role`` (``target`` | ``reference`` | …), ``metric``, ``value``. Only
        rows of the roles ``target`` and ``reference`` and of the two metrics below are read.
    text_metric : str, default "bleu"
        The metric that becomes ``text_target`` / ``text_reference``.
    func_metric : str, default "sim_func"
        The metric that becomes ``func_target`` / ``func_reference``.

    Returns
    -------
    polars.DataFrame
        :data:`WIDE_SCHEMA`, one row per ``sample_id`` having at least one selected row, in order of
        first appearance. A missing (sample, role, metric) value is null: for SIM_func that marks the
        sample inconclusive; for SIM_text :func:`counterfactual_rates` rejects it by sample_id.

    Raises
    ------
    ValueError
        When a column is missing, the two metrics are the same, or a (sample_id, role, metric)
        appears more than once.
    """
    frame = _require_frame("similarities", similarities, LONG_COLUMNS)
    for name, value in (("text_metric", text_metric), ("func_metric", func_metric)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{name} must be a non-empty metric name, got {value!r}")
    if text_metric == func_metric:
        raise ValueError(f"text_metric and func_metric must differ, both are {text_metric!r}")
    selected = frame.filter(
        pl.col("metric").is_in([text_metric, func_metric]) & pl.col("role").is_in(list(_ROLES))
    ).select(
        pl.col("sample_id").cast(pl.String),
        pl.col("role").cast(pl.String),
        pl.col("metric").cast(pl.String),
        pl.col("value").cast(pl.Float64),
    )
    keys = selected.select("sample_id", "role", "metric")
    repeated = keys.filter(keys.is_duplicated())
    if repeated.height:
        sid, role, metric = repeated.row(0)
        raise ValueError(
            f"similarities has more than one row for sample_id {sid!r}, role {role!r}, metric "
            f"{metric!r}; each (sample_id, role, metric) must appear once"
        )
    wide = selected.select("sample_id").unique(maintain_order=True)
    for prefix, metric in (("text", text_metric), ("func", func_metric)):
        for role in _ROLES:
            part = selected.filter((pl.col("metric") == metric) & (pl.col("role") == role)).select(
                "sample_id", pl.col("value").alias(f"{prefix}_{role}")
            )
            wide = wide.join(part, on="sample_id", how="left", maintain_order="left")
    return wide.select(pl.col(name).cast(dtype) for name, dtype in WIDE_SCHEMA.items())
