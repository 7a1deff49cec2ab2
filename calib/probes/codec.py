"""CoDeC, the decoder-side likelihood probe: does context from a dataset lower the model's confidence on it?

Zawalski et al. (2025) score each sample x of a dataset D twice with teacher forcing: alone (the
baseline) and after ``n_context`` other samples of D drawn at random (x itself excluded). The
per-sample statistic is the change of the mean per-token log-likelihood of x's own tokens,

    Δ(x) = mean log p(x_t | context, x_<t) − mean log p(x_t | x_<t),

and the dataset's **contamination score** is the share of samples whose likelihood *drops*,
S(D) = (1/|D|) Σ 1[Δ(x) < 0]. In-context examples help a model on data it has not seen (Δ > 0) and
disrupt data it has memorized (Δ < 0), so seen datasets score high (71–75 % on Pythia) and unseen ones
low (17–24 %); the scale-aware diagnostics paper (§5.3, §6.2) shows the gap shrinking with scale.

How calib builds the two requests (both through the Server seam's
:meth:`~calib.servers.base.Scoring.score`, so x's tokens are the same ids in both):

* the baseline prompt is ``separator`` alone: a prompt must hold at least one token to score the
  first token of x after it (servers without a BOS token refuse an empty prompt), and the same
  neutral prefix stands right before x in both conditions, so the in-context examples are the only
  difference between them;
* the in-context prompt is ``c_1 + separator + … + c_n + separator``, the context samples in the
  order drawn;
* where the server reports its context length and can tokenize, a prompt that would not fit with x
  is cut on the left at a token boundary (the context text farthest from x goes first), so x and the
  separator before it are always scored whole; such a sample is marked ``truncated``.

One failed request (:class:`~calib.servers.base.RequestFailed`, or a server's refusal of one
sample, e.g. too long for its context) is recorded on its sample and the probe goes on.

References
----------
M. Zawalski, M. Boubdir, K. Bałazy, B. Nushi, P. Ribalta (2025). Detecting data contamination in LLMs
via in-context learning. arXiv:2510.27055 (CoDeC: the Δ(x) above, contexts from D \\ {x}, the score as
the share of samples with Δ < 0). Scale-aware diagnostics paper, §5.3 (the AUC over seen and unseen
datasets with ties counted one half) and §6.2 (CoDeC across model scale).
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import json
import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from calib._exceptions import CalibError, InvalidParameterError
from calib.probes.codec_stats import CodecSample, CodecScore, codec_auc, codec_score
from calib.servers.base import CapabilityError, RequestFailed, ScoredContinuation, Scoring, Tokenizing, require

__all__ = ["CodecSample", "CodecScore", "codec_auc", "codec_probe", "codec_score", "draw_context"]

# How often a left-truncated prompt is re-cut when detokenizing and re-tokenizing changed its length.
_FIT_ROUNDS = 4
_ERROR_CHARS = 500


# --- context draws ------------------------------------------------------------------------------

def draw_context(dataset: str, sample_id: str, sample_ids: Sequence[str], *, n_context: int,
                 seed: int) -> tuple[str, ...]:
    """The ``n_context`` samples that precede ``sample_id`` in its in-context prompt, in prompt order.

    A uniform draw without replacement from the dataset's other samples (the sample itself is never
    its own context, as in CoDeC's x_1..x_n ~ D \\ {x}). The draw depends only on ``seed``, the
    dataset's name, the sample's id and the *set* of ids: a generator seeded with a SHA-256 of those
    draws from the other ids sorted, so neither the order of the datasets nor the order of the
    samples changes it, and it is the same on every machine and Python run.

    Parameters
    ----------
    dataset, sample_id
        The sample whose context is drawn.
    sample_ids
        Every sample id of the dataset (``sample_id`` among them).
    n_context
        How many context samples, >= 1 and at most ``len(sample_ids) - 1``.
    seed
        The probe's seed.

    Raises
    ------
    ValueError
        ``n_context`` out of range, or ``sample_id`` not in ``sample_ids``.
    """
    ids = sorted(set(sample_ids))
    if sample_id not in sample_ids:
        raise InvalidParameterError(f"sample_id {sample_id!r} is not among the sample_ids of dataset {dataset!r}")
    _check_int("n_context", n_context, minimum=1)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidParameterError(f"seed must be an integer, got {seed!r}")
    if n_context > len(ids) - 1:
        raise InvalidParameterError(
            f"dataset {dataset!r} has {len(ids)} samples, too few for n_context={n_context}: each sample needs "
            f"n_context other samples as its context; give it at least {n_context + 1} samples or lower n_context")
    return _draw(dataset, sample_id, ids, n_context, seed)


def _draw(dataset: str, sample_id: str, ids: Sequence[str], n_context: int, seed: int) -> tuple[str, ...]:
    """:func:`draw_context` on ids already sorted and unique, without copying them (one sort per dataset)."""
    blob = json.dumps(["calib.probes.codec", seed, dataset, sample_id], ensure_ascii=True)
    rng = random.Random(int.from_bytes(hashlib.sha256(blob.encode()).digest()[:8], "big"))
    # random.sample picks positions from the population's length alone, so drawing positions among the
    # len(ids) - 1 others and skipping the sample's own position equals sampling the list of the others.
    own = bisect.bisect_left(ids, sample_id)
    return tuple(ids[j if j < own else j + 1] for j in rng.sample(range(len(ids) - 1), n_context))


# --- the probe ----------------------------------------------------------------------------------

def _check_int(name: str, value: Any, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _check_datasets(datasets: Mapping[str, Sequence[tuple[str, str]]], n_context: int) -> dict[str, dict[str, str]]:
    if not isinstance(datasets, Mapping) or not datasets:
        raise InvalidParameterError("datasets must be a non-empty mapping of dataset name -> [(sample_id, text)]")
    out: dict[str, dict[str, str]] = {}
    for name, samples in datasets.items():
        if not isinstance(name, str) or not name:
            raise InvalidParameterError(f"dataset names must be non-empty strings, got {name!r}")
        texts: dict[str, str] = {}
        for pos, pair in enumerate(samples):
            if not (isinstance(pair, tuple | list) and len(pair) == 2):
                raise InvalidParameterError(f"dataset {name!r}, sample {pos}: expected a (sample_id, text) pair, "
                                            f"got {pair!r}")
            sample_id, text = pair
            if not isinstance(sample_id, str) or not sample_id:
                raise InvalidParameterError(f"dataset {name!r}, sample {pos}: sample_id must be a non-empty "
                                            f"string, got {sample_id!r}")
            if sample_id in texts:
                raise InvalidParameterError(f"dataset {name!r}: sample_id {sample_id!r} appears twice; ids must "
                                            f"be unique within a dataset")
            if not isinstance(text, str) or not text:
                raise InvalidParameterError(f"dataset {name!r}, sample {sample_id!r}: text must be a non-empty "
                                            f"string (an empty sample has no tokens to score)")
            texts[sample_id] = text
        if len(texts) < n_context + 1:
            raise InvalidParameterError(
                f"dataset {name!r} has {len(texts)} samples, too few for n_context={n_context}: each sample needs "
                f"n_context other samples as its context; give it at least {n_context + 1} samples or lower "
                f"n_context")
        out[name] = texts
    return out


def _mean_logprob(scored: ScoredContinuation) -> float:
    if not scored.tokens:
        raise InvalidParameterError("the sample has no tokens on this server; nothing to score")
    return math.fsum(t.logprob for t in scored.tokens) / len(scored.tokens)


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:_ERROR_CHARS]


class _Limit:
    """The context length and the separator's length in tokens, where the server tells both."""

    def __init__(self, server: Tokenizing, max_context: int, separator_tokens: int) -> None:
        self.server, self.max_context, self.separator_tokens = server, max_context, separator_tokens

    async def fit(self, context: str, separator: str, budget: int) -> tuple[str, bool]:
        """``context + separator`` cut on the left so that it tokenizes to at most ``budget`` tokens."""
        prompt = context + separator
        over = len(await self.server.tokenize(prompt)) - budget
        if over <= 0:
            return prompt, False
        ids = await self.server.tokenize(context)
        keep = min(len(ids), budget - self.separator_tokens)
        for _ in range(_FIT_ROUNDS):
            if keep <= 0:
                break
            prompt = await self.server.detokenize(ids[len(ids) - keep:]) + separator
            over = len(await self.server.tokenize(prompt)) - budget
            if over <= 0:
                return prompt, True
            keep -= over
        used = self.max_context - budget + self.separator_tokens
        raise InvalidParameterError(
            f"no room for in-context examples: the sample and the separator take {used} of the server's "
            f"{self.max_context} tokens of context; use shorter samples or a server with a longer context")


