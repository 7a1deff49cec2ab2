"""The report of a ``probes`` study (scale-aware diagnostics), checked by hand.

The synthetic run: two models, ``small`` then ``large`` (the panel's order); seven tasks, of which
``t7``'s reference fails its own tests (left out), so six are used; labels original, syn20,
dead_code, iso:affine and iso_dec:affine; the isomorphisms do not apply to t5 and t6. Each
(model, label, task) has n = 4 generations, of which :data:`PASSES` says how many pass (the first c
sample indices). Under iso:affine the small model writes no program for t2 and a syntax error for t3.
Opcode histograms are built so that the small model's iso profiles move far from its original ones
(an extra ``CALL`` block) and the large model's hardly move. CoDeC: four datasets per model, two seen.

The tables the later stages write (pass_at_k, model_pairs, opcodes, codec_scores) are computed here
the way the stage does it, with calib.stats for the bootstrap intervals; the report's numbers are
checked against hand computations written in each test.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.stats import binomtest

from calib._exceptions import InputError
from calib.cli import main
from calib.report import load_run, write_report
from calib.report.run import RunTables
from calib.stats import bootstrap_ci
from calib.study.probes.tables import PROBES_TABLES
from calib.study.spec import StudySpec
from tests.cli._helpers import Outcome

N = 4
TASKS = ("t1", "t2", "t3", "t4", "t5", "t6")
LEFT_OUT = "t7"
LABELS = ("original", "syn20", "dead_code", "iso:affine", "iso_dec:affine")
ISO_TASKS = TASKS[:4]
NOT_APPLICABLE = {("iso:affine", "t5"): "no integer in the tests", ("iso:affine", "t6"): "no integer in the tests",
                  ("iso_dec:affine", "t5"): "no integer in the tests",
                  ("iso_dec:affine", "t6"): "the function returns no integer"}
#: model -> label -> passing generations per task (t1..t6; t1..t4 under the isomorphisms)
PASSES = {
    "small": {"original": [4, 3, 2, 4, 0, 1], "syn20": [4, 2, 2, 3, 0, 1], "dead_code": [4, 3, 1, 4, 0, 1],
              "iso:affine": [1, 0, 0, 2], "iso_dec:affine": [2, 0, 1, 2]},
    "large": {"original": [4, 4, 4, 4, 2, 3], "syn20": [4, 4, 4, 4, 2, 2], "dead_code": [4, 4, 3, 4, 2, 3],
              "iso:affine": [3, 2, 4, 1], "iso_dec:affine": [3, 3, 4, 2]},
}
#: model -> dataset -> (seen, n, decreased)
CODEC = {"small": {"wiki": (True, 40, 30), "hackernews": (True, 40, 28), "gpqa": (False, 40, 9),
                   "lcb": (False, 40, 11)},
         "large": {"wiki": (True, 40, 12), "hackernews": (True, 40, 9), "gpqa": (False, 40, 10),
                   "lcb": (False, 40, 9)}}
RESAMPLES = 200


def _pass_at_k(n: int, c: int, k: int) -> float:
    # Chen et al. (2021), eq. 1: 1 - C(n - c, k) / C(n, k)
    return 1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _tasks_of(label: str) -> tuple[str, ...]:
    return ISO_TASKS if label.startswith("iso") else TASKS


def _status(model: str, label: str, task: str, passed: bool) -> str:
    if passed:
        return "ok"
    if (model, label, task) == ("small", "iso:affine", "t2"):
        return "no_program"
    if (model, label, task) == ("small", "iso:affine", "t3"):
        return "syntax"
    return "ok"


def _histogram(model: str, label: str, i: int) -> dict[str, int]:
    hist = {"LOAD_FAST": 10 + 2 * i, "BINARY_OP": 3 + i, "RETURN_VALUE": 1, "COMPARE_OP": 2}
    if label.startswith("iso") and model == "small":
        hist["CALL"] = 12 + 3 * i  # a different algorithm
        hist["LOAD_GLOBAL"] = 6
    elif label.startswith("iso"):
        hist["BINARY_OP"] += 1  # the same algorithm, one more operation for the encoding
    elif label == "syn20":
        hist["COMPARE_OP"] += i % 2
    return hist


def _entropy(hist: dict[str, int]) -> float:
    p = np.array(list(hist.values()), dtype=float)
    p /= p.sum()
    return float(-(p * np.log2(p)).sum())


def _jsd(a: dict[str, int], b: dict[str, int]) -> float:
    keys = sorted(set(a) | set(b))
    return float(jensenshannon([a.get(k, 0) for k in keys], [b.get(k, 0) for k in keys], base=2) ** 2)


def _write(root: Path, frames: dict[str, list[dict[str, Any]]]) -> None:
    (root / "tables").mkdir(parents=True, exist_ok=True)
    for name, rows in frames.items():
        schema = PROBES_TABLES[name]
        pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema).write_parquet(
            root / "tables" / f"{name}.parquet")


def _per_problem(model: str, label: str, k: int, tasks: tuple[str, ...]) -> np.ndarray:
    c = dict(zip(_tasks_of(label), PASSES[model][label]))
    return np.array([_pass_at_k(N, c[t], k) for t in tasks])


def build_run(root: Path, *, models: tuple[str, ...] = ("small", "large"), codec: bool = True,
              described: dict[str, Any] | None = None) -> Path:
    """Write the synthetic probes run under ``root`` (see the module docstring); returns ``root``."""
    tasks = [{"task_id": t, "source": "tasks.jsonl", "entry_point": f"f_{t}", "statement": f"Task {t}.",
              "code": "def f(x):\n    return x\n", "tests": ["assert f(1) == 1"], "setup": "",
              "reference_status": "ok", "reference_passed": True} for t in TASKS]
    tasks.append({"task_id": LEFT_OUT, "source": "tasks.jsonl", "reference_status": "program_error",
                  "reference_passed": False})
    prompts, generations, results, passk, pairs, opcodes = [], [], [], [], [], []
    for label in LABELS:
        condition, _, family = label.partition(":")
        # the left-out task's prompts exist too; its reference fails every condition's tests, which is no bug of T
        prompts.append({"prompt_id": f"{label}/{LEFT_OUT}", "task_id": LEFT_OUT, "label": label,
                        "condition": condition, "family": family or None, "applicable": True,
                        "reference_passed": False})
        for t in TASKS:
            reason = NOT_APPLICABLE.get((label, t))
            prompts.append({"prompt_id": f"{label}/{t}", "task_id": t, "label": label, "condition": condition,
                            "family": family or None, "applicable": reason is None, "reason": reason,
                            "prompt": f"Write f for {t}.", "prompt_tokens": 40 + (30 if label != "original" else 0),
                            "added_tokens": 0 if label == "original" else 30 + (label == "dead_code"),
                            "reference_passed": None if reason else True})
    for model in models:
        for label in LABELS:
            for i, t in enumerate(_tasks_of(label)):
                c = PASSES[model][label][i]
                for s in range(N):
                    status = _status(model, label, t, s < c)
                    lost = (model, label, t, s) == ("large", "original", "t5", 3)
                    status = "no_program" if lost else status
                    error = "request failed: timeout" if lost else "no code found in the completion" \
                        if status == "no_program" else None
                    generations.append({"prompt_id": f"{label}/{t}", "task_id": t, "label": label, "model": model,
                                        "model_name": f"org/{model}-coder", "sample_index": s, "text": "...",
                                        "program": None if error else "def f(x): ...", "error": error})
                    results.append({"prompt_id": f"{label}/{t}", "task_id": t, "label": label, "model": model,
                                    "sample_index": s, "status": status, "passed": s < c, "tests_passed": 0,
                                    "tests_total": 1})
                programs = sum(_status(model, label, t, s < c) == "ok" for s in range(N)) - (
                    model == "large" and label == "original" and t == "t5")
                hist, original = _histogram(model, label, i), _histogram(model, "original", i)
                orig_passing = PASSES[model]["original"][TASKS.index(t)] > 0
                opcodes.append({"model": model, "task_id": t, "label": label, "programs": programs, "passing": c,
                                "histogram": json.dumps(hist) if programs else None,
                                "passing_histogram": json.dumps(hist) if c else None,
                                "entropy": _entropy(hist) if programs else None,
                                "passing_entropy": _entropy(hist) if c else None,
                                "jsd": _jsd(hist, original) if programs else None,
                                "passing_jsd": _jsd(hist, original) if c and orig_passing else None})
            for k in (1, 2):
                tasks_here = _tasks_of(label)
                mine, orig = _per_problem(model, label, k, tasks_here), _per_problem(model, "original", k, tasks_here)
                ci = bootstrap_ci(mine, n_resamples=RESAMPLES, seed=0)
                diff = bootstrap_ci(mine - orig, n_resamples=RESAMPLES, seed=0)
                passk.append({"model": model, "label": label, "condition": label.partition(":")[0],
                              "family": label.partition(":")[2] or None, "k": k, "n_problems": len(tasks_here),
                              "estimate": float(mine.mean()), "low": ci.low, "high": ci.high,
                              "original": float(orig.mean()), "difference": float((mine - orig).mean()),
                              "difference_low": diff.low, "difference_high": diff.high,
                              "relative_change": float((mine - orig).mean() / orig.mean()) if orig.mean() else None,
                              "confidence": 0.95, "n_resamples": RESAMPLES})
    for label in LABELS:
        for k in (1, 2):
            for a, b in zip(models, models[1:]):
                tasks_here = _tasks_of(label)
                pa, pb = _per_problem(a, label, k, tasks_here), _per_problem(b, label, k, tasks_here)
                ci = bootstrap_ci(pb - pa, n_resamples=RESAMPLES, seed=0)
                pairs.append({"label": label, "k": k, "model_a": a, "model_b": b, "n_problems": len(tasks_here),
                              "estimate_a": float(pa.mean()), "estimate_b": float(pb.mean()),
                              "difference": float((pb - pa).mean()), "low": ci.low, "high": ci.high})
    frames = {"tasks": tasks, "prompts": prompts, "probe_generations": generations, "test_results": results,
              "pass_at_k": passk, "opcodes": opcodes}
    if len(models) > 1:
        frames["model_pairs"] = pairs
    if codec:
        scores, samples = [], []
        for model in models:
            seen = [d / n for s, n, d in CODEC[model].values() if s]
            unseen = [d / n for s, n, d in CODEC[model].values() if not s]
            auc = float(np.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a in seen for b in unseen]))
            for dataset, (is_seen, n, d) in CODEC[model].items():
                ci = binomtest(d, n).proportion_ci(0.95, method="exact")
                scores.append({"model": model, "dataset": dataset, "seen": is_seen, "n": n, "decreased": d,
                               "score": d / n, "low": ci.low, "high": ci.high, "mean_delta": 0.01 * (n - 2 * d) / n,
                               "auc": auc})
            samples.append({"model": model, "dataset": "gpqa", "seen": False, "sample_id": "g-41",
                            "error": "request failed: context too long" if model == "large" else None})
        frames["codec"], frames["codec_scores"] = samples, scores
    _write(root, frames)
    probes: dict[str, Any] = {"tasks": "tasks.jsonl", "conditions": ["original", "syn20", "dead_code", "iso",
                                                                     "iso_dec"], "n": N, "k": [1, 2],
                              "bootstrap": RESAMPLES}
    if codec:
        probes["codec"] = {"datasets": [{"name": name, "source": f"{name}.jsonl", "seen": seen}
                                        for name, (seen, _, _) in CODEC["small"].items()]}
    spec = StudySpec.model_validate({
        "study": {"name": "scale", "kind": "probes", "description": "Synthetic probes study."},
        "servers": {m: {"kind": "openai", "model": f"org/{m}-coder", "base_url": "http://10.0.0.1:8000/v1"}
                    for m in models},
        "models": {"panel": list(models), **(described or {})}, "probes": probes}).public()
    (root / "spec.json").write_text(json.dumps(spec, indent=2))
    (root / "manifest.json").write_text(json.dumps({"calib_version": "0.1.0.dev0",
                                                    "started_at": "2026-01-02T03:04:05+00:00",
                                                    "finished_at": "2026-01-02T04:04:05+00:00"}))
    return root


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = build_run(tmp_path_factory.mktemp("run"))
    paths = write_report(run)
    return {"run": run, "paths": paths, "summary": json.loads(paths["summary"].read_text()),
            "md": paths["markdown"].read_text(), "html": paths["html"].read_text()}


def _table(run: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(run / "tables" / f"{name}.parquet")


def _section(md: str, heading: str) -> str:
    start = md.index(f"## {heading}\n")
    end = md.find("\n## ", start + 3)
    return md[start:] if end < 0 else md[start:end]


def test_the_run_is_read_as_a_probes_study(rendered):
    run = load_run(rendered["run"])
    assert isinstance(run, RunTables) and run.kind == "probes" and set(run.tables) == set(PROBES_TABLES)
    assert rendered["summary"]["kind"] == "probes"
    assert rendered["summary"]["labels"] == list(LABELS)
    assert [m["server"] for m in rendered["summary"]["procedure"]["models"]] == ["small", "large"]


def test_pass_at_1_grid_by_hand(rendered):
    grid, md = rendered["summary"]["pass_at_1"], _section(rendered["md"], "pass@k")
    table = _table(rendered["run"], "pass_at_k").filter(pl.col("k") == 1)
    for model, by_label in PASSES.items():
        for label, passes in by_label.items():
            expected = sum(c / N for c in passes) / len(passes)  # pass@1 = mean over problems of c/n
            cell = grid[model][label]
            assert cell["estimate"] == pytest.approx(expected) and cell["n_problems"] == len(passes)
            row = table.filter((pl.col("model") == model) & (pl.col("label") == label)).row(0, named=True)
            assert f"{100 * expected:.1f} [{100 * row['low']:.1f}, {100 * row['high']:.1f}]" in md
    assert grid["small"]["original"]["estimate"] == pytest.approx(3.5 / 6)
    # the isomorphisms are scored on four of the six tasks, and the report says so
    assert "| problems | 6 | 6 | 6 | 4 | 4 |" in md
    assert "Iso (affine) applies to 4 of 6 tasks" in md


def test_change_from_original_on_the_same_problems(rendered):
    md = _section(rendered["md"], "pass@k")
    # small, iso:affine: pass@1 = (1 + 0 + 0 + 2)/16 = 0.1875; original on t1..t4 = (4 + 3 + 2 + 4)/16 = 0.8125
    cell = rendered["summary"]["pass_at_1"]["small"]["iso:affine"]
    assert cell["original"] == pytest.approx(0.8125) and cell["difference"] == pytest.approx(-0.625)
    assert cell["relative_change"] == pytest.approx(-0.625 / 0.8125)
    assert f"-62.5 [{100 * cell['difference_low']:+.1f}, {100 * cell['difference_high']:+.1f}] (-76.9%)" in md
    # large, dead_code: (4+4+3+4+2+3)/24 − (4+4+4+4+2+3)/24 = −1/24
    assert rendered["summary"]["pass_at_1"]["large"]["dead_code"]["difference"] == pytest.approx(-1 / 24)


def test_pass_at_2_table(rendered):
    md = _section(rendered["md"], "pass@k")
    assert "### pass@2" in md
    # small, syn20, pass@2 per task: 1 − C(4−c, 2)/C(4, 2) for c = 4, 2, 2, 3, 0, 1 -> 1, 5/6, 5/6, 1, 0, 1/2
    expected = (1 + 5 / 6 + 5 / 6 + 1 + 0 + 0.5) / 6
    row = next(r for r in rendered["summary"]["pass_at_k"] if r["model"] == "small" and r["label"] == "syn20"
               and r["k"] == 2)
    assert row["estimate"] == pytest.approx(expected)
    assert f"{100 * expected:.1f} [{100 * row['low']:.1f}, {100 * row['high']:.1f}]" in md.split("### pass@2")[1]


def test_procedure_statement(rendered):
    md = _section(rendered["md"], "Procedure")
    assert rendered["md"].index("## Procedure") < rendered["md"].index("## pass@k")
    assert "7 tasks, 1 left out because their reference solution failed its own tests (1 program_error); 6 used" in md
    assert "1. `small` (model `org/small-coder`" in md and "2. `large`" in md
    assert md.index("`small`") < md.index("`large`")
    assert "T(t) = 3·t + 5, T⁻¹(u) = (u − 5) / 3" in md  # the spec's default affine family
    assert "n = 4 completions per task and condition at temperature 0" in md
    assert "Chen et al. 2021, eq. 1" in md and "200 resamples" in md and "95% confidence" in md
    assert "**near-zero** opcode JSD" in md and "**not** evidence of memorization" in md
    assert "bounds the share" in md
    assert "10.0.0.1" not in rendered["html"]


def test_base_and_cubic_formulas_come_from_the_spec():
    from calib.report.probes.summary import bijection_formula
    # base 7: "25" read in base 7 is 2·7 + 5 = 19 (paper §7.1)
    assert "T(25) = 19" in bijection_formula("base", {"base": 7})
    assert bijection_formula("cubic", {"cubic_c": -2}) == "T(t) = t³ − 2, T⁻¹(u) = ∛(u + 2)"
    assert bijection_formula("affine", {"affine_a": -2, "affine_b": -1}) == "T(t) = −2·t − 1, T⁻¹(u) = (u + 1) / −2"


def test_applicability_and_the_proof_by_test(rendered):
    rows = {a["label"]: a for a in rendered["summary"]["applicability"]}
    assert rows["iso:affine"]["applicable"] == 4 and rows["iso:affine"]["not_applicable"] == 2
    assert rows["iso:affine"]["reasons"] == [{"reason": "no integer in the tests", "count": 2}]
    assert rows["iso_dec:affine"]["reasons"] == [{"reason": "no integer in the tests", "count": 1},
                                                 {"reason": "the function returns no integer", "count": 1}]
    # the left-out task t7 counts nowhere: six prompts per condition, its failing reference flagged nowhere
    assert rows["original"]["prompts"] == 6 and rows["original"]["reference_passed"] == 6
    assert rows["dead_code"]["mean_added_tokens"] == 31
    md = _section(rendered["md"], "Applicability")
    assert "| Iso (affine) | 4 | 2 | no integer in the tests (2) | 4 passed, 0 failed |" in md
    assert rendered["summary"]["reference_failures"] == [] and "**Bug**" not in md


def test_a_failed_proof_by_test_is_flagged(tmp_path):
    run = build_run(tmp_path)
    path = run / "tables" / "prompts.parquet"
    bad = pl.col("prompt_id") == "iso:affine/t3"
    pl.read_parquet(path).with_columns(pl.when(bad).then(False).otherwise(pl.col("reference_passed"))
                                       .alias("reference_passed")).write_parquet(path)
    write_report(run)
    md = (run / "report" / "report.md").read_text()
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert summary["reference_failures"] == [{"label": "iso:affine", "task_id": "t3", "prompt_id": "iso:affine/t3"}]
    assert "**Bug**: 1 prompt(s) whose known-correct solution fails the condition's own tests: Iso (affine) `t3`" in md


def test_model_comparisons(rendered):
    md = _section(rendered["md"], "Model comparisons")
    # original, k = 1: large (21/24) − small (14/24) = 7/24
    row = next(r for r in rendered["summary"]["model_pairs"] if r["label"] == "original" and r["k"] == 1)
    assert row["difference"] == pytest.approx(7 / 24)
    assert (f"| Original | 1 | `small` → `large` | 6 | 58.3 | 87.5 | +29.2 [{100 * row['low']:+.1f}, "
            f"{100 * row['high']:+.1f}] |") in md


def test_opcode_divergence_by_numpy(rendered):
    opcodes = _table(rendered["run"], "opcodes")
    md = _section(rendered["md"], "Opcode divergence")
    for model in ("small", "large"):
        for label in LABELS[1:]:
            mine = opcodes.filter((pl.col("model") == model) & (pl.col("label") == label))
            jsd = mine["jsd"].drop_nulls().to_numpy()
            passing = mine["passing_jsd"].drop_nulls().to_numpy()
            row = next(r for r in rendered["summary"]["opcodes"] if r["model"] == model and r["label"] == label)
            assert row["jsd_median"] == pytest.approx(np.median(jsd)) and row["jsd_problems"] == jsd.size
            assert row["passing_jsd_median"] == pytest.approx(np.median(passing))
            assert f"{np.median(jsd):.3f} / {np.mean(jsd):.3f} ({jsd.size})" in md
    # the original is the reference profile: entropy only (the median of six equal-shaped profiles' entropies)
    entropy = np.median(opcodes.filter((pl.col("model") == "small") & (pl.col("label") == "original"))["entropy"])
    assert f"| `small` | Original | 6 | 24 (14) | – | – | {entropy:.2f} | – |" in md
    small = next(r for r in rendered["summary"]["opcodes"] if r["model"] == "small" and r["label"] == "iso:affine")
    large = next(r for r in rendered["summary"]["opcodes"] if r["model"] == "large" and r["label"] == "iso:affine")
    # the small model has no program that compiles for t2 (none taken) and t3 (syntax): no JSD there; its iso
    # profiles move far, the large model's hardly
    assert small["jsd_problems"] == 2 and small["jsd_median"] > 0.1 > 0.01 > large["jsd_median"]
    # syn20 leaves half the profiles unchanged: JSD 0 on t1, t3, t5
    assert next(r for r in rendered["summary"]["opcodes"] if r["model"] == "large"
                and r["label"] == "syn20")["jsd_median"] > 0


def test_test_outcomes_show_a_model_without_code(rendered):
    row = next(r for r in rendered["summary"]["outcomes"] if r["model"] == "small" and r["label"] == "iso:affine")
    # t2: 4 × no_program, t3: 4 × syntax, t1: 1 pass + 3 failing runs, t4: 2 + 2
    assert row["generations"] == 16 and row["passed"] == 3
    assert row["statuses"] == [{"status": "ok", "count": 8}, {"status": "no_program", "count": 4},
                               {"status": "syntax", "count": 4}]
    md = _section(rendered["md"], "Test outcomes")
    assert "| `small` | Iso (affine) | 16 | 3 | 8 | 4 | 4 |" in md
    assert "no code found in the completion (4)" in md and "request failed: timeout (1)" in md


def test_codec_scores_and_auc(rendered):
    codec = rendered["summary"]["codec"]
    models = {m["model"]: m for m in codec["models"]}
    # small: seen 30/40, 28/40 > unseen 9/40, 11/40 -> AUC 1; large: seen .3, .225 vs unseen .25, .225 ->
    # (1 + 1 + 0 + 0.5)/4 = 0.625 (a tie counts one half)
    assert models["small"]["auc"] == 1.0 and models["large"]["auc"] == pytest.approx(0.625)
    assert models["small"]["gap"] == pytest.approx((58 - 20) / 80)
    md = _section(rendered["md"], "CoDeC")
    ci = binomtest(30, 40).proportion_ci(0.95, method="exact")
    assert f"| `small` | `wiki` | seen | 40 | 30 | 75.0 [{100 * ci.low:.1f}, {100 * ci.high:.1f}] |" in md
    assert "| `large` | 26.2 | 23.8 | +2.5 | 62.5 |" in md  # (12+9)/80, (10+9)/80
    assert "58 points on Pythia-12B" in md and "5.5 on Llama-3.1-405B" in md
    assert codec["errors"] == [{"model": "large", "dataset": "gpqa", "count": 1}]
    assert rendered["summary"]["consistency"] == []


def test_figures_are_svg_files(rendered):
    run, summary = rendered["run"], rendered["summary"]
    assert set(summary["figures"]) == {"pass-at-1", "jsd", "entropy", "codec"}
    for rel in summary["figures"].values():
        assert (run / "report" / rel).read_text().lstrip().startswith("<?xml")
    assert rendered["html"].count("<svg") == 4


def test_one_model_without_codec(tmp_path):
    run = build_run(tmp_path, models=("large",), codec=False)
    assert not (run / "tables" / "model_pairs.parquet").exists()
    assert not (run / "tables" / "codec_scores.parquet").exists()
    paths = write_report(run)
    md, summary = paths["markdown"].read_text(), json.loads(paths["summary"].read_text())
    assert "## Model comparisons" not in md and "## CoDeC" not in md
    assert "One model in the panel (`large`): no comparison between models." in md
    assert "**CoDeC**: not run" in md
    assert summary["codec"] is None and summary["model_pairs"] == []
    assert set(summary["figures"]) == {"pass-at-1", "jsd", "entropy"}


def test_codec_configured_but_its_table_missing_is_an_input_error(tmp_path):
    run = build_run(tmp_path)
    (run / "tables" / "codec_scores.parquet").unlink()
    with pytest.raises(InputError) as caught:
        write_report(run)
    assert "no codec_scores table" in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_table_is_a_one_line_input_error(tmp_path):
    run = build_run(tmp_path)
    (run / "tables" / "opcodes.parquet").unlink()
    with pytest.raises(InputError) as caught:
        write_report(run)
    assert "no opcodes table" in str(caught.value) and "\n" not in str(caught.value)


def test_disagreeing_tables_are_flagged(tmp_path):
    run = build_run(tmp_path)
    path = run / "tables" / "pass_at_k.parquet"
    bad = (pl.col("model") == "small") & (pl.col("label") == "syn20") & (pl.col("k") == 1)
    pl.read_parquet(path).with_columns(pl.when(bad).then(0.9).otherwise(pl.col("estimate")).alias("estimate")) \
        .write_parquet(path)
    summary = json.loads(write_report(run)["summary"].read_text())
    # small, syn20: (4 + 2 + 2 + 3 + 0 + 1)/24 = 0.5 from test_results
    assert summary["consistency"] == ["small, syn20: pass@1 0.900000 over 6 problems in pass_at_k, 0.500000 over 6 "
                                      "in test_results"]
    assert "**Warning**: the tables disagree" in (run / "report" / "report.md").read_text()


def test_rendering_again_gives_the_same_bytes(tmp_path):
    run = build_run(tmp_path)
    first = {k: p.read_bytes() for k, p in write_report(run).items()}
    figures = {p.name: p.read_bytes() for p in (run / "report" / "figures").iterdir()}
    assert {k: p.read_bytes() for k, p in write_report(run).items()} == first
    assert {p.name: p.read_bytes() for p in (run / "report" / "figures").iterdir()} == figures


def test_cli_report(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("CALIB_DEBUG", raising=False)
    run = build_run(tmp_path)

    def calib(*args: object) -> Outcome:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main([str(a) for a in args])
        captured = capsys.readouterr()
        return Outcome(code=int(exited.value.code or 0), out=captured.out, err=captured.err)

    data = calib("report", run, "--json").json()
    assert json.loads(Path(data["summary"]).read_text())["kind"] == "probes"
    path = run / "tables" / "opcodes.parquet"
    pl.read_parquet(path).drop("passing_jsd").write_parquet(path)
    line = calib("report", run).one_line_error()
    assert "opcodes table lacks column(s) passing_jsd" in line


def _keys(value: Any, path: str = "") -> set[str]:
    """Every key of ``value``, except those of dicts whose keys are data (models, labels, figure names)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if path in ("figures", "provenance.manifest_counts"):
                continue
            if path in ("pass_at_1", "pass_at_1.*"):
                found |= _keys(inner, f"{path}.*" if path == "pass_at_1" else "pass_at_1.*.*")
                continue
            found.add(key)
            found |= _keys(inner, f"{path}.{key}".lstrip("."))
    elif isinstance(value, list):
        for inner in value:
            found |= _keys(inner, path)
    return found


