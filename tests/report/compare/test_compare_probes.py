"""Comparing probes runs (:mod:`calib.report.compare.probes`) on three small synthetic runs, checked by hand.

Run ``base`` (k = 1, 2; 1000 resamples, seed 7): model ``m`` (org/m-7b) and ``solo`` (org/solo) on tasks
t1..t8, labels original and syn20. Run ``same`` (500 resamples, seed 3) asks ``m`` the same prompts for
t1..t6, t7 with another prompt (a conflicting id), not t8, and t9 besides; its t5 lost three of four
generations to failed requests (a cell for k = 1 only) and t6 all four to overflows (no cell); every syn20
generation overflowed. Its ``solo`` server reports another model (org/solo-v2), so ``solo`` is not compared.
Run ``other`` (k = 1) asks ``m`` other tasks (h1..h5; HumanEval against MBPP): independent samples.

Each (model, label, task) has N = 4 generations; :data:`PASSES` gives how many pass (the first c sample
indices). Expected numbers come from the planted counts: pass@k by the closed form with math.comb (Chen et
al. 2021, eq. 1), intervals from calib.stats.bootstrap_ci / scipy.stats.bootstrap on the same values and
seed, the paired p-value from all 2^n sign flips enumerated here, the independent one from all splits of the
pooled problems, Holm / BH from statsmodels' multipletests.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from calib.report.compare.probes import PROBES_COMPARISON_SCHEMA, compare_probes, probes_blocks, probes_table
from calib.report.compare.runs import check_operating_points, load_runs
from calib.report.document import to_markdown
from calib.stats import bootstrap_ci
from calib.study.probes.tables import PROBES_TABLES
from calib.study.spec import StudySpec
from tests.cli._helpers import run_calib

N = 4
#: run -> (model, label) -> task -> passing generations
PASSES: dict[str, dict[tuple[str, str], dict[str, int]]] = {
    "base": {("m", "original"): {"t1": 4, "t2": 3, "t3": 2, "t4": 1, "t5": 1, "t6": 4, "t7": 0, "t8": 2},
             ("m", "syn20"): {"t1": 3, "t2": 2, "t3": 0},
             ("solo", "original"): {"t1": 1, "t2": 0}},
    "same": {("m", "original"): {"t1": 4, "t2": 4, "t3": 4, "t4": 2, "t5": 1, "t6": 0, "t7": 4, "t9": 1},
             ("m", "syn20"): {"t1": 0, "t2": 0, "t3": 0},
             ("solo", "original"): {"t1": 2, "t2": 2}},
    "other": {("m", "original"): {"h1": 0, "h2": 1, "h3": 0, "h4": 0, "h5": 2},
              ("m", "syn20"): {"h1": 0}},
}
#: (run, model, label, task) -> (status, how many generations) of the missing ones (the last sample indices)
MISSING = {("base", "m", "original", "t4"): ("request_failed", 2),
           ("same", "m", "original", "t5"): ("request_failed", 3),
           ("same", "m", "original", "t6"): ("overflow", 4), ("other", "m", "syn20", "h1"): ("request_failed", 4),
           **{("same", "m", "syn20", t): ("overflow", 4) for t in ("t1", "t2", "t3")}}
NAMES = {"m": "org/m-7b", "solo": "org/solo"}
SETTINGS = {"base": ([1, 2], 1000, 7, "mbpp"), "same": ([1, 2], 500, 3, "mbpp"), "other": ([1], 200, 0, "humaneval")}


def _closed(n: int, c: int, k: int) -> float:
    # Chen et al. (2021), eq. 1: pass@k = 1 - C(n - c, k) / C(n, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _cells(run: str, model: str, label: str, k: int) -> dict[str, float]:
    """task -> pass@k from the planted counts: n completed = N minus the missing ones; no cell when n < k."""
    out = {}
    for task, c in PASSES[run][(model, label)].items():
        n = N - MISSING.get((run, model, label, task), ("", 0))[1]
        if n >= k:
            out[task] = _closed(n, c, k)
    return out


def _prompt_id(run: str, label: str, task: str) -> str:
    return f"{label}/{task}" + ("/reworded" if (run, task) == ("same", "t7") else "")


def _write_run(root: Path, run: str) -> Path:
    ks, resamples, seed, tasks = SETTINGS[run]
    prompts, generations, results = {}, [], []
    for (model, label), by_task in PASSES[run].items():
        for task, c in by_task.items():
            pid = _prompt_id(run, label, task)
            prompts[pid] = {"prompt_id": pid, "task_id": task, "label": label, "condition": label,
                            "applicable": True, "reference_passed": True}
            status, lost = MISSING.get((run, model, label, task), ("", 0))
            for s in range(N):
                gone = s >= N - lost
                name = "org/solo-v2" if (run, model) == ("same", "solo") else NAMES[model]
                generations.append({"prompt_id": pid, "task_id": task, "label": label, "model": model,
                                    "model_name": None if gone else name, "sample_index": s,
                                    "missing": status if gone else None})
                results.append({"prompt_id": pid, "task_id": task, "label": label, "model": model,
                                "sample_index": s, "status": status if gone else "ok",
                                "passed": None if gone else s < c})
    task_ids = sorted({p["task_id"] for p in prompts.values()})
    frames = {"tasks": [{"task_id": t, "reference_passed": True} for t in task_ids],
              "prompts": list(prompts.values()), "probe_generations": generations, "test_results": results,
              "pass_at_k": [], "opcodes": [], "model_pairs": []}
    (root / "tables").mkdir(parents=True)
    for name, rows in frames.items():
        schema = PROBES_TABLES[name]
        pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema).write_parquet(
            root / "tables" / f"{name}.parquet")
    models = sorted({m for m, _ in PASSES[run]})
    spec = StudySpec.model_validate({
        "study": {"name": run, "kind": "probes", "seed": seed},
        "servers": {m: {"kind": "openai", "model": NAMES[m], "base_url": "http://10.0.0.1:8000/v1"} for m in models},
        "models": {"panel": models}, "probes": {"tasks": tasks, "n": N, "k": ks, "bootstrap": resamples}}).public()
    (root / "spec.json").write_text(json.dumps(spec))
    return root


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("probes-runs")
    return {run: _write_run(root / run, run) for run in PASSES}


def _compare(paths: dict[str, Path], pairing: str = "all", adjust: str = "holm") -> dict[str, Any]:
    runs = load_runs([paths["base"], paths["same"], paths["other"]])
    point = check_operating_points(runs)
    found = compare_probes(runs, point, pairing=pairing, adjust=adjust)
    return {**found, "kind": "probes", "operating_point": point, "confidence": 0.95, "pairing": pairing,
            "adjust": adjust}


@pytest.fixture(scope="module")
def result(paths: dict[str, Path]) -> dict[str, Any]:
    return _compare(paths)


def _one(result: dict[str, Any], a: str, b: str, label: str, k: int) -> dict[str, Any]:
    found = [c for c in result["comparisons"] if (c["run_a"], c["run_b"], c["model"], c["label"], c["k"])
             == (a, b, "m", label, k)]
    assert len(found) == 1
    return found[0]


def _sign_flip_p(d: np.ndarray) -> float:
    # every one of the 2^n sign flips of the paired differences; two-sided as scipy: 2 min(P(T <= t), P(T >= t))
    t = d.mean()
    null = np.array([(d * np.array(signs)).mean() for signs in itertools.product((1, -1), repeat=len(d))])
    eps = 1e-12
    return min(1.0, 2 * min((null <= t + eps).mean(), (null >= t - eps).mean()))


def _split_p(x: np.ndarray, y: np.ndarray) -> float:
    # every split of the pooled values into groups of len(x) and len(y); statistic mean(y) - mean(x)
    pooled, t = np.concatenate([x, y]), y.mean() - x.mean()
    null = []
    for chosen in itertools.combinations(range(len(pooled)), len(x)):
        mask = np.zeros(len(pooled), dtype=bool)
        mask[list(chosen)] = True
        null.append(pooled[~mask].mean() - pooled[mask].mean())
    null_arr, eps = np.array(null), 1e-12
    return min(1.0, 2 * min((null_arr <= t + eps).mean(), (null_arr >= t - eps).mean()))


def test_rates_by_hand_with_each_runs_bootstrap(result):
    rates = {(r["run"], r["model"], r["label"], r["k"]): r for r in result["rates"]}
    assert len(rates) == 2 * 3 + 2 * 3 + 2  # base and same: 3 (model, label) x k 1, 2; other: 2 x k 1
    for run, (ks, resamples, seed, _) in SETTINGS.items():
        for (model, label), by_task in PASSES[run].items():
            for k in ks:
                row, cells = rates[(run, model, label, k)], _cells(run, model, label, k)
                assert (row["n_problems"], row["problems_missing"]) == (len(cells), len(by_task) - len(cells))
                lost = sum(m[1] for key, m in MISSING.items() if key[:3] == (run, model, label))
                assert row["generations_missing"] == lost
                if not cells:
                    assert row["estimate"] is None and row["low"] is None
                    continue
                values = np.array(list(cells.values()))
                ci = bootstrap_ci(values, n_resamples=resamples, seed=seed)
                assert row["estimate"] == pytest.approx(values.mean(), abs=1e-12)
                assert (row["low"], row["high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
                assert (row["n_resamples"], row["seed"], row["model_name"]) == (
                    resamples, seed, "org/solo-v2" if (run, model) == ("same", "solo") else NAMES[model])
    # base, m, original, k = 2: t4 has n = 2 completed (2 missing), c = 1 -> pass@2 = 1; c = 2 of 4 -> 5/6
    expected = (1 + 1 + 5 / 6 + 1 + 0.5 + 1 + 0 + 5 / 6) / 8
    assert rates[("base", "m", "original", 2)]["estimate"] == pytest.approx(expected)


def test_rates_are_the_runs_own_pass_at_k_table(tmp_path):
    # the probes report's synthetic run writes its pass_at_k table with bootstrap_ci in the test itself
    from tests.report.probes.test_probes_report import build_run

    runs = load_runs([build_run(tmp_path / "a"), build_run(tmp_path / "b", models=("large",), codec=False)])
    found = compare_probes(runs, check_operating_points(runs), pairing="baseline", adjust="holm")
    own = pl.read_parquet(runs[0].root / "tables" / "pass_at_k.parquet")
    mine = [r for r in found["rates"] if r["run"] == "a"]
    assert len(mine) == own.height == 20
    for r in mine:
        row = own.filter((pl.col("model") == r["model"]) & (pl.col("label") == r["label"]) & (pl.col("k") == r["k"]))
        assert (r["estimate"], r["low"], r["high"], r["n_problems"]) == pytest.approx(
            row.select("estimate", "low", "high", "n_problems").row(0), abs=1e-12)
    # large against itself: every paired difference is 0 with p = 1; small is in run a only
    assert {(c["difference"], c["p_value"], c["model"]) for c in found["comparisons"]} == {(0.0, 1.0, "large")}
    assert [(u["only_in"], u["model"]) for u in found["unmatched"]] == [("a", "small")]


def test_paired_difference_over_shared_problems_with_dropped_cells(result):
    for k, both, dropped in ((1, ["t1", "t2", "t3", "t4", "t5"], (0, 1)), (2, ["t1", "t2", "t3", "t4"], (1, 1))):
        c = _one(result, "base", "same", "original", k)
        a, b = _cells("base", "m", "original", k), _cells("same", "m", "original", k)
        assert (c["design"], c["shared"], c["conflicting_ids"]) == ("paired", 6, 1)  # t1..t6; t7 reworded
        assert (c["n_a"], c["n_b"], c["n_paired"]) == (len(a), len(b), len(both))
        assert (c["dropped_a"], c["dropped_b"]) == (len(a) - len(both), len(b) - len(both))
        assert (c["dropped_failed"], c["dropped_overflow"]) == dropped  # t5 failed (k = 2 only), t6 overflowed
        x, y = np.array([a[t] for t in both]), np.array([b[t] for t in both])
        d = y - x
        assert (c["estimate_a"], c["estimate_b"]) == pytest.approx((x.mean(), y.mean()), abs=1e-12)
        assert c["difference"] == pytest.approx(d.mean(), abs=1e-12)
        ci = bootstrap_ci(d, n_resamples=1000, seed=7)  # the first run's resamples and seed
        assert (c["low"], c["high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
        assert (c["n_resamples"], c["seed"], c["test"], c["exact"], c["permutations"]) == (
            1000, 7, "sign-flip", True, 2 ** len(both))
        assert c["p_value"] == pytest.approx(_sign_flip_p(d), abs=1e-12)
    # k = 1: d = (0, 1/4, 1/2, 0, 3/4), none negative: 4 of the 32 flips reach its mean (the zeros flip freely)
    assert _one(result, "base", "same", "original", 1)["p_value"] == pytest.approx(2 * 4 / 32)


def test_no_shared_cell_has_no_difference_and_says_why(result):
    c = _one(result, "base", "same", "syn20", 1)
    assert (c["design"], c["n_paired"], c["dropped_overflow"], c["dropped_a"]) == ("paired", 0, 3, 3)
    assert c["difference"] is None and c["p_value"] is None and c["p_adjusted"] is None and c["significant"] is None
    assert "no shared problem" in c["note"]
    c = _one(result, "base", "other", "syn20", 1)
    assert (c["design"], c["n_a"], c["n_b"], c["difference"]) == ("independent", 3, 0, None)
    assert c["note"] == "no problem with a pass@k cell (k completed generations) in run b"


def test_independent_runs_two_sample_bootstrap_and_exact_permutation(result):
    c = _one(result, "base", "other", "original", 1)
    x = np.array(list(_cells("base", "m", "original", 1).values()))
    y = np.array(list(_cells("other", "m", "original", 1).values()))
    assert (c["design"], c["shared"], c["n_a"], c["n_b"], c["n_paired"]) == ("independent", 0, 8, 5, 0)
    assert c["difference"] == pytest.approx(y.mean() - x.mean(), abs=1e-12)
    assert c["difference"] == pytest.approx(0.15 - 0.5625, abs=1e-12)  # (0+1+0+0+2)/4/5 - (4+3+2+2+1+4+0+2)/4/8
    boot = stats.bootstrap((x, y), lambda u, v, axis=-1: v.mean(axis=axis) - u.mean(axis=axis), method="percentile",
                           n_resamples=1000, vectorized=True, rng=np.random.default_rng(7)).confidence_interval
    assert (c["low"], c["high"]) == pytest.approx((boot.low, boot.high), abs=1e-12)
    assert c["low"] < c["difference"] < c["high"] < 0
    assert (c["exact"], c["permutations"]) == (True, math.comb(13, 5))
    assert c["p_value"] == pytest.approx(_split_p(x, y), abs=1e-12)
    # only base and other were ever given k = 2: other's k = [1] leaves k = 2 uncompared
    assert not [c for c in result["comparisons"] if c["run_b"] == "other" and c["k"] == 2]


@pytest.mark.parametrize("x, y", [([0.5], [1.0, 0.0, 0.25]), ([1.0, 0.0, 0.25, 1.0, 1.0, 1.0], [0.0]), ([0.5], [1.0])])
def test_a_one_problem_side_is_enumerated_and_resamples_to_itself(x, y):
    # scipy's permutation_test and bootstrap need two items a sample: the one-problem cases are done by hand
    from calib.report.compare.probes import _permutation, _two_sample_interval

    xa, ya = np.array(x), np.array(y)
    p, permutations, exact = _permutation(xa, ya, "independent", 0)
    assert (p, permutations, exact) == (pytest.approx(_split_p(xa, ya), abs=1e-12), len(x) + len(y), True)
    low, high = _two_sample_interval(xa, ya, 500, 0.95, 5)
    many, one = (ya, xa) if len(xa) == 1 else (xa, ya)
    ci = bootstrap_ci(many, n_resamples=500, seed=5)  # the one problem is every resample's mean
    sign = 1 if len(xa) == 1 else -1
    expected = sorted((sign * (ci.low - one[0]), sign * (ci.high - one[0])))
    assert (low, high) == pytest.approx(tuple(expected), abs=1e-12)
    assert _permutation(xa[:1], ya[:1], "samples", 0) == (1.0, 2, True)  # one pair: d and -d, p = 1


@pytest.mark.parametrize("adjust, method", [("holm", "holm"), ("bh", "fdr_bh")])
def test_p_values_adjusted_together(paths, adjust, method):
    result = _compare(paths, "all", adjust)
    tested = [c for c in result["comparisons"] if c["p_value"] is not None]
    assert len(tested) == len(result["comparisons"]) - 4  # syn20: base-same k 1, 2; base-other; same-other
    expected = multipletests([c["p_value"] for c in tested], method=method)[1]
    assert [c["p_adjusted"] for c in tested] == pytest.approx(list(expected), abs=1e-12)
    assert [c["significant"] for c in tested] == [bool(p <= 0.05) for p in expected]


def test_models_match_by_server_and_reported_model(result):
    assert {c["model"] for c in result["comparisons"]} == {"m"}
    assert {(u["run_a"], u["run_b"], u["only_in"], u["model"], u["model_name"]) for u in result["unmatched"]} == {
        ("base", "same", "base", "solo", "org/solo"), ("base", "same", "same", "solo", "org/solo-v2"),
        ("base", "other", "base", "solo", "org/solo"), ("same", "other", "same", "solo", "org/solo-v2")}
    assert [r["models"] for r in result["runs"]][:2] == [
        [{"model": "m", "model_name": "org/m-7b"}, {"model": "solo", "model_name": "org/solo"}],
        [{"model": "m", "model_name": "org/m-7b"}, {"model": "solo", "model_name": "org/solo-v2"}]]


def test_baseline_pairs_only_the_first_run(paths):
    result = _compare(paths, "baseline")
    assert {(c["run_a"], c["run_b"]) for c in result["comparisons"]} == {("base", "same"), ("base", "other")}


def test_table_json_and_report(result):
    table = probes_table(result["comparisons"])
    assert table.schema == pl.Schema(PROBES_COMPARISON_SCHEMA) and table.height == len(result["comparisons"])
    assert table.columns == [key for key in PROBES_COMPARISON_SCHEMA]
    json.dumps(result, allow_nan=False)  # JSON-ready, NaN never
    md = to_markdown(probes_blocks(result))
    assert md.startswith("# calib compare-runs: 3 probes runs\n")
    for heading in ("## Runs", "## pass@k", "## Differences", "## Method"):
        assert heading in md
    c = _one(result, "base", "same", "original", 1)
    start = "| `base` | `same` | `m` (org/m-7b) | `original` | 1 |"
    row = next(line for line in md.splitlines() if line.startswith(start))
    assert f"{100 * c['difference']:+.1f} pp [{100 * c['low']:+.1f}, {100 * c['high']:+.1f}]" in row
    assert "5 paired of 6 shared (left out: 3 of a, 2 of b; 1 shared dropped for a missing cell)" in row
    assert f"| `base` | `m` (org/m-7b) | `original` | 1 | {100 * c['estimate_a']:.1f} [" not in md  # 5 paired only
    assert "| `base` | `m` (org/m-7b) | `original` | 1 | 56.2 [" in md  # 4.5 / 8
    assert "`solo` (org/solo-v2) of `same`" in md and "Chen et al. (2021)" in md


def test_the_command_writes_the_report_and_json_of_two_probes_runs(paths, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CALIB_DEBUG", raising=False)
    out = tmp_path / "cmp"
    done = run_calib(capsys, "compare-runs", paths["base"], paths["other"], "--out", out)
    assert done.code == 0, done.err
    assert sorted(p.name for p in out.iterdir()) == ["comparison.json", "comparisons.parquet", "report.html",
                                                      "report.md"]
    written = json.loads((out / "comparison.json").read_text())
    assert (written["kind"], written["confidence"], written["operating_point"]["probes.style"]) == ("probes", 0.95,
                                                                                                      "mbpp")
    c = next(c for c in written["comparisons"] if (c["label"], c["k"]) == ("original", 1))
    assert (c["design"], c["n_a"], c["n_b"]) == ("independent", 8, 5)
    assert c["difference"] == pytest.approx(0.15 - 0.5625, abs=1e-12)
    assert pl.read_parquet(out / "comparisons.parquet").columns == list(PROBES_COMPARISON_SCHEMA)
    md = (out / "report.md").read_text()
    assert "# calib compare-runs: 2 probes runs" in md and f"{100 * c['difference']:+.1f} pp" in md
