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
import dataclasses
import hashlib
import json
import math
import numbers
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from calib._exceptions import CalibError, InvalidParameterError
from calib.servers.base import CapabilityError, RequestFailed, ScoredContinuation, Scoring, Tokenizing, require
from calib.stats import clopper_pearson

__all__ = ["CodecSample", "CodecScore", "codec_auc", "codec_probe", "codec_score", "draw_context"]

# How often a left-truncated prompt is re-cut when detokenizing and re-tokenizing changed its length.
_FIT_ROUNDS = 4
_ERROR_CHARS = 500


@dataclass(frozen=True)
class CodecSample:
    """One sample scored without and with in-context examples from its own dataset.

    Attributes
    ----------
    dataset, sample_id
        Which sample.
    tokens
        The sample's length in the server's tokens (the tokens both means run over; 0 when unknown).
    ll_without, ll_with
        Mean per-token log-likelihood (natural log, as the server returns it) of the sample's tokens
        after the neutral prompt (the separator) and after the in-context examples; NaN when failed.
    delta
        ``ll_with - ll_without``; negative means the context lowered the model's confidence.
    context_ids
        The in-context samples, in prompt order.
    error
        Why the sample is unscored (one line), else ``None``.
    truncated
        The in-context prompt was cut on the left to fit the server's context length.
    prompt_tokens
        Length of the in-context prompt in the server's tokens, its special tokens included (0 when
        unknown): how much context the sample was actually scored after.
    """

    dataset: str
    sample_id: str
    tokens: int
    ll_without: float
    ll_with: float
    delta: float
    context_ids: tuple[str, ...]
    error: str | None = None
    truncated: bool = False
    prompt_tokens: int = 0

    @property
    def decreased(self) -> bool:
        """The context lowered the likelihood (``delta < 0``; a tie is not a decrease)."""
        return self.error is None and self.delta < 0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (NaN becomes ``None``)."""
        return _plain(dataclasses.asdict(self))


@dataclass(frozen=True)
class CodecScore:
    """The CoDeC contamination score of one dataset, with its Clopper–Pearson interval.

    Attributes
    ----------
    dataset
        The dataset's name.
    score
        ``k / n``, the share of scored samples whose likelihood decreased with context (NaN when none
        was scored).
    k, n
        Samples with ``delta < 0`` and samples scored (failed ones are left out of both).
    n_failed
        Samples not scored (their requests failed).
    low, high
        The Clopper–Pearson interval of ``score`` at ``confidence`` (0 and 1 when ``n == 0``).
    confidence
        The interval's confidence level.
    mean_delta
        Mean of ``delta`` over the scored samples (NaN when none).
    method
        ``"clopper-pearson"``.
    """

    dataset: str
    score: float
    k: int
    n: int
    n_failed: int
    low: float
    high: float
    confidence: float
    mean_delta: float
    method: str = "clopper-pearson"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (NaN becomes ``None``)."""
        return _plain(dataclasses.asdict(self))


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in data.items():
        if isinstance(value, float) and not math.isfinite(value):
            value = None
        elif isinstance(value, tuple):
            value = list(value)
        out[key] = value
    return out


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


# --- statistics ---------------------------------------------------------------------------------

def codec_score(samples: Sequence[CodecSample], *, confidence: float = 0.95) -> dict[str, CodecScore]:
    """The contamination score of each dataset: the share of its samples with ``delta < 0``.

    A tie (``delta == 0``: the context left the mean log-likelihood exactly unchanged) counts as *not*
    decreased, as CoDeC's indicator 1[Δ < 0] does. Failed samples are counted in ``n_failed`` and left
    out of ``k`` and ``n``. Each sample is a Bernoulli trial, so the interval is Clopper–Pearson
    (:func:`calib.stats.clopper_pearson`; DESIGN.md, "Statistics").

    Parameters
    ----------
    samples
        What :func:`codec_probe` returned (any subset).
    confidence
        Confidence level of the intervals, in (0, 1).

    Returns
    -------
    dict of str to CodecScore
        Keyed by dataset, in order of first appearance.
    """
    if not 0.0 < confidence < 1.0:
        raise InvalidParameterError(f"confidence must lie in (0, 1), got {confidence!r}")
    groups: dict[str, list[CodecSample]] = {}
    for s in samples:
        if not isinstance(s, CodecSample):
            raise InvalidParameterError(f"samples must be CodecSample objects, got {type(s).__name__}")
        groups.setdefault(s.dataset, []).append(s)
    out = {}
    for dataset, group in groups.items():
        scored = [s for s in group if s.error is None]
        n, k = len(scored), sum(1 for s in scored if s.delta < 0)
        if n:
            ci = clopper_pearson(k, n, confidence)
            low, high, score = ci.low, ci.high, ci.estimate
            mean_delta = math.fsum(s.delta for s in scored) / n
        else:
            low, high, score, mean_delta = 0.0, 1.0, math.nan, math.nan
        out[dataset] = CodecScore(dataset=dataset, score=score, k=k, n=n, n_failed=len(group) - n, low=low,
                                  high=high, confidence=float(confidence), mean_delta=mean_delta)
    return out


def codec_auc(seen_scores: Sequence[float], unseen_scores: Sequence[float]) -> float:
    """How well the contamination scores separate seen from unseen datasets (ties count one half).

    .. math::

        \\mathrm{AUC} = \\frac{1}{|S^+| |S^-|} \\sum_{s^+ \\in S^+} \\sum_{s^- \\in S^-}
        \\left[ 1(s^+ > s^-) + 0.5\\, 1(s^+ = s^-) \\right]

    computed literally (a handful of datasets per side), the scale-aware diagnostics paper's §5.3
    formula: 1 when every seen dataset scores above every unseen one, 0.5 for no separation.

    Parameters
    ----------
    seen_scores, unseen_scores
        Contamination scores (:attr:`CodecScore.score`) of the datasets in the model's training data
        (S+) and of those not in it (S−); finite, at least one each.

    Returns
    -------
    float
        The AUC in [0, 1].

    Raises
    ------
    ValueError
        An empty side or a non-finite score (naming the side and position).
    """
    sides = {}
    for name, values in (("seen_scores", seen_scores), ("unseen_scores", unseen_scores)):
        values = list(values)
        if not values:
            raise InvalidParameterError(f"{name} is empty; the AUC needs at least one seen and one unseen dataset")
        for i, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
                raise InvalidParameterError(f"{name}[{i}] must be a finite number, got {v!r}")
        sides[name] = [float(v) for v in values]
    seen, unseen = sides["seen_scores"], sides["unseen_scores"]
    wins = sum((1.0 if p > q else 0.5 if p == q else 0.0) for p in seen for q in unseen)
    return wins / (len(seen) * len(unseen))
