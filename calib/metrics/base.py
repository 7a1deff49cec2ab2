"""The Metric seam (docs/architecture.md "Seams"): how similar a candidate is to a reference function.

A metric answers ``score(reference_code, candidate_code, language) -> float`` for one pair. Where it
cannot give a number (a language it does not handle, code that does not parse, a judge's reply that
cannot be read, a server that failed) it raises :class:`MetricUnavailable` with the reason, and the
pair is recorded with a null value and that reason, never scored 0.

Metrics that work better in batches (the offline embedding model, a remote server) also implement
``score_batch(pairs) -> list[Score]`` or ``async ascore_batch(pairs) -> list[Score]``; the runner
(:mod:`calib.metrics.run`) prefers them. Every metric has a ``fingerprint()`` (name, version and the
settings that change its values) that keys its cached results in the run directory.

Built-in metrics are looked up by name in :data:`METRIC_NAMES`; third-party packages add metrics through
``[project.entry-points."calib.metrics"]`` (a factory taking the same keyword options).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import polars as pl

from calib._exceptions import CalibError, InvalidParameterError
from calib._registry import Registry

__all__ = [
    "LANGUAGES",
    "LANGUAGE_NAMES",
    "METRIC_NAMES",
    "SIMILARITIES_SCHEMA",
    "Metric",
    "MetricUnavailable",
    "Pair",
    "Score",
    "create_metric",
    "normalize_language",
    "register",
    "score_pairs",
]

#: The languages calib's metrics handle (tree-sitter grammar names; ``cpp`` is C++).
LANGUAGES = ("python", "c", "cpp", "java", "rust", "go")

#: How prompts and reports write each language.
LANGUAGE_NAMES = {"python": "Python", "c": "C", "cpp": "C++", "java": "Java", "rust": "Rust", "go": "Go"}

_ALIASES = {"py": "python", "c++": "cpp", "cxx": "cpp", "cc": "cpp", "rs": "rust", "golang": "go", "h": "c",
            "hpp": "cpp", "cpp": "cpp"}

MetricKind = Literal["textual", "structural", "embedding", "judge"]


def normalize_language(language: str) -> str:
    """``language`` as one of :data:`LANGUAGES` (case and the usual aliases ignored: ``C++``, ``py``, ``rs``...).

    Raises
    ------
    InvalidParameterError
        For a language calib's metrics do not handle.
    """
    key = str(language).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in LANGUAGES:
        raise InvalidParameterError(f"language {language!r}: expected one of {', '.join(LANGUAGES)} "
                                    f"(or C++, py, rs, golang)")
    return key


class MetricUnavailable(CalibError):
    """A metric cannot give a value for this pair; ``reason`` says why (recorded, never scored 0).

    Parameters
    ----------
    reason
        One line: what stopped the metric (``"candidate does not parse as rust"``, ``"judge reply
        unparsable"``, ``"request failed: ..."``).
    raw
        The judge's raw reply, when there was one.
    transient
        The cause may go away on a re-run (a failed request, a missing server): the null is recorded
        but not cached, so the next run tries again.
    """

    def __init__(self, reason: str, *, raw: str | None = None, transient: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.raw = raw
        self.transient = transient


@dataclass(frozen=True)
class Pair:
    """One comparison: the reference function (training data), a candidate (a generation) and the language."""

    reference: str
    candidate: str
    language: str


@dataclass(frozen=True)
class Score:
    """One metric's result for one pair.

    ``value`` is in [0, 1] (cosine similarity may be negative for embeddings), or ``None`` with the
    ``reason``. ``raw`` keeps a judge's reply; ``detail`` holds what else a metric reports (a judge's
    category and reasoning), JSON-serialisable. ``transient`` marks a null whose cause may go away
    (a failed request): it is not cached.
    """

    value: float | None
    reason: str | None = None
    raw: str | None = None
    detail: Mapping[str, Any] | None = field(default=None)
    transient: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "reason": self.reason, "raw": self.raw,
                "detail": dict(self.detail) if self.detail is not None else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Score:
        return cls(value=data.get("value"), reason=data.get("reason"), raw=data.get("raw"),
                   detail=data.get("detail"))


@runtime_checkable
class Metric(Protocol):
    """A similarity metric (docs/architecture.md "Seams": Metric).

    Attributes
    ----------
    name
        The metric's name in specs, tables and ``calib similarity --metrics``.
    kind
        ``textual``, ``structural``, ``embedding`` or ``judge``: the runner runs the first two in a
        process pool and the remote ones with the server's concurrency.
    version
        Bumped whenever the metric's definition changes, so cached values are not reused.
    """

    name: str
    kind: MetricKind
    version: str

    def score(self, reference_code: str, candidate_code: str, language: str) -> float:
        """The similarity of ``candidate_code`` to ``reference_code``; raises :class:`MetricUnavailable`."""
        ...

    def fingerprint(self) -> dict[str, Any]:
        """Name, version and every setting that changes the values (no secrets): the cache key's identity."""
        ...


