"""Completion budgets without the server's tokenizer (issue "hosted"): a host without ``/tokenize`` is asked
for ``max_tokens``; its context-length refusal (HTTP 400) is answered by asking again with what it says is
left, recorded in events.jsonl and the manifest, so the generations equal those of a run that could count
the prompt's tokens first.

The target is the tiny organism's target model behind ``calib serve`` and tests/_hosted.py's proxy
(``direct``, then ``no_tokenize``); the reference is the organism's reference model in-process.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from calib.study import run_study
from calib.study.budgets import budget_after_refusal, context_refusal
from calib.study.runner import RunOptions
from tests._hosted import HostedProxy


def _spec(cache_dir: Path, url: str) -> str:
    return f"""[study]
name = "budgets"

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.target]
kind = "openai"
base_url = "{url}/v1"
model = "organism-target"
max_retries = 0

[servers.reference]
kind = "embedded"
model_dir = "organism:reference"

[models]
target = "target"
reference = "reference"

[data]
source = "organism"
limit = 6
"""


def _generate(organism, tmp_path: Path, url: str, name: str, until: str | None = "generate") -> Path:
    spec = tmp_path / f"{name}.toml"
    spec.write_text(_spec(organism.root.parent.parent, url))
    run_study(spec, run_dir=tmp_path / name, options=RunOptions(until=until, progress=False))
    return tmp_path / name


def test_a_host_without_tokenizer_gets_the_budget_its_refusal_leaves(organism_tiny, served_organism_target,
                                                                    tmp_path):
    with HostedProxy(served_organism_target, "direct") as host:
        direct = _generate(organism_tiny, tmp_path, host.url, "direct")
    with HostedProxy(served_organism_target, "no_tokenize") as host:
        hosted = _generate(organism_tiny, tmp_path, host.url, "hosted", until=None)  # to the report
        completions = host.requests["/v1/completions"]
    columns = ["sample_id", "role", "model", "text", "function", "finish_reason", "error"]
    a = pl.read_parquet(direct / "tables" / "generations.parquet").select(columns).sort("sample_id", "role")
    b = pl.read_parquet(hosted / "tables" / "generations.parquet").select(columns).sort("sample_id", "role")
    assert a["text"].null_count() == 0  # every request answered in both runs (the tiny model's text may not parse)
    assert a.equals(b)  # the same completions, token for token
    # the default 500 tokens do not fit the organism's 512-token context after most prompts: those target
    # requests were refused once and asked again with what the refusal left
    manifest = json.loads((hosted / "manifest.json").read_text())
    events = [json.loads(line) for line in (hosted / "events.jsonl").read_text().splitlines()]
    lowered = [e for e in events if e["event"] == "budget_lowered"]
    n = len(lowered)
    assert 1 <= n <= a.filter(pl.col("role") == "target").height
    assert all(e["role"] == "target" and e["asked"] == 500 and 0 < e["budget"] < 500 for e in lowered)
    assert manifest["counts"]["max_tokens_lowered"] == {"target": n}
    assert manifest["servers"]["target"]["tokenize"] is False
    assert "max_tokens_lowered" not in json.loads((direct / "manifest.json").read_text())["counts"]
    assert completions >= a.filter(pl.col("role") == "target").height + n
    # the report says how each model's budget was set
    budgets = json.loads((hosted / "report" / "summary.json").read_text())["methods"]["decoding"]["budgets"]
    assert budgets == [{"role": "target", "tokenizer": False, "max_context": 512, "lowered_after_refusal": n},
                       {"role": "reference", "tokenizer": True, "max_context": 512, "lowered_after_refusal": 0}]
    methods = (hosted / "report" / "report.md").read_text()
    assert "its server has no tokenizer route" in methods and f"({n} request(s); nothing was truncated" in methods


@pytest.mark.parametrize("message,limit,used", [
    # calib serve (this repository's embedded server, as the test above receives it)
    ("This model's maximum context length is 512 tokens. However, you requested 812 tokens (312 in the prompt, "
     "500 in the completion). Please reduce the length of the prompt or the completion.", 512, 312),
    # scripted: the OpenAI API's and vLLM < 0.8's chat wording
    ("This model's maximum context length is 8192 tokens. However, you requested 8500 tokens (500 in the "
     "messages, 8000 in the completion). Please reduce the length of the messages or completion.", 8192, 500),
    # scripted: vLLM >= 0.8's wording
    ("'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 "
     "tokens and your request has 2778 input tokens (8000 > 4096 - 2778). None", 4096, 2778),
])
def test_context_refusals_are_read_in_each_hosts_wording(message, limit, used):
    assert context_refusal(message) == (limit, used)
    assert budget_after_refusal(message, 10_000) == limit - used


def test_other_errors_and_full_prompts_are_not_retried():
    assert context_refusal("HTTP 500: quota exceeded") is None
    assert budget_after_refusal("HTTP 500: quota exceeded", 500) is None
    full = "This model's maximum context length is 512 tokens. However, your request has 600 input tokens."
    assert budget_after_refusal(full, 500) is None  # the prompt alone fills the context: the failure stands
    fits = "This model's maximum context length is 512 tokens. However, you requested 520 tokens (20 in the prompt"
    assert budget_after_refusal(fits, 492) is None  # nothing smaller to ask for
