"""The ``functional`` study's spec sections: ``[prompt]``, ``[generation]``, ``[execute]``, ``[measure]``, ``[dedup]``.

docs/study-spec.md documents every key; :class:`calib.study.spec.StudySpec` composes these sections.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from calib.study.corpus_caps import CorpusCaps
from calib.study.sections import CONCURRENCY_MAX, LINES_MAX, TOKENS_MAX, Section

__all__ = ["DEFAULT_METRICS", "SERVER_SUFFIX", "DedupSection", "ExecuteSection", "GenerationSection", "MeasureSection",
           "PromptSection"]

#: The metrics a functional study scores by default (judges need ``measure.judge_server``).
DEFAULT_METRICS = ("exact", "bleu", "edit", "lcs", "codebleu", "codebleu_syntax", "codebleu_dataflow", "tsed")

class PromptSection(Section):
    """``[prompt]``: how prompts are built (the paper: up to P = 250 context tokens, then the signature)."""

    max_context_tokens: int = Field(default=250, ge=0, le=TOKENS_MAX)
    #: What counts the context's tokens (calib.data.tokenizers): the target server's /tokenize, its completions
    #: route's own tokens (echo), a local tokenizer.json, one from a Hub repository at a pinned revision, or a
    #: character budget.
    tokenizer: Literal["server", "completions", "file", "hub", "chars"] = "server"
    tokenizer_file: str | None = Field(default=None, min_length=1)
    tokenizer_repo: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
    tokenizer_revision: str | None = Field(default=None, min_length=1)
    chars_per_token: float = Field(default=4.0, gt=0.0, le=100.0)

    @model_validator(mode="after")
    def _source_keys(self) -> PromptSection:
        wanted = {"file": ("tokenizer_file",), "hub": ("tokenizer_repo", "tokenizer_revision")}.get(self.tokenizer, ())
        for key in wanted:
            if getattr(self, key) is None:
                raise ValueError(f"tokenizer = {self.tokenizer!r} needs {key}" + (
                    " (a commit hash or tag: the tokenizer is pinned)" if key == "tokenizer_revision" else ""))
        for key in ("tokenizer_file", "tokenizer_repo", "tokenizer_revision"):
            if getattr(self, key) is not None and key not in wanted:
                raise ValueError(f"{key} is read only with tokenizer = "
                                 f"{'file' if key == 'tokenizer_file' else 'hub'!r} (tokenizer is {self.tokenizer!r})")
        if self.chars_per_token != 4.0 and self.tokenizer != "chars":
            raise ValueError(f"chars_per_token is read only with tokenizer = 'chars' (tokenizer is {self.tokenizer!r})")
        return self


class GenerationSection(Section):
    """``[generation]``: decoding, the same for target and reference (the paper: greedy, 500 tokens)."""

    max_tokens: int = Field(default=500, ge=1, le=TOKENS_MAX)
    temperature: float = Field(default=0.0, ge=0.0, le=100.0)
    stop: tuple[str, ...] = ()
    concurrency: int = Field(default=8, ge=1, le=CONCURRENCY_MAX)
    #: How both models are asked: their completion route, or their chat route through a prompt-selection rule
    #: (docs/hosted.md "Generation through chat"); the same for target and reference, members and controls.
    route: Literal["complete", "chat"] = "complete"
    #: The prompt-selection rule of the chat route: a built-in rule's name (calib.data.rules.RULES) or a rule's
    #: TOML file (relative to the spec's folder). Only with ``route = "chat"``; ``natural`` when not given.
    rule: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _rule_with_chat(self) -> GenerationSection:
        if self.rule is not None and self.route != "chat":
            raise ValueError(f"rule = {self.rule!r} applies to the chat route only; set route = \"chat\" or remove "
                             "rule")
        if self.rule is not None and "/" not in self.rule and not self.rule.endswith(".toml"):
            from calib.data.rules import RULES

            if self.rule not in RULES:
                raise ValueError(f"rule = {self.rule!r} is not a built-in prompt-selection rule ({', '.join(RULES)}); "
                                 "name one of them or a rule's TOML file")
        return self

    @property
    def chat_rule(self) -> str | None:
        """The prompt-selection rule of the chat route (``natural`` unless named); None on the completion route."""
        return (self.rule or "natural") if self.route == "chat" else None


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
    budget_seconds: float = Field(default=2.0, gt=0.0, le=86_400.0)
    memory_mb: int = Field(default=1024, ge=64, le=1_048_576)
    workers: int = Field(default=0, ge=0, le=CONCURRENCY_MAX)
    unsafe_no_sandbox: bool = False
    #: False: a sample whose x the search already made inconclusive runs no candidate (docs/study-spec.md)
    candidates_when_inconclusive: bool = True

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

    def settings(self) -> dict[str, Any]:
        """These settings as a stage's fingerprint holds them: not ``workers`` (how many sandboxes at once changes no
        result), and ``candidates_when_inconclusive`` only when off (runs made before the key existed keep their
        fingerprints)."""
        skip = {"workers"} | ({"candidates_when_inconclusive"} if self.candidates_when_inconclusive else set())
        return self.model_dump(mode="json", exclude=skip)

    def executor_config(self, seed: int, *, workers: int | None = None) -> Any:
        """The :class:`calib.executors.ExecutorConfig` of these settings and the study's ``seed`` (every study kind
        that executes builds it here); ``workers`` overrides the executor's default when given."""
        from calib.executors import ExecutorConfig

        extra = {} if workers is None else {"workers": workers}
        return ExecutorConfig(n_inputs=self.n_inputs, min_valid=self.min_valid, coverage=self.coverage,
                              min_distinct=self.min_distinct, seed=seed, input_timeout=self.input_timeout,
                              budget_runs=self.budget_runs, budget_seconds=self.budget_seconds,
                              memory_mb=self.memory_mb, unsafe_no_sandbox=self.unsafe_no_sandbox,
                              candidates_when_inconclusive=self.candidates_when_inconclusive, **extra)


