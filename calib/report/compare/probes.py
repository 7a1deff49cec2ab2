"""Comparing probes runs: each run's pass@k, and the difference of every pair of runs (docs/compare-runs.md).

A rate is the unbiased pass@k (Chen et al. 2021, eq. 1) of one model under one condition label, averaged over
the problems with at least k completed generations, with the percentile bootstrap interval over problems
(Efron & Tibshirani 1993, ch. 13), as in the run's own ``pass_at_k`` table. A missing generation (its request
failed, or its prompt overflowed the context) is neither a pass nor a failure: a problem's pass@k uses its n
completed generations, and with fewer than k of them the (problem, label) cell is missing.

Two runs are compared per (model, label, k) for the models both ran (the same server name and the same model
the server reported). Runs that asked the same problem (the same ``task_id`` with the same ``prompt_id``,
which hashes the task, label, prompt text and tests) are compared **paired** over the shared problems with a
cell in both: the mean of pass@k(b) − pass@k(a), its percentile bootstrap interval over problems and a
sign-flip permutation test (Pitman 1937; Good 2005). Runs that share no problem (e.g. MBPP against HumanEval)
are compared as **independent** samples: the difference of the means, the two-sample percentile bootstrap
and a two-sample permutation test. The p-values of every comparison are adjusted together (Holm or BH).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from calib.report.compare.differences import adjust_comparisons
from calib.report.compare.functional import run_pairs
from calib.report.compare.render import p_cell
from calib.report.compare.runs import ComparedRun
from calib.report.document import Bullets, Heading, Paragraph, Table
from calib.report.format import DASH, number, setting_pct
from calib.report.run import setting
from calib.stats import bootstrap_ci, pass_at_k, pass_at_k_summary
from calib.stats.compare import ADJUSTMENTS

__all__ = ["MISSING_STATUSES", "PERMUTATIONS", "PROBES_COMPARISON_SCHEMA", "compare_probes", "probes_blocks",
           "probes_table"]

#: test_results statuses of a missing generation (no completion to test; not counted as a failure).
MISSING_STATUSES = ("request_failed", "overflow")

#: Random permutations of each permutation test (seeded); a test with at most this many distinct
#: permutations enumerates them all instead (exact).
PERMUTATIONS = 9999

#: Resamples evaluated at once (bounds the memory of the bootstrap and the permutation tests).
_BATCH = 1000

#: The columns of ``comparisons.parquet`` for probes runs: one row per comparison (docs/compare-runs.md).
PROBES_COMPARISON_SCHEMA: dict[str, pl.DataType] = {
    "run_a": pl.String(), "run_b": pl.String(), "model": pl.String(), "model_name": pl.String(),
    "label": pl.String(), "k": pl.Int64(), "design": pl.String(), "shared": pl.Int64(),
    "conflicting_ids": pl.Int64(), "n_a": pl.Int64(), "n_b": pl.Int64(), "n_paired": pl.Int64(),
    "dropped_a": pl.Int64(), "dropped_b": pl.Int64(), "dropped_failed": pl.Int64(), "dropped_overflow": pl.Int64(),
    "estimate_a": pl.Float64(), "estimate_b": pl.Float64(), "difference": pl.Float64(), "low": pl.Float64(),
    "high": pl.Float64(), "confidence": pl.Float64(), "method": pl.String(), "n_resamples": pl.Int64(),
    "seed": pl.Int64(), "test": pl.String(), "permutations": pl.Int64(), "exact": pl.Boolean(),
    "p_value": pl.Float64(), "p_adjusted": pl.Float64(), "significant": pl.Boolean(), "note": pl.String(),
}


def _cells(run: ComparedRun) -> pl.DataFrame:
    """(model, label, task_id) -> ``prompt_id``, ``n`` completed, ``c`` passing, ``missing``, ``overflow``."""
    tables = run.data.tables  # type: ignore[union-attr]
    missing = pl.col("status").is_in(MISSING_STATUSES)
    counts = tables["test_results"].group_by(["model", "label", "task_id"], maintain_order=True).agg(
        missing.not_().sum().cast(pl.Int64).alias("n"),
        pl.col("passed").fill_null(False).filter(missing.not_()).sum().cast(pl.Int64).alias("c"),
        missing.sum().cast(pl.Int64).alias("missing"), (pl.col("status") == "overflow").any().alias("overflow"))
    prompts = tables["prompts"].select("task_id", "label", "prompt_id").unique(["task_id", "label"], keep="first")
    return counts.join(prompts, on=["task_id", "label"], how="left")


def _model_names(run: ComparedRun) -> dict[str, str | None]:
    """Server name -> the model(s) it reported in ``probe_generations`` (comma-separated; None when none)."""
    frame = run.data.tables["probe_generations"].select("model", "model_name")  # type: ignore[union-attr]
    names: dict[str, set[str]] = {}
    for model, name in frame.iter_rows():
        names.setdefault(model, set()).update([name] if name is not None else [])
    return {model: ", ".join(sorted(found)) or None for model, found in names.items()}


def _resampling(run: ComparedRun) -> tuple[int, int]:
    """The run's bootstrap resamples (``probes.bootstrap``) and seed (``study.seed``), the spec's defaults if unset."""
    return int(setting(run.spec, "probes.bootstrap", 10_000)), int(setting(run.spec, "study.seed", 0))


def _ks(run: ComparedRun) -> list[int]:
    value = setting(run.spec, "probes.k", [1])
    return [int(k) for k in (value if isinstance(value, list) else [value])]


def _cell_values(frame: pl.DataFrame, k: int) -> tuple[dict[str, float], dict[str, str], dict[str, str | None]]:
    """task_id -> pass@k (cells with n >= k); task_id -> why a cell is missing; task_id -> prompt_id."""
    values, why, prompts = {}, {}, {}
    for task, n, c, overflow, prompt in frame.select("task_id", "n", "c", "overflow", "prompt_id").iter_rows():
        prompts[task] = prompt
        if n >= k:
            values[task] = pass_at_k(n, c, k)
        else:
            why[task] = "overflow" if overflow else "request_failed"
    return values, why, prompts


def _finite(value: Any) -> float | None:
    return float(value) if value is not None and math.isfinite(float(value)) else None


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(y, axis=axis) - np.mean(x, axis=axis)


def _permutation(x: np.ndarray, y: np.ndarray, kind: str, seed: int) -> tuple[float, int, bool]:
    """Two-sided p-value of the mean difference (scipy's permutation_test), the permutations used, and exactness.

    scipy needs two items a sample; with one, every permutation is enumerated here: a single pair's sign
    flip gives p = 1, and a one-problem side is any one of the pooled problems, the rest the other side.
    """
    distinct = 2 ** len(x) if kind == "samples" else math.comb(len(x) + len(y), len(x))
    if min(len(x), len(y)) >= 2:
        found = stats.permutation_test((x, y), _mean_difference, permutation_type=kind, vectorized=True,
                                       n_resamples=PERMUTATIONS, batch=_BATCH, rng=np.random.default_rng(seed))
        exact = distinct <= PERMUTATIONS
        return min(1.0, float(found.pvalue)), distinct if exact else PERMUTATIONS, exact
    if kind == "samples":
        return 1.0, distinct, True
    pooled, alone_x = np.concatenate([x, y]), len(x) == 1
    rest = (pooled.sum() - pooled) / (len(pooled) - 1)  # the mean of the others when problem i is alone
    null = rest - pooled if alone_x else pooled - rest
    observed = float(y.mean() - x.mean())
    tolerance = abs(observed) * 100 * np.finfo(np.float64).eps  # scipy's tolerance for ties
    p = 2 * min(np.mean(null <= observed + tolerance), np.mean(null >= observed - tolerance))
    return min(1.0, float(p)), len(pooled), True


def _two_sample_interval(x: np.ndarray, y: np.ndarray, resamples: int, confidence: float,
                         seed: int) -> tuple[float, float]:
    """Percentile bootstrap of mean(y) − mean(x), resampling each run's problems independently.

    scipy's two-sample ``bootstrap`` needs two problems a side; a side with one problem resamples to itself,
    so the interval is then the other side's one-sample bootstrap shifted by that constant.
    """
    if len(x) >= 2 and len(y) >= 2:
        ci = stats.bootstrap((x, y), _mean_difference, method="percentile", n_resamples=resamples,
                             confidence_level=confidence, vectorized=True, batch=_BATCH,
                             rng=np.random.default_rng(seed)).confidence_interval
        return float(ci.low), float(ci.high)
    if len(x) == 1:
        one = bootstrap_ci(y, n_resamples=resamples, confidence=confidence, seed=seed)
        return one.low - float(x[0]), one.high - float(x[0])
    one = bootstrap_ci(x, n_resamples=resamples, confidence=confidence, seed=seed)
    return float(y[0]) - one.high, float(y[0]) - one.low


def _empty(body: dict[str, Any], note: str) -> dict[str, Any]:
    return {**body, "estimate_a": None, "estimate_b": None, "difference": None, "low": None, "high": None,
            "method": None, "test": None, "permutations": None, "exact": None, "p_value": None, "note": note}


def _compare_cells(a: pl.DataFrame, b: pl.DataFrame, k: int, *, resamples: int, confidence: float,
                   seed: int) -> dict[str, Any]:
    """The comparison body of one (model, label, k): paired over shared problems, else independent."""
    va, why_a, pa = _cell_values(a, k)
    vb, why_b, pb = _cell_values(b, k)
    asked = [t for t in pa if t in pb]
    shared = [t for t in asked if pa[t] is not None and pa[t] == pb[t]]
    body: dict[str, Any] = {"shared": len(shared), "conflicting_ids": len(asked) - len(shared), "n_a": len(va),
                            "n_b": len(vb), "confidence": confidence, "n_resamples": resamples, "seed": seed}
    if shared:
        both = [t for t in shared if t in va and t in vb]
        causes = ["overflow" if "overflow" in (why_a.get(t), why_b.get(t)) else "request_failed"
                  for t in shared if t not in va or t not in vb]
        body.update(design="paired", n_paired=len(both), dropped_a=len(va) - len(both),
                    dropped_b=len(vb) - len(both), dropped_failed=causes.count("request_failed"),
                    dropped_overflow=causes.count("overflow"))
        if not both:
            return _empty(body, "no shared problem has a pass@k cell (k completed generations) in both runs")
        x, y = np.array([va[t] for t in both]), np.array([vb[t] for t in both])
        ci = bootstrap_ci(y - x, n_resamples=resamples, confidence=confidence, seed=seed)
        low, high, method, kind, test = ci.low, ci.high, "percentile-bootstrap-paired", "samples", "sign-flip"
    else:
        body.update(design="independent", n_paired=0, dropped_a=0, dropped_b=0, dropped_failed=0,
                    dropped_overflow=0)
        if not va or not vb:
            where = "either run" if not va and not vb else "run a" if not va else "run b"
            return _empty(body, f"no problem with a pass@k cell (k completed generations) in {where}")
        x, y = np.array(list(va.values())), np.array(list(vb.values()))
        low, high = _two_sample_interval(x, y, resamples, confidence, seed)
        method, kind, test = "percentile-bootstrap-independent", "independent", "permutation-independent"
    p, permutations, exact = _permutation(x, y, kind, seed)
    return {**body, "estimate_a": float(x.mean()), "estimate_b": float(y.mean()),
            "difference": float(y.mean() - x.mean()), "low": _finite(low), "high": _finite(high), "method": method,
            "test": test, "permutations": permutations, "exact": exact, "p_value": p, "note": None}


def _rates(run: ComparedRun, cells: pl.DataFrame, names: dict[str, str | None], confidence: float
           ) -> list[dict[str, Any]]:
    """pass@k of every (model, label, k) of ``run`` with its bootstrap interval (the run's own resamples and seed)."""
    resamples, seed = _resampling(run)
    rows = []
    for (model, label), frame in cells.group_by(["model", "label"], maintain_order=True):
        for k in _ks(run):
            kept = frame.filter(pl.col("n") >= k)
            row: dict[str, Any] = {"run": run.label, "model": model, "model_name": names.get(model), "label": label,
                                   "k": k, "n_problems": kept.height, "problems_missing": frame.height - kept.height,
                                   "generations_missing": int(frame["missing"].sum()), "estimate": None, "low": None,
                                   "high": None, "confidence": confidence, "n_resamples": resamples, "seed": seed}
            if kept.height:
                s = pass_at_k_summary(kept["n"].to_numpy(), kept["c"].to_numpy(), k, confidence=confidence,
                                      n_resamples=resamples, seed=seed)
                row.update(estimate=s.estimate, low=s.low, high=s.high)
            rows.append(row)
    return rows


def _run_record(run: ComparedRun, cells: pl.DataFrame, names: dict[str, str | None]) -> dict[str, Any]:
    return {"label": run.label, "path": str(run.root), "study": setting(run.spec, "study.name"),
            "tasks": setting(run.spec, "probes.tasks", "mbpp"),
            "models": [{"model": m, "model_name": n} for m, n in names.items()],
            "labels": cells["label"].unique(maintain_order=True).to_list(), "k": _ks(run),
            "n": setting(run.spec, "probes.n", 5), "problems": cells["task_id"].n_unique(),
            **dict(zip(("bootstrap", "seed"), _resampling(run), strict=True))}


def compare_probes(runs: list[ComparedRun], point: dict[str, Any], *, pairing: str, adjust: str) -> dict[str, Any]:
    """Each run's pass@k and the comparisons of the pairs of ``pairing``, p-values adjusted by ``adjust``.

    Returns ``{"runs", "rates", "comparisons", "unmatched"}`` (docs/compare-runs.md, "Probes runs"): a
    comparison's ``difference`` is pass@k(b) − pass@k(a), run a being the earlier run on the command line;
    ``unmatched`` lists, per compared pair, the models only one run has (not compared).
    """
    confidence = float(point["probes.confidence"])
    cells = [_cells(run) for run in runs]
    names = [_model_names(run) for run in runs]
    for c, n in zip(cells, names, strict=True):  # a model with results but no generations row keeps a null name
        n.update({m: None for m in c["model"].unique(maintain_order=True).to_list() if m not in n})
    resamples, seed = _resampling(runs[0])
    comparisons, unmatched = [], []
    for i, j in run_pairs(len(runs), pairing):
        for side, this, other in ((i, names[i], names[j]), (j, names[j], names[i])):
            unmatched += [{"run_a": runs[i].label, "run_b": runs[j].label, "only_in": runs[side].label, "model": m,
                           "model_name": n} for m, n in this.items() if m not in other or other[m] != n]
        ks = [k for k in _ks(runs[i]) if k in _ks(runs[j])]
        for model, name in names[i].items():
            if model not in names[j] or names[j][model] != name:
                continue
            mine, theirs = (c.filter(pl.col("model") == model) for c in (cells[i], cells[j]))
            labels = [label for label in mine["label"].unique(maintain_order=True).to_list()
                      if label in set(theirs["label"].to_list())]
            for label in labels:
                a, b = mine.filter(pl.col("label") == label), theirs.filter(pl.col("label") == label)
                for k in ks:
                    body = _compare_cells(a, b, k, resamples=resamples, confidence=confidence, seed=seed)
                    comparisons.append({"run_a": runs[i].label, "run_b": runs[j].label, "model": model,
                                        "model_name": name, "label": label, "k": k, **body})
    adjust_comparisons(comparisons, adjust, confidence)
    return {"runs": [_run_record(r, c, n) for r, c, n in zip(runs, cells, names, strict=True)],
            "rates": [row for run, c, n in zip(runs, cells, names, strict=True)
                      for row in _rates(run, c, n, confidence)],
            "comparisons": comparisons, "unmatched": unmatched}


def probes_table(comparisons: list[dict[str, Any]]) -> pl.DataFrame:
    """The comparisons as rows of :data:`PROBES_COMPARISON_SCHEMA`."""
    return pl.DataFrame([{key: c.get(key) for key in PROBES_COMPARISON_SCHEMA} for c in comparisons],
                        schema=PROBES_COMPARISON_SCHEMA)


def _pc(value: float | None) -> str:
    """A share as a percentage with one decimal, unsigned (``58.1``)."""
    return DASH if value is None else f"{100 * value:.1f}"


def _pp(value: float | None) -> str:
    """A difference of shares in percentage points, signed (``+12.5``)."""
    return DASH if value is None else f"{100 * value:+.1f}"


def _model(model: str, name: str | None) -> str:
    return f"`{model}` ({name})" if name else f"`{model}`"


def _problems(c: dict[str, Any]) -> str:
    if c["design"] == "paired":
        dropped = c["dropped_failed"] + c["dropped_overflow"]
        lost = f"; {dropped} shared dropped for a missing cell" if dropped else ""
        return (f"{c['n_paired']} paired of {c['shared']} shared (left out: {c['dropped_a']} of a, "
                f"{c['dropped_b']} of b{lost})")
    return f"{c['n_a']} vs {c['n_b']}"


def _difference(c: dict[str, Any]) -> str:
    if c["difference"] is None:
        return f"{DASH} ({c['note']})"
    return f"{_pp(c['difference'])} pp [{_pp(c['low'])}, {_pp(c['high'])}]"


def probes_blocks(result: dict[str, Any]) -> list[Any]:
    """The report's blocks for probes runs: the runs, their pass@k, the differences and how they were computed."""
    conf, comparisons = setting_pct(result["confidence"]), result["comparisons"]
    pairs = ("the first run (the baseline) against each other run" if result["pairing"] == "baseline"
             else "every pair of runs")
    point_text = ", ".join(f"`{key}` = {value}" for key, value in result["operating_point"].items())
    first = comparisons[0] if comparisons else {"n_resamples": result["runs"][0]["bootstrap"],
                                                "seed": result["runs"][0]["seed"]}
    blocks: list[Any] = [
        Heading(1, f"calib compare-runs: {len(result['runs'])} {result['kind']} runs", "top"),
        Paragraph(f"Compares {pairs}, per model, condition label and k; a difference is pass@k(b) − pass@k(a), "
                  "run a being the earlier run on the command line. Every run has one operating point: "
                  f"{point_text}."),
        Heading(2, "Runs", "runs"),
        Table(("run", "path", "study", "tasks", "models", "labels", "k", "problems"),
              tuple((f"`{r['label']}`", f"`{r['path']}`", r["study"] or DASH, f"`{r['tasks']}`",
                     ", ".join(_model(m["model"], m["model_name"]) for m in r["models"]) or DASH,
                     ", ".join(f"`{label}`" for label in r["labels"]) or DASH,
                     ", ".join(str(k) for k in r["k"]), number(r["problems"])) for r in result["runs"]),
              anchor="runs-table"),
        Heading(2, "pass@k", "rates"),
        Paragraph(f"Each run's unbiased pass@k (%) over the problems with at least k completed generations, with "
                  f"its {conf} percentile bootstrap interval over problems, as in the run's own report; missing "
                  "generations (failed requests, overflows) are not failures, and a problem with fewer than k "
                  "completed ones has no cell (`missing`)."),
        Table(("run", "model", "label", "k", "pass@k [interval]", "problems", "missing"),
              tuple((f"`{r['run']}`", _model(r["model"], r["model_name"]), f"`{r['label']}`", str(r["k"]),
                     DASH if r["estimate"] is None else f"{_pc(r['estimate'])} [{_pc(r['low'])}, {_pc(r['high'])}]",
                     number(r["n_problems"]), number(r["problems_missing"])) for r in result["rates"]),
              anchor="rates-table"),
        Heading(2, "Differences", "differences"),
        Paragraph(f"Differences pass@k(b) − pass@k(a) in percentage points with {conf} percentile bootstrap intervals "
                  f"({first['n_resamples']} resamples, seed {first['seed']}): paired over the shared problems (same "
                  "task and prompt) with a cell in both runs, with a sign-flip permutation test; otherwise the two "
                  f"runs' problems as independent samples, with a two-sample permutation test ({PERMUTATIONS} "
                  "permutations, or all of them where there are fewer). p-values are adjusted across all "
                  f"{sum(c['p_value'] is not None for c in comparisons)} comparisons by `{result['adjust']}`, which "
                  f"controls the {ADJUSTMENTS[result['adjust']]}; **significant** means the adjusted p-value is at "
                  f"most {1 - result['confidence']:.3g}."),
        Table(("run a", "run b", "model", "label", "k", "design", "problems", "pass@k a → b", "difference [interval]",
               "p", "p adjusted", "significant"),
              tuple((f"`{c['run_a']}`", f"`{c['run_b']}`", _model(c["model"], c["model_name"]), f"`{c['label']}`",
                     str(c["k"]), c["design"], _problems(c), f"{_pc(c['estimate_a'])} → {_pc(c['estimate_b'])}",
                     _difference(c), p_cell(c["p_value"]), p_cell(c["p_adjusted"]),
                     DASH if c["significant"] is None else ("**yes**" if c["significant"] else "no"))
                    for c in comparisons), anchor="differences-table"),
    ]
    if result.get("unmatched"):
        blocks.append(Paragraph("Not compared (a model only one run of the pair has, by server name and reported "
                                "model): " + "; ".join(f"{_model(u['model'], u['model_name'])} of `{u['only_in']}` "
                                                       f"(`{u['run_a']}` vs `{u['run_b']}`)"
                                                       for u in result["unmatched"]) + "."))
    blocks += [
        Heading(2, "Method", "method"),
        Bullets((
            "Models are matched across runs by server name and the model the server reported; labels and k by name.",
            "Two runs asked the same problem when it has the same `task_id` and the same `prompt_id` (task, label, "
            "prompt text and tests); a task asked with another prompt is not shared (`conflicting_ids`). Shared "
            "problems without a cell in both runs are dropped and counted by cause (failed request, overflow).",
            "M. Chen et al. (2021). Evaluating large language models trained on code. arXiv:2107.03374, eq. (1) "
            "(unbiased pass@k).",
            "B. Efron and R. J. Tibshirani (1993). An Introduction to the Bootstrap. Chapman & Hall, ch. 13 "
            "(percentile interval).",
            "E. J. G. Pitman (1937). Significance tests which may be applied to samples from any populations. "
            "JRSS Supplement 4(1):119–130; P. Good (2005). Permutation, Parametric, and Bootstrap Tests of "
            "Hypotheses, 3rd ed. Springer.",
            "S. Holm (1979), Scandinavian Journal of Statistics 6(2):65–70; Y. Benjamini and Y. Hochberg (1995), "
            "JRSS-B 57(1):289–300.",
        )),
    ]
    return blocks
