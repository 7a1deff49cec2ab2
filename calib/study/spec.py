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

import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, create_model, model_validator

from calib._exceptions import InputError
from calib.study.kinds import BUILTIN_KINDS, KINDS, study_kind
from calib.study.sections import (
    ORGANISM_MODEL_PREFIX,
    AnalyzeSection,
    BudgetSection,
    DataSection,
    HubSection,
    ModelsSection,
    OrganismSection,
    ReportSection,
    RunnerSection,
    Section,
    StudySection,
    same_checkpoint,
)
from calib.study.sections.extraction import (
    CENSUS_PROCEDURES,
    PROBABILISTIC,
    PROCEDURES,
    CensusPair,
    CensusSection,
    ExtractionSection,
    chat_procedures,
)
from calib.study.sections.functional import (
    DedupSection,
    ExecuteSection,
    GenerationSection,
    MeasureSection,
    PromptSection,
)
from calib.study.sections.mitigation import MitigationSection
from calib.study.sections.probes import ProbesSection
from calib.study.spec_paths import locate_key, resolve_paths

# The kinds' own sections are re-exported: ``from calib.study.spec import ExtractionSection`` keeps working.
__all__ = ["ORGANISM_MODEL_PREFIX", "PROBABILISTIC", "PROCEDURES", "AnalyzeSection", "CensusPair", "CensusSection",
           "DedupSection", "ExtractionSection", "DataSection", "ExecuteSection", "GenerationSection",
           "HubSection", "MeasureSection", "MitigationSection",
           "ModelsSection", "OrganismSection", "ProbesSection", "PromptSection",
           "ReportSection", "RunnerSection", "StudySection",
           "StudySpec", "load_spec", "locate_key", "spec_hash", "spec_model"]


class StudySpec(Section):
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
    budget: BudgetSection | None = None
    runner: RunnerSection = RunnerSection()
    probes: ProbesSection | None = None
    mitigation: MitigationSection | None = None

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
        named = [("models.target", self.models.target), ("models.reference", self.models.reference)]
        named += [("measure.judge_server", name) for name in self.measure.judge_servers]
        named += [("measure.embedding_server", name) for name in self.measure.embedding_servers]
        named += [("models.panel", name) for name in self.models.panel]
        named += [("execute.server", self.execute.server),
                  ("data.judge.server", self.data.judge and self.data.judge.server)]
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
                if model_dir[len(ORGANISM_MODEL_PREFIX):] not in ("target", "reference", "chat-target",
                                                                  "chat-reference"):
                    raise ValueError(f"[servers.{name}] model_dir = {model_dir!r}: use organism:target, "
                                     "organism:reference or their chat variants organism:chat-target, "
                                     "organism:chat-reference")
        same = same_checkpoint(self.servers, self.models.target, self.models.reference)
        if same is not None:
            raise ValueError(same)
        for name in (self.budget.prices if self.budget is not None else {}):
            if name not in self.servers:
                raise ValueError(f"budget.prices.{name} names no [servers.{name}] table")
        kind = self.study.kind
        if kind == "mitigation":
            if self.mitigation is None:
                raise ValueError("study.kind = 'mitigation' needs a [mitigation] table (audit = \"RUN\")")
            rewriter = self.mitigation.rewriter
            if rewriter is not None and rewriter not in self.servers:
                raise ValueError(f"mitigation.rewriter = {rewriter!r} names no [servers.{rewriter}] table")
            target = self.servers.get(self.models.target or "", {})
            if target.get("kind") != "embedded":
                raise ValueError("models.target: a mitigation study post-trains the target, so it must be an "
                                 "embedded server (kind = \"embedded\", model_dir = a model folder or organism:target)")
        elif self.mitigation is not None:
            raise ValueError(f"[mitigation] is read only by study.kind = 'mitigation' (kind is {kind!r})")
        if self.dedup is not None:
            if kind != "functional":
                raise ValueError(f"[dedup] is read only by functional studies (kind is {kind!r})")
            if self.dedup.source == "organism" and self.organism is None:
                raise ValueError("dedup.source = 'organism' needs an [organism] table")
            name = self.dedup.embedding_server
            if name is not None and name not in self.servers:
                raise ValueError(f"dedup.embedding_server = {name!r} names no [servers.{name}] table")
        screen = self.extraction.screen
        if screen is not None:
            if kind != "extraction":
                raise ValueError(f"[extraction.screen] is read only by extraction studies (kind is {kind!r}); a census "
                                 "removes verified control windows with analyze.decontaminate")
            if screen.source == "organism" and self.organism is None:
                raise ValueError("extraction.screen.source = 'organism' needs an [organism] table")
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
        elif self.models.target is None and kind in BUILTIN_KINDS:
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
        if self.generation.route == "chat" and kind in ("extraction", "census"):
            chat_procedures(self.extraction, self.generation.chat_rule)
        if self.data.judge is not None and kind != "functional":
            raise ValueError(f"[data.judge] is read only by functional studies (kind is {kind!r})")
        if self.data.source == "organism" and self.organism is None and kind in ("functional", "extraction"):
            raise ValueError("data.source = 'organism' needs an [organism] table")
        judges = [m for m in self.measure.metrics if m.startswith("judge_")]
        if judges and self.measure.judge_server is None:
            raise ValueError(f"measure.metrics lists {judges}: set measure.judge_server to a chat server's name")
        if self.analyze.text_metric not in self.measure.metrics:
            raise ValueError(f"analyze.text_metric = {self.analyze.text_metric!r} is not in measure.metrics")
        if kind not in BUILTIN_KINDS:
            record = study_kind(kind)
            if record.validate is not None:
                record.validate(self)  # a plugin kind's own rules across sections
        return self

    def public(self) -> dict[str, Any]:
        """The spec as JSON data, with every server's secret-bearing keys left as written (names, not values)."""
        return json.loads(self.model_dump_json())


def spec_model(kind: str) -> type[StudySpec]:
    """The spec model of a study of ``kind``: :class:`StudySpec`, with a plugin kind's own section added.

    A plugin kind whose :class:`~calib.study.kinds.StudyKind` names a ``section`` model gets a subclass
    of :class:`StudySpec` with the required field ``<spec_section>`` of that model, so its table is
    validated (unknown keys, types, ranges: one line naming the key) and written to ``spec.json`` like
    any other section. Any other kind, or a name no kind has (the ``study.kind`` check then names it),
    gets :class:`StudySpec`.
    """
    if kind in BUILTIN_KINDS or kind not in KINDS:
        return StudySpec
    record = study_kind(kind)
    if record.section is None:
        return StudySpec
    name = record.spec_section
    if not name or name in StudySpec.model_fields:
        raise InputError(f"study kind {kind!r}: its spec section must have a name of its own, not "
                         f"{name!r} (the built-in sections are {', '.join(StudySpec.model_fields)}); fix the "
                         "plugin's StudyKind record")
    return create_model(f"StudySpec_{kind}", __base__=StudySpec, **{name: (record.section, ...)})


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
        study = data.get("study")
        kind = study.get("kind", "functional") if isinstance(study, dict) else None
        spec = spec_model(kind if isinstance(kind, str) else "functional").model_validate(data)
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
    return resolve_paths(spec, path.resolve().parent, text, str(path))