#: Joins a metric's name and its server's in the name of a further server's metric (``judge_functional@NAME``).
SERVER_SUFFIX = "@"


class MeasureSection(Section):
    """``[measure]``: the similarity metrics scored against x (docs/metrics.md).

    ``judge_server`` and ``embedding_server`` name one server or a list of them (the paper's §5.2 compares
    several judges and embedding models): the first server's metrics keep their plain names, each further
    server's are named ``METRIC@SERVER`` (:meth:`measured`). A list of one is the same as its one name.
    """

    metrics: tuple[str, ...] = DEFAULT_METRICS
    judge_server: str | tuple[str, ...] | None = None
    embedding_server: str | tuple[str, ...] | None = None
    judge_max_tokens: int = Field(default=512, ge=1, le=TOKENS_MAX)
    workers: int = Field(default=0, ge=0, le=CONCURRENCY_MAX)

    @field_validator("judge_server", "embedding_server", mode="before")
    @classmethod
    def _servers(cls, value: Any) -> str | tuple[str, ...] | None:
        if not (value is None or isinstance(value, str)
                or (isinstance(value, list | tuple) and all(isinstance(name, str) for name in value))):
            raise ValueError(f"expected a server's name or a list of names (\"NAME\" or [\"A\", \"B\"]), got "
                             f"{value!r}")
        if value is None or isinstance(value, str):
            if value == "":
                raise ValueError("a server's name cannot be empty; name a [servers.NAME] table")
            return value
        if not value:
            raise ValueError("an empty list names no server; name one [servers.NAME] table or a list of them")
        if any(not name for name in value):
            raise ValueError("a server's name cannot be empty; name a [servers.NAME] table")
        if len(set(value)) != len(value):
            twice = sorted({n for n in value if value.count(n) > 1})
            raise ValueError(f"server(s) {twice} listed twice; list each server once")
        bad = [name for name in value[1:] if SERVER_SUFFIX in name]
        if bad:
            raise ValueError(f"server name(s) {bad} contain {SERVER_SUFFIX!r}, which joins a metric's name and its "
                             f"server's ({'judge_functional' + SERVER_SUFFIX + bad[0]}); rename the [servers] table")
        return value[0] if len(value) == 1 else tuple(value)  # one name: exactly as a plain string (fingerprints)

    @property
    def judge_servers(self) -> tuple[str, ...]:
        """The judge servers, first (plain metric names) first; empty without one."""
        return _names(self.judge_server)

    @property
    def embedding_servers(self) -> tuple[str, ...]:
        """The embedding servers, first first; empty without one (``embedding`` then runs the offline model)."""
        return _names(self.embedding_server)

    def measured(self) -> list[tuple[str, str, str | None]]:
        """``(name, metric, server)`` of every metric the measure stage records, in the order it records them.

        ``name`` is the similarities table's ``metric``: ``metric`` for the first server (or none), then
        ``metric@SERVER`` for each further judge or embedding server, each right after its plain one.
        """
        out: list[tuple[str, str, str | None]] = []
        for metric in self.metrics:
            servers = (self.judge_servers if metric.startswith("judge_")
                       else self.embedding_servers if metric == "embedding" else ())
            out.append((metric, metric, servers[0] if servers else None))
            out += [(f"{metric}{SERVER_SUFFIX}{server}", metric, server) for server in servers[1:]]
        return out

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


def _names(value: str | tuple[str, ...] | None) -> tuple[str, ...]:
    return () if value is None else (value,) if isinstance(value, str) else tuple(value)


class DedupSection(Section, CorpusCaps):
    """``[dedup]``: near-duplicates of the audited functions in the target's training corpus (functional studies)."""

    source: Literal["organism", "corpus", "functions", "bands"] = "organism"
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

    @model_validator(mode="before")
    @classmethod
    def _band_table_is_textual(cls, data: Any) -> Any:
        # a band table holds band keys, not embeddings: its study finds textual pairs only, unless told otherwise
        if isinstance(data, dict) and data.get("source") == "bands" and "semantic" not in data:
            return {**data, "semantic": False}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> DedupSection:
        if self.source == "organism" and self.paths:
            raise ValueError("source = 'organism' takes no paths (the organism's training corpus is rebuilt)")
        if self.source != "organism" and not self.paths:
            raise ValueError(f"source = {self.source!r} needs paths = [...] (the training corpus)")
        if self.source == "bands":
            if len(self.paths) != 1:
                raise ValueError(f"source = 'bands' takes one path, the band table's folder (calib dedup bands "
                                 f"--out DIR), not {len(self.paths)}")
            if self.semantic:
                raise ValueError("source = 'bands' finds textual near-duplicates only (a band table holds no "
                                 "embeddings); remove semantic = true, or use source = 'functions' or 'corpus'")
            for key in ("redis_url", "embedding_server"):
                if getattr(self, key) is not None:
                    raise ValueError(f"source = 'bands' searches the band table; remove {key}")
        return self
