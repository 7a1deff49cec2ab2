"""The study spec: a TOML file validated into a pydantic model (docs/study-spec.md documents every key).

:func:`load_spec` reads a spec and reports the first problem as one line naming the file, the line and
the key path (``studies/demo.toml:14: data.min_lines: ...``), with how to fix it: unknown keys, wrong
types, values out of range, server names that no ``[servers.NAME]`` table defines, files that do not
exist. Relative paths are resolved against the spec file's folder.

Server tables are kept as written (each kind validates its own keys when it is built, see
docs/servers.md), except that an ``embedded`` server's ``model_dir`` may say ``"organism:target"`` or
``"organism:reference"``: the model of the study's ``[organism]``, built (or found in the cache) when
the study runs.
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from calib._exceptions import InputError
from calib.study._corpus_caps import CorpusCaps
from calib.study._probes_spec import ProbesSection

__all__ = ["ORGANISM_MODEL_PREFIX", "PROBABILISTIC", "PROCEDURES", "AnalyzeSection", "CensusPair", "CensusSection",
           "DedupSection", "ExtractionSection", "DataSection", "ExecuteSection", "GenerationSection",
           "HubSection", "MeasureSection", "ModelsSection", "OrganismSection", "PromptSection", "ReportSection",
           "StudySection", "StudySpec", "load_spec", "locate_key", "spec_hash"]

#: ``model_dir = "organism:target"`` in an embedded server table names a model of the study's organism.
ORGANISM_MODEL_PREFIX = "organism:"

#: The metrics a functional study scores by default (judges need ``measure.judge_server``).
#: The conformal sweep's default grid of target levels (extraction studies).
DEFAULT_ALPHAS = (0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)

DEFAULT_METRICS = ("exact", "bleu", "edit", "lcs", "codebleu", "codebleu_syntax", "codebleu_dataflow", "tsed")


#: Upper bounds of the spec's integers: each key is range-checked, so a typo such as ``n_inputs = 10e20``
#: (or 10^20 written out) is refused with the key named, never run (docs/study-spec.md lists the ranges).
SEED_MAX = 2**63 - 1  # seeds go to numpy and torch as 64-bit integers
COUNT_MAX = 10**9  # samples, rows, offsets
LINES_MAX = 100_000  # function body lines
TOKENS_MAX = 1_000_000  # tokens of a prompt, a window or a generation
CONCURRENCY_MAX = 4_096  # requests in flight, worker processes


class _Section(BaseModel):
    # allow_inf_nan=False: TOML has nan and inf, and no key of a spec means anything with them
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class StudySection(_Section):
    """``[study]``: what the study is."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    kind: Literal["functional", "extraction", "census", "probes"] = "functional"
    seed: int = Field(default=0, ge=0, le=SEED_MAX)
    description: str = ""


class OrganismSection(_Section):
    """``[organism]``: build the model organism and audit its planted members and controls."""

    preset: Literal["tiny", "demo"] = "demo"
    seed: int = Field(default=0, ge=0, le=SEED_MAX)
    cache_dir: Path | None = None
    extra_controls: int = Field(default=0, ge=0, le=100_000)


class ModelsSection(_Section):
    """``[models]``: which server plays which role (names of ``[servers.NAME]`` tables)."""

    target: str | None = Field(default=None, min_length=1)
    reference: str | None = Field(default=None, min_length=1)
    panel: tuple[str, ...] = ()

    @field_validator("panel")
    @classmethod
    def _panel(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value) or any(not name for name in value):
            raise ValueError("panel must list distinct server names (the models of a probes study, smallest first)")
        return value

    def probed(self) -> tuple[str, ...]:
        """The models a probes study runs: ``panel``, else the target and reference."""
        return self.panel or tuple(name for name in (self.target, self.reference) if name is not None)


class HubSection(_Section):
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


class DataSection(_Section, CorpusCaps):
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


class PromptSection(_Section):
    """``[prompt]``: how prompts are built (the paper: up to P = 250 context tokens, then the signature)."""

    max_context_tokens: int = Field(default=250, ge=0, le=TOKENS_MAX)


