"""A probes study through chat (issue "hosted"): ``[generation] route = "chat"`` asks every panel model by a rule.

The panel is the tiny organism's chat variant: its reference in-process and its target served by ``calib serve``
behind tests/_hosted.py's proxy in ``chat_only`` mode (no /v1/completions, no /tokenize). The organism's models
do not solve tasks from their text (docs/probes.md), so what is checked is the procedure: every prompt asked n
times through chat with the rule's messages verbatim and distinct seeds when sampling, nothing through a
completion route, the rule recorded and stated, and a rule that shows an answer refused before any request.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from aiohttp import web

from calib._exceptions import InputError
from calib.data.rules import load_rule
from calib.study import RunOptions, run_study
from tests._hosted import HostedProxy

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


def _spec(cache_dir: Path, url: str, rule: str) -> str:
    return f"""[study]
name = "probes-chat"
kind = "probes"
seed = 0

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.reference]
kind = "embedded"
model_dir = "organism:chat-reference"
threads = 1

[servers.target]
kind = "openai"
base_url = "{url}/v1"
model = "organism-chat-target"
max_retries = 0

[models]
panel = ["reference", "target"]

[generation]
route = "chat"
rule = "{rule}"

[probes]
tasks = "organism:business"
style = "completion"
conditions = ["original", "syn40"]
n = 2
k = [1, 2]
temperature = 0.7
max_tokens = 64
bootstrap = 200
"""


class ChatHost(HostedProxy):
    """The ``chat_only`` host; with ``fail_seed`` set, a generation request of that seed gets HTTP 500."""

    fail_seed: int | None = None

    def answer(self, path: str, body: dict[str, Any] | None) -> web.Response | None:
        body = body or {}
        if (path == "/v1/chat/completions" and self.fail_seed is not None and body.get("seed") == self.fail_seed
                and int(body.get("max_tokens") or 16) > 1):
            return web.json_response({"error": {"message": "upstream overloaded", "type": "server_error"}}, status=500)
        return super().answer(path, body)


@pytest.fixture(scope="module")
def chat_host(served_organism_chat_target):
    """The chat target behind the session's ``calib serve`` (tests/_served.py) and this module's chat-only host."""
    with ChatHost(served_organism_chat_target, "chat_only") as host:
        yield host


def test_every_panel_model_is_asked_through_chat_by_the_rule(organism_tiny, chat_host, tmp_path):
    spec = tmp_path / "p.toml"
    spec.write_text(_spec(organism_tiny.root.parent.parent, chat_host.url, "continue"))
    check = subprocess.run([sys.executable, "-m", "calib", "check", str(spec), "--json"], capture_output=True,
                           text=True, timeout=600)
    assert check.returncode == 0, check.stdout + check.stderr
    target = json.loads(check.stdout)["servers"]["target"]
    assert target["needs"] == ["chat"] and target["missing"] == []  # the chat-only host suffices
    result = run_study(spec, run_dir=tmp_path / "run", options=RunOptions(progress=False))
    assert "report" in result.ran
    run = tmp_path / "run"
    prompts = pl.read_parquet(run / "tables" / "prompts.parquet").filter(
        pl.col("applicable") & pl.col("reference_passed"))
    generations = pl.read_parquet(run / "tables" / "probe_generations.parquet")
    assert prompts.height > 0
    assert generations.height == 2 * 2 * prompts.height  # n = 2 per prompt and model
    assert not generations["error"].fill_null("").str.starts_with("request failed").any()
    # the chat-only target: n chat requests per prompt (the probes' one-token asks aside), the rule's messages
    # verbatim, seeds 0 and 1 (sampling at T = 0.7 asks distinct draws), nothing answered through completions
    chats = [body for body in chat_host.bodies["/v1/chat/completions"] if body["max_tokens"] != 1]
    rule = load_rule("continue")
    expected = sorted(json.dumps(rule.messages(p, language="python"), sort_keys=True)
                      for p in prompts["prompt"].to_list() for _ in range(2))
    assert sorted(json.dumps(body["messages"], sort_keys=True) for body in chats) == expected
    assert sorted(body["seed"] for body in chats) == sorted([0, 1] * prompts.height)
    assert {body["temperature"] for body in chats} == {0.7}
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["generation"] == {"route": "chat", "rule": rule.record()}
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert summary["methods"]["generation"]["rule"]["sha256"] == rule.sha256
    report = (run / "report" / "report.md").read_text()
    assert "The panel's models were asked through their chat route" in report
    assert "prompt-selection rule `continue` version 1" in report


def test_a_rule_that_shows_the_answer_is_refused_before_any_request(organism_tiny, chat_host, tmp_path):
    spec = tmp_path / "p.toml"
    spec.write_text(_spec(organism_tiny.root.parent.parent, chat_host.url, "parrot"))
    before = len(chat_host.bodies["/v1/chat/completions"])
    with pytest.raises(InputError, match="generation.rule = 'parrot' shows the model the answer"):
        run_study(spec, run_dir=tmp_path / "run", options=RunOptions(progress=False))
    assert [b for b in chat_host.bodies["/v1/chat/completions"][before:] if b["max_tokens"] != 1] == []
    assert not (tmp_path / "run" / "tables" / "probe_generations.parquet").exists()


def test_a_failed_chat_sample_is_missing_and_pass_at_k_uses_the_samples_left(organism_tiny, chat_host, tmp_path):
    # each of the n = 2 samples is its own chat request (seeds 0 and 1); the host fails every seed-1 request of the
    # target, so each of its cells keeps one completed sample: pass@1 on n = 1, and no pass@2 cell at all
    spec = tmp_path / "p.toml"
    spec.write_text(_spec(organism_tiny.root.parent.parent, chat_host.url, "continue"))
    chat_host.fail_seed = 1
    try:
        run_study(spec, run_dir=tmp_path / "run", options=RunOptions(progress=False))
    finally:
        chat_host.fail_seed = None
    tables = tmp_path / "run" / "tables"
    gens = pl.read_parquet(tables / "probe_generations.parquet").filter(pl.col("model") == "target")
    assert gens.filter(pl.col("sample_index") == 1)["missing"].to_list() == ["request_failed"] * (gens.height // 2)
    assert gens.filter(pl.col("sample_index") == 0)["missing"].null_count() == gens.height // 2
    results = pl.read_parquet(tables / "test_results.parquet").filter(
        (pl.col("model") == "target") & (pl.col("sample_index") == 0))
    passk = pl.read_parquet(tables / "pass_at_k.parquet").filter(pl.col("model") == "target")
    tasks = results["task_id"].n_unique()
    for label in ("original", "syn40"):
        mine = results.filter(pl.col("label") == label)
        one = passk.filter((pl.col("label") == label) & (pl.col("k") == 1)).row(0, named=True)
        # 1 − C(n − c, 1)/C(n, 1) with n = 1: the one sample's pass (Chen et al. 2021, eq. 1)
        expected = [1.0 - math.comb(1 - int(p), 1) / math.comb(1, 1) for p in mine["passed"].to_list()]
        assert one["n_problems"] == tasks and one["estimate"] == pytest.approx(sum(expected) / tasks)
        two = passk.filter((pl.col("label") == label) & (pl.col("k") == 2)).row(0, named=True)
        assert (two["n_problems"], two["problems_missing"], two["estimate"]) == (0, tasks, None)
    syn40 = passk.filter((pl.col("label") == "syn40") & (pl.col("k") == 2)).row(0, named=True)
    assert (syn40["dropped_failed"], syn40["dropped_overflow"]) == (tasks, 0)
    report = (tmp_path / "run" / "report" / "report.md").read_text()
    assert f"`target` Syn-40 vs Original (pass@2): {tasks} by failed requests, 0 by overflow" in report
