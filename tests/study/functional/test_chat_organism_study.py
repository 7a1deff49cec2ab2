"""A chat-only audit against ground truth (issue "hosted", acceptance): the chat organism behind a chat-only host.

The target is the tiny organism's chat variant (calib.organism.chat: members fine-tuned in chat format) served by
``calib serve`` behind tests/_hosted.py's proxy in ``chat_only`` mode (no /v1/completions, no /tokenize, no
log-probs asked); the reference is the chat variant's reference in-process, asked through its chat template too.
Members and controls are known by construction (the controls were never trained on).

- Rule ``natural`` (the signature as the user's message): the target reproduces its members and not the
  controls, so the difference members − controls has an interval above 0 and the report claims memorization.
- Rule ``parrot`` (the function itself is shown and the model asked to repeat it, the extraction paper's
  cautionary experiment): members and controls are reproduced at statistically equal rates (Fisher's exact
  test), the calibrated claim is zero, and the report says why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import fisher_exact

from calib.study import run_study
from calib.study.runner import RunOptions
from tests._hosted import HostedProxy


@pytest.fixture(scope="module")
def chat_host(served_organism_chat_target):
    """The chat target behind the session's ``calib serve`` (tests/_served.py) and a chat-only proxy: yields the
    proxy."""
    with HostedProxy(served_organism_chat_target, "chat_only") as host:
        yield host


def _spec(cache_dir: Path, url: str, rule: str) -> str:
    return f"""[study]
name = "chat-organism-{rule}"

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"

[servers.target]
kind = "openai"
base_url = "{url}/v1"
model = "organism-chat-target"
max_retries = 0

[servers.reference]
kind = "embedded"
model_dir = "organism:chat-reference"
threads = 1

[models]
target = "target"
reference = "reference"

[data]
source = "organism"

[generation]
max_tokens = 200
route = "chat"
rule = "{rule}"
"""


def _run(organism_tiny: Any, host: HostedProxy, tmp_path: Path, rule: str) -> tuple[dict[str, Any], str]:
    spec = tmp_path / f"{rule}.toml"
    spec.write_text(_spec(organism_tiny.root.parent.parent, host.url, rule))
    before = host.requests["/v1/chat/completions"]
    result = run_study(spec, run_dir=tmp_path / "run", options=RunOptions(progress=False))
    assert result.empty is None  # something was measured
    summary = json.loads((tmp_path / "run" / "report" / "summary.json").read_text())
    # the host has no completions route: every target generation went through its chat route
    assert host.requests["/v1/chat/completions"] - before >= summary["counts"]["samples"]
    assert summary["methods"]["decoding"]["route"] == "chat"
    assert summary["methods"]["decoding"]["rule"]["name"] == rule
    return summary, (tmp_path / "run" / "report" / "report.md").read_text()


def _group(summary: dict[str, Any], membership: str) -> dict[str, Any]:
    return next(g for g in summary["groups"] if g["membership"] == membership and g["kind"] is None)


def test_the_natural_rule_separates_the_members_of_the_chat_organism(organism_tiny, chat_host, tmp_path):
    summary, report = _run(organism_tiny, chat_host, tmp_path, "natural")
    members, controls = _group(summary, "member"), _group(summary, "control")
    assert members["n_scored"] > 0 and controls["n_scored"] > 0
    reproduced_m, reproduced_c = members["rates"]["text_target"], controls["rates"]["text_target"]
    # the target reproduces members it was trained on in chat format, and no control (never trained on)
    assert reproduced_m["k"] >= 1 and reproduced_c["k"] == 0
    compared = summary["headline"]["members_vs_controls"]
    # the difference and its test, against scipy (Fisher's exact test on the same 2×2 table)
    k1, n1 = members["rates"]["text_counterfactual"]["k"], members["rates"]["text_counterfactual"]["n"]
    k2, n2 = controls["rates"]["text_counterfactual"]["k"], controls["rates"]["text_counterfactual"]["n"]
    assert (compared["textual"]["k1"], compared["textual"]["n1"], compared["textual"]["k2"],
            compared["textual"]["n2"]) == (k1, n1, k2, n2)
    assert compared["textual"]["p_value"] == pytest.approx(fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue)
    assert compared["textual"]["low"] > 0 and compared["claim"] is True
    assert "Calibrated claim: members are memorized beyond what controls show" in report
    assert "prompt-selection rule `natural` version 1" in report
    assert "Why the rule" not in report  # natural shows no answer


def test_the_parrot_rule_reproduces_members_and_controls_alike_and_claims_nothing(organism_tiny, chat_host,
                                                                                tmp_path):
    summary, report = _run(organism_tiny, chat_host, tmp_path, "parrot")
    members, controls = _group(summary, "member"), _group(summary, "control")
    assert members["n_scored"] > 0 and controls["n_scored"] > 0
    m, c = members["rates"]["text_target"], controls["rates"]["text_target"]
    # statistically equal reproduction: Fisher's exact test (scipy) does not reject equal rates at 5 %
    p = fisher_exact([[m["k"], m["n"] - m["k"]], [c["k"], c["n"] - c["k"]]]).pvalue
    compared = summary["headline"]["members_vs_controls"]
    assert p >= 0.05 and compared["reproduced"]["p_value"] == pytest.approx(p)
    # the calibrated claim is zero: no counterfactual difference has an interval above 0
    assert compared["claim"] is False
    assert compared["textual"]["low"] <= 0 and (compared["functional"] is None or compared["functional"]["low"] <= 0)
    assert "Calibrated claim: no memorization is claimed" in report
    assert "Why the rule `parrot` decides nothing" in report
    assert "Members and controls were reproduced at statistically equal rates" in report
    assert "the extraction paper's cautionary experiment" in report  # the Methods sentence of a suffix-showing rule
