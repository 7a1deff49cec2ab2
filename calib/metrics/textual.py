"""Textual similarity: exact match, BLEU on code tokens, edit similarity, longest common substring.

The functional-memorization paper (§3 "Textual similarity") measures textual overlap between the
training-data function x (the reference) and a generation x* (the candidate) with four metrics; calib
defines them as follows, for every language alike (they read text, not syntax):

- ``exact``: 1.0 when x and x* are the same text after normalising line endings to ``\\n``, removing
  trailing whitespace at the end of each line and dropping leading and trailing blank lines; else 0.0.
- ``bleu``: BLEU (Papineni et al. 2002) with 1- to 4-gram precisions on **code tokens**, computed by
  sacrebleu (``tokenize="none"`` over the tokens joined by spaces) with its sentence-level defaults:
  exponential smoothing (``smooth_method="exp"``, NIST's geometric sequence for zero counts) and
  effective order (n-gram orders longer than the candidate are left out). A code token is a maximal
  run of word characters (letters of any script, digits, ``_``) or any single other non-space
  character: ``x+=1`` is ``x``, ``+``, ``=``, ``1``. Reported on [0, 1] (sacrebleu's score / 100);
  τ_text = 0.75 marks near-verbatim memorization (Ippolito et al. 2023).
- ``edit``: 1 − Levenshtein(x, x*) / |x| over characters (rapidfuzz), floored at 0 (a candidate much
  longer than x would otherwise go negative).
- ``lcs``: the length of the longest common substring of x and x* (characters) divided by |x|.

An empty reference has no textual similarity to speak of: ``bleu``, ``edit`` and ``lcs`` raise
:class:`~calib.metrics.base.MetricUnavailable`; ``exact`` still answers.
"""

from __future__ import annotations

import functools
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from calib.metrics.base import MetricUnavailable, Pair, Score, normalize_language, register, score_pairs

__all__ = ["BLEU_SETTINGS", "Bleu", "EditSimilarity", "ExactMatch", "LongestCommonSubstring", "code_tokens",
           "normalize_text"]

_TOKEN = re.compile(r"\w+|[^\w\s]")
_TRAILING = re.compile(r"[ \t\f\v]+$", re.MULTILINE)

#: The sacrebleu settings behind ``bleu`` (recorded in its fingerprint).
BLEU_SETTINGS = {"tokenize": "none", "smooth_method": "exp", "effective_order": True, "max_ngram_order": 4,
                 "tokens": "code: \\w+ runs and single other non-space characters"}


def code_tokens(code: str) -> list[str]:
    """The code tokens of ``code``: runs of word characters and single other non-space characters."""
    return _TOKEN.findall(code)


def normalize_text(code: str) -> str:
    """``code`` with ``\\n`` line endings, no trailing whitespace on any line, no leading/trailing blank lines."""
    text = code.replace("\r\n", "\n").replace("\r", "\n")
    return _TRAILING.sub("", text).strip("\n")


@dataclass(frozen=True)
class _Textual(ABC):
    """Shared plumbing: a textual metric is a pure function of the two texts."""

    name: ClassVar[str]
    kind: ClassVar[str] = "textual"
    version: ClassVar[str] = "1"

    def fingerprint(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}

    def score(self, reference_code: str, candidate_code: str, language: str) -> float:
        normalize_language(language)
        return self._value(reference_code, candidate_code)

    def score_batch(self, pairs: Sequence[Pair]) -> list[Score]:
        return score_pairs(self, pairs)

    @abstractmethod
    def _value(self, reference: str, candidate: str) -> float:
        """The metric's value for two texts (each subclass defines it)."""


@register("exact")
@dataclass(frozen=True)
class ExactMatch(_Textual):
    """``exact``: 1.0 when the texts match after :func:`normalize_text`, else 0.0."""

    name: ClassVar[str] = "exact"

    def _value(self, reference: str, candidate: str) -> float:
        return 1.0 if normalize_text(reference) == normalize_text(candidate) else 0.0


@functools.cache
def _bleu():
    from sacrebleu.metrics import BLEU

    return BLEU(tokenize=BLEU_SETTINGS["tokenize"], smooth_method=BLEU_SETTINGS["smooth_method"],
                effective_order=BLEU_SETTINGS["effective_order"], max_ngram_order=BLEU_SETTINGS["max_ngram_order"])


@register("bleu")
@dataclass(frozen=True)
class Bleu(_Textual):
    """``bleu``: sentence BLEU of the candidate against the reference on code tokens, on [0, 1]."""

    name: ClassVar[str] = "bleu"

    def fingerprint(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, **BLEU_SETTINGS}

    def _value(self, reference: str, candidate: str) -> float:
        ref = code_tokens(reference)
        if not ref:
            raise MetricUnavailable("the reference has no code tokens (empty function)")
        hyp = code_tokens(candidate)
        if not hyp:
            return 0.0
        return min(1.0, _bleu().sentence_score(" ".join(hyp), [" ".join(ref)]).score / 100.0)


@register("edit")
@dataclass(frozen=True)
class EditSimilarity(_Textual):
    """``edit``: 1 − Levenshtein distance / |reference| over characters, floored at 0."""

    name: ClassVar[str] = "edit"

    def _value(self, reference: str, candidate: str) -> float:
        from rapidfuzz.distance import Levenshtein

        if not reference:
            raise MetricUnavailable("the reference is empty: edit similarity divides by its length")
        return max(0.0, 1.0 - Levenshtein.distance(reference, candidate) / len(reference))


@register("lcs")
@dataclass(frozen=True)
class LongestCommonSubstring(_Textual):
    """``lcs``: the longest common substring's length / |reference| (characters)."""

    name: ClassVar[str] = "lcs"

    def _value(self, reference: str, candidate: str) -> float:
        from calib.metrics._lcs import longest_common_substring

        if not reference:
            raise MetricUnavailable("the reference is empty: the substring share divides by its length")
        return longest_common_substring(reference, candidate) / len(reference)
