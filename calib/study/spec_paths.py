"""Where a study spec's keys are (:func:`locate_key`) and its relative paths resolved (:func:`resolve_paths`).

:func:`calib.study.spec.load_spec` validates a spec, then resolves every path it names against the spec
file's folder here: named files must exist, globs are expanded later (a spec may name data still to be
downloaded; ``calib check`` refuses a glob that matches nothing). Errors are one line naming the file,
the line (found by :func:`locate_key`) and the key.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path
from typing import Any

from calib._exceptions import InputError
from calib.study.sections import ORGANISM_MODEL_PREFIX
from calib.study.sections.extraction import CensusPair
from calib.study.sections.probes import ProbesSection

__all__ = ["locate_key", "resolve_paths"]


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


def resolve_paths(spec: Any, base: Path, text: str, where: str) -> Any:
    """Relative paths against the spec's folder; named files must exist (globs are expanded later: a spec may
    name data still to be downloaded; ``calib check`` refuses a glob that matches nothing)."""
    def corpus_paths(section: str, paths: tuple[str, ...]) -> tuple[str, ...]:
        resolved = []
        for item in paths:
            full = item if Path(item).is_absolute() else str(base / item)
            if not glob.has_magic(item) and not Path(full).exists():
                raise InputError(f"{section}.paths: {item!r} does not exist (relative paths are read from the "
                                 "spec's folder)", path=where, line=locate_key(text, (*section.split("."), "paths")))
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
    extraction = spec.extraction
    screen = extraction.screen
    if screen is not None and screen.paths:
        screen = screen.model_copy(update={"paths": corpus_paths("extraction.screen", screen.paths)})
        extraction = extraction.model_copy(update={"screen": screen})
    dedup = spec.dedup
    if dedup is not None and dedup.paths:
        dedup = dedup.model_copy(update={"paths": corpus_paths("dedup", dedup.paths)})
    probes = spec.probes
    if probes is not None:
        probes = _resolve_probes(probes, base, text, where)
    def file(item: str, key: tuple[str, ...]) -> str:
        full = item if Path(item).is_absolute() else str(base / item)
        if not Path(full).is_file():
            raise InputError(f"{'.'.join(key)}: {item!r} is not a file (relative paths are read from the spec's "
                             "folder)", path=where, line=locate_key(text, key))
        return full

    prompt = spec.prompt
    if prompt.tokenizer_file is not None:
        prompt = prompt.model_copy(update={"tokenizer_file": file(prompt.tokenizer_file, ("prompt", "tokenizer_file"))})
    generation = spec.generation
    if generation.rule is not None and ("/" in generation.rule or generation.rule.endswith(".toml")):
        from calib.data.rules import load_rule

        full = file(generation.rule, ("generation", "rule"))
        load_rule(full)  # a rule that does not load is refused here, naming its file and key
        generation = generation.model_copy(update={"rule": full})
    if data.judge is not None and data.judge.prompt is not None:
        from calib.data.judge import load_judge_prompt

        full = file(data.judge.prompt, ("data", "judge", "prompt"))
        try:  # a prompt that does not load is refused here, naming its file
            load_judge_prompt(full)
        except (ValueError, OSError) as exc:
            raise InputError(f"data.judge.prompt: {exc}", path=where,
                             line=locate_key(text, ("data", "judge", "prompt"))) from None
        data = data.model_copy(update={"judge": data.judge.model_copy(update={"prompt": full})})
    mitigation = spec.mitigation
    if mitigation is not None:
        audit = mitigation.audit if Path(mitigation.audit).is_absolute() else str(base / mitigation.audit)
        if not (Path(audit) / "spec.json").is_file():
            raise InputError(f"mitigation.audit: {mitigation.audit!r} is not a run directory (no spec.json); name "
                             "the folder a finished functional study wrote (relative paths are read from the spec's "
                             "folder)", path=where, line=locate_key(text, ("mitigation", "audit")))
        benchmarks = []
        for item in mitigation.benchmarks:
            if not item.startswith(("mbpp", "humaneval", ORGANISM_MODEL_PREFIX)):
                item = item if Path(item).is_absolute() else str(base / item)
                if not Path(item).is_file():
                    raise InputError(f"mitigation.benchmarks: {item!r} is not a task file, \"humaneval\", \"mbpp\" "
                                     "or \"organism:business\" (relative paths are read from the spec's folder)",
                                     path=where, line=locate_key(text, ("mitigation", "benchmarks")))
            benchmarks.append(item)
        mitigation = mitigation.model_copy(update={"audit": audit, "benchmarks": tuple(benchmarks)})
    organism = spec.organism
    if organism is not None and organism.cache_dir is not None and not organism.cache_dir.is_absolute():
        organism = organism.model_copy(update={"cache_dir": base / organism.cache_dir})
    return spec.model_copy(update={"data": data, "organism": organism, "census": census, "dedup": dedup,
                                   "extraction": extraction,
                                   "probes": probes, "generation": generation, "prompt": prompt,
                                   "mitigation": mitigation})


def _resolve_probes(probes: ProbesSection, base: Path, text: str, where: str) -> ProbesSection:
    """The task file and the codec datasets' files, relative to the spec's folder; they must exist."""
    def resolve(item: str, key: tuple[str, ...]) -> str:
        if item.startswith(("mbpp", "humaneval", ORGANISM_MODEL_PREFIX)):
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
