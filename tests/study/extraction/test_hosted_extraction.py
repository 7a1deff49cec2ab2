"""An extraction study through generations alone (issue "hosted"): no log-probs, no ``/tokenize`` of the host's.

The tiny organism's target behind ``calib serve`` and tests/_hosted.py's proxy in mode ``no_tokenize`` (a
host with neither a tokenizer route nor any use of its log-probs here); the windows are cut with the
organism's own ``tokenizer.json`` (``[prompt] tokenizer = "file"``) and scored by ``greedy_prefix`` and
``sampled`` (docs/extraction.md "Scores without log-probs"). The same spec run directly against the server,
with its own ``/tokenize``, must cut the same windows; through a host that takes one request at a time
(``rate_limited``: 429 with Retry-After), the same scores.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from scipy import stats as sps

from tests._hosted import HostedProxy

ALPHA = 0.1
SAMPLES = 16
SUFFIX = 16


def _spec(cache_dir: Path, url: str, prompt: str) -> str:
    return f"""[study]
name = "generations-only"
kind = "extraction"
seed = 0

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"
extra_controls = 24

[servers.target]
kind = "openai"
base_url = "{url}/v1"
model = "organism-target"
max_retries = 0

[models]
target = "target"

[data]
source = "organism"
kinds = ["verbatim"]

[prompt]
{prompt}

[extraction]
prefix_tokens = 32
suffix_tokens = [{SUFFIX}]
procedures = ["greedy_prefix", "sampled"]
samples = {SAMPLES}

