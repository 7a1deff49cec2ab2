"""Extraction scores from generations: ``greedy_prefix``, ``greedy_logprob``, ``sampled`` (no teacher forcing).

A hosted API that returns neither prompt log-probs nor its tokenizer can still be audited by what it
generates (docs/extraction.md "Scores without log-probs"; Cooper et al., "Extractable Memorization From
First Principles", §6 and App. F.1), through its completion route or through chat by a prompt-selection
rule (:mod:`calib.study.extraction.asking`):

* ``greedy_prefix``: one greedy generation of ℓ_s tokens after the prefix; the score is the share of the
  suffix's tokens it reproduces from the start, before its first differing character (1 = verbatim). A
  graded score, so the conformal threshold is not one atom of tied 0/1 scores.
* ``greedy_logprob``: the same greedy generation with its output-token log-probs (top-k ≤ 20, where the
  API offers them): the suffix's probability at T = 1 when the generation reproduces it, else an upper
  bound from the first differing token (:func:`suffix_logprob`).
* ``sampled``: n generations at ``sample_temperature``; a hit is a generation that starts with the suffix,
  character for character. The score ``hits / n`` estimates the per-query generation probability p; its
  Clopper–Pearson 95 % interval bounds p, and the query budget at the lower bound p_lo,
  ceil(ln 0.05 / ln(1 − p_lo)) ≈ 3/p_lo, states "extractable within N queries with probability ≥ 95 %".

Tokens are the window tokenizer's (``[prompt] tokenizer``, :mod:`calib.study.tokenizer_source`): the
suffix of a window is ℓ_s of its units, and every generation is asked for that many tokens
(``max_tokens``) — exactly ℓ_s when the window tokenizer is the model's, an upper bound for a character
budget (a token is at least one character); a chat reply that may repeat the prompt gets more
(:func:`calib.study.extraction.asking.chat_budget`). Text a generation adds after the suffix is ignored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

__all__ = ["CONFIDENCE", "generation_scores", "matched_prefix", "matched_tokens", "query_budget", "sampled_detail",
           "suffix_logprob"]

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


def suffix_logprob(tokens: Sequence[Any], suffix: str) -> tuple[float, bool, int]:
    """The log-probability (natural log) of ``suffix`` read off a greedy generation's output-token log-probs.

    ``tokens`` are the generation's tokens (``token``, ``logprob`` and the listed ``top`` alternatives,
    as :class:`calib.servers.TokenLogprob`), from the first character of the continuation. While the
    generation agrees with the suffix, each token's log-prob is the suffix's own (one tokenization: the
    generated one). At the first token that departs from the suffix the probability of continuing the
    suffix is at most 1 − the listed mass of tokens that depart from it (the generated token among
    them), so the result is an upper bound from there on; a generation that stops before the suffix
    ends gives the bound of the tokens it has. Returns ``(log p, exact, characters matched)``: exact
    when the generation reproduced the whole suffix.
    """
    total, at = 0.0, 0
    for token in tokens:
        rest = suffix[at:]
        if not rest:
            break
        text = token.token

        def agrees(t: str, rest: str = rest) -> bool:
            return bool(t) and (rest.startswith(t) or t.startswith(rest))

        if agrees(text):
            total += token.logprob
            at += len(text)
            continue
        departing = math.fsum(math.exp(lp) for _, t, lp in token.top if not agrees(t) and t != text)
        mass = 1.0 - math.exp(token.logprob) - departing
        return total + (math.log(mass) if mass > 0.0 else -math.inf), False, at
    return total, at >= len(suffix), min(at, len(suffix))


def _row(procedure: str, value: float, detail: dict[str, Any]) -> dict[str, Any]:
    log10 = -math.inf if value <= 0.0 else math.log10(value)
    return {"procedure": procedure, "value": value, "log10_value": log10,
            "detail": json.dumps(detail, sort_keys=True)}


async def generation_scores(asker: Any, tokenizer: Any, prefix: str, suffix: str, spec: Any, *,
                            language: str | None = None, top_logprobs: int = 0) -> list[dict[str, Any]]:
    """The ``greedy_prefix``, ``greedy_logprob`` and ``sampled`` rows of one window by one server (those listed).

    ``asker`` (:class:`calib.study.extraction.asking.Asker`) asks the server through its completion route
    or through chat by the spec's rule; ``tokenizer`` (the window tokenizer) counts the suffix's tokens;
    ``top_logprobs`` is how many alternatives ``greedy_logprob`` asks per output token (the server's most,
    at most 20). One greedy generation serves both greedy procedures.
    """
    from calib.study.extraction.asking import chat_budget

    e = spec.extraction
    target = await tokenizer.tokenize(suffix)
    n = len(target)
    budget = n
    if asker.rule is not None:
        budget = chat_budget(asker.rule, n, len(await tokenizer.tokenize(prefix)) if asker.rule.reply != "raw" else 0)
    rows = []
    greedy = [p for p in ("greedy_prefix", "greedy_logprob") if p in e.procedures]
    if greedy:
        (generation,) = await asker.generate(prefix, suffix, max_tokens=budget, temperature=0.0,
                                             seed=spec.study.seed, language=language,
                                             logprobs=top_logprobs if "greedy_logprob" in greedy else None)
        said = {"generation": generation.text}
        if generation.reply is not None:
            said["reply"] = generation.reply
        if "greedy_prefix" in greedy:
            matched = await matched_tokens(tokenizer, generation.text, suffix, target)
            rows.append(_row("greedy_prefix", matched / n, {"n_tokens": n, "matched": matched, **said}))
        if "greedy_logprob" in greedy:
            if generation.tokens is None:
                raise ValueError("the server returned no output-token log-probs for greedy_logprob")
            log_p, exact, chars = suffix_logprob(generation.tokens, suffix)
            log10 = log_p / math.log(10.0)
            rows.append({"procedure": "greedy_logprob", "value": 0.0 if log10 == -math.inf else 10.0 ** log10,
                         "log10_value": log10, "detail": json.dumps(
                             {"n_tokens": n, "exact": exact, "matched_chars": chars, "top_logprobs": top_logprobs,
                              **said}, sort_keys=True)})
    if "sampled" in e.procedures:
        generations = await asker.generate(prefix, suffix, max_tokens=budget, temperature=e.sample_temperature,
                                           n=e.samples, seed=spec.study.seed, language=language)
        hits = sum(g.text.startswith(suffix) for g in generations)
        rows.append(_row("sampled", hits / e.samples, {"n_tokens": n, **sampled_detail(
            hits, e.samples, float(e.sample_temperature))}))
    return rows