def score_pairs(metric: Metric, pairs: Sequence[Pair]) -> list[Score]:
    """Score ``pairs`` one by one with ``metric.score``; :class:`MetricUnavailable` becomes a null with its reason.

    Any other exception from a metric is a bug in that metric for that pair: it is recorded as the
    pair's reason (``"error: ..."``) so that one bad sample never stops a run.
    """
    out: list[Score] = []
    for pair in pairs:
        try:
            out.append(Score(float(metric.score(pair.reference, pair.candidate, pair.language))))
        except MetricUnavailable as exc:
            out.append(Score(None, exc.reason, exc.raw, transient=exc.transient))
        except Exception as exc:  # noqa: BLE001 - one bad sample is recorded, never fatal
            out.append(Score(None, f"error: {type(exc).__name__}: {' '.join(str(exc).split())}"[:500]))
    return out


#: One row per (sample, role, metric): the ``similarities`` table (docs/architecture.md "Run directory").
SIMILARITIES_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String(),
    "role": pl.String(),  # target | reference | ...
    "metric": pl.String(),
    "value": pl.Float64(),  # null when the metric could not apply
    "reason": pl.String(),  # why value is null
    "detail": pl.String(),  # JSON: what else the metric reports (judge category and reasoning, raw reply)
}

# name -> module defining it (loaded on first use so that importing calib.metrics stays light).
_BUILTIN: dict[str, str] = {
    "exact": "calib.metrics.textual",
    "bleu": "calib.metrics.textual",
    "edit": "calib.metrics.textual",
    "lcs": "calib.metrics.textual",
    "codebleu": "calib.metrics.structural",
    "codebleu_syntax": "calib.metrics.structural",
    "codebleu_dataflow": "calib.metrics.structural",
    "tsed": "calib.metrics.structural",
    "embedding": "calib.metrics.embedding",
    "judge_structure": "calib.metrics.judges",
    "judge_semantic": "calib.metrics.judges",
    "judge_functional": "calib.metrics.judges",
}

#: Every built-in metric, in the order reports list them.
METRIC_NAMES = tuple(_BUILTIN)

Factory = Callable[..., Metric]
REGISTRY: Registry[Factory] = Registry("metric", "calib.metrics", _BUILTIN)
register = REGISTRY.register


def create_metric(name: str, **options: Any) -> Metric:
    """Build the metric ``name`` with its options (``server=`` for embeddings and judges, ...).

    Raises
    ------
    InvalidParameterError
        For an unknown name (the message lists the known ones) or an option the metric does not take.
    """
    factory = REGISTRY.get(name)
    if factory is None:
        raise InvalidParameterError(REGISTRY.unknown(name))
    try:
        return factory(**options)
    except TypeError as exc:
        raise InvalidParameterError(f"metric {name!r}: {exc}") from exc