[analyze]
alpha = {ALPHA}
"""


def _study(root: Path, cache: Path, name: str, url: str, prompt: str, *extra: str) -> subprocess.CompletedProcess:
    (root / f"{name}.toml").write_text(_spec(cache, url, prompt))
    return subprocess.run([sys.executable, "-m", "calib", "study", f"{name}.toml", "--run-dir", name, "--quiet",
                           *extra], cwd=root, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})


@pytest.fixture(scope="module")
def runs(organism_tiny, served_organism_target, tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("hosted-extraction")
    cache = organism_tiny.root.parent.parent
    tokenizer = organism_tiny.target / "tokenizer.json"
    url = served_organism_target  # the session's calib serve of the organism's target (tests/_served.py)
    with HostedProxy(url, "no_tokenize") as host:
        hosted = _study(root, cache, "hosted", host.url, f'tokenizer = "file"\ntokenizer_file = "{tokenizer}"')
        requests, bodies = dict(host.requests), list(host.bodies["/v1/completions"])
    with HostedProxy(url, "direct") as host:
        direct = _study(root, cache, "direct", host.url, "", "--stage", "windows")
    # a host that takes one request at a time (429 + Retry-After); the client retries the refusals
    with HostedProxy(url, "rate_limited", concurrency=1, retry_after="0.05") as host:
        (root / "limited.toml").write_text(_spec(cache, host.url, f'tokenizer = "file"\ntokenizer_file = '
                                                 f'"{tokenizer}"').replace("max_retries = 0", "max_retries = 8"))
        limited = subprocess.run([sys.executable, "-m", "calib", "study", "limited.toml", "--run-dir", "limited",
                                  "--quiet"], cwd=root, capture_output=True, text=True, timeout=900,
                                 env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
        throttled = host.throttled
    return {"root": root, "hosted": hosted, "direct": direct, "requests": requests, "bodies": bodies,
            "tokenizer": tokenizer, "limited": limited, "throttled": throttled}


def _table(run: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(run / "tables" / f"{name}.parquet")


def _scores(run: Path, procedure: str) -> pl.DataFrame:
    windows = _table(run, "windows").filter(pl.col("error").is_null()).select("window_id", "membership")
    return _table(run, "scores").filter(pl.col("procedure") == procedure).join(windows, on="window_id")


def test_the_study_completes_without_log_probs_or_the_hosts_tokenizer(runs):
    assert runs["hosted"].returncode == 0, runs["hosted"].stderr
    run = runs["root"] / "hosted"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["servers"]["target"]["tokenize"] is False  # the probe found no tokenizer route
    assert manifest["window_tokenizer"]["source"] == "file"
    assert manifest["window_tokenizer"]["path"] == str(runs["tokenizer"])
    windows = _table(run, "windows").filter(pl.col("error").is_null()).height
    # past the capability probe, every request was a plain completion: no echo, no prompt log-probs
    asked = [b for b in runs["bodies"] if int(b.get("max_tokens") or 0) > 1]
    assert not [b for b in asked if b.get("echo") or b.get("prompt_logprobs") or b.get("logprobs")]
    greedy = [b for b in asked if b.get("temperature") == 0.0]
    sampled = [b for b in asked if b.get("n") == SAMPLES]
    assert len(greedy) == windows and len(sampled) == windows  # one request of each per window
    assert all(b["max_tokens"] == SUFFIX and b["temperature"] == 1.0 for b in sampled)
    assert runs["requests"].get("/tokenize", 0) <= 1 and "/detokenize" not in runs["requests"]  # the probe's 404


def test_members_score_above_controls_and_the_conformal_test_claims_members(runs):
    run = runs["root"] / "hosted"
    claims = _table(run, "extraction_claims")
    for procedure in ("greedy_prefix", "sampled"):
        scores = _scores(run, procedure)
        assert scores["error"].is_null().all()
        members = scores.filter(pl.col("membership") == "member")["value"]
        controls = scores.filter(pl.col("membership") == "control")["value"]
        assert members.len() == 8 and controls.len() >= 20
        assert members.min() >= 0.0 and members.max() <= 1.0 and controls.min() >= 0.0
        assert members.mean() > controls.mean() + 0.4  # the planted members are reproduced, the controls not
        mine = claims.filter(pl.col("procedure") == procedure)
        member_claims = int(mine.filter(pl.col("membership") == "member")["claim"].sum())
        control_claims = int(mine.filter(pl.col("membership") == "control")["claim"].sum())
        assert member_claims >= 6, procedure
        assert control_claims <= ALPHA * controls.len(), procedure  # at most α of the controls
    greedy = _scores(run, "greedy_prefix")
    for row in greedy.iter_rows(named=True):  # the score is the matched share of the suffix's tokens
        detail = json.loads(row["detail"])
        assert detail["n_tokens"] == SUFFIX and row["value"] == detail["matched"] / SUFFIX


def test_sampled_details_state_the_interval_and_the_query_budget(runs):
    run = runs["root"] / "hosted"
    for row in _scores(run, "sampled").iter_rows(named=True):
        d = json.loads(row["detail"])
        k, n = d["hits"], d["samples"]
        assert n == SAMPLES and row["value"] == k / n
        # Clopper–Pearson 95 %: scipy.stats.beta.ppf(0.025, k, n − k + 1), beta.ppf(0.975, k + 1, n − k)
        assert d["p_low"] == pytest.approx(0.0 if k == 0 else sps.beta.ppf(0.025, k, n - k + 1), abs=1e-12)
        assert d["p_high"] == pytest.approx(1.0 if k == n else sps.beta.ppf(0.975, k + 1, n - k), abs=1e-12)
        expected = None if k == 0 else math.ceil(math.log(0.05) / math.log(1 - d["p_low"]))
        assert d["queries_95"] == expected
    summary = json.loads((run / "report" / "summary.json").read_text())
    (record,) = summary["sampled"]
    best = record["best_member"]
    assert (record["samples"], record["temperature"]) == (SAMPLES, 1.0)
    report = (run / "report" / "report.md").read_text()
    assert "## Sampling estimates" in report
    assert f"is extractable within {best['queries_95']} queries with probability ≥ 95 %" in report
    assert f"n = {SAMPLES} generations of ℓ_s tokens sampled at temperature 1" in report
    assert f"tokens are cut with the local tokenizer file `{runs['tokenizer']}`" in report


def test_the_hosts_own_tokenizer_cuts_the_same_windows(runs):
    assert runs["direct"].returncode == 0, runs["direct"].stderr
    direct = json.loads((runs["root"] / "direct" / "manifest.json").read_text())
    assert direct["window_tokenizer"]["source"] == "server" and direct["servers"]["target"]["tokenize"] is True
    columns = ["window_id", "sample_id", "start_token", "char_start", "char_end", "prefix", "suffix", "error"]
    a = _table(runs["root"] / "direct", "windows").select(columns).sort("window_id")
    b = _table(runs["root"] / "hosted", "windows").select(columns).sort("window_id")
    assert a.filter(pl.col("error").is_null()).height >= 28
    assert a.equals(b)


def test_a_rate_limited_host_gives_the_same_scores(runs):
    assert runs["limited"].returncode == 0, runs["limited"].stderr
    assert runs["throttled"] > 0  # the host refused requests, and the client waited and asked again
    columns = ["window_id", "role", "procedure", "value", "detail", "error"]
    a = _table(runs["root"] / "hosted", "scores").select(columns).sort("window_id", "procedure")
    b = _table(runs["root"] / "limited", "scores").select(columns).sort("window_id", "procedure")
    assert a.equals(b)  # greedy and seeded sampling: what the host answers does not depend on when it is asked