async def _limit(server: Any, separator: str) -> _Limit | None:
    """Check scoring up front; return the context limit where the server reports it and can tokenize."""
    probe = getattr(server, "capabilities", None)
    if probe is None:
        return None
    caps = await probe()
    require(caps, ["scoring"])
    if caps.max_context and caps.tokenize and isinstance(server, Tokenizing):
        return _Limit(server, int(caps.max_context), len(await server.tokenize(separator)))
    return None


async def _score_one(server: Scoring, limit: _Limit | None, dataset: str, sample_id: str, text: str,
                     context: tuple[str, ...], texts: Mapping[str, str], separator: str) -> CodecSample:
    tokens, truncated, prompt_tokens = 0, False, 0
    try:
        alone = await server.score(separator, text)
        tokens = len(alone.continuation_token_ids)
        ll_without = _mean_logprob(alone)
        joined = separator.join(texts[c] for c in context)
        prompt = joined + separator
        if limit is not None:
            # The server's own special tokens (e.g. BOS) count against its context too.
            special = max(0, len(alone.prompt_token_ids) - limit.separator_tokens)
            prompt, truncated = await limit.fit(joined, separator, limit.max_context - special - tokens)
        within = await server.score(prompt, text)
        prompt_tokens = len(within.prompt_token_ids)
        if tuple(within.continuation_token_ids) != tuple(alone.continuation_token_ids):
            raise InvalidParameterError("the server tokenized the sample differently in the two requests, so the "
                                        "two means would not cover the same tokens")
        ll_with = _mean_logprob(within)
    except CapabilityError:
        raise
    except (RequestFailed, CalibError) as exc:  # one failed sample is recorded, never fatal
        nan = math.nan
        return CodecSample(dataset, sample_id, tokens, nan, nan, nan, context, _one_line(exc), truncated,
                           prompt_tokens)
    return CodecSample(dataset, sample_id, tokens, ll_without, ll_with, ll_with - ll_without, context, None,
                       truncated, prompt_tokens)


