"""Extraction scores of a continuation from one teacher-forced scoring pass (log10, no underflow).

Given the log-probs of each continuation token and its top alternatives (a
:class:`~calib.servers.base.ScoredContinuation`), three procedures of the extraction paper score how
readily a decoding policy generates the continuation after the prompt:

* ``greedy``: 1 when every continuation token is the argmax at its position (greedy decoding
  reproduces the continuation exactly), else 0 — discoverable extraction;
* ``top_k``: the probability of generating the continuation under top-k sampling, the product over
  positions of the token's probability renormalised over the k most likely tokens, and 0 as soon as
  a token falls outside the top k;
* ``base`` at temperature T: the product of the token probabilities under the base policy, softmax of
  logits / T (T = 1: the log-probs the server returns).

Everything is summed in natural logs and reported as log10 (log10 of 0 is -inf), so probabilities far
below 1e-300 stay exact. Reference: Cooper et al., "Extractable Memorization From First Principles",
§3 and App. B (decoding policies: base, top-k, greedy; k = 40 by default).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from calib.servers.base import ScoredContinuation, TokenLogprob

__all__ = ["ExtractionScores", "extraction_scores"]

_LN10 = math.log(10.0)
# Two log-probs that differ by less than this are one value printed twice (servers round floats).
_TIE = 1e-6


@dataclass(frozen=True)
class ExtractionScores:
    """The scores of one continuation; probabilities as log10 (``-inf`` for 0).

    ``greedy_match`` is the binary greedy score; ``log10_top_k`` the top-k sampling probability at
    ``top_k``; ``log10_base`` maps each temperature to the base-policy probability; ``n_tokens`` is
    the continuation's length in the server's tokens.
    """

    n_tokens: int
    greedy_match: bool
    top_k: int
    log10_top_k: float
    log10_base: dict[float, float] = field(default_factory=dict)


def _logsumexp(values: Sequence[float]) -> float:
    m = max(values)
    if m == -math.inf:
        return -math.inf
    return m + math.log(math.fsum(math.exp(v - m) for v in values))


def _is_argmax(tok: TokenLogprob) -> bool:
    if tok.rank is not None:
        return tok.rank == 1
    if not tok.top:
        raise ValueError("greedy scoring needs the top-1 alternative or the token's rank at every position")
    best_id, _, best_lp = tok.top[0]
    if tok.token_id is not None and best_id is not None:
        return best_id == tok.token_id or abs(best_lp - tok.logprob) <= _TIE
    return tok.logprob >= best_lp - _TIE


def _top_k_logprob(tok: TokenLogprob, k: int) -> float:
    """ln of the token's probability renormalised over the top k (-inf when outside the top k)."""
    if len(tok.top) < k:
        raise ValueError(f"top-k scoring with k={k} needs {k} alternatives per position, the server gave "
                         f"{len(tok.top)}; ask for top_logprobs >= {k}")
    top = tok.top[:k]
    kth = top[-1][2]
    if tok.token_id is not None and all(t[0] is not None for t in top):
        inside = any(t[0] == tok.token_id for t in top)
    else:
        inside = tok.logprob >= kth - _TIE
    if not inside:
        return -math.inf
    return tok.logprob - _logsumexp([t[2] for t in top])


def extraction_scores(scored: ScoredContinuation, *, top_k: int = 40,
                      temperatures: Sequence[float] = (1.0,)) -> ExtractionScores:
    """Greedy match, top-k probability and base-policy probabilities of one scored continuation.

    Parameters
    ----------
    scored
        Teacher-forced log-probs with at least ``top_k`` alternatives per position.
    top_k
        k of top-k sampling (40 by default, as in the extraction paper).
    temperatures
        Temperatures of the base policy; T = 1 uses the returned log-probs, other T need
        ``scored.temperature_logprobs[T]`` (servers that normalise over the whole vocabulary).
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    tokens = scored.tokens
    greedy = all(_is_argmax(t) for t in tokens)
    # Every position is checked (not only up to the first token outside the top k), so a server that
    # gave too few alternatives fails the same way whatever the continuation.
    ln_top_k = math.fsum(_top_k_logprob(tok, top_k) for tok in tokens)
    base: dict[float, float] = {}
    for temperature in temperatures:
        if temperature <= 0:
            raise ValueError(f"temperatures must be > 0 (greedy is its own score), got {temperature}")
        # fsum: a sum of hundreds of log-probs keeps its last digits (plain sum drifts by ~1e-13 relative).
        if temperature == 1.0:
            ln = math.fsum(t.logprob for t in tokens)
        elif temperature in scored.temperature_logprobs:
            per_token = scored.temperature_logprobs[temperature]
            if len(per_token) != len(tokens):
                raise ValueError(f"temperature_logprobs[{temperature}] has {len(per_token)} log-probs for "
                                 f"{len(tokens)} continuation tokens: score the same continuation at every "
                                 "temperature")
            ln = math.fsum(per_token)
        else:
            raise ValueError(f"no log-probs at temperature {temperature}: score with temperatures="
                             f"[{temperature}] on a server that normalises over the whole vocabulary")
        base[float(temperature)] = ln / _LN10
    return ExtractionScores(n_tokens=len(tokens), greedy_match=greedy, top_k=top_k,
                            log10_top_k=ln_top_k / _LN10 if ln_top_k != -math.inf else -math.inf,
                            log10_base=base)
