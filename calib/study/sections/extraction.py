"""The ``extraction`` and ``census`` studies' spec sections: ``[extraction]`` and ``[census]``.

docs/study-spec.md documents every key; :class:`calib.study.spec.StudySpec` composes these sections.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from calib.data.extract import DEFAULT_MAX_DOCUMENT_BYTES
from calib.study.corpus_caps import CAP_MAX
from calib.study.sections import CONCURRENCY_MAX, COUNT_MAX, TOKENS_MAX, Section

__all__ = ["CENSUS_PROCEDURES", "DEFAULT_PROCEDURES", "GENERATION_ONLY", "PROBABILISTIC", "PROCEDURES", "SAMPLES_MAX",
           "CensusPair", "CensusSection", "ControlScreenSection", "ExtractionSection", "chat_procedures"]

#: Every procedure ``[extraction] procedures`` may list.
PROCEDURES = ("greedy", "top_k", "base", "near_verbatim_greedy", "near_verbatim", "greedy_prefix", "greedy_logprob",
              "sampled")
#: The procedures of an extraction study that names none (the generation-only ones are asked for by name).
DEFAULT_PROCEDURES = ("greedy", "top_k", "base", "near_verbatim_greedy", "near_verbatim")
#: Procedures scored from generations alone — no teacher-forced log-probs, no /tokenize of the server's own — so
#: they run through a completion route or through chat (``greedy_logprob`` reads the output tokens' log-probs).
GENERATION_ONLY = ("greedy_prefix", "greedy_logprob", "sampled")
#: Procedures whose score is a probability (or its estimate): the census and budgets use these; ``greedy_prefix``
#: is graded (a matched share) but not a probability, the others are 0/1.
PROBABILISTIC = ("top_k", "base", "near_verbatim", "sampled")
#: The most generations ``sampled`` draws per window.
SAMPLES_MAX = 10_000
#: A census's default procedures (a top-k census has no threshold when every control window scores 0).
CENSUS_PROCEDURES = ("base", "near_verbatim")


class ControlScreenSection(Section):
    """``[extraction.screen]``: screen every control against the members (and a training corpus) for reused text.

    The extraction paper removes controls verified as reused member text (App. D.2, E.1): they sit at the top
    of the control scores and raise the threshold. A control is flagged when the share of its distinct token
    ``ngram_tokens``-grams found in one screened document reaches ``overlap``, or when the exact Jaccard
    similarity of its ``shingle_tokens``-shingle set with one (a MinHash LSH candidate, calib.dedup) reaches
    ``jaccard``. ``source``: the members only, or also the organism's training corpus or a corpus of files
    (``paths``, ``format``, ``content_column``, ``extensions``, ``max_file_bytes`` as in ``[dedup]``; each
    document is screened whole). ``enabled = false`` keeps the table in the spec but runs no screen.
    """

    enabled: bool = True
    source: Literal["members", "organism", "corpus"] = "members"
    paths: tuple[str, ...] = ()
    format: Literal["files", "jsonl", "parquet", "csv"] | None = None
    content_column: str = "content"
    extensions: tuple[str, ...] = ()
    max_file_bytes: int = Field(default=DEFAULT_MAX_DOCUMENT_BYTES, ge=1, le=CAP_MAX)
    ngram_tokens: int = Field(default=13, ge=1, le=10_000)
    overlap: float = Field(default=0.5, gt=0.0, le=1.0)
    shingle_tokens: int = Field(default=5, ge=1, le=10_000)
    jaccard: float = Field(default=0.5, gt=0.0, le=1.0)
    num_perm: int = Field(default=128, ge=16, le=65_536)

    @model_validator(mode="after")
    def _consistent(self) -> ControlScreenSection:
        if self.source == "corpus" and not self.paths:
            raise ValueError("source = 'corpus' needs paths = [...] (the training corpus: files, folders or globs)")
        if self.source != "corpus" and self.paths:
            raise ValueError(f"paths are read only with source = 'corpus' (source is {self.source!r})")
        return self


class ExtractionSection(Section):
    """``[extraction]``: windows and scoring procedures of extraction and census studies."""

    prefix_tokens: int = Field(default=50, ge=1, le=TOKENS_MAX)
    suffix_tokens: tuple[int, ...] = (50,)
    procedures: tuple[Literal["greedy", "top_k", "base", "near_verbatim_greedy", "near_verbatim", "greedy_prefix",
                              "greedy_logprob", "sampled"], ...] = DEFAULT_PROCEDURES
    top_k: int = Field(default=40, ge=1, le=10_000)
    temperatures: tuple[float, ...] = (1.0,)
    epsilon: int = Field(default=5, ge=0, le=TOKENS_MAX)
    #: ``sampled``: generations per window (n), and the temperature they are drawn at.
    samples: int = Field(default=100, ge=1, le=SAMPLES_MAX)
    sample_temperature: float = Field(default=1.0, gt=0.0, le=100.0)
    offset: int = Field(default=0, ge=0, le=COUNT_MAX)
    stride: int = Field(default=1, ge=1, le=COUNT_MAX)
    concurrency: int = Field(default=8, ge=1, le=CONCURRENCY_MAX)
    #: ``[extraction.screen]``: the automatic decontamination screen of the controls (extraction studies).
    screen: ControlScreenSection | None = None

    def screening(self) -> bool:
        """Whether the control screen runs (an ``[extraction.screen]`` table with ``enabled`` true)."""
        return self.screen is not None and self.screen.enabled

    @field_validator("suffix_tokens")
    @classmethod
    def _suffixes(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or any(not 1 <= v <= TOKENS_MAX for v in value) or len(set(value)) != len(value):
            raise ValueError(f"suffix_tokens must list distinct suffix lengths, each from 1 to {TOKENS_MAX} tokens")
        return value

    @field_validator("procedures")
    @classmethod
    def _procedures(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or len(set(value)) != len(value):
            raise ValueError(f"procedures must list distinct procedures of {list(PROCEDURES)}")
        return value

    @field_validator("temperatures")
    @classmethod
    def _temperatures(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value or any(not t > 0 for t in value) or len(set(value)) != len(value):
            raise ValueError("temperatures must list distinct temperatures > 0 (greedy is its own procedure)")
        return value


_ORGANISM_RANGE = re.compile(r"^organism:(member|control):(\d+)-(\d+)$")


class CensusPair(Section):
    """One ``[[census.pairs]]`` entry: a candidate document and its matched control document(s)."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    document: str = Field(min_length=1)
    control: tuple[str, ...] = Field(min_length=1)

    @field_validator("control", mode="before")
    @classmethod
    def _controls(cls, value: Any) -> Any:
        """One control or a list; ``organism:control:A-B`` names the organism's controls A to B."""
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            return value
        out: list[Any] = []
        for item in items:
            match = _ORGANISM_RANGE.match(item) if isinstance(item, str) else None
            if match:
                first, last = int(match.group(2)), int(match.group(3))
                if first > last:
                    raise ValueError(f"{item!r}: the range's first index exceeds its last")
                out.extend(f"organism:{match.group(1)}:{i}" for i in range(first, last + 1))
            else:
                out.append(item)
        if any(not isinstance(i, str) or not i for i in out) or len(set(out)) != len(out):
            raise ValueError("control must be a document or a list of distinct documents")
        return tuple(out)


