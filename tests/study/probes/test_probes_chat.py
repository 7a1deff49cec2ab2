"""A probes study through chat (issue "hosted"): ``[generation] route = "chat"`` asks every panel model by a rule.

The panel is the tiny organism's chat variant: its reference in-process and its target served by ``calib serve``
behind tests/_hosted.py's proxy in ``chat_only`` mode (no /v1/completions, no /tokenize). The organism's models
do not solve tasks from their text (docs/probes.md), so what is checked is the procedure: every prompt asked n
times through chat with the rule's messages verbatim and distinct seeds when sampling, nothing through a
completion route, the rule recorded and stated, and a rule that shows an answer refused before any request.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from calib._exceptions import InputError
from calib.data.rules import load_rule
from calib.study import RunOptions, run_study
from tests._hosted import HostedProxy
from tests._served import serving

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


@pytest.fixture(scope="module")
def chat_host(organism_tiny_chat, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "stderr.txt"
    with serving(organism_tiny_chat.chat_target, "organism-chat-target", log) as url, \
            HostedProxy(url, "chat_only") as host:
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
