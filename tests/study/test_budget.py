"""``[budget]`` caps (issue "hosted"): a study stops cleanly when a cap on requests, tokens or cost is reached,
keeps what it did, exits 4 with one line, and resumes when run again.

The servers are ``calib serve`` (the session's tiny model) behind tests/_hosted.py's proxy, asked through
the openai kind, whose answers report token ``usage``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from calib._exceptions import InputError
from calib.study.spec import load_spec
from tests._hosted import HostedProxy

CODE = "\n\n".join(f'''def step_{i}(values, k={i + 1}):
    total = 0
    for v in values:
        total += v * k
    return total - {i}
''' for i in range(8))


def _spec(url: str, corpus: Path, budget: str) -> str:
    return f"""[study]
name = "budget"

[servers.target]
kind = "openai"
base_url = "{url}"
model = "tiny"
max_retries = 0

[servers.reference]
kind = "openai"
base_url = "{url}"
model = "tiny"
max_retries = 0

[models]
target = "target"
reference = "reference"

[data]
source = "corpus"
paths = ["{corpus}"]
min_lines = 2

[prompt]
max_context_tokens = 16

[generation]
max_tokens = 24
concurrency = 1

{budget}
"""


def _study(tmp_path: Path, name: str, run: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "calib", "study", f"{name}.toml", "--run-dir", run, "--stage",
                           "generate", "--quiet"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})


def _events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def test_a_token_cap_stops_between_chunks_and_a_rerun_resumes_to_the_same_table(served_model, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "mod.py").write_text(CODE)
    with HostedProxy(served_model, "direct") as host:
        (tmp_path / "free.toml").write_text(_spec(host.url, corpus, ""))
        free = _study(tmp_path, "free", "free")
        assert free.returncode == 0, free.stderr
        # a cap the probes stay under (about 240 tokens) and the first chunk of generations (8 completions) exceeds
        (tmp_path / "capped.toml").write_text(_spec(host.url, corpus, "[budget]\ntokens = 400"))
        stopped = _study(tmp_path, "capped", "capped")
        (tmp_path / "capped.toml").write_text(_spec(host.url, corpus, "[budget]\ntokens = 100000"))
        resumed = _study(tmp_path, "capped", "capped")
    assert stopped.returncode == 4, stopped.stdout + stopped.stderr
    errors = [line for line in stopped.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("calib: error: the study's budget is reached: ")
    line = errors[0]
    assert "(budget.tokens = 400)" in line and "stage generate stopped with 1 of 2 chunks done, all kept" in line
    run = tmp_path / "capped"
    reached = [e for e in _events(run) if e["event"] == "budget_reached"]
    assert len(reached) == 1 and reached[0]["chunks_done"] == 1 and reached[0]["chunks"] == 2
    # the resumed run took the kept chunk as it was and asked only for the other
    assert resumed.returncode == 0, resumed.stderr
    resume = [e for e in _events(run) if e["event"] == "resume"]
    assert resume and resume[-1]["chunks_done"] == 1
    columns = ["sample_id", "role", "text", "function", "finish_reason", "error"]
    a = pl.read_parquet(tmp_path / "free" / "tables" / "generations.parquet").select(columns).sort("sample_id", "role")
    b = pl.read_parquet(run / "tables" / "generations.parquet").select(columns).sort("sample_id", "role")
    assert a.height == 16 and a.equals(b)
    # what each invocation asked of the host: requests and the usage its answers reported
    spending = json.loads((run / "manifest.json").read_text())["spending"]
    assert spending["tokens"] == spending["input_tokens"] + spending["output_tokens"] > 0
    assert set(spending["servers"]) == {"target", "reference"} and spending["usage_missing"] == 0


def test_a_cost_cap_prices_each_servers_tokens(served_model, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "mod.py").write_text(CODE)
    budget = ("[budget]\ncost = 0.000001\ncurrency = \"EUR\"\n\n[budget.prices.target]\ninput = 1.0\noutput = 2.0\n")
    with HostedProxy(served_model, "direct") as host:
        (tmp_path / "s.toml").write_text(_spec(host.url, corpus, budget))
        stopped = _study(tmp_path, "s", "run")
    assert stopped.returncode == 4, stopped.stderr
    assert "EUR spent (budget.cost = 1e-06 EUR, at budget.prices)" in stopped.stderr
    spending = json.loads((tmp_path / "run" / "manifest.json").read_text())["spending"]
    target, reference = spending["servers"]["target"], spending["servers"]["reference"]
    # input at 1 and output at 2 per million tokens; the reference has no price
    assert target["cost"] == pytest.approx((target["input_tokens"] * 1.0 + target["output_tokens"] * 2.0) / 1e6)
    assert reference["cost"] == 0.0 and spending["cost"] == pytest.approx(target["cost"])
    assert spending["currency"] == "EUR"


@pytest.mark.parametrize("budget,message", [
    ("[budget]\ncost = 5.0", "budget: cost needs prices"),
    ("[budget]\nrequests = 0", "budget.requests"),
    ("[budget]\ntokens = 10\n[budget.prices.judge]\ninput = 1\noutput = 1", "budget.prices.judge names no "
                                                                            "[servers.judge] table"),
    ("[budget]\nrequest = 10", "budget.request"),
])
def test_bad_budget_keys_are_one_line_errors(tmp_path, budget, message):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "s.toml").write_text(_spec("http://127.0.0.1:9/v1", tmp_path / "corpus", budget))
    with pytest.raises(InputError) as caught:
        load_spec(tmp_path / "s.toml")
    assert message in str(caught.value) and "\n" not in str(caught.value)
