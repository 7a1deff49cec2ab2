"""Several judges and several embedding models in one functional study, and their agreement (paper §5.2).

One real study of the tiny organism (members in the target's training data by construction), with
``measure.judge_server = ["judge_a", "judge_b"]`` and ``measure.embedding_server = ["target", "reference"]``:

* the two judges are loopback chat servers of the test's own with SCRIPTED answers (no chat model that can
  judge code runs here): judge_a answers the share of characters the two functions have in common
  (difflib's ratio, to two decimals), judge_b the same moved by -0.2, 0 or +0.2 by a hash of the generated
  function (so they disagree on some pairs, agree on others);
* the two embedding models are the organism's own target and reference models, whose in-process servers
  embed through their mean-pooled last hidden state (two different embedding spaces); their context is 512
  tokens, so completions are kept to 96 tokens and the audit to the business-rule and near-duplicate
  functions (some verbatim ones are longer than that).

What is tested is calib's part: every server asked, the second server's metrics named ``METRIC@SERVER``, and
the agreement numbers of summary.json equal to scipy's and to the closed form of Cohen's weighted κ,
recomputed here from the similarities table.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from itertools import combinations

import numpy as np
import polars as pl
import pytest
from aiohttp import web
from scipy import stats

from tests._hosted import LoopbackProxy

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

ENV = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
_FUNCTIONS = re.compile(r"Function A \(Reference\):\s*(.*?)\s*Function B \(Generated\):\s*(.*?)\s*Provide a single",
                        re.S)


class ScriptedJudge(LoopbackProxy):
    """A chat server answering the ``judge_functional`` prompt itself (SCRIPTED; see the module docstring)."""

    def __init__(self, name: str, shift: bool) -> None:
        super().__init__("http://127.0.0.1:9")  # answers every request: nothing is forwarded
        self.name, self.shift = name, shift

    def score(self, reference: str, generated: str) -> float:
        value = round(difflib.SequenceMatcher(None, reference, generated).ratio(), 2)
        if self.shift:
            value += 0.2 * (hashlib.sha256(generated.encode()).digest()[0] % 3 - 1)
        return min(1.0, max(0.0, round(value, 2)))

    def answer(self, path: str, body: dict | None) -> web.Response | None:
        if path == "/v1/models":
            return web.json_response({"object": "list", "data": [{"id": self.name, "object": "model"}]})
        if path != "/v1/chat/completions" or body is None:
            return web.json_response({"error": {"message": f"Not Found: {path}"}}, status=404)
        found = _FUNCTIONS.search(body["messages"][-1]["content"])
        content = "ok" if found is None else json.dumps(
            {"equivalence_score": self.score(found.group(1), found.group(2)), "reasoning": "scripted"})
        return web.json_response({"id": "j", "object": "chat.completion", "model": self.name, "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5}})


SPEC = """[study]
name = "judges"
seed = 5

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.target]
kind = "embedded"
model_dir = "organism:target"

[servers.reference]
kind = "embedded"
model_dir = "organism:reference"

[servers.judge_a]
kind = "openai"
base_url = "{a}"
model = "judge-a"
max_retries = 0

[servers.judge_b]
kind = "openai"
base_url = "{b}"
model = "judge-b"
max_retries = 0

[models]
target = "target"
reference = "reference"

[data]
source = "organism"
limit = 10
kinds = ["business_rule", "near_duplicate"]

[generation]
max_tokens = 96