def test_docs_describe_every_summary_key_section_and_figure(rendered):
    doc = (Path(__file__).resolve().parents[3] / "docs" / "report.md").read_text()
    section = doc[doc.index("## Probes report"):]
    missing = sorted(k for k in _keys(rendered["summary"]) if f"`{k}`" not in section)
    assert not missing, f"summary.json keys not documented under Probes report in docs/report.md: {missing}"
    for heading in re.findall(r"^## (.+)$", rendered["md"], re.M):
        assert f"**{heading}**" in section, heading
    for name in rendered["summary"]["figures"]:
        assert f"figures/{name}.svg" in section, name


def test_a_run_without_generations_renders(tmp_path):
    run = build_run(tmp_path, models=("large",), codec=False)
    for name in ("probe_generations", "test_results", "pass_at_k", "opcodes"):
        path = run / "tables" / f"{name}.parquet"
        pl.read_parquet(path).clear().write_parquet(path)
    paths = write_report(run)
    md, summary = paths["markdown"].read_text(), json.loads(paths["summary"].read_text())
    assert "No pass@1 in the pass_at_k table." in md and "The opcodes table has no rows." in md
    assert summary["pass_at_1"] == {} and summary["figures"] == {} and summary["counts"]["generations"] == 0
    assert summary["applicability"][0]["applicable"] == 6  # the prompts are still there


