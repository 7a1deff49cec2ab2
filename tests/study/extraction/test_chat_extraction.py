"""Extraction through a chat-only host (issue "hosted"): windows asked through chat by a prompt-selection rule.

The target is the tiny organism's chat variant (calib.organism.chat) served by ``calib serve`` behind
tests/_hosted.py's proxy in ``chat_only`` mode (no /v1/completions, no /tokenize, no log-probs); the
windows are cut with the chat target's own ``tokenizer.json``. Members and controls are known by
construction (the controls were never trained on).

- Rule ``continue``: every window is asked through chat, the reply's code read back from where the
  window's prefix stops (usually inside a line). The chat variant was fine-tuned on whole signatures as
  prompts, not on prefixes cut at a token, so it reproduces few members from a 16-token prefix — but it
  reproduces some, and no control: the conformal test claims members and no more controls than α allows.
- Rule ``parrot`` (the suffix itself is shown): members and controls are reproduced at statistically equal
  rates and nothing is claimed — what matched controls do to a rule that shows the answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from scipy.stats import fisher_exact

from calib.study import check_study, run_study
from calib.study.runner import RunOptions
from tests._hosted import HostedProxy

SAMPLES = 4
ALPHA = 0.1


@pytest.fixture(scope="module")
def chat_served(served_organism_chat_target: str) -> str:
    """The chat target behind the session's ``calib serve`` (tests/_served.py): its URL (each run puts a proxy of
    its mode in front)."""
    return served_organism_chat_target


def _spec(organism_tiny: Any, organism_tiny_chat: Any, url: str, rule: str, procedures: str) -> str:
    return f"""[study]
name = "chat-extraction-{rule}"
kind = "extraction"
seed = 0

[organism]
preset = "tiny"
cache_dir = "{organism_tiny.root.parent.parent}"
extra_controls = 24

[servers.target]
kind = "openai"
base_url = "{url}/v1"
model = "organism-chat-target"
max_retries = 0

[models]
target = "target"

[data]
source = "organism"
kinds = ["verbatim"]

[prompt]
tokenizer = "file"
tokenizer_file = "{organism_tiny_chat.chat_target / 'tokenizer.json'}"

[generation]
route = "chat"
rule = "{rule}"

[extraction]
prefix_tokens = 16
suffix_tokens = [16]
procedures = {procedures}
samples = {SAMPLES}

