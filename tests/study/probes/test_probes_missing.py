"""A probes study whose host fails some requests and overflows one prompt: missing generations, not failures.

The tiny organism's target is served by ``calib serve`` behind a fault proxy of this test's own (on
tests/_hosted.py's :class:`LoopbackProxy`): it answers HTTP 500 to the generation requests of one chosen
prompt (the dead-code prompt of task A: a failed request) and refuses another (the syn40 prompt of task B)
with vLLM's context-length refusal, HTTP 400 (a host that counts the prompt longer than calib's
tokenizer did: an overflow). The study runs up to the
``prompts`` stage first, so that the faults can be keyed by the exact prompt texts, then to the end.

Checked against the rows beneath them: those generations are missing (not failed) and untested; pass@k
is the unbiased estimator 1 − C(n − c, k)/C(n, k) (math.comb) over the completed generations; tasks A
and B are dropped from their condition's comparison with the original and the count is in the table,
summary.json and the report; every condition of a task is asked with the same ``max_tokens`` (the
proxy's recorded request bodies); the truncation rates carry Clopper–Pearson bounds (scipy.stats.beta).
"""

from __future__ import annotations

import json
import math
import shutil
import urllib.request
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from aiohttp import web
from scipy.stats import beta

from calib.study import RunOptions, run_study
from tests._hosted import LoopbackProxy, context_message

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

N, MAX_TOKENS = 2, 400


class FaultProxy(LoopbackProxy):
    """Fails the generation requests of the prompts in ``fail`` (HTTP 500); refuses those in ``overflow`` as
    longer than the context (HTTP 400 in vLLM's words)."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.fail: set[str] = set()
        self.overflow: set[str] = set()
        self.failed = 0
        self.refused = 0

    def answer(self, path: str, body: dict[str, Any] | None) -> web.Response | None:
        body = body or {}
        if path != "/v1/completions" or int(body.get("max_tokens") or 16) <= 1:
            return None
        if _text(body) in self.fail:
            self.failed += 1
            return web.json_response({"error": {"message": "upstream overloaded", "type": "server_error"}}, status=500)
        if _text(body) in self.overflow:
            self.refused += 1
            message = context_message(512, 600, int(body["max_tokens"]))
            return web.json_response({"error": {"message": message, "type": "BadRequestError"}}, status=400)
        return None


def _text(body: dict[str, Any]) -> str | None:
    """The prompt of a one-prompt completion request (calib sends a list of one)."""
    prompt = body.get("prompt")
    return prompt[0] if isinstance(prompt, list) and len(prompt) == 1 else prompt if isinstance(prompt, str) else None


def _spec(cache_dir: Path, url: str) -> str:
    return f"""[study]
name = "probes-missing"
kind = "probes"
seed = 0

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.target]
kind = "openai"
base_url = "{url}/v1"
model = "organism-target"
max_retries = 0

[models]
panel = ["target"]