[measure]
metrics = ["bleu", "judge_functional", "embedding"]
judge_server = ["judge_a", "judge_b"]
embedding_server = ["target", "reference"]
"""


@pytest.fixture(scope="module")
def study(organism_tiny, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("several-judges")
    cache_dir = organism_tiny.root.parent.parent
    with ScriptedJudge("judge-a", False) as a, ScriptedJudge("judge-b", True) as b:
        (root / "s.toml").write_text(SPEC.format(cache_dir=cache_dir, a=a.url, b=b.url))
        done = subprocess.run([sys.executable, "-m", "calib", "study", "s.toml", "--run-dir", "run", "--quiet"],
                              cwd=root, capture_output=True, text=True, timeout=900, env=ENV)
        asked = {name: [c for c in judge.bodies.get("/v1/chat/completions", [])
                        if _FUNCTIONS.search(c["messages"][-1]["content"])] for name, judge in (("a", a), ("b", b))}
    assert done.returncode == 0, done.stderr[-3000:]
    run = root / "run"
    return {"run": run, "asked": asked,
            "sims": pl.read_parquet(run / "tables" / "similarities.parquet"),
            "samples": pl.read_parquet(run / "tables" / "samples.parquet"),
            "summary": json.loads((run / "report" / "summary.json").read_text())}


def _values(sims: pl.DataFrame, metric: str, samples: set[str]) -> dict[tuple[str, str], float]:
    return {(r["sample_id"], r["role"]): r["value"] for r in sims.iter_rows(named=True)
            if r["metric"] == metric and r["value"] is not None and np.isfinite(r["value"])
            and r["sample_id"] in samples}


def _weighted_kappa(a: np.ndarray, b: np.ndarray, k: int = 11) -> float:
    """Quadratic-weighted Cohen's κ by its closed form (Cohen 1968; Fleiss, Levin & Paik 2003, §18.2):
    1 - Σ w O / Σ w E with w_ij = (i - j)², O the observed and E the chance (outer product of margins) table."""
    observed = np.zeros((k, k))
    for i, j in zip(a, b):
        observed[i, j] += 1
    observed /= observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    w = (np.arange(k)[:, None] - np.arange(k)[None, :]) ** 2
    return 1.0 - float((w * observed).sum() / (w * expected).sum())


def test_each_server_scores_under_its_own_name(study):
    names = study["sims"]["metric"].unique(maintain_order=True).to_list()
    assert names == ["bleu", "judge_functional", "judge_functional@judge_b", "embedding", "embedding@reference"]
    sims = study["sims"]
    with_candidate = sims.filter((pl.col("metric") == "bleu") & (pl.col("reason").is_null()
                                                                 | ~pl.col("reason").str.contains("no candidate")))
    # each judge was asked once per (sample, completion) with a generated function, and nothing twice
    for judge in ("a", "b"):
        assert len(study["asked"][judge]) == with_candidate.height
    a = _values(sims, "judge_functional", set(study["samples"]["sample_id"]))
    b = _values(sims, "judge_functional@judge_b", set(study["samples"]["sample_id"]))
    assert set(a) == set(b) and len(a) == with_candidate.height
    assert any(a[k] != b[k] for k in a) and any(a[k] == b[k] for k in a)  # the judges disagree on some pairs
    ea = _values(sims, "embedding", set(study["samples"]["sample_id"]))
    eb = _values(sims, "embedding@reference", set(study["samples"]["sample_id"]))
    assert set(ea) == set(eb) and any(abs(ea[k] - eb[k]) > 1e-6 for k in ea)  # two embedding spaces
    metrics = study["summary"]["methods"]["metrics"]
    assert [(e["server"], e["suffix"]) for e in metrics["judges"]] == [("judge_a", ""), ("judge_b", "@judge_b")]
    assert [(e["server"], e["suffix"]) for e in metrics["embeddings"]] == [("target", ""),
                                                                           ("reference", "@reference")]
    assert metrics["judge"]["server"] == "judge_a" and metrics["embedding"]["server"] == "target"
    proxied = [m["metric"] for m in study["summary"]["proxies"]["metrics"]]
    assert proxied == names


def test_agreement_equals_scipy_and_the_closed_form_kappa(study):
    proxies = study["summary"]["proxies"]
    samples = set(study["samples"]["sample_id"])
    for key, family, members in (("judges_agreement", "judge_functional", ["judge_a", "judge_b"]),
                                 ("embeddings_agreement", "embedding", ["target", "reference"])):
        (record,) = proxies[key]
        assert record["metric"] == family and [m["server"] for m in record["members"]] == members
        names = [m["metric"] for m in record["members"]]
        values = {n: _values(study["sims"], n, samples) for n in names}
        assert record["n_pairs"] == len(set().union(*values.values()))
        for pair, (a, b) in zip(record["pairs"], combinations(names, 2), strict=True):
            keys = sorted(set(values[a]) & set(values[b]))
            x, y = np.array([values[a][k] for k in keys]), np.array([values[b][k] for k in keys])
            assert (pair["a"], pair["b"], pair["n"]) == (a, b, len(keys)) and len(keys) >= 3
            assert pair["pearson_r"] == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)
            assert pair["spearman_rho"] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
            if key == "judges_agreement":
                levels = [np.floor(v * 10 + 0.5).astype(int) for v in (x, y)]
                assert pair["kappa"] == pytest.approx(_weighted_kappa(*levels), abs=1e-12)
                assert pair["kappa"] < 1.0
            else:
                assert "kappa" not in pair


def test_the_report_tables_name_every_server(study):
    from calib.report.document import to_markdown
    from calib.report.functional.judges_section import judges_blocks

    md = to_markdown(judges_blocks(study["summary"]["proxies"]))
    (pair,) = study["summary"]["proxies"]["judges_agreement"][0]["pairs"]
    assert "| `judge_functional` | `judge_functional@judge_b` |" in md and f"{pair['pearson_r']:.3f}" in md
    assert "`embedding@reference` (server `reference`)" in md
    methods = (study["run"] / "report" / "report.md").read_text()
    assert ("The 2 judge servers: `judge_a` (model `judge-a`, metrics named plainly); `judge_b` (model `judge-b`, "
            "metrics suffixed `@judge_b`).") in methods
    # each judge server's requests are recorded apart (manifest spending; every answer here reports 5 tokens,
    # the capability probes' included)
    spending = json.loads((study["run"] / "manifest.json").read_text())["spending"]["servers"]
    for server, judge in (("judge_a", "a"), ("judge_b", "b")):
        assert spending[server]["output_tokens"] >= 5 * len(study["asked"][judge]) > 0
