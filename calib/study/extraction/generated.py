"""Extraction scores from generations alone: ``greedy_prefix`` and ``sampled`` (no log-probs, no server /tokenize).

A hosted API that returns neither prompt log-probs nor its tokenizer can still be audited by what it
generates (docs/extraction.md "Scores without log-probs"; Cooper et al., "Extractable Memorization From
First Principles", §6 and App. F.1):

* ``greedy_prefix``: one greedy generation of ℓ_s tokens after the prefix; the score is the share of the
  suffix's tokens it reproduces from the start, before its first differing character (1 = verbatim). A
  graded score, so the conformal threshold is not one atom of tied 0/1 scores.
* ``sampled``: n generations at ``sample_temperature``; a hit is a generation that starts with the suffix,
  character for character. The score ``hits / n`` estimates the per-query generation probability p; its
  Clopper–Pearson 95 % interval bounds p, and the query budget at the lower bound p_lo,
  ceil(ln 0.05 / ln(1 − p_lo)) ≈ 3/p_lo, states "extractable within N queries with probability ≥ 95 %".

Tokens are the window tokenizer's (``[prompt] tokenizer``, :mod:`calib.study.tokenizer_source`): the
suffix of a window is ℓ_s of its units, and every generation is asked for that many tokens
(``max_tokens``) — exactly ℓ_s when the window tokenizer is the model's, an upper bound for a character
budget (a token is at least one character). Text a generation adds after the suffix is ignored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

__all__ = ["CONFIDENCE", "REQUEST_SAMPLES", "generation_scores", "matched_prefix", "matched_tokens",
           "query_budget", "sampled_detail"]

#: Generations asked per completion request of ``sampled`` (n above it is split into several requests).
REQUEST_SAMPLES = 32
#: The confidence of the Clopper–Pearson interval and of the query budget (the paper's 95 %).
CONFIDENCE = 0.95


def matched_prefix(generated: Sequence[int], target: Sequence[int]) -> int:
    """How many leading tokens of ``target`` ``generated`` reproduces, in order (0 when the first differs)."""
    count = 0
    for a, b in zip(generated, target):
        if a != b:
            break
        count += 1
    return count


async def matched_tokens(tokenizer: Any, generation: str, suffix: str, target: Sequence[int]) -> int:
    """Suffix tokens (``target``: the suffix's ids) that ``generation`` reproduces in full from the start.

    The generation and the suffix share their first c characters; the count is the number of leading
    ``target`` tokens inside those c characters (the shared text re-tokenized: a token cut at the first
    differing character does not count). A generation that starts with the whole suffix scores every token.
    """
    if generation.startswith(suffix):
        return len(target)
    shared = 0
    for a, b in zip(generation, suffix):
        if a != b:
            break
        shared += 1
    if shared == 0:
        return 0
    return matched_prefix(await tokenizer.tokenize(suffix[:shared]), target)


def query_budget(p_low: float, confidence: float = CONFIDENCE) -> int | float:
    """Queries after which a generation of probability ≥ ``p_low`` happens at least once with ``confidence``.

    ceil(ln(1 − c) / ln(1 − p_low)) (:func:`calib.stats.attempts_needed`); infinite when ``p_low`` is 0.
    """
    from calib.stats import attempts_needed

    if p_low <= 0.0:
        return math.inf
    return attempts_needed(p_low, confidence).attempts


def sampled_detail(hits: int, n: int, temperature: float) -> dict[str, Any]:
    """The ``sampled`` score's detail: hits, n, the Clopper–Pearson interval, the 95 % query budget (None: ∞)."""
    from calib.stats import clopper_pearson

    interval = clopper_pearson(hits, n, CONFIDENCE)
    budget = query_budget(interval.low)
    return {"hits": hits, "samples": n, "temperature": temperature, "confidence": CONFIDENCE,
            "p_low": interval.low, "p_high": interval.high,
            "queries_95": None if budget == math.inf else budget}


def _row(procedure: str, value: float, detail: dict[str, Any]) -> dict[str, Any]:
    log10 = -math.inf if value <= 0.0 else math.log10(value)
    return {"procedure": procedure, "value": value, "log10_value": log10,
            "detail": json.dumps(detail, sort_keys=True)}


async def generation_scores(server: Any, tokenizer: Any, prefix: str, suffix: str, spec: Any) -> list[dict[str, Any]]:
    """The ``greedy_prefix`` and ``sampled`` rows of one window by one server (those the spec lists).

    ``server`` only completes; ``tokenizer`` (the window tokenizer) counts the suffix's tokens.
    """
    from calib.servers import SamplingParams

    e = spec.extraction
    target = await tokenizer.tokenize(suffix)
    n = len(target)
    rows = []
    if "greedy_prefix" in e.procedures:
        (completion,), = await server.complete([prefix], SamplingParams(max_tokens=n, temperature=0.0,
                                                                         seed=spec.study.seed))
        matched = await matched_tokens(tokenizer, completion.text, suffix, target)
        rows.append(_row("greedy_prefix", matched / n, {"n_tokens": n, "matched": matched,
                                                          "generation": completion.text}))
    if "sampled" in e.procedures:
        hits = 0
        for start in range(0, e.samples, REQUEST_SAMPLES):
            size = min(REQUEST_SAMPLES, e.samples - start)
            seed = None if spec.study.seed is None else (spec.study.seed + start) % 2**63
            (completions,) = await server.complete([prefix], SamplingParams(
                max_tokens=n, temperature=e.sample_temperature, n=size, seed=seed))
            if len(completions) != size:
                raise ValueError(f"asked for n = {size} generations, the server returned {len(completions)}")
            hits += sum(c.text.startswith(suffix) for c in completions)
        rows.append(_row("sampled", hits / e.samples, {"n_tokens": n, **sampled_detail(
            hits, e.samples, float(e.sample_temperature))}))
    return rows