class GenerationSection(_Section):
    """``[generation]``: decoding, the same for target and reference (the paper: greedy, 500 tokens)."""

    max_tokens: int = Field(default=500, ge=1, le=TOKENS_MAX)
    temperature: float = Field(default=0.0, ge=0.0, le=100.0)
    stop: tuple[str, ...] = ()
    concurrency: int = Field(default=8, ge=1, le=CONCURRENCY_MAX)


class ExecuteSection(_Section):
    """``[execute]``: the executor and the validity criteria (DESIGN.md "Execution semantics")."""

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


class MeasureSection(_Section):
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


class AnalyzeSection(_Section):
    """``[analyze]``: thresholds and intervals (DESIGN.md "The three methods" 1, "Statistics")."""

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


PROCEDURES = ("greedy", "top_k", "base", "near_verbatim_greedy", "near_verbatim")
#: Procedures whose score is a probability (the others are 0/1): the census and budgets use these.
PROBABILISTIC = ("top_k", "base", "near_verbatim")
#: A census's default procedures (a top-k census has no threshold when every control window scores 0).
CENSUS_PROCEDURES = ("base", "near_verbatim")


class ExtractionSection(_Section):
    """``[extraction]``: windows and scoring procedures of extraction and census studies."""

    prefix_tokens: int = Field(default=50, ge=1, le=TOKENS_MAX)
    suffix_tokens: tuple[int, ...] = (50,)
    procedures: tuple[Literal["greedy", "top_k", "base", "near_verbatim_greedy", "near_verbatim"], ...] = PROCEDURES
    top_k: int = Field(default=40, ge=1, le=10_000)
    temperatures: tuple[float, ...] = (1.0,)
    epsilon: int = Field(default=5, ge=0, le=TOKENS_MAX)
    offset: int = Field(default=0, ge=0, le=COUNT_MAX)
    stride: int = Field(default=1, ge=1, le=COUNT_MAX)
    concurrency: int = Field(default=8, ge=1, le=CONCURRENCY_MAX)

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


class CensusPair(_Section):
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


class CensusSection(_Section):
    """``[census]``: the documents a census study audits, each with its matched control."""

    pairs: tuple[CensusPair, ...] = Field(min_length=1)

    @field_validator("pairs")
    @classmethod
    def _distinct(cls, value: tuple[CensusPair, ...]) -> tuple[CensusPair, ...]:
        names = [p.name for p in value]
        if len(set(names)) != len(names):
            raise ValueError("two census pairs share a name")
        return value


class DedupSection(_Section, CorpusCaps):
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


class ReportSection(_Section):
    """``[report]``: what the report shows."""

    examples: int = Field(default=5, ge=0, le=10_000)


