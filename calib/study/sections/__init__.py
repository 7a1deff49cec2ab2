"""The spec sections every study kind shares: ``[study]``, ``[organism]``, ``[models]``, ``[data]``, ``[analyze]``,
``[report]``, and the bounds of the spec's numbers (docs/study-spec.md documents every key).

Each kind's own sections are in :mod:`calib.study.sections.functional`, :mod:`calib.study.sections.extraction`
and :mod:`calib.study.sections.probes` and subclass :class:`Section`; :class:`calib.study.spec.StudySpec`
composes them. They sit in the study core, not in the kind packages, because the spec model imports
them all and no kind may import another (pyproject.toml's import contracts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from calib.study.corpus_caps import CorpusCaps

__all__ = ["CONCURRENCY_MAX", "COUNT_MAX", "DEFAULT_ALPHAS", "LINES_MAX", "ORGANISM_MODEL_PREFIX", "SEED_MAX",
           "TOKENS_MAX", "AnalyzeSection", "BudgetSection",
           "DataSection", "HubSection", "JudgeSection", "ModelsSection", "OrganismSection",
           "Price", "ReportSection", "RunnerSection", "Section", "StudySection", "same_checkpoint"]

#: ``model_dir = "organism:target"`` in an embedded server table names a model of the study's organism.
ORGANISM_MODEL_PREFIX = "organism:"
#: The conformal sweep's default grid of target levels (extraction studies).
DEFAULT_ALPHAS = (0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
#: Upper bounds of the spec's integers: each key is range-checked, so a typo such as ``n_inputs = 10e20``
#: (or 10^20 written out) is refused with the key named, never run (docs/study-spec.md lists the ranges).
SEED_MAX = 2**63 - 1  # seeds go to numpy and torch as 64-bit integers
COUNT_MAX = 10**9  # samples, rows, offsets
LINES_MAX = 100_000  # function body lines
TOKENS_MAX = 1_000_000  # tokens of a prompt, a window or a generation
CONCURRENCY_MAX = 4_096  # requests in flight, worker processes

class Section(BaseModel):
    # allow_inf_nan=False: TOML has nan and inf, and no key of a spec means anything with them
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class StudySection(Section):
    """``[study]``: what the study is."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    kind: str = "functional"
    seed: int = Field(default=0, ge=0, le=SEED_MAX)
    description: str = ""

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        from calib.study.kinds import KINDS

        if value not in KINDS.names():  # the built-ins and installed plugins (entry points), none imported
            raise ValueError(f"{value!r} is not a study kind; use one of {', '.join(KINDS.names())} (a plugin's "
                             "kind needs its package installed: docs/architecture.md, \"Adding a plugin\")")
        return value


class OrganismSection(Section):
    """``[organism]``: build the model organism and audit its planted members and controls."""

    preset: Literal["tiny", "demo"] = "demo"
    seed: int = Field(default=0, ge=0, le=SEED_MAX)
    cache_dir: Path | None = None
    extra_controls: int = Field(default=0, ge=0, le=100_000)


class ModelsSection(Section):
    """``[models]``: which server plays which role (names of ``[servers.NAME]`` tables)."""

    target: str | None = Field(default=None, min_length=1)
    reference: str | None = Field(default=None, min_length=1)
    panel: tuple[str, ...] = ()
    #: The panel's capability tiers, as the scale-aware paper's Table 1 labels its models (F = frontier, M =
    #: mid-tier, S = small): server name -> tier. Reported beside each model; a model left out has none.
    tiers: dict[str, Literal["frontier", "mid", "small"]] = Field(default_factory=dict)
    #: Parameter counts in billions where known (server name -> billions): the scale axis of the report.
    parameters: dict[str, float] = Field(default_factory=dict)

    @field_validator("panel")
    @classmethod
    def _panel(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value) or any(not name for name in value):
            raise ValueError("panel must list distinct server names (the models of a probes study, smallest first)")
        return value

    @field_validator("parameters")
    @classmethod
    def _parameters(cls, value: dict[str, float]) -> dict[str, float]:
        bad = [name for name, billions in value.items() if not 0 < billions < 1e6]
        if bad:
            raise ValueError(f"parameters.{bad[0]}: give the parameter count in billions, > 0 (e.g. 7 or 0.41)")
        return value

    @model_validator(mode="after")
    def _described_models(self) -> ModelsSection:
        probed = self.probed()
        for key in ("tiers", "parameters"):
            for name in getattr(self, key):
                if name not in probed:
                    raise ValueError(f"{key}.{name}: {name!r} is not a probed model (the panel, else target and "
                                     f"reference: {', '.join(probed) or 'none'}); name one of them")
        return self

    def probed(self) -> tuple[str, ...]:
        """The models a probes study runs: ``panel``, else the target and reference."""
        return self.panel or tuple(name for name in (self.target, self.reference) if name is not None)


