"""A corpus study through OpenAI-compatible servers that fail: retries are made and recorded, a sample
whose requests always fail is recorded and skipped, and the study finishes with its report.

The models are ``calib serve`` running a tiny chat model (the session fixture ``served_model``); between
calib and it sits a loopback proxy of the test's own that answers 503 to the first attempt of every
completion and 500 to every attempt whose prompt holds ``poison``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from aiohttp import web

from tests._hosted import LoopbackProxy

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

CODE = '''"""A small module of the corpus."""

RATE = 3


def scale(values, factor=RATE):
    out = []
    for v in values:
        out.append(v * factor)
    return out


def poison_pill(n):
    total = 0
    for i in range(n):
        total += i
    return total


def clamp(x, low=0, high=10):
    if x < low:
        return low
    if x > high:
        return high
    return x
'''


class FlakyProxy(LoopbackProxy):
    """Forwards to ``upstream``; completions fail once (503), or always (500) when their prompt says poison."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.attempts: Counter[str] = Counter()

    def answer(self, path: str, body: dict | None) -> web.Response | None:
        if path != "/v1/completions" or body is None:
            return None
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        key = json.dumps(prompts)
        self.attempts[key] += 1
        if any("poison" in str(p) for p in prompts):
            return web.json_response({"error": {"message": "poisoned"}}, status=500)
        if self.attempts[key] == 1:
            return web.json_response({"error": {"message": "busy"}}, status=503, headers={"Retry-After": "0"})
        return None


def _spec(url: str, corpus: Path) -> str:
    server = f'kind = "openai"\nbase_url = "{url}"\nmodel = "tiny"\nmax_retries = 2\ntimeout = 60\n'
    return f"""[study]
name = "corpus"

[servers.target]
{server}
[servers.reference]
{server}
[models]
target = "target"
reference = "reference"

[data]
source = "corpus"
paths = ["{corpus}"]
min_lines = 2

[prompt]
max_context_tokens = 40

[generation]
max_tokens = 24

[execute]
budget_seconds = 60.0
"""


def test_flaky_servers_are_retried_and_a_failing_sample_is_recorded_and_skipped(served_model, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "mod.py").write_text(CODE)
    with FlakyProxy(served_model) as proxy:
        (tmp_path / "s.toml").write_text(_spec(proxy.url, corpus))
        proc = subprocess.run([sys.executable, "-m", "calib", "study", "s.toml", "--run-dir", "run", "--quiet"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "run"
    samples = pl.read_parquet(run / "tables" / "samples.parquet")
    assert sorted(samples["signature"].to_list()) == ["def clamp(x, low=0, high=10):", "def poison_pill(n):",
                                                      "def scale(values, factor=RATE):"]
    assert samples["prompt_context_tokens"].max() <= 40  # P tokens of context, then the signature
    assert all(p.endswith(s) for p, s in zip(samples["prompt"], samples["signature"]))
    generations = pl.read_parquet(run / "tables" / "generations.parquet")
    poisoned = generations.join(samples.select("sample_id", "signature"), on="sample_id").filter(
        pl.col("signature") == "def poison_pill(n):")
    assert poisoned.height == 2 and poisoned["text"].null_count() == 2
    assert all(e.startswith("request failed:") and "500" in e for e in poisoned["error"])
    others = generations.filter(~pl.col("sample_id").is_in(poisoned["sample_id"].implode()))
    assert others["text"].null_count() == 0  # retried after the 503s, not lost
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    requests = [e for e in events if e["event"] == "requests"]
    assert {e["server"] for e in requests} == {"target", "reference"}
    assert sum(e["retries"] for e in requests) >= 4 and sum(e["failures"] for e in requests) >= 2
    assert any(e["event"] == "sample_error" and e.get("role") for e in events)
    claims = pl.read_parquet(run / "tables" / "claims.parquet")
    assert claims.filter(pl.col("sample_id").is_in(poisoned["sample_id"].implode()))["verdict"].to_list() == [
        "unscored"]
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert summary["counts"]["samples"] == 3 and summary["counts"]["unscored"] == 1