class StudySpec(_Section):
    """A whole study spec. ``path`` is the file it was read from (relative paths resolve against its folder)."""

    study: StudySection
    servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    organism: OrganismSection | None = None
    models: ModelsSection
    data: DataSection = DataSection()
    extraction: ExtractionSection = ExtractionSection()
    census: CensusSection | None = None
    dedup: DedupSection | None = None
    prompt: PromptSection = PromptSection()
    generation: GenerationSection = GenerationSection()
    execute: ExecuteSection = ExecuteSection()
    measure: MeasureSection = MeasureSection()
    analyze: AnalyzeSection = AnalyzeSection()
    report: ReportSection = ReportSection()
    probes: ProbesSection | None = None

    @model_validator(mode="before")
    @classmethod
    def _kind_defaults(cls, data: Any) -> Any:
        """A census scores probabilities: its default procedures are the base policy and near-verbatim."""
        if isinstance(data, dict) and isinstance(data.get("study"), dict) and data["study"].get("kind") == "census":
            extraction = data.get("extraction")
            if extraction is None or (isinstance(extraction, dict) and "procedures" not in extraction):
                data = {**data, "extraction": {**(extraction or {}), "procedures": list(CENSUS_PROCEDURES)}}
        return data

    @model_validator(mode="after")
    def _references(self) -> StudySpec:
        named = [("models.target", self.models.target), ("models.reference", self.models.reference),
                 ("measure.judge_server", self.measure.judge_server),
                 ("measure.embedding_server", self.measure.embedding_server)]
        named += [("models.panel", name) for name in self.models.panel]
        named.append(("execute.server", self.execute.server))
        for key, name in named:
            if name is not None and name not in self.servers:
                defined = ", ".join(sorted(self.servers)) or "none"
                raise ValueError(f"{key} = {name!r} names no [servers.{name}] table (servers defined: {defined})")
        kinds = _server_kinds() if self.servers else ()
        for name, table in self.servers.items():
            if not isinstance(table.get("kind"), str):
                raise ValueError(f"[servers.{name}] needs kind = \"openai\" | \"tgi\" | \"anthropic\" | \"embedded\"")
            if table["kind"] not in kinds:
                raise ValueError(f"[servers.{name}] kind = {table['kind']!r} is not a server kind; use one of "
                                 f"{', '.join(kinds)} (docs/servers.md)")
            model_dir = table.get("model_dir")
            if isinstance(model_dir, str) and model_dir.startswith(ORGANISM_MODEL_PREFIX):
                if self.organism is None:
                    raise ValueError(f"[servers.{name}] model_dir = {model_dir!r} needs an [organism] table")
                if model_dir[len(ORGANISM_MODEL_PREFIX):] not in ("target", "reference"):
                    raise ValueError(f"[servers.{name}] model_dir = {model_dir!r}: use organism:target or "
                                     "organism:reference")
        kind = self.study.kind
        if self.dedup is not None:
            if kind != "functional":
                raise ValueError(f"[dedup] is read only by functional studies (kind is {kind!r})")
            if self.dedup.source == "organism" and self.organism is None:
                raise ValueError("dedup.source = 'organism' needs an [organism] table")
            name = self.dedup.embedding_server
            if name is not None and name not in self.servers:
                raise ValueError(f"dedup.embedding_server = {name!r} names no [servers.{name}] table")
        if kind == "probes":
            if self.probes is None:
                raise ValueError("study.kind = 'probes' needs a [probes] table (tasks, conditions)")
            if not self.models.probed():
                raise ValueError("models.panel: a probes study needs at least one model (panel = [\"small\", "
                                 "\"large\"], or target)")
            if self.probes.tasks == "organism:business" and self.organism is None:
                raise ValueError("probes.tasks = 'organism:business' needs an [organism] table")
            codec = self.probes.codec
            for item in codec.datasets if codec is not None else ():
                if item.source.startswith(ORGANISM_MODEL_PREFIX) and self.organism is None:
                    raise ValueError(f"probes.codec.datasets: {item.source!r} needs an [organism] table")
        elif self.probes is not None:
            raise ValueError(f"[probes] is read only by study.kind = 'probes' (kind is {kind!r})")
        elif self.models.target is None:
            raise ValueError(f"models.target: a {kind} study needs a target model")
        if kind == "functional" and self.models.reference is None:
            raise ValueError("models.reference: a functional study needs a reference model (the counterfactual)")
        if kind == "census":
            if self.census is None:
                raise ValueError("study.kind = 'census' needs [[census.pairs]] (name, document, control)")
            bad = [p for p in self.extraction.procedures if p not in PROBABILISTIC]
            if bad:
                raise ValueError(f"extraction.procedures: the census needs probabilities, {bad} are 0/1 scores; use "
                                 f"{list(PROBABILISTIC)}")
            if len(self.extraction.suffix_tokens) != 1:
                raise ValueError("extraction.suffix_tokens: a census uses one suffix length")
            for pair in self.census.pairs:
                for side in (pair.document, *pair.control):
                    if side.startswith(ORGANISM_MODEL_PREFIX) and self.organism is None:
                        raise ValueError(f"census.pairs: {side!r} needs an [organism] table")
        elif self.census is not None:
            raise ValueError(f"[census] is read only by study.kind = 'census' (kind is {kind!r})")
        if self.data.source == "organism" and self.organism is None and kind not in ("census", "probes"):
            raise ValueError("data.source = 'organism' needs an [organism] table")
        judges = [m for m in self.measure.metrics if m.startswith("judge_")]
        if judges and self.measure.judge_server is None:
            raise ValueError(f"measure.metrics lists {judges}: set measure.judge_server to a chat server's name")
        if self.analyze.text_metric not in self.measure.metrics:
            raise ValueError(f"analyze.text_metric = {self.analyze.text_metric!r} is not in measure.metrics")
        return self

    def public(self) -> dict[str, Any]:
        """The spec as JSON data, with every server's secret-bearing keys left as written (names, not values)."""
        return json.loads(self.model_dump_json())