class CensusSection(Section):
    """``[census]``: the documents a census study audits, each with its matched control."""

    pairs: tuple[CensusPair, ...] = Field(min_length=1)

    @field_validator("pairs")
    @classmethod
    def _distinct(cls, value: tuple[CensusPair, ...]) -> tuple[CensusPair, ...]:
        names = [p.name for p in value]
        if len(set(names)) != len(names):
            raise ValueError("two census pairs share a name")
        return value


def chat_procedures(section: ExtractionSection, rule: str) -> None:
    """Refuse what an extraction or census study through chat cannot score (``[generation] route = "chat"``).

    Only the generation procedures run through chat; ``greedy_logprob`` reads the reply's own tokens, so
    its rule must give the reply as the continuation (``raw``: a rule file is checked when the run loads it).
    """
    forced = [p for p in section.procedures if p not in GENERATION_ONLY]
    if forced:
        raise ValueError(f"extraction.procedures: {forced} need teacher-forced log-probs, which a chat route does "
                         f"not give; through generation.route = 'chat' use {list(GENERATION_ONLY)}")
    if "greedy_logprob" in section.procedures and "/" not in rule and not rule.endswith(".toml"):
        from calib.data.rules import load_rule

        if load_rule(rule).reply != "raw":
            raise ValueError(f"extraction.procedures: greedy_logprob through chat reads the reply's own tokens, so it "
                             f"needs a rule whose reply is the continuation as is (natural), not {rule!r}")
