"""The functional study through a rate-limited host (issue "hosted", acceptance): the same measurements as direct.

The target is the tiny organism's target behind ``calib serve`` and tests/_hosted.py's proxy in
``rate_limited`` mode (HTTP 429 with ``Retry-After`` to a request that arrives while one is in flight);
the reference is the organism's reference in-process. The study backs off and asks again, so every
sample is generated as in the direct run (the same proxy in ``direct`` mode), the report's rates are
the same, and the requests event says how often the host refused and how far the concurrency fell.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from calib.study import run_study
from calib.study.runner import RunOptions
from tests._hosted import HostedProxy


def _spec(cache_dir: Path, url: str) -> str:
    return f"""[study]
name = "rate-limited"

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.target]
kind = "openai"
base_url = "{url}/v1"
model = "organism-target"
max_retries = 8
max_in_flight = 4

[servers.reference]
kind = "embedded"
model_dir = "organism:reference"

[models]
target = "target"
reference = "reference"

[data]
source = "organism"
limit = 8

[generation]
max_tokens = 128
concurrency = 8
"""


def _run(organism, tmp_path: Path, url: str, name: str) -> Path:
    spec = tmp_path / f"{name}.toml"
    spec.write_text(_spec(organism.root.parent.parent, url))
    result = run_study(spec, run_dir=tmp_path / name, options=RunOptions(progress=False))
    assert result.empty is None
    return tmp_path / name


def test_a_rate_limited_host_gives_the_direct_runs_measurements(organism_tiny, served_organism_target, tmp_path):
    with HostedProxy(served_organism_target, "direct") as host:
        direct = _run(organism_tiny, tmp_path, host.url, "direct")
    with HostedProxy(served_organism_target, "rate_limited", concurrency=1, retry_after="0.05") as host:
        limited = _run(organism_tiny, tmp_path, host.url, "limited")
        throttled, most = host.throttled, host.max_in_flight
    columns = ["sample_id", "role", "text", "function", "finish_reason", "error"]
    a = pl.read_parquet(direct / "tables" / "generations.parquet").select(columns).sort("sample_id", "role")
    b = pl.read_parquet(limited / "tables" / "generations.parquet").select(columns).sort("sample_id", "role")
    assert a["text"].null_count() == 0 and a.equals(b)  # every completion as in the direct run
    summary_a = json.loads((direct / "report" / "summary.json").read_text())
    summary_b = json.loads((limited / "report" / "summary.json").read_text())
    assert summary_b["groups"] == summary_a["groups"] and summary_b["headline"] == summary_a["headline"]
    # the host refused some requests; the client backed off to one in flight and recorded it
    assert throttled > 0 and most >= 1
    events = [json.loads(line) for line in (limited / "events.jsonl").read_text().splitlines()]
    target = [e for e in events if e["event"] == "requests" and e.get("server") == "target"]
    last = target[-1]  # the counters are the server's totals so far
    assert last["throttled"] == throttled and last["limit_min"] == 1 and last["failures"] == 0