def same_checkpoint(servers: dict[str, dict[str, Any]], target: str | None, reference: str | None) -> str | None:
    """Why the target and reference tables are two servers of one model with nothing telling them apart, else None.

    Two servers (different ``base_url``) serving one ``model`` name at the same ``revision`` (or none) leave
    the report unable to say which checkpoint each role was, and, if they are one, measure the target against
    itself; each must name the checkpoint it serves (``revision``). One server for both roles (the same
    table, or the same URL) is taken as meant.
    """
    if target is None or reference is None or target == reference:
        return None
    a, b = servers.get(target, {}), servers.get(reference, {})
    if a.get("model") is None or a.get("base_url") == b.get("base_url") or any(
            a.get(k) != b.get(k) for k in ("kind", "model", "revision")):
        return None
    fix = (f"set revision in [servers.{target}] and [servers.{reference}] (the checkpoint each serves)"
           if a.get("revision") is None else f"both have revision = {a['revision']!r}; give each its own checkpoint")
    return (f"models.target ({target}) and models.reference ({reference}) are two servers of model = "
            f"{a['model']!r} with nothing telling their checkpoints apart: {fix}")


class HubSection(Section):
    """``[data.hub]``: a corpus in a Hugging Face Hub dataset repository, pinned to a commit."""

    repo_id: str = Field(pattern=r"^[^/\s]+/[^/\s]+$")
    revision: str = Field(pattern=r"^[0-9a-f]{40}$")
    files: tuple[str, ...] = ()
    allow_patterns: tuple[str, ...] = ()
    repo_type: Literal["dataset", "model", "space"] = "dataset"

    @model_validator(mode="after")
    def _one_selection(self) -> HubSection:
        if bool(self.files) == bool(self.allow_patterns):
            raise ValueError("give exactly one of files or allow_patterns (which files of the repository to read)")
        return self


class JudgeSection(Section):
    """``[data.judge]``: keep only functions an LLM judge rates as meaningful logic (functional-memorization paper §4).

    Functions are drawn in a seeded order and judged until ``data.limit`` pass (every function when the
    limit is 0); each verdict is recorded in the ``judgments`` table (docs/study-spec.md "[data.judge]").
    """

    server: str = Field(min_length=1)
    prompt: str | None = Field(default=None, min_length=1)
    threshold: int = Field(default=5, ge=1, le=10)
    concurrency: int = Field(default=8, ge=1, le=CONCURRENCY_MAX)


class DataSection(Section, CorpusCaps):
    """``[data]``: where the audited functions come from (``max_file_bytes``, ``max_line_chars``: CorpusCaps)."""

    source: Literal["organism", "corpus", "functions"] = "organism"
    unit: Literal["function", "document"] = "function"
    paths: tuple[str, ...] = ()
    hub: HubSection | None = None
    metadata_columns: dict[str, str] | None = None
    format: Literal["files", "jsonl", "parquet", "csv"] | None = None
    content_column: str = "content"
    extensions: tuple[str, ...] = ()
    language: Literal["python", "c", "cpp", "java", "rust", "go"] = "python"
    min_lines: int = Field(default=10, ge=0, le=LINES_MAX)
    max_lines: int = Field(default=50, ge=1, le=LINES_MAX)
    limit: int = Field(default=0, ge=0, le=COUNT_MAX)
    kinds: tuple[Literal["verbatim", "business_rule", "near_duplicate"], ...] = (
        "verbatim", "business_rule", "near_duplicate")
    judge: JudgeSection | None = None

    @model_validator(mode="after")
    def _consistent(self) -> DataSection:
        if self.min_lines > self.max_lines:
            raise ValueError(f"min_lines ({self.min_lines}) exceeds max_lines ({self.max_lines})")
        if self.source == "corpus" and bool(self.paths) == (self.hub is not None):
            raise ValueError("source = 'corpus' needs exactly one of paths = [...] (files, folders or globs) "
                             "or a [data.hub] table")
        if self.source == "functions" and not self.paths:
            raise ValueError("source = 'functions' needs paths = [...] (functions tables written by calib extract)")
        if self.source != "corpus" and self.hub is not None:
            raise ValueError(f"[data.hub] is read only with source = 'corpus' (source is {self.source!r})")
        if self.source == "organism" and self.paths:
            raise ValueError("source = 'organism' takes no paths (the organism provides the functions)")
        if self.unit == "document" and self.source != "corpus":
            raise ValueError(f"unit = 'document' reads whole documents of a corpus (source is {self.source!r})")
        return self