def test_model_tiers_and_sizes_label_the_panel(tmp_path):
    # the scale-aware paper's Table 1 / Table 3: each model's parameter count and tier, tier letters in the tables
    run = build_run(tmp_path / "run", codec=False, described={"tiers": {"small": "small", "large": "frontier"},
                                                              "parameters": {"small": 0.41}})
    paths = write_report(run)
    summary, md = json.loads(paths["summary"].read_text()), paths["markdown"].read_text()
    models = {m["server"]: m for m in summary["procedure"]["models"]}
    assert (models["small"]["tier"], models["small"]["parameters_billions"]) == ("small", 0.41)
    assert (models["large"]["tier"], models["large"]["parameters_billions"]) == ("frontier", None)
    assert "1. `small` (model `org/small-coder`, openai server; 0.41 B parameters, tier small; reports" in md
    assert "2. `large` (model `org/large-coder`, openai server; tier frontier; reports" in md
    pass_md = _section(md, "pass@k")
    assert "\n| small (S) | " in pass_md and "\n| large (F) | " in pass_md
    # a run without them keeps the bare names
    assert "| small | " in _section(write_report(build_run(tmp_path / "bare", codec=False))["markdown"].read_text(),
                                    "pass@k")


@pytest.mark.parametrize("described,message", [
    ({"tiers": {"medium": "mid"}}, "tiers.medium: 'medium' is not a probed model"),
    ({"tiers": {"small": "huge"}}, "Input should be 'frontier', 'mid' or 'small'"),
    ({"parameters": {"large": 0}}, "parameters.large: give the parameter count in billions, > 0"),
])
def test_tiers_and_sizes_name_probed_models(tmp_path, described, message):
    with pytest.raises(ValueError, match=message):
        build_run(tmp_path / "run", codec=False, described=described)
