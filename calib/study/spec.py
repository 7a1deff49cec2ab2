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
    Section,
    StudySection,
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
from calib.study.sections.probes import ProbesSection

# The kinds' own sections are re-exported: ``from calib.study.spec import ExtractionSection`` keeps working.
__all__ = ["ORGANISM_MODEL_PREFIX", "PROBABILISTIC", "PROCEDURES", "AnalyzeSection", "CensusPair", "CensusSection",
           "DedupSection", "ExtractionSection", "DataSection", "ExecuteSection", "GenerationSection",
           "HubSection", "MeasureSection", "ModelsSection", "OrganismSection", "ProbesSection", "PromptSection",
           "ReportSection", "StudySection", "StudySpec", "load_spec", "locate_key", "spec_hash", "spec_model"]


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
                if model_dir[len(ORGANISM_MODEL_PREFIX):] not in ("target", "reference", "chat-target",
                                                                  "chat-reference"):
                    raise ValueError(f"[servers.{name}] model_dir = {model_dir!r}: use organism:target, "
                                     "organism:reference or their chat variants organism:chat-target, "
                                     "organism:chat-reference")
        for name in (self.budget.prices if self.budget is not None else {}):
            if name not in self.servers:
                raise ValueError(f"budget.prices.{name} names no [servers.{name}] table")
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
    prompt = spec.prompt
    if prompt.tokenizer_file is not None:
        full = prompt.tokenizer_file if Path(prompt.tokenizer_file).is_absolute() else str(base / prompt.tokenizer_file)
        if not Path(full).is_file():
            raise InputError(f"prompt.tokenizer_file: {prompt.tokenizer_file!r} is not a file (relative paths are read "
                             "from the spec's folder)", path=where, line=locate_key(text, ("prompt", "tokenizer_file")))
        prompt = prompt.model_copy(update={"tokenizer_file": full})
    generation = spec.generation
    if generation.rule is not None and ("/" in generation.rule or generation.rule.endswith(".toml")):
        from calib.data.rules import load_rule

        full = generation.rule if Path(generation.rule).is_absolute() else str(base / generation.rule)
        line = locate_key(text, ("generation", "rule"))
        if not Path(full).is_file():
            raise InputError(f"generation.rule: {generation.rule!r} is not a file (relative paths are read from the "
                             "spec's folder)", path=where, line=line)
        load_rule(full)  # a rule that does not load is refused here, naming its file and key
        generation = generation.model_copy(update={"rule": full})
    organism = spec.organism
    if organism is not None and organism.cache_dir is not None and not organism.cache_dir.is_absolute():
        organism = organism.model_copy(update={"cache_dir": base / organism.cache_dir})
    return spec.model_copy(update={"data": data, "organism": organism, "census": census, "dedup": dedup,
                                   "probes": probes, "generation": generation, "prompt": prompt})


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