class AnalyzeSection(Section):
    """``[analyze]``: thresholds and intervals (docs/architecture.md "The three methods" 1, "Statistics")."""

    text_metric: str = "bleu"
    tau_text: float = Field(default=0.75, gt=0.0, le=1.0)
    tau_func: float = Field(default=0.8, gt=0.0, le=1.0)
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    fpr_levels: tuple[float, ...] = (0.001, 0.01, 0.1)
    alpha: float | str = 0.001
    alphas: tuple[float | str, ...] = DEFAULT_ALPHAS
    fdr: float = Field(default=0.05, gt=0.0, lt=1.0)
    fwer: float = Field(default=0.05, gt=0.0, lt=1.0)
    budgets: tuple[float, ...] = (1e5,)
    budget_confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    decontaminate: tuple[str, ...] = ()
    review: int = Field(default=10, ge=0, le=100_000)

    @field_validator("alpha")
    @classmethod
    def _alpha(cls, value: float | str) -> float | str:
        from calib.stats import parse_alpha

        parse_alpha(value)
        return value

    @field_validator("alphas")
    @classmethod
    def _alphas(cls, value: tuple[float | str, ...]) -> tuple[float | str, ...]:
        from calib.stats import parse_alpha

        if not value:
            raise ValueError("alphas must list at least one target level")
        for item in value:
            parse_alpha(item)
        return value

    @field_validator("budgets")
    @classmethod
    def _budgets(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(not v >= 1 for v in value):
            raise ValueError("budgets are numbers of queries, each >= 1")
        return value

    @field_validator("fpr_levels")
    @classmethod
    def _levels(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value or any(not 0.0 < v < 1.0 for v in value):
            raise ValueError("fpr_levels must be a non-empty list of numbers in (0, 1)")
        return value


class ReportSection(Section):
    """``[report]``: what the report shows."""

    examples: int = Field(default=5, ge=0, le=10_000)


class Price(Section):
    """One server's price per million tokens (``[budget.prices.NAME]``), in the budget's currency."""

    input: float = Field(ge=0.0, le=1e9)
    output: float = Field(ge=0.0, le=1e9)


class RunnerSection(Section):
    """``[runner]``: where the stages that map over samples with no server to ask run (docs/scale.md).

    ``local`` (the default): in this process and its sandboxes. ``ray``: chunks go to the Ray cluster at
    ``address`` as tasks of ``cpus_per_task`` CPUs each (the sandbox's worker processes in that task), at most
    ``max_in_flight`` at once (default: twice what the cluster's CPUs hold), a task lost with its worker retried
    ``max_retries`` times; ``chunk_size`` samples per execute chunk (one task; default 4: a large cluster wants
    larger chunks, or its driver writes thousands of chunk files a second). The runner decides where work runs,
    never what it computes: no stage's fingerprint includes it, so a run started on one runner resumes on the
    other with the same tables (a chunk size other than the stage's keeps its chunks apart).
    """

    kind: Literal["local", "ray"] = "local"
    address: str | None = Field(default=None, min_length=1, max_length=1000)
    cpus_per_task: int = Field(default=1, ge=1, le=CONCURRENCY_MAX)
    max_in_flight: int | None = Field(default=None, ge=1, le=CONCURRENCY_MAX)
    max_retries: int = Field(default=3, ge=0, le=100)
    chunk_size: int | None = Field(default=None, ge=1, le=100_000)

    @model_validator(mode="after")
    def _addressed(self) -> RunnerSection:
        if self.kind == "ray" and self.address is None:
            raise ValueError('kind = "ray" needs address = "HOST:PORT" of the cluster\'s head (`ray start --head` '
                             'prints it), or "auto" on a cluster node')
        if self.kind == "local" and self.address is not None:
            raise ValueError('address is for kind = "ray"; a local runner has none (remove it, or set kind = "ray")')
        return self


class BudgetSection(Section):
    """``[budget]``: caps on what one ``calib study`` invocation asks of the model servers (docs/hosted.md).

    ``requests`` counts requests sent over the network (retries included, cache hits not), ``tokens`` the
    input plus output tokens the answers reported (``usage``), ``cost`` those tokens at ``prices`` (per
    million tokens, per server; a server without a price costs nothing). Checked before each chunk of
    work: chunks in flight finish and are kept, then the study stops (exit 4) and resumes when run again.
    """

    requests: int | None = Field(default=None, ge=1, le=COUNT_MAX)
    tokens: int | None = Field(default=None, ge=1, le=10**15)
    cost: float | None = Field(default=None, gt=0.0, le=1e12)
    currency: str = Field(default="USD", min_length=1, max_length=8)
    prices: dict[str, Price] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _priced(self) -> BudgetSection:
        if self.cost is not None and not self.prices:
            raise ValueError("cost needs prices: [budget.prices.NAME] input = ..., output = ... (per million tokens) "
                             "for each paid server")
        return self
