"""Extraction scores against closed forms on hand-built scoring passes, and against numpy/scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import log_softmax, logsumexp

from calib.servers.base import ScoredContinuation, TokenLogprob
from calib.servers.scoring import extraction_scores

LN10 = math.log(10.0)


def _tok(token_id: int | None, p: float, top: list[tuple[int | None, float]], rank: int | None = None) -> TokenLogprob:
    """A scored token of probability ``p`` with top alternatives given as (id, probability)."""
    return TokenLogprob(token_id=token_id, token=f"t{token_id}", logprob=math.log(p),
                        top=tuple((i, f"t{i}", math.log(q)) for i, q in top), rank=rank)


def _scored(tokens: list[TokenLogprob],
            temperature_logprobs: dict[float, tuple[float, ...]] | None = None) -> ScoredContinuation:
    ids = tuple(t.token_id if t.token_id is not None else -1 for t in tokens)
    return ScoredContinuation(prompt_token_ids=(0,), continuation_token_ids=ids, tokens=tuple(tokens),
                              temperature_logprobs=temperature_logprobs or {})


# Three positions, three alternatives each; the continuation takes the 1st, the 2nd, the 1st.
#   position 1: token 5, p = 0.5; top 0.5 (5), 0.3 (7), 0.1 (9)
#   position 2: token 3, p = 0.2; top 0.6 (2), 0.2 (3), 0.1 (4)   <- not the argmax
#   position 3: token 8, p = 0.9; top 0.9 (8), 0.05 (1), 0.02 (6)
POSITIONS = [
    (5, 0.5, [(5, 0.5), (7, 0.3), (9, 0.1)], 1),
    (3, 0.2, [(2, 0.6), (3, 0.2), (4, 0.1)], 2),
    (8, 0.9, [(8, 0.9), (1, 0.05), (6, 0.02)], 1),
]


def _three(with_rank: bool, with_ids: bool = True) -> ScoredContinuation:
    tokens = []
    for token_id, p, top, rank in POSITIONS:
        tokens.append(_tok(token_id if with_ids else None, p, [(i if with_ids else None, q) for i, q in top],
                           rank if with_rank else None))
    return _scored(tokens)


@pytest.mark.parametrize("with_rank", [True, False], ids=["rank", "top-1 id"])
def test_greedy_match_by_rank_or_by_top1(with_rank: bool) -> None:
    assert extraction_scores(_three(with_rank), top_k=3).greedy_match is False  # position 2 is rank 2
    argmax_only = _scored([_tok(top[0][0], top[0][1], top, 1 if with_rank else None) for _, _, top, _ in POSITIONS])
    assert extraction_scores(argmax_only, top_k=3).greedy_match is True


def test_greedy_match_without_ids_compares_logprobs() -> None:
    # An API that gives only token texts (ids None): the token is the argmax iff its log-prob is the top one.
    assert extraction_scores(_three(with_rank=False, with_ids=False), top_k=3).greedy_match is False
    only_first = _scored([_tok(None, 0.5, [(None, 0.5), (None, 0.3), (None, 0.1)])])
    assert extraction_scores(only_first, top_k=3).greedy_match is True


def test_greedy_needs_a_rank_or_the_top_alternative() -> None:
    with pytest.raises(ValueError, match="top-1 alternative or the token's rank"):
        extraction_scores(_scored([TokenLogprob(token_id=1, token="a", logprob=-0.1)]), top_k=1)


@pytest.mark.parametrize("with_ids", [True, False])
def test_top_k_is_the_product_of_renormalised_probabilities(with_ids: bool) -> None:
    scored = _three(with_rank=False, with_ids=with_ids)
    # k = 2: 0.5/(0.5+0.3) * 0.2/(0.6+0.2) * 0.9/(0.9+0.05) = 0.625 * 0.25 * 0.947368... = 0.148026...
    k2 = 0.5 / 0.8 * 0.2 / 0.8 * 0.9 / 0.95
    assert extraction_scores(scored, top_k=2).log10_top_k == pytest.approx(math.log10(k2), abs=1e-12)
    # k = 3: 0.5/0.9 * 0.2/0.9 * 0.9/0.97
    k3 = 0.5 / 0.9 * 0.2 / 0.9 * 0.9 / 0.97
    assert extraction_scores(scored, top_k=3).log10_top_k == pytest.approx(math.log10(k3), abs=1e-12)
    # k = 1: position 2's token (rank 2) is outside the top 1, so the probability is 0 and its log10 -inf.
    assert extraction_scores(scored, top_k=1).log10_top_k == -math.inf


def test_top_k_ignores_the_extra_alternative_a_server_appends() -> None:
    # vLLM lists the scored token after the top k when it is not among them (here k = 2, token rank 3).
    tok = _tok(9, 0.1, [(5, 0.5), (7, 0.3), (9, 0.1)], rank=3)
    assert extraction_scores(_scored([tok]), top_k=2).log10_top_k == -math.inf
    assert extraction_scores(_scored([tok]), top_k=3).log10_top_k == pytest.approx(math.log10(0.1 / 0.9), abs=1e-12)


def test_base_policy_at_temperature_1_is_the_sum_of_logprobs_over_ln10() -> None:
    # 0.5 * 0.2 * 0.9 = 0.09; log10(0.09) = -1.0457574905606752
    scores = extraction_scores(_three(with_rank=True), top_k=3)
    assert scores.log10_base == {1.0: pytest.approx(-1.0457574905606752, abs=1e-12)}
    assert scores.n_tokens == 3 and scores.top_k == 3


def test_other_temperatures_use_the_servers_logprobs_at_that_temperature() -> None:
    scored = _scored([_tok(5, 0.5, [(5, 0.5)], 1), _tok(8, 0.9, [(8, 0.9)], 1)],
                     {0.5: (math.log(0.7), math.log(0.95))})
    scores = extraction_scores(scored, top_k=1, temperatures=(1.0, 0.5))
    assert scores.log10_base[1.0] == pytest.approx(math.log10(0.45), abs=1e-12)  # 0.5 * 0.9
    assert scores.log10_base[0.5] == pytest.approx(math.log10(0.665), abs=1e-12)  # 0.7 * 0.95


def test_tiny_probabilities_do_not_underflow() -> None:
    # 1,000 tokens at log-prob -2 each: ln P = -2000, log10 P = -2000 / ln 10 = -868.588963806503...
    # (P = 1e-868.6 is far below the smallest double, 5e-324.) Each token ties with one alternative, so
    # its top-2 renormalised probability is 1/2 and the top-2 score is 1000 * log10(1/2) = -301.02999566...
    tokens = [TokenLogprob(token_id=1, token="a", logprob=-2.0, top=((1, "a", -2.0), (2, "b", -2.0)), rank=1)
              for _ in range(1000)]
    scores = extraction_scores(_scored(tokens), top_k=2)
    assert scores.log10_base[1.0] == pytest.approx(-868.5889638065036, abs=1e-9)
    assert scores.log10_top_k == pytest.approx(-301.0299956639812, abs=1e-9)
    assert scores.greedy_match is True


def test_an_empty_continuation_is_certain() -> None:
    scores = extraction_scores(_scored([]), top_k=40)
    assert (scores.n_tokens, scores.greedy_match, scores.log10_top_k, scores.log10_base) == (0, True, 0.0, {1.0: 0.0})


def test_errors_name_the_fix() -> None:
    scored = _three(with_rank=True)
    with pytest.raises(ValueError, match="k=4 needs 4 alternatives per position.*gave 3.*top_logprobs >= 4"):
        extraction_scores(scored, top_k=4)
    with pytest.raises(ValueError, match="no log-probs at temperature 0.7"):
        extraction_scores(scored, top_k=3, temperatures=(1.0, 0.7))
    with pytest.raises(ValueError, match="temperatures must be > 0"):
        extraction_scores(scored, top_k=3, temperatures=(0.0,))
    with pytest.raises(ValueError, match="top_k must be >= 1"):
        extraction_scores(scored, top_k=0)
    short = _scored(list(scored.tokens), {0.7: (-0.1,)})
    with pytest.raises(ValueError, match="1 log-probs for 3 continuation tokens"):
        extraction_scores(short, top_k=3, temperatures=(0.7,))


def test_too_few_alternatives_fail_even_after_a_zero() -> None:
    # Position 1 is already outside the top 1; position 2 still must have the alternatives asked for.
    tokens = [_tok(7, 0.3, [(5, 0.5)], 2), _tok(8, 0.9, [], 1)]
    with pytest.raises(ValueError, match="k=1 needs 1 alternatives"):
        extraction_scores(_scored(tokens), top_k=1)


# How the continuation's tokens are drawn: always the argmax (greedy, inside every top k); a random one of
# the top k (not greedy, a finite top-k score); any token (mostly outside the top k: -inf); a mix.
@pytest.mark.parametrize(("seed", "draw"), [(0, "argmax"), (1, "top_k"), (2, "top_k"), (3, "any"), (4, "mixed"),
                                            (5, "argmax")])
def test_agrees_with_numpy_and_scipy_on_random_distributions(seed: int, draw: str) -> None:
    rng = np.random.default_rng(seed)
    vocab, length, given, k, temperature = 60, 40, 12, 5, 0.6
    logits = rng.normal(scale=3.0, size=(length, vocab))
    logprobs = log_softmax(logits, axis=1)
    at_t = log_softmax(logits / temperature, axis=1)
    order = np.argsort(-logprobs, axis=1)
    rows = np.arange(length)
    chosen = {"argmax": order[:, 0], "top_k": order[rows, rng.integers(0, k, size=length)],
              "any": rng.integers(0, vocab, size=length),
              "mixed": np.where(rng.random(length) < 0.9, order[:, 0], rng.integers(0, vocab, size=length))}[draw]
    tokens = []
    for pos, tok in enumerate(chosen):
        rank = int(np.nonzero(order[pos] == tok)[0][0]) + 1
        top = tuple((int(i), f"t{i}", float(logprobs[pos, i])) for i in order[pos, :given])
        tokens.append(TokenLogprob(token_id=int(tok), token=f"t{tok}", logprob=float(logprobs[pos, tok]), top=top,
                                   rank=rank if seed % 3 else None))
    scored = ScoredContinuation(prompt_token_ids=(1, 2), continuation_token_ids=tuple(int(t) for t in chosen),
                                tokens=tuple(tokens),
                                temperature_logprobs={temperature: tuple(float(at_t[p, t]) for p, t in
                                                                         enumerate(chosen))})
    scores = extraction_scores(scored, top_k=k, temperatures=(1.0, temperature))

    expected_greedy = bool(np.all(chosen == order[:, 0]))
    top_k_ids = order[:, :k]
    inside = np.any(top_k_ids == chosen[:, None], axis=1)
    renormalised = logprobs[rows, chosen] - logsumexp(np.take_along_axis(logprobs, top_k_ids, axis=1), axis=1)
    expected_top_k = np.sum(renormalised) / LN10 if inside.all() else -math.inf
    assert scores.greedy_match is expected_greedy
    assert scores.log10_top_k == pytest.approx(expected_top_k, rel=1e-12, abs=1e-12)
    assert scores.log10_base[1.0] == pytest.approx(np.sum(logprobs[rows, chosen]) / LN10, rel=1e-12)
    assert scores.log10_base[temperature] == pytest.approx(np.sum(at_t[rows, chosen]) / LN10, rel=1e-12)