[analyze]
alpha = {ALPHA}
"""


def _run(organism_tiny, organism_tiny_chat, url: str, root: Path, rule: str, mode: str = "chat_only",
         procedures: str = '["greedy_prefix", "sampled"]') -> dict[str, Any]:
    spec = root / f"{rule}.toml"
    with HostedProxy(url, mode) as host:
        spec.write_text(_spec(organism_tiny, organism_tiny_chat, host.url, rule, procedures))
        estimate = check_study(spec, probe=False, estimate=True)["estimate"]  # asks the host nothing
        result = run_study(spec, run_dir=root / rule, options=RunOptions(progress=False))
        completions = host.bodies.get("/v1/completions", [])
        asked = [b for b in host.bodies["/v1/chat/completions"] if b.get("max_tokens", 0) > 1]  # not the probes
    assert result.empty is None
    run = root / rule
    windows = pl.read_parquet(run / "tables" / "windows.parquet").filter(pl.col("error").is_null())
    scores = pl.read_parquet(run / "tables" / "scores.parquet").join(
        windows.select("window_id", "membership", "prefix", "suffix"), on="window_id")
    return {"run": run, "windows": windows, "scores": scores, "asked": asked, "estimate": estimate,
            "completions": completions, "summary": json.loads((run / "report" / "summary.json").read_text()),
            "manifest": json.loads((run / "manifest.json").read_text()),
            "report": (run / "report" / "report.md").read_text()}


@pytest.fixture(scope="module")
def runs(organism_tiny, organism_tiny_chat, chat_served, tmp_path_factory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("chat-extraction")
    out = {rule: _run(organism_tiny, organism_tiny_chat, chat_served, root, rule) for rule in ("continue", "parrot")}
    # a chat host that gives output-token log-probs: greedy_logprob beside greedy_prefix, rule natural
    out["natural"] = _run(organism_tiny, organism_tiny_chat, chat_served, root, "natural", "chat_logprobs",
                          '["greedy_prefix", "greedy_logprob"]')
    return out


def test_every_window_is_asked_through_chat_by_the_rule(runs):
    run = runs["continue"]
    scores, windows = run["scores"], run["windows"]
    assert scores["error"].null_count() == scores.height  # every window scored, none failed
    # one greedy request and `samples` sampled ones per window, all through chat (the host has no completions)
    assert len(run["asked"]) == windows.height * (1 + SAMPLES)
    assert all(b.get("max_tokens", 0) <= 1 for b in run["completions"])  # the probes' only (answered 404)
    for body in run["asked"]:
        user = body["messages"][-1]["content"]
        assert user.startswith("Continue this python code exactly")
    greedy = [b for b in run["asked"] if b["temperature"] == 0.0]
    assert len(greedy) == windows.height
    assert {b["seed"] for b in run["asked"] if b["temperature"] > 0} == set(range(SAMPLES))
    manifest = run["manifest"]
    assert manifest["generation"]["route"] == "chat" and manifest["generation"]["rule"]["name"] == "continue"
    assert manifest["window_tokenizer"]["source"] == "file"
    assert "prompt-selection rule `continue` version 1" in run["report"]  # the report states the rule


def test_the_estimate_bounds_the_chat_requests_the_run_sends(runs):
    run = runs["continue"]
    (score,) = [e for e in run["estimate"]["stages"] if e["stage"] == "score" and e["server"] == "target"]
    # a chat request is one generation: one greedy and `samples` sampled requests per window; the estimate
    # bounds the windows (a sample's bytes as its tokens) and so the requests
    assert score["requests"] % (1 + SAMPLES) == 0 and len(run["asked"]) <= score["requests"]
    output = sum(b["max_tokens"] for b in run["asked"])
    assert output <= score["output_tokens"]


def test_the_reply_is_kept_and_read_back_from_where_the_prefix_stops(runs):
    scores = runs["continue"]["scores"].filter(pl.col("procedure") == "greedy_prefix")
    full = 0
    for row in scores.iter_rows(named=True):
        detail = json.loads(row["detail"])
        reply, generation = detail["reply"], detail["generation"]
        assert generation in reply or reply.endswith(generation.lstrip("\n"))  # read back from the raw reply
        if row["value"] == 1.0:
            full += 1
            assert generation.startswith(row["suffix"])
            # the prefix usually ends inside a line: the reply repeats that line, the continuation starts mid-line
            assert (row["prefix"].rsplit("\n", 1)[-1].lstrip() + row["suffix"].split("\n", 1)[0]) in reply
    assert full >= 1


def test_members_are_claimed_and_controls_are_not(runs):
    scores = runs["continue"]["scores"].filter(pl.col("procedure") == "greedy_prefix")
    members = scores.filter(pl.col("membership") == "member")["value"]
    controls = scores.filter(pl.col("membership") == "control")["value"]
    assert controls.max() < members.max()
    summary = runs["continue"]["summary"]
    points = [h["operating_point"] for h in summary["headline"]
              if h["procedure"] == "greedy_prefix" and h["role"] == "target"]
    (point,) = points
    assert point["claims"] >= 1  # members above every control's score are claimed at the certified level
    assert point["in_sample_fpr"] <= ALPHA


def test_parrot_reproduces_members_and_controls_alike_and_claims_nothing(runs):
    run = runs["parrot"]
    scores = run["scores"].filter(pl.col("procedure") == "greedy_prefix")
    assert scores["error"].null_count() == scores.height
    for body in run["asked"]:  # the suffix is shown to the model
        assert body["messages"][-1]["content"].startswith("Repeat the following python code exactly")
    full = scores.with_columns(hit=pl.col("value") == 1.0).group_by("membership").agg(
        pl.col("hit").sum().alias("hits"), pl.len().alias("n"))
    counts = {r["membership"]: (r["hits"], r["n"]) for r in full.iter_rows(named=True)}
    (mh, mn), (ch, cn) = counts["member"], counts["control"]
    # members and controls reproduced at statistically equal rates (Fisher's exact test, scipy)
    assert fisher_exact([[mh, mn - mh], [ch, cn - ch]]).pvalue > 0.05
    (point,) = [h["operating_point"] for h in run["summary"]["headline"]
                if h["procedure"] == "greedy_prefix" and h["role"] == "target"]
    assert point["claims"] == 0
    assert "cautionary experiment" in run["report"]  # and says what a rule that shows the answer is worth


def test_greedy_logprob_reads_the_chat_replys_own_log_probs(runs):
    run = runs["natural"]
    assert run["manifest"]["servers"]["target"]["chat_logprobs"] is True
    # one greedy request per window asks the log-probs of its tokens with the host's most alternatives (20)
    assert len(run["asked"]) == run["windows"].height
    assert all(b["logprobs"] is True and b["top_logprobs"] == 20 for b in run["asked"])
    scores = run["scores"]
    assert scores["error"].null_count() == scores.height
    wide = scores.pivot(on="procedure", index=["window_id", "membership"], values=["value", "detail"])
    for row in wide.iter_rows(named=True):
        detail = json.loads(row["detail_greedy_logprob"])
        assert detail["reply"] == detail["generation"]  # natural: the reply is the continuation as it is
        # exact exactly when the greedy reply reproduces the whole suffix (greedy_prefix = 1)
        assert detail["exact"] is (row["value_greedy_prefix"] == 1.0)
        assert 0.0 <= row["value_greedy_logprob"] <= 1.0
    members = wide.filter(pl.col("membership") == "member")["value_greedy_logprob"]
    controls = wide.filter(pl.col("membership") == "control")["value_greedy_logprob"]
    assert members.len() == 8 and controls.len() >= 20
    assert members.max() > controls.max()  # a member reproduced verbatim outscores every control's bound
    claims = pl.read_parquet(run["run"] / "tables" / "extraction_claims.parquet").filter(
        pl.col("procedure") == "greedy_logprob")
    assert claims.filter(pl.col("membership") == "control")["claim"].sum() <= ALPHA * controls.len()
