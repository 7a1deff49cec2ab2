"""Executor agreement between two runs (functional-memorization paper, Appendix C, Figure 25).

Two functional runs that executed the same samples — the same ``sample_id`` and function x, and for a role
the same candidate (the completion compared with x) — can be compared verdict by verdict, which is how the
paper checks that another agent or harness reaches the same execution-based results. Each (sample, role)
that both runs executed gets a verdict in each run: ``inconclusive`` (x's execution did not meet the validity
criteria), ``equivalent`` (conclusive and SIM_func(x, candidate) ≥ τ_func) or ``not equivalent``. The
verdicts are cross-tabulated per role, with Cohen's κ and its large-sample interval
(:func:`calib.stats.cohen_kappa`); x's conclusiveness is cross-tabulated per sample the same way, and the
equivalence of the candidates on the samples both runs judged conclusive. A (sample, role) that a run did
not execute (no generation, a language the executor does not run) is left out, and one whose candidate
differs between the runs (other generations) is left out and counted.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from calib.report.compare.runs import ComparedRun
from calib.report.document import Block, Heading, Paragraph, Table
from calib.report.format import DASH, fixed, number, setting_pct
from calib.report.functional.samples import ROLES
from calib.report.run import setting
from calib.stats.compare import cohen_kappa

__all__ = ["VERDICTS", "agreement_blocks", "executor_agreement", "executor_of", "verdicts"]

#: The verdicts of one (sample, role), in the order of the cross-tables' rows and columns.
VERDICTS = ("inconclusive", "equivalent", "not equivalent")


def executor_of(run: ComparedRun) -> str:
    """The executors that wrote the run's executions rows (sorted, comma-separated), the llm executor with the
    spec's ``execute.level``; the spec's ``execute.executor`` when the table has no row."""
    execs = run.data.executions  # type: ignore[union-attr]
    names = sorted(execs.filter(pl.col("role").is_in(ROLES))["executor"].drop_nulls().cast(pl.String).unique())
    names = names or [str(setting(run.spec, "execute.executor", "sandbox"))]
    level = setting(run.spec, "execute.level")
    return ", ".join(f"llm (level {level})" if name == "llm" and level is not None else name for name in names)


def verdicts(run: ComparedRun, tau_func: float) -> pl.DataFrame:
    """``sample_id, role, function, candidate, conclusive, verdict`` of every executed (sample, role).

    ``candidate`` is the parsed completion, else the raw text; ``verdict`` one of :data:`VERDICTS`.
    """
    data = run.data
    x = data.samples.select(pl.col("sample_id").cast(pl.String), pl.col("function").cast(pl.String))  # type: ignore[union-attr]
    gens = data.generations.select(  # type: ignore[union-attr]
        pl.col("sample_id").cast(pl.String), pl.col("role").cast(pl.String),
        pl.coalesce(pl.col("function"), pl.col("text")).cast(pl.String).alias("candidate"))
    execs = data.executions  # type: ignore[union-attr]
    # the cost column runs is null on rows of samples that were not executed (an unsupported language, a missing
    # compiler, an executor error); runs written before it have no such column, and only the candidate is checked
    ran = pl.col("runs").is_not_null() if "runs" in execs.columns else pl.lit(True)
    rows = execs.filter(pl.col("role").is_in(ROLES) & ran).select(
        pl.col("sample_id").cast(pl.String), pl.col("role").cast(pl.String), pl.col("conclusive").cast(pl.Boolean),
        pl.col("sim_func").cast(pl.Float64))
    verdict = (pl.when(~pl.col("conclusive")).then(pl.lit(VERDICTS[0]))
               .when(pl.col("sim_func") >= tau_func).then(pl.lit(VERDICTS[1]))
               .otherwise(pl.lit(VERDICTS[2])))
    # a role without a candidate (its generation failed) was not compared; a conclusive row has its SIM_func
    compared = pl.col("candidate").is_not_null() & pl.col("conclusive").is_not_null() & (
        ~pl.col("conclusive") | pl.col("sim_func").is_not_null())
    return (rows.join(x, on="sample_id", how="inner").join(gens, on=["sample_id", "role"], how="left")
            .filter(compared)
            .with_columns(verdict.alias("verdict"))
            .select("sample_id", "role", "function", "candidate", "conclusive", "verdict"))


def _table(a: pl.Series, b: pl.Series, categories: tuple[str, ...]) -> np.ndarray:
    index = {c: i for i, c in enumerate(categories)}
    table = np.zeros((len(categories), len(categories)), dtype=np.int64)
    for va, vb in zip(a.to_list(), b.to_list(), strict=True):
        table[index[va], index[vb]] += 1
    return table


def _cross(a: pl.Series, b: pl.Series, categories: tuple[str, ...], confidence: float) -> dict[str, Any]:
    table = _table(a, b, categories)
    kappa = cohen_kappa(table, confidence).to_dict() if table.sum() else None
    return {"categories": list(categories), "n": int(table.sum()), "table": table.tolist(), "kappa": kappa}


def _pair(a: pl.DataFrame, b: pl.DataFrame, confidence: float) -> dict[str, Any]:
    joined = a.join(b, on=["sample_id", "role"], how="inner", suffix="_b")
    same_x = joined.filter(pl.col("function").eq_missing(pl.col("function_b")))
    same = same_x.filter(pl.col("candidate").eq_missing(pl.col("candidate_b")))
    roles = {role: _cross(part["verdict"], part["verdict_b"], VERDICTS, confidence)
             for role in ROLES for part in [same.filter(pl.col("role") == role)]}
    # x's conclusiveness is the sample's (the same on each of its rows): once per sample
    per_sample = same_x.unique("sample_id", keep="first", maintain_order=True)
    to_label = {True: "conclusive", False: "inconclusive"}
    conclusive = _cross(per_sample["conclusive"].replace_strict(to_label, return_dtype=pl.String),
                        per_sample["conclusive_b"].replace_strict(to_label, return_dtype=pl.String),
                        ("conclusive", "inconclusive"), confidence)
    both = same.filter(pl.col("conclusive") & pl.col("conclusive_b"))
    equivalent = _cross(both["verdict"], both["verdict_b"], VERDICTS[1:], confidence)
    return {"shared_samples": per_sample.height, "different_x": joined.height - same_x.height,
            "different_candidate": same_x.height - same.height, "conclusive": conclusive,
            "equivalent_if_conclusive": equivalent, "roles": roles}


def executor_agreement(runs: list[ComparedRun], pairs: list[tuple[int, int]], analyze: dict[str, Any]
                       ) -> list[dict[str, Any]]:
    """comparison.json ``agreement``: one record per pair of runs (of ``pairs``) that executed shared samples."""
    confidence, tau = float(analyze["confidence"]), float(analyze["tau_func"])
    table = [verdicts(run, tau) for run in runs]
    out = []
    for i, j in pairs:
        found = _pair(table[i], table[j], confidence)
        if found["shared_samples"] == 0:
            continue
        out.append({"run_a": runs[i].label, "run_b": runs[j].label, "executor_a": executor_of(runs[i]),
                    "executor_b": executor_of(runs[j]), **found})
    return out


# --- the report's blocks ----------------------------------------------------------------------------------------
def _kappa_cell(cross: dict[str, Any]) -> str:
    k = cross["kappa"]
    if k is None:
        return f"{DASH} (no item)"
    if k["kappa"] is None:
        return f"{DASH} (one category only: κ undefined)"
    return f"{fixed(k['kappa'], 3)} [{fixed(k['low'], 3)}, {fixed(k['high'], 3)}]"


def _cross_table(record: dict[str, Any], name: str, cross: dict[str, Any], caption: str) -> Table:
    rows = tuple((f"a: {cat}", *(number(v) for v in row)) for cat, row in zip(cross["categories"], cross["table"]))
    anchor = f"agreement-{name}-{record['run_a']}-{record['run_b']}".replace("/", "-").replace(" ", "-")
    return Table(("", *(f"b: {cat}" for cat in cross["categories"])), rows, anchor,
                 f"{caption}: n = {cross['n']}, κ = {_kappa_cell(cross)}.")


def agreement_blocks(result: dict[str, Any]) -> list[Block]:
    """The "Executor agreement" section from comparison.json ``agreement``; none without a shared sample."""
    records = result.get("agreement") or []
    if not records:
        return []
    conf = setting_pct(result["confidence"])
    blocks: list[Block] = [Heading(2, "Executor agreement", "agreement"), Paragraph(
        "As in Appendix C (Figure 25) of the functional-memorization paper: the execution verdicts of two runs on "
        "the samples both executed (same sample id, same x, and for a role the same candidate), cross-tabulated "
        "with rows for run a and columns for run b. A verdict is *inconclusive* (x's execution did not meet the "
        "validity criteria), *equivalent* (SIM_func ≥ τ_func = "
        f"{number(result['operating_point']['analyze.tau_func'])})"
        f" or *not equivalent*. κ is Cohen's kappa with its {conf} large-sample interval (Fleiss, Cohen & Everitt "
        "1969): 1 is perfect agreement, 0 the agreement expected by chance from the margins.")]
    for r in records:
        summary = (f"`{r['run_a']}` (executor `{r['executor_a']}`) vs `{r['run_b']}` (executor `{r['executor_b']}`): "
                   f"{r['shared_samples']} shared samples")
        if r["different_candidate"]:
            summary += f"; {r['different_candidate']} (sample, role) pairs left out: their candidates differ"
        blocks.append(Paragraph(summary + "."))
        blocks.append(_cross_table(r, "conclusive", r["conclusive"], "Conclusiveness of x, per sample"))
        for role, cross in r["roles"].items():
            blocks.append(_cross_table(r, role, cross, f"Verdict of the {role} completion"))
        blocks.append(_cross_table(r, "equivalent", r["equivalent_if_conclusive"],
                                   "Equivalence where both runs are conclusive (both roles)"))
    return blocks
