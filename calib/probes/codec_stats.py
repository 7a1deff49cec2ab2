"""CoDeC's results and statistics: per-sample records, the per-dataset contamination score, the seen/unseen AUC.

:func:`calib.probes.codec.codec_probe` (whose module docstring defines Δ(x) and the score) produces the
:class:`CodecSample` records; :func:`codec_score` and :func:`codec_auc` summarise them. Every public name
here is also importable from :mod:`calib.probes.codec`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from calib._exceptions import InvalidParameterError
from calib.stats import clopper_pearson

__all__ = ["CodecSample", "CodecScore", "codec_auc", "codec_score"]


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


def codec_score(samples: Sequence[CodecSample], *, confidence: float = 0.95) -> dict[str, CodecScore]:
    """The contamination score of each dataset: the share of its samples with ``delta < 0``.

    A tie (``delta == 0``: the context left the mean log-likelihood exactly unchanged) counts as *not*
    decreased, as CoDeC's indicator 1[Δ < 0] does. Failed samples are counted in ``n_failed`` and left
    out of ``k`` and ``n``. Each sample is a Bernoulli trial, so the interval is Clopper–Pearson
    (:func:`calib.stats.clopper_pearson`; docs/architecture.md, "Statistics").

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
