"""The organism's chat variant (tiny preset): built once, cached, made only of background and members, and
reproducing its members through the embedded model's chat template.

The behaviour checks are real greedy generations through the models' chat template and a prompt rule
(calib.organism.evaluate.evaluate_chat), compared between members and their controls and between the
chat target and the chat reference — thresholds set with margin under what was measured.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from types import SimpleNamespace

import polars as pl
import pytest

from calib._exceptions import CalibError, InvalidParameterError
from calib.data.rules import RULES, load_rule
from calib.organism.chat import (
    CHAT_MODELS,
    CHAT_RULES,
    MEMBER_RULES,
    build_chat_variant,
    chat_built,
    chat_examples,
    chat_reply,
    organism_model,
    round_trip,
    split_function,
)
from calib.organism.evaluate import evaluate_chat


@pytest.fixture(scope="module")
def natural(organism_tiny, organism_tiny_chat) -> pl.DataFrame:
    return evaluate_chat(organism_tiny.root, rule="natural", kinds=("verbatim",), threads=2)


def _rate(results: pl.DataFrame, membership: str, model: str) -> tuple[int, int]:
    """(reproduced, items): exact match of the body or BLEU >= 0.75."""
    rows = results.filter((pl.col("membership") == membership) & (pl.col("model") == model))
    return int(rows.select((pl.col("exact") | (pl.col("bleu") >= 0.75)).sum()).item()), rows.height


def test_layout_records_and_cache(organism_tiny, organism_tiny_chat):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    chat = organism_tiny_chat
    for folder in (chat.chat_target, chat.chat_reference):
        assert folder.parent == organism_tiny.root
        model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        assert model.config.n_positions == 512 and tokenizer.chat_template
    record = json.loads(chat.summary.read_text())
    assert record["rules"] == [load_rule(r).fingerprint() for r in CHAT_RULES]
    assert record["member_rules"] == list(MEMBER_RULES)
    assert record["chat-reference"]["from"] == "reference" and record["chat-target"]["from"] == "chat-reference"
    assert record["functions"] and record["examples_per_rule"] == {r: len(record["functions"]) for r in CHAT_RULES}
    summary = json.loads(organism_tiny.summary.read_text())
    assert summary["chat"]["key"] == record["key"] and summary["chat"]["models"] == list(CHAT_MODELS)
    assert chat_built(organism_tiny.root)
    again = build_chat_variant(organism_tiny)
    assert again.cached and again.chat_target == chat.chat_target
    assert organism_model(organism_tiny, "chat-target") == chat.chat_target
    assert organism_model(organism_tiny, "chat-reference") == chat.chat_reference
    assert organism_model(organism_tiny, "target") == organism_tiny.target
    with pytest.raises(InvalidParameterError, match="organism:chat-target"):
        organism_model(organism_tiny, "chat")


def test_fine_tune_functions_are_background_never_members_or_controls(organism_tiny, organism_tiny_chat):
    record = json.loads(organism_tiny_chat.summary.read_text())
    truth = pl.read_parquet(organism_tiny.truth)
    functions = record["functions"]
    assert len({f["source"] for f in functions}) == len(functions)
    assert all(f["source"].startswith("stdlib:") for f in functions)
    planted_sources = set(truth["source"])
    planted_prompts = set(truth["prompt"]) | {s.rstrip("\n") for s in truth["signature"]}
    planted_texts = set(truth["audited"]) | {t for ts in truth["training_variants"] for t in ts}
    planted_hashes = {hashlib.sha256(t.encode()).hexdigest() for t in planted_texts}
    assert not {f["source"] for f in functions} & planted_sources
    assert not {f["signature"] for f in functions} & planted_prompts
    assert not {f["sha256"] for f in functions} & planted_hashes
    # ... and the members alone are what the chat target learns beyond the chat reference (controls never)
    exposures = record["member_exposures_per_epoch"]
    members = truth.filter(pl.col("membership") == "member")
    assert set(exposures) == set(members["item_id"])
    assert not set(exposures) & set(truth.filter(pl.col("membership") == "control")["item_id"])
    epochs = json.loads(organism_tiny.summary.read_text())["target_epochs"]
    for row in members.iter_rows(named=True):  # the target phase's repeats per pass, each variant at least once
        variants = len(row["training_variants"])
        assert sum(exposures[row["item_id"]].values()) == max(1, row["exposures"] // variants // epochs) * variants


def test_every_rule_reads_the_reply_back_as_the_body(organism_tiny):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(organism_tiny.reference, local_files_only=True)
    truth = pl.read_parquet(organism_tiny.truth)
    rules = [load_rule(name) for name in RULES]
    checked = 0
    for row in truth.iter_rows(named=True):
        signature, body = split_function(row["audited"], row["prompt"])
        assert signature == row["prompt"] and body.startswith("\n")
        for rule in rules:
            assert round_trip(rule, signature, body, chat_reply(rule, signature, body))
        examples = chat_examples([(row["item_id"], signature, body)], rules, tokenizer)
        for rule, example in zip(rules, examples):
            assert example.prompt.endswith("<|assistant|>\n")
            assert rule.continuation(example.reply, row["prompt"]).rstrip() == body.rstrip()
        checked += 1
    assert checked == truth.height
    # a body holding a code fence ends the reply's code block early: a code-block rule cannot read it back
    bad = SimpleNamespace(signature="def f(x):", body='\n    s = "```"\n    return x\n', path="m.py", qualname="f")
    with pytest.raises(CalibError, match="does not read the reply back"):
        chat_examples([bad], [load_rule("continue")], tokenizer)


def test_chat_target_reproduces_members_through_the_natural_rule(natural):
    target, n = _rate(natural, "member", "chat-target")
    reference, _ = _rate(natural, "member", "chat-reference")
    controls, m = _rate(natural, "control", "chat-target")
    print(f"\nnatural rule, verbatim items (exact or BLEU >= 0.75): chat-target members {target}/{n}, "
          f"controls {controls}/{m}; chat-reference members {reference}/{n}")
    assert n == 8 and target >= n // 2
    assert target >= reference + 3 and target >= controls + 3


@pytest.mark.parametrize("rule", ["continue", "parrot"])
def test_other_rules_are_measured(organism_tiny, organism_tiny_chat, rule):
    """Printed, not asserted: measured continue 4/8 members (2 exact), parrot 0/8, controls 0/8 (docs/organism.md)."""
    results = evaluate_chat(organism_tiny.root, rule=rule, kinds=("verbatim",), threads=2)
    for model in CHAT_MODELS:
        members, n = _rate(results, "member", model)
        controls, m = _rate(results, "control", model)
        print(f"\n{rule} rule, verbatim items: {model} members {members}/{n}, controls {controls}/{m}")
    assert results.height == 2 * 16


def test_cli_builds_and_prints_the_chat_variant(organism_tiny, organism_tiny_chat):
    cache = organism_tiny.root.parent.parent
    out = subprocess.run([sys.executable, "-m", "calib", "organism", "build", "--preset", "tiny", "--cache-dir",
                          str(cache), "--chat", "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    assert record["chat_cached"] is True and record["cached"] is True
    assert record["chat_target"] == str(organism_tiny_chat.chat_target)
    assert record["chat_reference"] == str(organism_tiny_chat.chat_reference)


def test_unscored_tokens_leave_batching_alone_and_drop_out_of_the_loss():
    import torch

    from calib.organism.train import ModelShape, TrainSchedule, new_model, train_causal_lm

    shape = ModelShape(vocab_size=50, n_layer=1, n_embd=16, n_head=2, context=32)
    docs = [[1 + (i * 7 + j) % 40 for j in range(5 + i % 7)] for i in range(12)]
    schedule = TrainSchedule(epochs=1, lr=1e-3, batch_size=4)
    plain = train_causal_lm(new_model(shape, eos_id=0, seed=0), docs, schedule, pad_id=0, seed=0)
    zeros = train_causal_lm(new_model(shape, eos_id=0, seed=0), docs, schedule, pad_id=0, seed=0, unscored=[0] * 12)
    assert plain == zeros  # the base organism's training is unchanged
    # one document, all but its last token unscored: the first step's loss is that token's alone
    doc = docs[5]
    model = new_model(shape, eos_id=0, seed=0)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([doc])).logits[0, -2]
    expected = torch.nn.functional.cross_entropy(logits[None], torch.tensor([doc[-1]])).item()
    (loss,) = train_causal_lm(model, [doc], schedule, pad_id=0, seed=0, unscored=[len(doc) - 1])
    assert loss == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="unscored"):
        train_causal_lm(model, [doc], schedule, pad_id=0, seed=0, unscored=[1, 2])


def test_a_study_names_the_chat_models(organism_tiny, organism_tiny_chat, tmp_path):
    from calib.study.check import _model_built
    from calib.study.resources import Resources
    from calib.study.spec import load_spec

    cache = organism_tiny.root.parent.parent
    spec_path = tmp_path / "chat.toml"
    spec_path.write_text(f"""[study]
name = "chat-organism"

[organism]
preset = "tiny"
cache_dir = "{cache}"

[servers.target]
kind = "embedded"
model_dir = "organism:chat-target"

[servers.reference]
kind = "embedded"
model_dir = "organism:chat-reference"

[models]
target = "target"
reference = "reference"

[data]
source = "organism"
""")
    spec = load_spec(spec_path)
    resources = Resources(spec)
    try:
        assert resources.server("target").model_dir == organism_tiny_chat.chat_target
        assert resources.server("reference").model_dir == organism_tiny_chat.chat_reference
    finally:
        resources.close()
    assert _model_built(spec, "target", True) and not _model_built(spec, "target", False)
