"""The ``functional`` study's spec sections: ``[prompt]``, ``[generation]``, ``[execute]``, ``[measure]``, ``[dedup]``.

docs/study-spec.md documents every key; :class:`calib.study.spec.StudySpec` composes these sections.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from calib.study.corpus_caps import CorpusCaps
from calib.study.sections import CONCURRENCY_MAX, LINES_MAX, TOKENS_MAX, Section

__all__ = ["DEFAULT_METRICS", "DedupSection", "ExecuteSection", "GenerationSection", "MeasureSection",
           "PromptSection"]

#: The metrics a functional study scores by default (judges need ``measure.judge_server``).
DEFAULT_METRICS = ("exact", "bleu", "edit", "lcs", "codebleu", "codebleu_syntax", "codebleu_dataflow", "tsed")

class PromptSection(Section):
    """``[prompt]``: how prompts are built (the paper: up to P = 250 context tokens, then the signature)."""

    max_context_tokens: int = Field(default=250, ge=0, le=TOKENS_MAX)


class GenerationSection(Section):
    """``[generation]``: decoding, the same for target and reference (the paper: greedy, 500 tokens)."""

    max_tokens: int = Field(default=500, ge=1, le=TOKENS_MAX)
    temperature: float = Field(default=0.0, ge=0.0, le=100.0)
    stop: tuple[str, ...] = ()
    concurrency: int = Field(default=8, ge=1, le=CONCURRENCY_MAX)


class ExecuteSection(Section):
    """``[execute]``: the executor and the validity criteria (docs/architecture.md "Execution semantics")."""

    executor: Literal["sandbox", "llm", "agent"] = "sandbox"
    server: str | None = Field(default=None, min_length=1)
    level: Literal["bare", "common_imports", "preamble", "preamble_retry"] = "preamble_retry"
    agent_max_turns: int = Field(default=20, ge=1, le=1_000)
    agent_max_seconds: float = Field(default=600.0, gt=0.0, le=7 * 86_400.0)
    n_inputs: int = Field(default=10, ge=1, le=10_000)
    min_valid: int = Field(default=8, ge=1, le=10_000)
    coverage: float = Field(default=0.8, ge=0.0, le=1.0)
    min_distinct: int = Field(default=2, ge=1, le=10_000)
    input_timeout: float = Field(default=1.0, gt=0.0, le=3_600.0)
    budget_runs: int = Field(default=200, ge=1, le=1_000_000)
    budget_seconds: float = Field(default=4.0, gt=0.0, le=86_400.0)
    memory_mb: int = Field(default=1024, ge=64, le=1_048_576)
    workers: int = Field(default=0, ge=0, le=CONCURRENCY_MAX)
    unsafe_no_sandbox: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> ExecuteSection:
        if self.min_valid > self.n_inputs:
            raise ValueError(f"min_valid ({self.min_valid}) exceeds n_inputs ({self.n_inputs})")
        if self.min_distinct > self.n_inputs:
            raise ValueError(f"min_distinct ({self.min_distinct}) exceeds n_inputs ({self.n_inputs}): no function "
                             "could show that many distinct outputs")
        if self.executor in ("llm", "agent") and self.server is None:
            raise ValueError(f"executor = {self.executor!r} needs server = \"NAME\" (a chat server's [servers.NAME])")
        return self


class MeasureSection(Section):
    """``[measure]``: the similarity metrics scored against x (docs/metrics.md)."""

    metrics: tuple[str, ...] = DEFAULT_METRICS
    judge_server: str | None = None
    embedding_server: str | None = None
    judge_max_tokens: int = Field(default=512, ge=1, le=TOKENS_MAX)
    workers: int = Field(default=0, ge=0, le=CONCURRENCY_MAX)

    @field_validator("metrics")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from importlib.metadata import entry_points

        from calib.metrics.base import METRIC_NAMES

        known = set(METRIC_NAMES) | {ep.name for ep in entry_points(group="calib.metrics")}
        unknown = [name for name in value if name not in known]
        if unknown:
            raise ValueError(f"unknown metric(s) {unknown}; known: {', '.join(sorted(known))}")
        if len(set(value)) != len(value):
            raise ValueError("a metric is listed twice")
        return value


class DedupSection(Section, CorpusCaps):
    """``[dedup]``: near-duplicates of the audited functions in the target's training corpus (functional studies)."""

    source: Literal["organism", "corpus", "functions"] = "organism"
    paths: tuple[str, ...] = ()
    format: Literal["files", "jsonl", "parquet", "csv"] | None = None
    content_column: str = "content"
    extensions: tuple[str, ...] = ()
    min_lines: int = Field(default=1, ge=0, le=LINES_MAX)
    jaccard: float = Field(default=0.4, gt=0.0, le=1.0)
    num_perm: int = Field(default=128, ge=16, le=65_536)
    shingle_tokens: int = Field(default=5, ge=1, le=10_000)
    semantic: bool = True
    cosine: float = Field(default=0.9, gt=-1.0, le=1.0)
    embedding_server: str | None = None
    index: Literal["auto", "exact", "faiss", "hnsw"] = "auto"
    redis_url: str | None = Field(default=None, pattern=r"^redis://")
    count_copies: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> DedupSection:
        if self.source == "organism" and self.paths:
            raise ValueError("source = 'organism' takes no paths (the organism's training corpus is rebuilt)")
        if self.source != "organism" and not self.paths:
            raise ValueError(f"source = {self.source!r} needs paths = [...] (the training corpus)")
        return self
