"""Scoring the organism against its own ground truth: what do target and reference reproduce?

Each planted item's prompt (its signature, without a trailing newline) is completed greedily by both
models, up to the length of the audited function plus a margin, stopping at end-of-text. A completion
is compared with the audited continuation (the audited function after the prompt):

* ``exact``: identical up to trailing whitespace (verbatim reproduction);
* ``similarity``: difflib's ratio of matching characters, a cheap textual similarity in [0, 1];
* ``constants_recall`` (business rules): the share of the hidden table's keys and values that appear
  in the completion — the logic reproduced even where the surface form differs.

:func:`evaluate_chat` does the same through the models' chat template with a prompt-selection rule
(the chat variant's self-check, :mod:`calib.organism.chat`), and adds sentence ``bleu`` (calib's metric).

This is the organism's self-check (its tests and ``benchmarks/organism.py``); audits use the study
runner's metrics.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from calib.servers.base import SamplingParams

__all__ = ["completion_target", "constants_recall", "evaluate_chat", "evaluate_models", "summarize"]

_MARGIN_TOKENS = 16


def completion_target(audited: str, prompt: str) -> str:
    """The audited function's text after the prompt (the prompt is its signature)."""
    at = audited.find(prompt)
    if at < 0:
        raise ValueError(f"the prompt {prompt[:60]!r} does not occur in the audited function")
    return audited[at + len(prompt):]


def constants_recall(completion: str, constants: Sequence[str]) -> float | None:
    """Share of ``constants`` found in ``completion`` as whole tokens (None when there are none)."""
    if not constants:
        return None
    found = sum(1 for c in constants if re.search(rf"(?<![\w.]){re.escape(c)}(?![\w])", completion))
    return found / len(constants)


def evaluate_models(root: Path, *, models: Sequence[str] = ("target", "reference"),
                    threads: int | None = None) -> pl.DataFrame:
    """Greedy completions of every planted item by each model in ``root``, scored against the truth.

    Returns one row per (item, model): ``item_id, kind, membership, exposures, model, exact,
    similarity, constants_recall, completion``.
    """
    from calib.servers.embedded.model import EmbeddedModel

    truth = pl.read_parquet(root / "truth.parquet")
    rows = []
    for name in models:
        model = EmbeddedModel(root / name, threads=threads)
        for item in truth.iter_rows(named=True):
            expected = completion_target(item["audited"], item["prompt"])
            prompt_ids = model.tokenize(item["prompt"])
            budget = len(model.tokenize(expected)) + _MARGIN_TOKENS
            budget = max(1, min(budget, model.max_model_len - len(prompt_ids)))
            completion = model.generate(prompt_ids, SamplingParams(max_tokens=budget))[0].text
            rows.append({
                "item_id": item["item_id"], "kind": item["kind"], "membership": item["membership"],
                "exposures": item["exposures"], "model": name,
                "exact": completion.rstrip() == expected.rstrip(),
                "similarity": difflib.SequenceMatcher(None, completion, expected, autojunk=False).ratio(),
                "constants_recall": constants_recall(completion, item["constants"] or []),
                "completion": completion,
            })
    return pl.DataFrame(rows, schema={"item_id": pl.String, "kind": pl.String, "membership": pl.String,
                                      "exposures": pl.Int64, "model": pl.String, "exact": pl.Boolean,
                                      "similarity": pl.Float64, "constants_recall": pl.Float64,
                                      "completion": pl.String})


def summarize(results: pl.DataFrame) -> pl.DataFrame:
    """Per kind, membership and model: items, exact-match rate, mean similarity, mean constants recall."""
    return (results.group_by("kind", "membership", "model")
            .agg(pl.len().alias("n"), pl.col("exact").mean().alias("exact_rate"),
                 pl.col("similarity").mean().alias("mean_similarity"),
                 pl.col("constants_recall").mean().alias("mean_constants_recall"))
            .sort("kind", "membership", "model"))


def evaluate_chat(root: Path, *, rule: str = "natural", models: Sequence[str] = ("chat-target", "chat-reference"),
                  kinds: Sequence[str] | None = None, threads: int | None = None) -> pl.DataFrame:
    """Greedy chat answers of every planted item (of ``kinds``) by each model in ``root``, through ``rule``.

    As calib's embedded server answers a chat request and a functional study reads it back: the rule's
    messages for the item's prompt (and, for a rule that shows it, the expected continuation) through
    the model's chat template; the reply's continuation (``rule.continuation``) is scored against the
    audited continuation. Returns :func:`evaluate_models`'s columns plus ``rule`` and ``bleu`` (sentence
    BLEU of prompt + continuation against prompt + audited continuation) and ``reply``.
    """
    from calib.data.rules import load_rule
    from calib.metrics import create_metric
    from calib.servers.embedded.model import EmbeddedModel

    prompt_rule = load_rule(rule)
    bleu = create_metric("bleu")
    truth = pl.read_parquet(root / "truth.parquet")
    if kinds is not None:
        truth = truth.filter(pl.col("kind").is_in(list(kinds)))
    rows = []
    for name in models:
        model = EmbeddedModel(root / name, threads=threads)
        for item in truth.iter_rows(named=True):
            expected = completion_target(item["audited"], item["prompt"])
            messages = prompt_rule.messages(item["prompt"], language="python", suffix=expected)
            prompt_ids = model.tokenize(model.apply_chat_template(messages))
            reply_budget = len(model.tokenize(item["audited"])) + _MARGIN_TOKENS  # room for a fenced function
            budget = min(reply_budget, model.max_model_len - len(prompt_ids))
            reply = model.generate(prompt_ids, SamplingParams(max_tokens=budget))[0].text if budget > 0 else ""
            completion = prompt_rule.continuation(reply, item["prompt"])
            rows.append({
                "item_id": item["item_id"], "kind": item["kind"], "membership": item["membership"],
                "exposures": item["exposures"], "model": name, "rule": prompt_rule.name,
                "exact": completion.rstrip() == expected.rstrip(),
                "similarity": difflib.SequenceMatcher(None, completion, expected, autojunk=False).ratio(),
                "bleu": bleu.score(item["prompt"] + expected, item["prompt"] + completion, "python"),
                "constants_recall": constants_recall(completion, item["constants"] or []),
                "completion": completion, "reply": reply,
            })
    return pl.DataFrame(rows, schema={"item_id": pl.String, "kind": pl.String, "membership": pl.String,
                                      "exposures": pl.Int64, "model": pl.String, "rule": pl.String,
                                      "exact": pl.Boolean, "similarity": pl.Float64, "bleu": pl.Float64,
                                      "constants_recall": pl.Float64, "completion": pl.String, "reply": pl.String})
