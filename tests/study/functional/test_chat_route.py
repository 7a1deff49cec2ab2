"""Generation through chat (issue "hosted"): ``[generation] route = "chat"`` asks both models through their chat
route, the request built by a prompt-selection rule (calib/data/rules) the same way for every sample; the
run records the rule and the report states it.

The chat-only host is the tiny organism's target behind ``calib serve`` and tests/_hosted.py's proxy in
``chat_only`` mode (no /v1/completions, no /tokenize); the reference is the organism's reference model
in-process, asked through its chat template too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from calib._exceptions import InputError
from calib.data.rules import load_rule
from calib.study import run_study
from calib.study.runner import RunOptions
from calib.study.spec import load_spec
from tests._hosted import HostedProxy


def _spec(cache_dir: Path, url: str, generation: str, *, limit: int = 6) -> str:
    return f"""[study]
name = "chat-route"

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
limit = {limit}

[generation]
max_tokens = 64
{generation}
"""


def test_a_chat_only_host_is_asked_through_the_rule_identically_for_every_sample(organism_tiny,
                                                                                  served_organism_target, tmp_path):
    spec = tmp_path / "chat.toml"
    with HostedProxy(served_organism_target, "chat_only") as host:
        spec.write_text(_spec(organism_tiny.root.parent.parent, host.url, 'route = "chat"\nrule = "continue"'))
        # calib check: the chat-only host lacks complete and tokenize, and the study needs neither
        check = subprocess.run([sys.executable, "-m", "calib", "check", str(spec), "--json"], capture_output=True,
                               text=True, timeout=600)
        assert check.returncode == 0, check.stdout + check.stderr
        target = json.loads(check.stdout)["servers"]["target"]
        assert target["missing"] == [] and target["capabilities"]["complete"] is False
        result = run_study(spec, run_dir=tmp_path / "run", options=RunOptions(progress=False))
        completions = host.requests["/v1/completions"]
    run = tmp_path / "run"
    samples = pl.read_parquet(run / "tables" / "samples.parquet")
    generations = pl.read_parquet(run / "tables" / "generations.parquet")
    assert set(samples["membership"]) == {"member", "control"}  # both kinds of sample were asked
    # one chat request per sample reached the host, besides the capability probes' one-token asks; the host has
    # no completions route (every try of it was the probes', answered 404)
    chats = [body for body in host.bodies["/v1/chat/completions"] if body["max_tokens"] != 1]
    assert len(chats) == samples.height and completions > 0
    assert json.loads((run / "manifest.json").read_text())["servers"]["target"]["complete"] is False
    rule = load_rule("continue")
    expected = {json.dumps(rule.messages(r["prompt"], language=r["language"]), sort_keys=True)
                for r in samples.to_dicts()}
    sent = {json.dumps(body["messages"], sort_keys=True) for body in chats}
    assert sent == expected  # the same rule, verbatim, for members and controls
    assert {body["max_tokens"] for body in chats} == {64} and {body["temperature"] for body in chats} == {0}
    assert generations.height == 2 * samples.height and generations["error"].is_null().sum() + \
        generations["error"].str.starts_with("generation ").sum() == generations.height  # no request failed
    # every reply is kept as the host sent it, the text being what the rule reads back from it
    prompts = dict(samples.select("sample_id", "prompt").iter_rows())
    for row in generations.iter_rows(named=True):
        assert row["reply"] is not None and row["text"] == rule.continuation(row["reply"], prompts[row["sample_id"]])
    # the run states the route and the rule; the report's Methods says it
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["generation"]["route"] == "chat"
    assert manifest["generation"]["rule"] | {} == {**rule.fingerprint(), "description": rule.description,
                                                   "reply": "code_block", "shows_suffix": False}
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert summary["methods"]["decoding"]["route"] == "chat"
    assert summary["methods"]["decoding"]["rule"]["sha256"] == rule.sha256
    report = (run / "report" / "report.md").read_text()
    assert "prompt-selection rule `continue` version 1" in report
    assert result.empty is None or "scored" in result.empty  # the untrained organism may answer nothing usable


def test_the_completion_route_records_no_rule(organism_tiny, tmp_path):
    spec = tmp_path / "complete.toml"
    spec.write_text(_spec(organism_tiny.root.parent.parent, "http://127.0.0.1:9", "", limit=2)
                    .replace('kind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "organism-target"\n'
                             'max_retries = 0', 'kind = "embedded"\nmodel_dir = "organism:target"'))
    run_study(spec, run_dir=tmp_path / "run", options=RunOptions(until="generate", progress=False))
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["generation"] == {"route": "complete",
                                                                                          "rule": None}


@pytest.mark.parametrize("generation,message", [
    ('rule = "parrot"', "generation: rule = 'parrot' applies to the chat route only; set route = \"chat\""),
    ('route = "chat"\nrule = "verbatim"', "'verbatim' is not a built-in prompt-selection rule (natural, continue, "
                                          "parrot)"),
    ('route = "chat"\nrule = "rules/missing.toml"', "generation.rule: 'rules/missing.toml' is not a file"),
    ('route = "chat"\nrule = "mine.toml"', "unknown key 'users' in the prompt rule"),
    ('route = "talk"', "generation.route"),
])
def test_bad_route_and_rule_keys_are_one_line_errors(tmp_path, generation, message):
    (tmp_path / "mine.toml").write_text('name = "mine"\nversion = 1\nusers = "{prompt}"\nuser = "{prompt}"\n'
                                        'reply = "raw"\n')
    spec = tmp_path / "spec.toml"
    spec.write_text(_spec(tmp_path, "http://127.0.0.1:9", generation))
    with pytest.raises(InputError) as caught:
        load_spec(spec)
    text = str(caught.value)
    assert message in text and "\n" not in text
    assert "mine.toml" in text if "users" in message else "spec.toml" in text


def test_a_user_rule_file_is_read_from_the_specs_folder(tmp_path):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "terse.toml").write_text('name = "terse"\nversion = 2\nuser = "Go on: {prompt}"\n'
                                                   'reply = "first_function"\n')
    spec = tmp_path / "spec.toml"
    spec.write_text(_spec(tmp_path, "http://127.0.0.1:9", 'route = "chat"\nrule = "rules/terse.toml"'))
    loaded = load_spec(spec)
    assert loaded.generation.chat_rule == str(tmp_path / "rules" / "terse.toml")
    assert load_rule(loaded.generation.chat_rule).version == 2


def test_an_extraction_study_through_chat_takes_the_generation_procedures_only(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(_spec(tmp_path, "http://127.0.0.1:9", 'route = "chat"').replace(
        '[study]\nname = "chat-route"', '[study]\nname = "chat-route"\nkind = "extraction"'))
    # the default procedures read teacher-forced log-probs, which no chat route gives
    with pytest.raises(InputError, match=r"extraction.procedures: \['greedy', 'top_k', 'base', 'near_verbatim_greedy', "
                                         r"'near_verbatim'\] need teacher-forced log-probs"):
        load_spec(spec)
    spec.write_text(spec.read_text() + '\n[extraction]\nprocedures = ["greedy_prefix", "sampled"]\n')
    assert load_spec(spec).generation.route == "chat"