async def codec_probe(server: Scoring, datasets: Mapping[str, Sequence[tuple[str, str]]], *, n_context: int,
                      seed: int, separator: str = "\n\n", concurrency: int = 4) -> list[CodecSample]:
    """Score every sample of every dataset without and with in-context examples from its own dataset.

    Parameters
    ----------
    server
        Any server with :class:`~calib.servers.base.Scoring`. Where it also has ``capabilities()``,
        scoring is checked before any request, and where those report ``max_context`` and
        ``tokenize``, in-context prompts are cut on the left to fit (module docstring).
    datasets
        Dataset name -> ``[(sample_id, text), ...]``; ids unique within a dataset, texts non-empty.
        Each dataset needs at least ``n_context + 1`` samples.
    n_context
        In-context examples per sample (>= 1; CoDeC's n, whose smallest setting n = 1 already separates
        seen from unseen data).
    seed
        Seed of the context draws (:func:`draw_context`).
    separator
        Text between in-context examples and before the sample; alone, it is the baseline prompt
        (non-empty).
    concurrency
        Samples in flight at once (each sends its two requests in turn).

    Returns
    -------
    list of CodecSample
        One per sample, datasets in mapping order and samples in input order; a sample whose request
        failed carries ``error`` and NaN log-likelihoods.

    Raises
    ------
    ValueError
        A bad parameter, a malformed dataset, or a dataset with fewer than ``n_context + 1`` samples
        (naming it).
    CapabilityError
        The server cannot score.
    """
    _check_int("n_context", n_context, minimum=1)
    _check_int("concurrency", concurrency, minimum=1)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidParameterError(f"seed must be an integer, got {seed!r}")
    if not isinstance(separator, str) or not separator:
        raise InvalidParameterError(f"separator must be a non-empty string (it is also the baseline prompt, which "
                                    f"needs at least one token), got {separator!r}")
    if not isinstance(server, Scoring):
        raise InvalidParameterError(f"server {getattr(server, 'name', server)!r} cannot score continuations; "
                                    "CoDeC needs a server with teacher-forced scoring (Scoring.score)")
    checked = _check_datasets(datasets, n_context)
    limit = await _limit(server, separator)
    gate = asyncio.Semaphore(concurrency)

    sorted_ids = {name: sorted(texts) for name, texts in checked.items()}

    async def one(dataset: str, sample_id: str) -> CodecSample:
        texts = checked[dataset]
        context = _draw(dataset, sample_id, sorted_ids[dataset], n_context, seed)
        async with gate:
            return await _score_one(server, limit, dataset, sample_id, texts[sample_id], context, texts, separator)

    return list(await asyncio.gather(*(one(d, s) for d, texts in checked.items() for s in texts)))
