"""Similarity metrics behind one protocol (docs/architecture.md "Seams": Metric).

Textual (``exact``, ``bleu``, ``edit``, ``lcs``), structural (``codebleu``, ``codebleu_syntax``,
``codebleu_dataflow``, ``tsed``), embedding (``embedding``) and LLM judges (``judge_structure``,
``judge_semantic``, ``judge_functional``). Build one with :func:`create_metric`; score a table of pairs
with :func:`compute_similarities`. The metric modules load on first use, so importing this package
stays light.
"""

from __future__ import annotations

from calib.metrics.base import (
    LANGUAGE_NAMES,
    LANGUAGES,
    METRIC_NAMES,
    SIMILARITIES_SCHEMA,
    Metric,
    MetricUnavailable,
    Pair,
    Score,
    create_metric,
    normalize_language,
    register,
    score_pairs,
)
from calib.metrics.run import PAIRS_COLUMNS, acompute_similarities, compute_similarities

__all__ = [
    "LANGUAGES",
    "LANGUAGE_NAMES",
    "METRIC_NAMES",
    "Metric",
    "MetricUnavailable",
    "PAIRS_COLUMNS",
    "Pair",
    "SIMILARITIES_SCHEMA",
    "Score",
    "acompute_similarities",
    "compute_similarities",
    "create_metric",
    "normalize_language",
    "register",
    "score_pairs",
]
