"""Memorization against training-corpus duplication (functional-memorization paper §5.3, Figure 4, App. G).

The ``dedup`` stage of a functional study with ``[dedup]`` writes ``tables/duplicates.parquet``: one
row per (audited function x, training-corpus document) near-duplicate pair, ``kind`` ``textual``
(MinHash over token shingles, exact Jaccard ≥ ``dedup.jaccard``) or ``semantic`` (embedding cosine ≥
``dedup.cosine`` and not textual). From it and the per-sample table this module computes

- per-sample counts ``textual_dups`` and ``semantic_dups`` (zeros included; each document once, or as
  often as it occurs in the corpus when ``dedup.count_copies``), as :func:`calib.dedup.duplicate_counts`;
- the paper's three groups, by the *target's* completion (not the counterfactual verdict):
  **textual** (scored, SIM_text(x, x_T) ≥ τ_text), **functional** (conclusive, SIM_func(x, x_T) ≥
  τ_func, SIM_text(x, x_T) < τ_text) and **others** (the remaining conclusive samples); an
  inconclusive sample below τ_text is in no group (its functional similarity is unknown);
- the joint logistic regressions of :func:`calib.stats.logistic_regression`: textual
  1[SIM_text(x, x_T) ≥ τ_text] over scored samples and functional 1[SIM_func(x, x_T) ≥ τ_func] over
  conclusive samples, each on ``textual_dups + semantic_dups``. A predictor constant over the samples
  is left out (it cannot be told from the intercept); where no fit exists (one class, separation) the
  record says why instead.

It also writes the report's "Duplication" section from that summary (:func:`duplication_blocks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from calib._exceptions import InputError
from calib.report.document import Block, Bullets, Figure, Heading, Paragraph, Table
from calib.report.format import DASH, fixed, number, pct, setting_pct
from calib.report.functional.figures import duplication_figure
from calib.report.run import RunData, setting
from calib.stats import logistic_regression

__all__ = ["COUNT_COLUMNS", "DEDUP_KINDS", "DUPLICATION_GROUPS", "Duplication", "analyze_duplication",
           "duplicate_counts", "duplication_blocks"]

#: The kinds of near-duplicate pair, as the duplicates table writes them.
DEDUP_KINDS = ("textual", "semantic")
#: The per-sample counts, one per kind (the predictors of the regressions, in this order).
COUNT_COLUMNS = ("textual_dups", "semantic_dups")
#: The paper's three groups, in the order the report shows them, with their definitions.
DUPLICATION_GROUPS: dict[str, str] = {
    "textual": "scored, SIM_text(x, x_T) ≥ τ_text",
    "functional": "conclusive, SIM_func(x, x_T) ≥ τ_func and SIM_text(x, x_T) < τ_text",
    "others": "the other conclusive samples (SIM_text(x, x_T) < τ_text and SIM_func(x, x_T) < τ_func)",
}
_GROUP_LABELS = {"textual": "textually similar", "functional": "functionally similar, low text overlap",
                 "others": "others"}
_COUNT_LABELS = {"textual_dups": "textual", "semantic_dups": "semantic-only"}
_SETTINGS = ("source", "jaccard", "cosine", "num_perm", "shingle_tokens", "semantic", "count_copies",
             "embedding_server")


@dataclass(frozen=True)
class Duplication:
    """The duplication analysis: ``summary`` (summary.json ``duplication``) and ``samples``, one row per
    sample: ``sample_id, membership, scored, conclusive, group`` (a key of :data:`DUPLICATION_GROUPS`
    or null), ``textual_dups, semantic_dups``."""

    summary: dict[str, Any]
    samples: pl.DataFrame


def _check_pairs(pairs: pl.DataFrame, where: str) -> None:
    """An InputError for a value the counts cannot use: an unknown kind, a null id, copies below 1."""
    kinds = set(pairs["kind"].cast(pl.String).unique().to_list())
    bad = sorted(str(k) for k in kinds - set(DEDUP_KINDS))
    if bad:
        raise InputError(f"the duplicates table has kind {bad[0]!r}; a pair is 'textual' or 'semantic' "
                         "(re-run `calib study SPEC`)", path=where)
    if pairs["sample_id"].null_count():
        raise InputError("the duplicates table has a pair without a sample_id; re-run `calib study SPEC`", path=where)
    copies = pairs["copies"]
    if not copies.dtype.is_integer() or copies.null_count() or (copies.len() and int(copies.min()) < 1):
        raise InputError("the duplicates table's copies must be whole numbers ≥ 1 (how often the document "
                         "occurs in the corpus); re-run `calib study SPEC`", path=where)


def duplicate_counts(pairs: pl.DataFrame, sample_ids: pl.Series, *, count_copies: bool) -> pl.DataFrame:
    """``sample_id, textual_dups, semantic_dups`` for every id of ``sample_ids`` (zeros included).

    The counts of :func:`calib.dedup.duplicate_counts`: each pair once, or ``copies`` times with
    ``count_copies``.
    """
    weight = pl.col("copies").cast(pl.Int64) if count_copies else pl.lit(1, dtype=pl.Int64)
    per = (pairs.select(pl.col("sample_id").cast(pl.String), pl.col("kind").cast(pl.String), weight.alias("_w"))
           .group_by("sample_id")
           .agg(*[(pl.col("_w") * (pl.col("kind") == kind).cast(pl.Int64)).sum().alias(column)
                  for kind, column in zip(DEDUP_KINDS, COUNT_COLUMNS)]))
    base = pl.DataFrame({"sample_id": sample_ids.cast(pl.String)})
    return (base.join(per, on="sample_id", how="left", maintain_order="left")
            .with_columns(*[pl.col(c).fill_null(0).cast(pl.Int64) for c in COUNT_COLUMNS]))


def _group(tau_text: float, tau_func: float) -> pl.Expr:
    text_t = pl.col("text_target") >= tau_text
    func_t = pl.col("func_target") >= tau_func
    return (pl.when(~pl.col("scored")).then(None)
            .when(text_t).then(pl.lit("textual"))
            .when(~pl.col("conclusive")).then(None)
            .when(func_t).then(pl.lit("functional"))
            .otherwise(pl.lit("others")))


def _count_stats(values: np.ndarray) -> dict[str, Any]:
    if values.size == 0:
        return {"mean": None, "median": None, "max": None, "n_with_any": 0, "share_with_any": None}
    with_any = int(np.count_nonzero(values >= 1))
    return {"mean": float(values.mean()), "median": float(np.median(values)), "max": int(values.max()),
            "n_with_any": with_any, "share_with_any": with_any / values.size}


def _groups(frame: pl.DataFrame) -> dict[str, dict[str, Any]]:
    out = {}
    for key, definition in DUPLICATION_GROUPS.items():
        rows = frame.filter(pl.col("group") == key)
        out[key] = {"label": _GROUP_LABELS[key], "definition": definition, "n": rows.height,
                    **{c: _count_stats(rows[c].to_numpy()) for c in COUNT_COLUMNS}}
    return out


def _outcome_note(name: str, population: str, n: int, n_positive: int) -> str | None:
    if n == 0:
        return f"not fitted: there is no {population} sample"
    if n_positive == 0:
        return f"not fitted: no {population} sample has {name}, so the outcome has one class only"
    if n_positive == n:
        return f"not fitted: every {population} sample has {name}, so the outcome has one class only"
    return None


def _regression(rows: pl.DataFrame, flags: np.ndarray, *, outcome: str, population: str,
                confidence: float) -> dict[str, Any]:
    n, n_positive = int(flags.size), int(np.count_nonzero(flags))
    record: dict[str, Any] = {"outcome": outcome, "population": population, "n": n, "n_positive": n_positive,
                              "predictors": [], "dropped": [], "fitted": False, "note": None, "converged": None,
                              "log_likelihood": None, "pseudo_r2": None, "confidence": confidence,
                              "coefficients": []}
    record["note"] = _outcome_note(outcome, population, n, n_positive)
    if record["note"] is not None:
        return record
    columns = {c: rows[c].cast(pl.Float64).to_numpy() for c in COUNT_COLUMNS}
    record["dropped"] = [c for c, v in columns.items() if np.ptp(v) == 0.0]
    record["predictors"] = [c for c in COUNT_COLUMNS if c not in record["dropped"]]
    if not record["predictors"]:
        values = " and ".join(f"{c} is {int(columns[c][0])}" for c in COUNT_COLUMNS)
        record["note"] = f"not fitted: neither count varies ({values} for every {population} sample)"
        return record
    try:
        fit = logistic_regression(flags, {c: columns[c] for c in record["predictors"]}, confidence=confidence)
    except ValueError as exc:
        record["note"] = f"not fitted: {exc}"
        return record
    record.update(fitted=True, converged=fit.converged, log_likelihood=fit.log_likelihood,
                  pseudo_r2=fit.pseudo_r2, coefficients=[c.to_dict() for c in fit.coefficients])
    notes = [f"{c} is {int(columns[c][0])} for every {population} sample and is left out of the model"
             for c in record["dropped"]]
    if not fit.converged:
        notes.append("Newton–Raphson did not converge: the estimates are not the maximum-likelihood ones")
    record["note"] = "; ".join(notes) or None
    return record


def _settings(spec: dict[str, Any]) -> dict[str, Any]:
    out = {key: setting(spec, f"dedup.{key}") for key in _SETTINGS}
    out["count_copies"] = bool(out["count_copies"])
    return out


def analyze_duplication(run: RunData, frame: pl.DataFrame, analyze: dict[str, Any]) -> Duplication | None:
    """The duplication analysis of ``run``, None when it has no duplicates table (see the module docstring).

    ``frame`` is the per-sample table (:func:`calib.report.functional.samples.sample_table`), ``analyze`` the
    operating point (``tau_text``, ``tau_func``, ``confidence``).

    Raises
    ------
    InputError
        When the duplicates table holds an unknown kind, a pair without a sample_id, or copies below 1.
    """
    pairs = run.duplicates
    if pairs is None:
        return None
    _check_pairs(pairs, str(run.root / "tables" / "duplicates.parquet"))
    settings = _settings(run.spec)
    ids = frame["sample_id"]
    known = pairs.filter(pl.col("sample_id").cast(pl.String).is_in(ids.implode()))
    counts = duplicate_counts(known, ids, count_copies=settings["count_copies"])
    samples = (frame.select("sample_id", "membership", "scored", "conclusive", "text_target", "func_target")
               .join(counts, on="sample_id", how="left", maintain_order="left")
               .with_columns(_group(analyze["tau_text"], analyze["tau_func"]).alias("group")))
    scored = samples.filter(pl.col("scored"))
    conclusive = samples.filter(pl.col("conclusive"))
    regressions = {
        "textual": _regression(scored, (scored["text_target"] >= analyze["tau_text"]).to_numpy(),
                               outcome="SIM_text(x, x_T) ≥ τ_text", population="scored",
                               confidence=analyze["confidence"]),
        "functional": _regression(conclusive, (conclusive["func_target"] >= analyze["tau_func"]).to_numpy(),
                                  outcome="SIM_func(x, x_T) ≥ τ_func", population="conclusive",
                                  confidence=analyze["confidence"]),
    }
    kinds = pairs["kind"].cast(pl.String)
    summary = {
        "settings": settings,
        "n_pairs": {kind: int((kinds == kind).sum()) for kind in DEDUP_KINDS},
        "unmatched_pairs": pairs.height - known.height,
        "n_samples": samples.height,
        "n_scored": scored.height,
        "n_conclusive": conclusive.height,
        "n_ungrouped_inconclusive": int(samples.filter(pl.col("scored") & pl.col("group").is_null()).height),
        "groups": _groups(samples),
        "regressions": regressions,
    }
    return Duplication(summary=summary,
                       samples=samples.select("sample_id", "membership", "scored", "conclusive", "group",
                                              *COUNT_COLUMNS))


# --- the report section ---------------------------------------------------------------------------------------
def _definitions(dup: dict[str, Any], op: dict[str, Any]) -> str:
    s = dup["settings"]
    source = f"the training corpus of `dedup.source` = `{s['source']}`" if s["source"] else "the training corpus"
    text = (f"As in §5.3, Figure 4 and Appendix G of the functional-memorization paper: near-duplicates of each "
            f"audited function x in {source}. A document is a **textual** near-duplicate of x when the Jaccard "
            f"similarity of their sets of {number(s['shingle_tokens'])}-token shingles is ≥ "
            f"{number(s['jaccard'])} (candidates found by MinHash LSH with {number(s['num_perm'])} permutations, "
            "each verified by its exact Jaccard), and a **semantic-only** near-duplicate when the cosine "
            f"similarity of their embeddings is ≥ {number(s['cosine'])} and it is not a textual one. ")
    text += ("Each document counts as often as it occurs in the corpus (`dedup.count_copies`). "
             if s["count_copies"] else "Each document counts once. ")
    n = dup["n_pairs"]
    text += f"The duplicates table holds {n['textual']} textual and {n['semantic']} semantic-only pairs"
    text += f" ({dup['unmatched_pairs']} more name no audited sample and are left out)." if dup["unmatched_pairs"] \
        else "."
    if s["semantic"] is False:
        text += " Semantic search was off (`dedup.semantic` = false)"
        text += ": every semantic-only count is 0." if not n["semantic"] else "."
    groups = dup["groups"]
    text += (f" Groups, by the target's completion as in the paper (not the counterfactual verdict), over the "
             f"{dup['n_scored']} scored samples (members and controls together): **textual** "
             f"(SIM_text(x, x_T) ≥ τ_text = {number(op['tau_text'])}; {groups['textual']['n']}), **functional** "
             f"(conclusive, SIM_func(x, x_T) ≥ τ_func = {number(op['tau_func'])} and SIM_text(x, x_T) < τ_text; "
             f"{groups['functional']['n']}) and **others** (the other conclusive samples; {groups['others']['n']}). "
             f"{dup['n_ungrouped_inconclusive']} inconclusive sample(s) below τ_text are in no group: their "
             "functional similarity is unknown.")
    return text


_PAPER = ("For context: in the paper (OLMo-3-32B, Python), functions the target completed textually similarly had "
          "more textual near-duplicates than the others, and functions it completed functionally similarly with "
          "low text overlap had the most semantic near-duplicates; these are associations in one training "
          "corpus, not causal effects, and need not hold for this model.")


def _stat_cells(stats: dict[str, Any]) -> tuple[str, str]:
    if stats["mean"] is None:
        return DASH, DASH
    return (f"{fixed(stats['mean'])} / {number(stats['median'])} / {stats['max']}",
            f"{pct(stats['share_with_any'])} ({stats['n_with_any']})")


def _group_table(dup: dict[str, Any]) -> Table:
    rows = tuple((g["label"], str(g["n"]), *_stat_cells(g["textual_dups"]), *_stat_cells(g["semantic_dups"]))
                 for g in dup["groups"].values())
    header = ("group", "samples", "textual: mean / median / max", "with ≥ 1 textual",
              "semantic-only: mean / median / max", "with ≥ 1 semantic-only")
    return Table(header, rows, "duplication-groups-table", "Near-duplicate counts per group (paper Figure 4).")


def _p_value(p: float | None) -> str:
    if p is None:
        return DASH
    return f"{p:.2e}" if p < 1e-3 else f"{p:.4f}"


def _regression_blocks(dup: dict[str, Any]) -> list[Block]:
    regs = dup["regressions"]
    conf = next((setting_pct(r["confidence"]) for r in regs.values()), "")
    text = ("Joint logistic regressions, as in Appendix G: logit P(flag) = β_0 + β_text · textual_dups + β_sem · "
            "semantic_dups, fitted by maximum likelihood with Wald standard errors, z, two-sided p-values and "
            f"{conf} Wald intervals (log-odds per near-duplicate; `calib.stats.logistic_regression`). A positive "
            "β is an association, not an effect of duplication.")
    models, rows = [], []
    for key, reg in regs.items():
        line = f"**{key}**: flag 1[{reg['outcome']}] over the {reg['n']} {reg['population']} samples " \
               f"({reg['n_positive']} flagged)"
        models.append(f"{line}; {reg['note']}." if reg["note"] else f"{line}.")
        if not reg["fitted"]:
            rows.append((key, "not fitted (see above)", DASH, DASH, DASH, DASH, DASH))
            continue
        for i, c in enumerate(reg["coefficients"]):
            rows.append((key if i == 0 else "", f"`{c['name']}`", fixed(c["estimate"], 4), fixed(c["std_error"], 4),
                         fixed(c["z"], 2), _p_value(c["p_value"]),
                         f"[{fixed(c['ci_low'], 4)}, {fixed(c['ci_high'], 4)}]"))
    return [Paragraph(text), Bullets(tuple(models)),
            Table(("model", "term", "estimate", "std. error", "z", "p-value", f"{conf} CI"), tuple(rows),
                  "duplication-regression-table", "Logistic regressions of memorization on duplicate counts.")]


def duplication_blocks(summary: dict[str, Any], samples: pl.DataFrame | None) -> list[Block]:
    """The "Duplication" section from summary.json's ``duplication`` and ``operating_point``; none without it.

    ``samples`` is :attr:`Duplication.samples` (for the figure).
    """
    dup = summary.get("duplication")
    if dup is None:
        return []
    blocks: list[Block] = [Heading(2, "Duplication", "duplication"),
                           Paragraph(_definitions(dup, summary["operating_point"])), Paragraph(_PAPER)]
    svg = None
    if samples is not None:
        drawn = [(g["label"], *(samples.filter(pl.col("group") == key)[c].to_numpy() for c in COUNT_COLUMNS))
                 for key, g in dup["groups"].items()]
        svg = duplication_figure(drawn, tuple(_COUNT_LABELS.values()))
    if svg is not None:
        blocks.append(Figure("duplication", svg, "Near-duplicate counts per group (as in the paper's Figure 4): "
                                                 "boxes with quartiles, dots the samples, diamonds the means."))
    blocks.append(_group_table(dup))
    return blocks + _regression_blocks(dup)