def _server_kinds() -> tuple[str, ...]:
    """The server kinds a spec may name: the built-in ones and those of installed plugins (by entry point).

    Read from the registry without importing any kind's module (the embedded kind would load torch).
    """
    from calib.servers.registry import REGISTRY

    return tuple(REGISTRY.names())


def spec_hash(data: Any) -> str:
    """SHA-256 (16 hex digits) of canonical JSON: what a stage's fingerprint is built from."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


_TABLE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_.\"' -]+?)\s*=")


def _split_key(text: str) -> list[str]:
    return [part.strip().strip("\"'") for part in text.split(".")]


def locate_key(text: str, path: tuple[str, ...]) -> int | None:
    """The 1-based line of the TOML key ``path`` in ``text`` (or of its deepest enclosing table/key)."""
    best_line, best_depth = None, 0
    table: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TABLE.match(line)
        if header:
            table = _split_key(header.group(1))
            full = table
        else:
            key = _KEY.match(line)
            if not key:
                continue
            full = table + _split_key(key.group(1))
        depth = 0
        for a, b in zip(full, path):
            if a != b:
                break
            depth += 1
        if depth > best_depth or (depth == best_depth == len(full) and best_line is None):
            best_line, best_depth = number, depth
    return best_line


def _message(error: dict[str, Any]) -> tuple[tuple[str, ...], str]:
    loc = tuple(str(part) for part in error["loc"] if not isinstance(part, int))
    kind, msg = error["type"], error["msg"]
    if kind == "extra_forbidden":
        where = ".".join(loc[:-1])
        return loc, f"unknown key {loc[-1]!r}{f' in [{where}]' if where else ''}; see docs/study-spec.md for the keys"
    if kind == "missing":
        return loc, f"missing key {'.'.join(loc)}"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    elif "input" in error and not isinstance(error["input"], (dict, list)):
        msg = f"{msg} (got {error['input']!r})"
    return loc, msg


def _read_spec_text(path: Path) -> str:
    """The spec's text; a folder, a FIFO or device, an unreadable or non-UTF-8 file raise one-line InputErrors."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise InputError(f"cannot read the study spec: {exc.strerror or exc}; check the path", path=str(path)) from exc
    if stat.S_ISDIR(mode):
        raise InputError("is a folder, not a study spec; give the spec's TOML file", path=str(path))
    if not stat.S_ISREG(mode):
        raise InputError("is not a regular file (a FIFO, socket or device); give the spec's TOML file",
                         path=str(path))
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the study spec: {exc.strerror or exc}; check its permissions",
                         path=str(path)) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); a study spec is "
                         "a TOML text file saved as UTF-8", path=str(path), line=line) from None


