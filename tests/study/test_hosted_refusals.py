"""Refuse before work, and never succeed empty (issue "hosted"): a study against hosts that cannot do
what it needs is refused before any stage, naming every missing capability; a host that fails every
generation after looking healthy ends the study with exit 3 and the cause, in the report too.

The hosts are ``calib serve`` (the session's tiny model) behind tests/_hosted.py's loopback proxy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._hosted import HostedProxy

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

CODE = '''def scale(values, factor=3):
    out = []
    for v in values:
        out.append(v * factor)
    return out


def clamp(x, low=0, high=10):
    if x < low:
        return low
    if x > high:
        return high
    return x
'''


def _spec(target: str, reference: str, corpus: Path) -> str:
    def server(url: str) -> str:
        # two servers of one model name: each says which checkpoint it serves (calib refuses them otherwise)
        revision = "hosted" if url == target else "direct"
        return (f'kind = "openai"\nbase_url = "{url}"\nmodel = "tiny"\nrevision = "{revision}"\nmax_retries = 1\n'
                'timeout = 60\n')

    return f"""[study]
name = "hosted"

[servers.target]
{server(target)}
[servers.reference]
{server(reference)}
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
max_tokens = 16
"""


def _calib(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "calib", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "mod.py").write_text(CODE)
    return folder


def test_a_chat_only_target_is_refused_before_any_stage_with_every_missing_capability(served_model, tmp_path,
                                                                                        corpus):
    with HostedProxy(served_model, "chat_only") as host:
        (tmp_path / "s.toml").write_text(_spec(host.url, served_model, corpus))
        checked = _calib("check", "s.toml", "--json", cwd=tmp_path)
        studied = _calib("study", "s.toml", "--run-dir", "run", "--quiet", cwd=tmp_path)
    found = json.loads(checked.stdout)
    assert checked.returncode == 2 and found["ok"] is False
    target = found["servers"]["target"]
    assert target["needs"] == ["complete", "tokenize"]  # a corpus study's prompts are cut by the target's tokenizer
    assert [m.split(":")[0] for m in target["missing"]] == ["complete", "tokenize"]
    assert "lacks complete" in target["error"] and "lacks tokenize" in target["error"]
    assert target["capabilities"]["complete"] is False and target["capabilities"]["chat"] is True
    assert found["servers"]["reference"]["missing"] == [] and "error" not in found["servers"]["reference"]
    # what each server's capabilities allow (calib.servers.base.PROCEDURE_NEEDS): the chat-only host chat (and the
    # embeddings route it forwards), nothing that completes, counts tokens or scores
    assert target["allows"] == ["functional, chat route (a prompt-selection rule)",
                                "extraction/census greedy_prefix, sampled through chat (a prompt-selection rule)",
                                "probes generations, chat route (a prompt-selection rule)", "judge, llm executor",
                                "embedding metric, semantic near-duplicates"]
    allows = found["servers"]["reference"]["allows"]  # calib serve itself: completions, tokenizer, log-probs
    assert {"functional, completion route", "functional prompts cut by the server's tokenizer",
            "extraction/census greedy, top_k, base (teacher-forced log-probs)", "probes CoDeC"} <= set(allows)
    # calib study: the same refusal, one line, exit 2, before the first stage wrote anything
    assert studied.returncode == 2, studied.stderr
    line = studied.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith("calib: error: the functional study cannot run")
    assert "server 'target' (openai, model 'tiny') lacks complete" in line and "lacks tokenize" in line
    assert "'reference'" not in line
    assert not (tmp_path / "run" / "tables").exists() or not any((tmp_path / "run" / "tables").iterdir())


def test_a_host_that_fails_every_generation_ends_the_study_with_exit_3_and_the_cause(served_model, tmp_path,
                                                                                       corpus):
    with HostedProxy(served_model, "outage_after_probe") as host:
        (tmp_path / "s.toml").write_text(_spec(host.url, host.url, corpus))
        studied = _calib("study", "s.toml", "--run-dir", "run", "--quiet", cwd=tmp_path)
        requests_after_first = sum(host.requests.values())
        again = _calib("study", "s.toml", "--run-dir", "run", "--quiet", cwd=tmp_path)
    assert studied.returncode == 3, studied.stdout + studied.stderr
    error = [line for line in studied.stderr.splitlines() if "error" in line]
    assert len(error) == 1
    assert error[0].startswith("calib study: error: the study measured nothing: none of the 2 samples was scored")
    assert "quota exceeded" in error[0]
    summary = json.loads((tmp_path / "run" / "report" / "summary.json").read_text())
    assert summary["counts"]["samples"] == 2 and summary["counts"]["scored"] == 0
    errors = summary["reasons"]["generation_errors"]
    assert set(errors) == {"target", "reference"} and all(sum(r["count"] for r in t) == 2 for t in errors.values())
    report = (tmp_path / "run" / "report" / "report.md").read_text()
    headline = report.split("## Headline", 1)[1].split("\n## ", 1)[0]
    assert "**Nothing was measured**: none of the 2 samples was scored" in headline and "quota exceeded" in headline
    # resumed with everything up to date: no request (not even a probe), and still not a success
    assert again.returncode == 3 and "ran: none" in again.stdout
    assert sum(host.requests.values()) == requests_after_first


def test_a_chat_only_host_that_fails_every_request_ends_the_study_with_exit_3_and_the_cause(served_model, tmp_path,
                                                                                              corpus):
    # a chat-only host (no completions, no tokenizer) that answers the probe's one-token chat and then fails
    # every request: asked through chat, with prompts counted by characters, the study measures nothing
    spec = _spec("URL", "URL", corpus).replace("[prompt]\n", '[prompt]\ntokenizer = "chars"\n').replace(
        "[generation]\n", '[generation]\nroute = "chat"\nrule = "continue"\n')
    with HostedProxy(served_model, "chat_outage_after_probe") as host:
        (tmp_path / "s.toml").write_text(spec.replace("URL", host.url))
        studied = _calib("study", "s.toml", "--run-dir", "run", "--quiet", cwd=tmp_path)
        failed = [b for b in host.bodies.get("/v1/chat/completions", []) if b["max_tokens"] > 1]
    assert studied.returncode == 3, studied.stdout + studied.stderr
    error = [line for line in studied.stderr.splitlines() if "error" in line]
    assert len(error) == 1
    assert error[0].startswith("calib study: error: the study measured nothing: none of the 2 samples was scored")
    assert "quota exceeded" in error[0]
    assert len(failed) >= 4  # both models asked through chat for both samples (each failure retried once)
