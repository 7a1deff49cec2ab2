"""Mitigation: preference pairs from an audit, post-training away from memorized functions, and its cost.

The functional-memorization paper's Appendix H (docs/mitigation.md): :mod:`calib.mitigation.pairs` makes
preference pairs from a finished functional audit (the memorized body rejected; the reference's greedy
completion, a target sample or a chat model's rewrite preferred, each checked by calib's executor),
:mod:`calib.mitigation.losses` holds NPO's and DPO's objectives and :mod:`calib.mitigation.train` post-trains
a Hugging Face causal LM with LoRA (peft), saving a checkpoint per chosen epoch that calib's embedded server
loads like any model folder.
"""

from calib.mitigation.pairs import PAIRS_SCHEMA, SOURCES, Memorized, build_pairs, memorized_set, write_jsonl
from calib.mitigation.train import METHODS, Pair, TrainConfig, TrainResult, train

__all__ = ["METHODS", "PAIRS_SCHEMA", "SOURCES", "Memorized", "Pair", "TrainConfig", "TrainResult", "build_pairs",
           "memorized_set", "train", "write_jsonl"]
