"""Comparing functional runs: each run's headline rates, and the difference of every pair of runs.

A rate is one of :data:`RATES` (the near-verbatim rate of the target, the counterfactual textual rate,
the functional-memorization rate; the functional-memorization paper §3, §5.1, Figure 2) of one
population (members, controls). Each run's rate gets its Clopper–Pearson interval, as in its own
report. Two runs that audited the same samples (the same ``sample_id`` with the same function x in the
same population) are compared on the samples both runs scored (for the functional rate: both judged
conclusively), with Newcombe's paired interval and McNemar's exact test; runs that share no sample are
compared as independent samples (Newcombe's hybrid score interval, Fisher's exact test). The p-values of
every comparison are adjusted together (Holm by default). docs/compare-runs.md states each rule.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import polars as pl

from calib.report.compare.differences import adjust_comparisons, independent_body, paired_body
from calib.report.compare.runs import ComparedRun
from calib.report.functional.analysis import analyze_run
from calib.stats import clopper_pearson

__all__ = ["PAIRINGS", "POPULATIONS", "RATES", "compare_functional", "run_pairs", "sample_flags"]

#: The compared rates: key -> (label, the samples it counts over: ``scored`` or ``conclusive``).
RATES: dict[str, tuple[str, str]] = {
    "reproduced": ("near-verbatim, target", "scored"),
    "textual": ("textual, counterfactual", "scored"),
    "functional": ("functionally memorized", "conclusive"),
}

#: The populations: key -> the ``membership`` value of the samples table.
POPULATIONS: dict[str, str] = {"members": "member", "controls": "control"}

#: Which pairs of runs are compared: the first run against each other one, or every pair.
PAIRINGS = ("baseline", "all")


def sample_flags(run: ComparedRun, analyze: dict[str, Any]) -> pl.DataFrame:
    """One row per sample of ``run``: ``sample_id, membership, function, scored, conclusive`` and a flag per rate.

    The flags follow the report's per-sample table (:func:`calib.report.functional.analysis.analyze_run`):
    ``reproduced`` is SIM_text(x, x_T) >= τ_text, ``textual`` that and SIM_text(x, x_R) < τ_text, and
    ``functional`` the verdict ``functional``; a flag is false where its sample is not counted.
    """
    frame = analyze_run(run.data).samples  # type: ignore[arg-type]
    x = run.data.samples.select(pl.col("sample_id").cast(pl.String), pl.col("function").cast(pl.String))  # type: ignore[union-attr]
    tau = analyze["tau_text"]
    reproduced = pl.col("scored") & (pl.col("text_target") >= tau)
    return frame.join(x, on="sample_id", how="left").select(
        "sample_id", "membership", "function", "scored", "conclusive",
        reproduced.fill_null(False).alias("reproduced"),
        (reproduced & (pl.col("text_reference") < tau)).fill_null(False).alias("textual"),
        (pl.col("verdict") == "functional").fill_null(False).alias("functional"))


def _counted(flags: pl.DataFrame, population: str, rate: str) -> pl.DataFrame:
    """The samples of ``population`` that ``rate`` counts over."""
    return flags.filter((pl.col("membership") == POPULATIONS[population]) & pl.col(RATES[rate][1]))


def _rate(flags: pl.DataFrame, run: str, population: str, rate: str, confidence: float) -> dict[str, Any]:
    part = _counted(flags, population, rate)
    interval = clopper_pearson(int(part[rate].sum()), part.height, confidence).to_dict() if part.height else None
    return {"run": run, "population": population, "rate": rate, "label": RATES[rate][0], "n": part.height,
            "interval": interval}


def _shared(a: pl.DataFrame, b: pl.DataFrame, population: str) -> tuple[pl.DataFrame, int]:
    """The samples of ``population`` both runs audited (same id, same x), and how many ids name another x."""
    member = POPULATIONS[population]
    left = a.filter(pl.col("membership") == member)
    right = b.filter(pl.col("membership") == member)
    joined = left.join(right, on="sample_id", how="inner", suffix="_b")
    same = joined.filter(pl.col("function").eq_missing(pl.col("function_b")))
    return same, joined.height - same.height


def _paired(same: pl.DataFrame, na: int, nb: int, rate: str, confidence: float) -> dict[str, Any]:
    where = RATES[rate][1]
    both = same.filter(pl.col(where) & pl.col(f"{where}_b"))
    out: dict[str, Any] = {"design": "paired", "n_a": na, "n_b": nb, "n_paired": both.height,
                           "dropped_a": na - both.height, "dropped_b": nb - both.height}
    if both.height == 0:
        return {**out, "difference": None, "p_value": None, "test": None,
                "note": f"no shared sample is {where} in both runs"}
    return {**out, **paired_body(both[rate].to_numpy(), both[f"{rate}_b"].to_numpy(), confidence)}


def _independent(a: pl.DataFrame, b: pl.DataFrame, rate: str, confidence: float) -> dict[str, Any]:
    out: dict[str, Any] = {"design": "independent", "n_a": a.height, "n_b": b.height, "n_paired": 0,
                           "dropped_a": 0, "dropped_b": 0}
    if a.height == 0 or b.height == 0:
        return {**out, "difference": None, "p_value": None, "test": None,
                "note": f"no {RATES[rate][1]} sample in {'either run' if a.height == b.height else 'one run'}"}
    return {**out, **independent_body(int(a[rate].sum()), a.height, int(b[rate].sum()), b.height, confidence)}


def run_pairs(n: int, pairing: str) -> list[tuple[int, int]]:
    """The (a, b) indexes of the runs compared under ``pairing`` (:data:`PAIRINGS`)."""
    return [(0, i) for i in range(1, n)] if pairing == "baseline" else list(combinations(range(n), 2))


def compare_functional(runs: list[ComparedRun], analyze: dict[str, Any], *, pairing: str = "baseline",
                       adjust: str = "holm") -> dict[str, Any]:
    """The rates of every run and the comparisons of the pairs of ``pairing``, p-values adjusted by ``adjust``.

    Returns ``{"rates": [...], "comparisons": [...]}`` (docs/compare-runs.md, "comparison.json"): a
    comparison's ``difference`` is rate(b) − rate(a), run a being the earlier run on the command line.
    """
    confidence = float(analyze["confidence"])
    flags = [sample_flags(run, analyze) for run in runs]
    rates = [_rate(f, run.label, population, rate, confidence)
             for run, f in zip(runs, flags, strict=True) for population in POPULATIONS for rate in RATES]
    comparisons = []
    for i, j in run_pairs(len(runs), pairing):
        for population in POPULATIONS:
            same, conflicting = _shared(flags[i], flags[j], population)
            for rate in RATES:
                a, b = _counted(flags[i], population, rate), _counted(flags[j], population, rate)
                if a.height == 0 and b.height == 0:
                    continue  # neither run has this population (e.g. no controls)
                body = (_paired(same, a.height, b.height, rate, confidence) if same.height
                        else _independent(a, b, rate, confidence))
                comparisons.append({"run_a": runs[i].label, "run_b": runs[j].label, "population": population,
                                    "rate": rate, "label": RATES[rate][0], "shared": same.height,
                                    "conflicting_ids": conflicting, **body})
    adjust_comparisons(comparisons, adjust, confidence)
    return {"rates": rates, "comparisons": comparisons}