def load_spec(path: str | Path) -> StudySpec:
    """Read and validate the study spec at ``path``.

    Raises
    ------
    InputError
        One line: ``FILE:LINE: KEY: what is wrong`` for a TOML syntax error, an unknown key, a wrong
        type or value, a server name no table defines, or a path that does not exist.
    """
    path = Path(path)
    text = _read_spec_text(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        raise InputError(f"not valid TOML: {exc}", path=str(path), line=int(line.group(1)) if line else None) from None
    try:
        spec = StudySpec.model_validate(data)
    except ValidationError as exc:
        loc, msg = _message(exc.errors()[0])
        if not loc:  # a check across sections: its message starts with the key it is about
            named = re.match(r"^\[?([A-Za-z_][\w.]*)\]?[ :=]", msg)
            loc = tuple(named.group(1).split(".")) if named else ()
            msg_key = ""
        else:
            msg_key = ".".join(loc)
        line = locate_key(text, loc) if loc else None
        raise InputError(f"{msg_key}: {msg}" if msg_key else msg, path=str(path), line=line) from None
    return _resolve_paths(spec, path.resolve().parent, text, str(path))


def _resolve_paths(spec: StudySpec, base: Path, text: str, where: str) -> StudySpec:
    """Relative paths against the spec's folder; named files must exist (globs are expanded later: a spec may
    name data still to be downloaded; ``calib check`` refuses a glob that matches nothing)."""
    def corpus_paths(section: str, paths: tuple[str, ...]) -> tuple[str, ...]:
        resolved = []
        for item in paths:
            full = item if Path(item).is_absolute() else str(base / item)
            if not glob.has_magic(item) and not Path(full).exists():
                raise InputError(f"{section}.paths: {item!r} does not exist (relative paths are read from the "
                                 "spec's folder)", path=where, line=locate_key(text, (section, "paths")))
            resolved.append(full)
        return tuple(resolved)

    data = spec.data
    if data.source in ("corpus", "functions") and data.hub is None:
        data = data.model_copy(update={"paths": corpus_paths("data", data.paths)})
    census = spec.census
    if census is not None:
        pairs = []
        for pair in census.pairs:
            def resolve(item: str, side: str, pair: CensusPair = pair) -> str:
                if item.startswith(ORGANISM_MODEL_PREFIX):
                    return item
                full = item if Path(item).is_absolute() else str(base / item)
                if not Path(full).is_file():
                    raise InputError(f"census.pairs: {side} = {item!r} of pair {pair.name!r} is not a file (relative "
                                     "paths are read from the spec's folder)", path=where,
                                     line=locate_key(text, ("census", "pairs", side)))
                return full

            pairs.append(pair.model_copy(update={"document": resolve(pair.document, "document"),
                                                 "control": tuple(resolve(c, "control") for c in pair.control)}))
        census = census.model_copy(update={"pairs": tuple(pairs)})
    dedup = spec.dedup
    if dedup is not None and dedup.paths:
        dedup = dedup.model_copy(update={"paths": corpus_paths("dedup", dedup.paths)})
    probes = spec.probes
    if probes is not None:
        probes = _resolve_probes(probes, base, text, where)
    organism = spec.organism
    if organism is not None and organism.cache_dir is not None and not organism.cache_dir.is_absolute():
        organism = organism.model_copy(update={"cache_dir": base / organism.cache_dir})
    return spec.model_copy(update={"data": data, "organism": organism, "census": census, "dedup": dedup,
                                   "probes": probes})


def _resolve_probes(probes: ProbesSection, base: Path, text: str, where: str) -> ProbesSection:
    """The task file and the codec datasets' files, relative to the spec's folder; they must exist."""
    def resolve(item: str, key: tuple[str, ...]) -> str:
        if item.startswith(("mbpp", ORGANISM_MODEL_PREFIX)):
            return item
        full = item if Path(item).is_absolute() else str(base / item)
        if not Path(full).exists():
            raise InputError(f"{'.'.join(key)}: {item!r} does not exist (relative paths are read from the spec's "
                             "folder)", path=where, line=locate_key(text, key))
        return full

    update: dict[str, Any] = {"tasks": resolve(probes.tasks, ("probes", "tasks"))}
    if probes.codec is not None:
        datasets = tuple(d.model_copy(update={"source": resolve(d.source, ("probes", "codec", "datasets", "source"))})
                         for d in probes.codec.datasets)
        update["codec"] = probes.codec.model_copy(update={"datasets": datasets})
    return probes.model_copy(update=update)