[probes]
tasks = "organism:business"
limit = 4
style = "completion"
conditions = ["original", "syn40", "dead_code"]
n = {N}
k = [1, 2]
temperature = 0.8
max_tokens = {MAX_TOKENS}
bootstrap = 200
"""


@pytest.fixture(scope="module")
def study(organism_tiny, served_organism_target, tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("probes-missing")
    url = served_organism_target  # the session's calib serve of the organism's target (tests/_served.py)
    with FaultProxy(url) as proxy:
        spec = root / "p.toml"
        spec.write_text(_spec(organism_tiny.root.parent.parent, proxy.url))
        run = root / "run"
        first = run_study(spec, run_dir=run, options=RunOptions(until="prompts", progress=False))
        assert first.ran == ["tasks", "prompts"]
        prompts = pl.read_parquet(run / "tables" / "prompts.parquet").filter(pl.col("applicable"))
        tasks = sorted(prompts["task_id"].unique().to_list())
        assert len(tasks) >= 3
        text = {(r["task_id"], r["label"]): r["prompt"] for r in prompts.iter_rows(named=True)}
        failed, overflowed = (tasks[0], "dead_code"), (tasks[1], "syn40")
        proxy.fail.add(text[failed])
        proxy.overflow.add(text[overflowed])
        rest = run_study(spec, run_dir=run, options=RunOptions(progress=False))
        assert "report" in rest.ran
        asked = set(text.values())  # the study's generation requests (not the capability probe's)
        bodies = [b for b in proxy.bodies.get("/v1/completions", []) if _text(b) in asked]
        context = next(m["max_model_len"] for m in _get(url + "/v1/models")["data"])
        counts = {p: len(_post(url + "/tokenize", {"prompt": p, "add_special_tokens": False})["tokens"])
                  for p in prompts["prompt"].to_list()}
        return {"run": run, "prompts": prompts, "failed": failed, "overflowed": overflowed, "bodies": bodies,
                "proxy_failed": proxy.failed, "proxy_refused": proxy.refused, "context": context,
                "count": counts.__getitem__}


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def _post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def _table(run: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(run / "tables" / f"{name}.parquet")


def test_failed_and_overflowed_generations_are_missing_not_failed(study):
    gens, results = _table(study["run"], "probe_generations"), _table(study["run"], "test_results")
    for (task, label), why in ((study["failed"], "request_failed"), (study["overflowed"], "overflow")):
        mine = gens.filter((pl.col("task_id") == task) & (pl.col("label") == label))
        assert mine.height == N and mine["missing"].to_list() == [why] * N
        assert mine["text"].null_count() == N and mine["program"].null_count() == N
        tested = results.filter((pl.col("task_id") == task) & (pl.col("label") == label))
        assert tested["status"].to_list() == [why] * N and tested["passed"].null_count() == N
    assert study["proxy_failed"] == 1 and study["proxy_refused"] == 1  # one request each (n in one request)
    assert gens.filter(pl.col("missing").is_null()).height == gens.height - 2 * N


def _pass_at_k(n: int, c: int, k: int) -> float:
    # Chen et al. (2021), eq. 1, in closed form
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def test_pass_at_k_counts_completed_generations_and_drops_problems_with_a_missing_cell(study):
    results, passk = _table(study["run"], "test_results"), _table(study["run"], "pass_at_k")
    done = results.filter(pl.col("status").is_in(["request_failed", "overflow"]).not_())
    cells = {(r["label"], r["task_id"]): (r["n"], r["c"]) for r in done.group_by("label", "task_id").agg(
        pl.len().alias("n"), pl.col("passed").cast(pl.Int64).sum().alias("c")).iter_rows(named=True)}
    for k in (1, 2):
        for label in ("original", "syn40", "dead_code"):
            values = {t: _pass_at_k(n, c, k) for (lab, t), (n, c) in cells.items() if lab == label and n >= k}
            row = passk.filter((pl.col("label") == label) & (pl.col("k") == k)).row(0, named=True)
            assert row["n_problems"] == len(values)
            assert row["estimate"] == pytest.approx(sum(values.values()) / len(values))
            if label == "original":
                continue
            base = {t: _pass_at_k(n, c, k) for (lab, t), (n, c) in cells.items() if lab == "original" and n >= k}
            common = sorted(set(base) & set(values))
            assert row["difference"] == pytest.approx(sum(values[t] - base[t] for t in common) / len(common))
            assert row["problems_missing"] == 1 and row["generations_missing"] == N
            expected = (1, 0) if label == "dead_code" else (0, 1)
            assert (row["dropped_failed"], row["dropped_overflow"]) == expected
    summary = json.loads((study["run"] / "report" / "summary.json").read_text())
    dropped = {(d["label"], d["k"]): (d["dropped_failed"], d["dropped_overflow"]) for d in summary["dropped"]}
    assert dropped[("dead_code", 1)] == (1, 0) and dropped[("syn40", 2)] == (0, 1)
    assert summary["counts"]["tested"] == summary["counts"]["test_results"] - 2 * N
    report = (study["run"] / "report" / "report.md").read_text()
    assert "`target` Dead code vs Original (pass@1): 1 by failed requests, 0 by overflow" in report
    assert "`target` Syn-40 vs Original (pass@1): 0 by failed requests, 1 by overflow" in report


def test_every_condition_of_a_task_is_asked_with_the_same_max_tokens(study):
    prompts = study["prompts"]
    task_of = {r["prompt"]: r["task_id"] for r in prompts.iter_rows(named=True)}
    asked: dict[str, set[int]] = {}
    for body in study["bodies"]:
        asked.setdefault(task_of[_text(body)], set()).add(int(body["max_tokens"]))
    assert set(asked) == set(task_of.values())
    # expected: the spec's max_tokens, lowered to the smallest room the context leaves after any of the task's
    # prompts, counted by the upstream server itself (by its count the refused prompt fits)
    context, count = study["context"], study["count"]
    longer = 0
    for task, budgets in asked.items():
        mine = prompts.filter(pl.col("task_id") == task)
        rooms = {r["label"]: context - count(r["prompt"]) - 1 for r in mine.iter_rows(named=True)}
        assert budgets == {min(MAX_TOKENS, *rooms.values())}, (task, budgets, rooms)
        longer += min(MAX_TOKENS, rooms["original"]) > min(budgets)  # the original alone would have had more
    assert longer >= 1
    gens = _table(study["run"], "probe_generations").filter(pl.col("missing").is_null())
    for task, budgets in asked.items():
        assert set(gens.filter(pl.col("task_id") == task)["max_tokens"].to_list()) == budgets


def test_truncation_rate_per_condition_with_clopper_pearson_bounds(study):
    gens = _table(study["run"], "probe_generations").filter(pl.col("missing").is_null())
    summary = json.loads((study["run"] / "report" / "summary.json").read_text())
    rows = {r["label"]: r for r in summary["truncation"]}
    assert set(rows) == {"original", "syn40", "dead_code"}
    for label, row in rows.items():
        mine = gens.filter(pl.col("label") == label)
        n, x = mine.height, int((mine["finish_reason"] == "length").sum())
        assert (row["completed"], row["truncated"]) == (n, x)
        # Clopper & Pearson (1934): Beta(α/2; x, n − x + 1) and Beta(1 − α/2; x + 1, n − x) at 95%
        low = 0.0 if x == 0 else beta.ppf(0.025, x, n - x + 1)
        high = 1.0 if x == n else beta.ppf(0.975, x + 1, n - x)
        assert row["rate"] == pytest.approx(x / n) and row["low"] == pytest.approx(low)
        assert row["high"] == pytest.approx(high)
    assert rows["dead_code"]["missing_failed"] == N and rows["syn40"]["missing_overflow"] == N
    report = (study["run"] / "report" / "report.md").read_text()
    assert "## Budget, truncation and missing generations" in report
    dead = rows["dead_code"]
    assert f"{100 * dead['rate']:.1f} [{100 * dead['low']:.1f}, {100 * dead['high']:.1f}]" in report
