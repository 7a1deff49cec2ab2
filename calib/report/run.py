"""Reading a run directory for the report: the tables of the study's kind, ``spec.json`` and ``manifest.json``.

The report depends on nothing but these files (docs/architecture.md "Run directory"), so it declares here the
columns it reads of each study kind's tables (``functional``, ``extraction``, ``census``, ``probes``);
a missing file or column is an :class:`~calib._exceptions.InputError` naming it. A functional study's
``duplicates`` table (written by the ``dedup`` stage of a spec with ``[dedup]``) is optional: absent,
``RunData.duplicates`` is None; present, it must be readable and hold :data:`DUPLICATES_COLUMNS`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from calib._exceptions import InputError

__all__ = ["COLUMNS_OF_KIND", "DUPLICATES_COLUMNS", "JUDGMENTS_COLUMNS", "OPTIONAL_TABLES", "PROBES_COLUMNS",
           "REQUIRED_COLUMNS", "RunData", "RunTables", "load_run", "probed_models", "setting", "study_kind"]

#: The columns the report reads from each table (calib/study/tables.py declares the full schemas).
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "samples": ("sample_id", "language", "membership", "kind", "source", "function"),
    "generations": ("sample_id", "role", "model", "text", "function", "finish_reason", "error"),
    "executions": ("sample_id", "role", "executor", "valid_inputs", "coverage", "distinct_outputs", "conclusive",
                   "reason", "sim_func", "matches"),
    "similarities": ("sample_id", "role", "metric", "value", "reason"),
    "claims": ("sample_id", "textually_memorized", "functionally_memorized"),
}

#: The columns the report reads from a functional study's optional ``duplicates`` table (calib/dedup/counts.py
#: ``DUPLICATES_SCHEMA``): one row per (audited function, training-corpus document) near-duplicate pair.
DUPLICATES_COLUMNS: tuple[str, ...] = ("sample_id", "corpus_id", "kind", "similarity", "copies")

#: The columns the report reads from each table of an ``extraction`` study (the population conformal test).
EXTRACTION_COLUMNS: dict[str, tuple[str, ...]] = {
    "samples": ("sample_id", "membership"),
    "windows": ("window_id", "sample_id", "membership", "suffix_tokens", "suffix", "error"),
    "scores": ("window_id", "sample_id", "role", "procedure", "suffix_tokens", "log10_value", "error"),
    "operating_points": ("role", "model", "procedure", "suffix_tokens", "pool", "n_controls", "alpha_dagger", "alpha",
                         "k", "certified_alpha", "log10_threshold", "in_sample_fpr", "certifiable", "at_atom",
                         "fpr_low", "fpr_high", "fpr_upper", "prob_exceeds_certified", "n_members", "claims",
                         "member_rate", "calibrated_rate", "low", "high"),
    "extraction_claims": ("window_id", "sample_id", "membership", "role", "procedure", "suffix_tokens", "log10_value",
                          "p_value", "margin", "claim", "bh", "bonferroni", "contaminated"),
    "budgets": ("role", "procedure", "suffix_tokens", "budget", "confidence", "log10_min_probability", "n_members",
                "members_generated", "n_controls", "controls_generated", "members_extractable", "member_rate",
                "control_rate", "extractable_rate"),
    "paired": ("procedure", "suffix_tokens", "alpha", "certified_alpha_target", "certified_alpha_reference", "n",
               "both", "target_only", "reference_only", "neither", "difference", "low", "high"),
}

#: The columns the report reads from each table of a ``census`` study (single documents).
CENSUS_COLUMNS: dict[str, tuple[str, ...]] = {
    "samples": ("sample_id", "membership"),
    "windows": ("window_id", "sample_id", "membership", "document", "char_start", "char_end", "suffix", "error"),
    "scores": ("window_id", "sample_id", "role", "procedure", "log10_value", "error"),
    "census": ("document", "role", "procedure", "suffix_tokens", "document_length", "n_windows", "n_control_windows",
               "removed_control_windows", "log10_threshold", "max_control_score_log10", "windows_above",
               "covered_characters", "coverage", "max_margin", "budget", "budget_confidence",
               "min_log10_score_within_budget", "windows_within_budget", "coverage_within_budget", "error"),
}

#: The columns the report reads from each table of a ``probes`` study (scale-aware diagnostics;
#: calib/study/_probes_tables.py declares the full schemas).
PROBES_COLUMNS: dict[str, tuple[str, ...]] = {
    "tasks": ("task_id", "source", "reference_status", "reference_passed"),
    "prompts": ("prompt_id", "task_id", "label", "condition", "family", "applicable", "reason", "prompt_tokens",
                "added_tokens", "reference_passed"),
    "probe_generations": ("task_id", "label", "model", "model_name", "error"),
    "test_results": ("task_id", "label", "model", "sample_index", "status", "passed"),
    "pass_at_k": ("model", "label", "condition", "family", "k", "n_problems", "estimate", "low", "high", "original",
                  "difference", "difference_low", "difference_high", "relative_change", "confidence", "n_resamples"),
    "model_pairs": ("label", "k", "model_a", "model_b", "n_problems", "estimate_a", "estimate_b", "difference", "low",
                    "high"),
    "opcodes": ("model", "task_id", "label", "programs", "passing", "entropy", "passing_entropy", "jsd",
                "passing_jsd"),
    "codec": ("model", "dataset", "seen", "error"),
    "codec_scores": ("model", "dataset", "seen", "n", "decreased", "score", "low", "high", "mean_delta", "auc"),
}

#: The columns the report reads from a functional study's optional ``judgments`` table (``[data.judge]``).
JUDGMENTS_COLUMNS = ("order", "sample_id", "severity", "passed", "error")

#: Study kind -> table name -> the columns the report reads.
COLUMNS_OF_KIND: dict[str, dict[str, tuple[str, ...]]] = {
    "functional": REQUIRED_COLUMNS, "extraction": EXTRACTION_COLUMNS, "census": CENSUS_COLUMNS,
    "probes": PROBES_COLUMNS}

#: Tables a run may lack, per kind: the extraction study writes ``paired`` only when it has a reference model, the
#: functional study ``duplicates`` only when its spec has a ``[dedup]`` table, the probes study ``codec`` and
#: ``codec_scores`` only with ``[probes.codec]`` and ``model_pairs`` only with two models or more.
OPTIONAL_TABLES: dict[str, tuple[str, ...]] = {"functional": ("duplicates",), "extraction": ("paired",), "census": (),
                                               "probes": ("model_pairs", "codec", "codec_scores")}

_FIX = "run `calib study SPEC` first (it writes the run directory)"


@dataclass(frozen=True)
class RunData:
    """Everything the report reads from one run directory.

    Attributes
    ----------
    root : Path
        The run directory.
    spec : dict
        The resolved study spec (``spec.json``, ``StudySpec.public()``).
    manifest : dict
        What ran (``manifest.json``); empty when the file is absent.
    samples, generations, executions, similarities, claims : polars.DataFrame
        The tables of ``RUN/tables/``.
    duplicates : polars.DataFrame or None
        The near-duplicate pairs of the ``dedup`` stage (:data:`DUPLICATES_COLUMNS`); None when the run
        has no such table (a spec without ``[dedup]``).
    judgments : polars.DataFrame or None
        The ``[data.judge]`` filter's verdicts (:data:`JUDGMENTS_COLUMNS`, one row per judged function); None
        when the run has no such table (a spec without ``[data.judge]``).
    """

    root: Path
    spec: dict[str, Any]
    manifest: dict[str, Any]
    samples: pl.DataFrame
    generations: pl.DataFrame
    executions: pl.DataFrame
    similarities: pl.DataFrame
    claims: pl.DataFrame
    duplicates: pl.DataFrame | None = None
    judgments: pl.DataFrame | None = None


@dataclass(frozen=True)
class RunTables:
    """What the report reads from the run directory of an ``extraction``, ``census`` or ``probes`` study.

    Attributes
    ----------
    root : Path
        The run directory.
    kind : str
        The study kind (``spec.json`` ``study.kind``).
    spec : dict
        The resolved study spec (``spec.json``).
    manifest : dict
        What ran (``manifest.json``); empty when the file is absent.
    tables : dict
        Table name -> polars.DataFrame, one per table of :data:`COLUMNS_OF_KIND` ``[kind]``; a table of
        :data:`OPTIONAL_TABLES` the run lacks is absent.
    """

    root: Path
    kind: str
    spec: dict[str, Any]
    manifest: dict[str, Any]
    tables: dict[str, pl.DataFrame]


def setting(data: dict[str, Any], dotted: str, default: Any = None) -> Any:
    """``data["a"]["b"]`` for ``dotted = "a.b"``, or ``default`` where a key is missing or null."""
    value: Any = data
    for key in dotted.split("."):
        if not isinstance(value, dict) or value.get(key) is None:
            return default
        value = value[key]
    return value


def _read_json(path: Path, *, required: bool) -> dict[str, Any]:
    if not path.is_file():
        if required:
            raise InputError(f"no {path.name} in the run directory; {_FIX}", path=str(path))
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read {path.name}: {exc}; re-run `calib study SPEC`", path=str(path)) from None
    if not isinstance(data, dict):
        raise InputError(f"{path.name} must hold a JSON object; re-run `calib study SPEC`", path=str(path))
    return data


def study_kind(spec: dict[str, Any], path: Path) -> str:
    """The study kind of ``spec`` (``study.kind``, default ``functional``); an InputError when it is not a name.

    Any name is accepted here: a plugin kind's tables are read whole, and whether some renderer draws the
    kind's report is decided by :func:`calib.report.write.write_report`.
    """
    kind = setting(spec, "study.kind", "functional")
    if not isinstance(kind, str) or not kind:
        raise InputError(f"study.kind = {kind!r} is not the name of a study kind; re-run `calib study SPEC`",
                         path=str(path))
    return kind


def probed_models(spec: dict[str, Any]) -> list[str]:
    """The models of a probes study in the spec's order: ``models.panel``, else the target and reference."""
    panel = setting(spec, "models.panel", [])
    if panel:
        return [str(name) for name in panel]
    return [str(name) for name in (setting(spec, "models.target"), setting(spec, "models.reference")) if name]


def _may_lack(kind: str, name: str, spec: dict[str, Any]) -> bool:
    """Whether a run of ``kind`` whose spec is ``spec`` may lack the optional table ``name``."""
    if name not in OPTIONAL_TABLES[kind]:
        return False
    if kind == "probes":
        # model pairs need two models; the CoDeC tables are written only with [probes.codec]
        return len(probed_models(spec)) < 2 if name == "model_pairs" else not setting(spec, "probes.codec")
    # paired compares target and reference: a study without a reference model has no such table
    return not setting(spec, "models.reference")


def _read_table(root: Path, name: str, columns: tuple[str, ...] | None = None) -> pl.DataFrame:
    path = root / "tables" / f"{name}.parquet"
    if not path.is_file():
        raise InputError(f"no {name} table in the run directory; {_FIX}", path=str(path))
    try:
        frame = pl.read_parquet(path)
    except Exception as exc:  # polars raises several unrelated types for a damaged file
        raise InputError(f"cannot read the {name} table ({type(exc).__name__}); re-run `calib study SPEC`",
                         path=str(path)) from None
    missing = [c for c in (REQUIRED_COLUMNS[name] if columns is None else columns) if c not in frame.columns]
    if missing:
        raise InputError(f"the {name} table lacks column(s) {', '.join(missing)}; re-run `calib study SPEC` "
                         "with this version of calib", path=str(path))
    return frame


def load_run(run_dir: str | Path) -> RunData | RunTables:
    """Read the tables, spec and manifest of the run directory ``run_dir``.

    Returns a :class:`RunData` for a ``functional`` study and a :class:`RunTables` (the tables by
    name) for an ``extraction``, ``census`` or ``probes`` study; ``spec.json``'s ``study.kind`` says which.
    A plugin kind's run is a :class:`RunTables` holding every table of ``RUN/tables/`` (its renderer checks
    their columns).

    Raises
    ------
    InputError
        One line naming the missing or unreadable file (or the missing column) and saying to run
        ``calib study SPEC`` first.
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise InputError(f"not a run directory; {_FIX}", path=str(root))
    spec = _read_json(root / "spec.json", required=True)
    kind = study_kind(spec, root / "spec.json")
    if kind == "functional":
        tables = {name: _read_table(root, name) for name in REQUIRED_COLUMNS}
        # written only by a study with [dedup]; absent is normal, present must be whole
        duplicates = _read_table(root, "duplicates", DUPLICATES_COLUMNS) \
            if (root / "tables" / "duplicates.parquet").exists() else None
        judgments = _read_table(root, "judgments", JUDGMENTS_COLUMNS) \
            if (root / "tables" / "judgments.parquet").exists() else None
        manifest = _read_json(root / "manifest.json", required=False)
        return RunData(root=root, spec=spec, manifest=manifest, **tables, duplicates=duplicates, judgments=judgments)
    read = {}
    if kind not in COLUMNS_OF_KIND:  # a plugin kind: every table the run wrote, as it is
        found = sorted((root / "tables").glob("*.parquet")) if (root / "tables").is_dir() else []
        read = {path.stem: _read_table(root, path.stem, ()) for path in found}
        return RunTables(root=root, kind=kind, spec=spec, manifest=_read_json(root / "manifest.json", required=False),
                         tables=read)
    for name, columns in COLUMNS_OF_KIND[kind].items():
        if _may_lack(kind, name, spec) and not (root / "tables" / f"{name}.parquet").exists():
            continue
        read[name] = _read_table(root, name, columns)
    manifest = _read_json(root / "manifest.json", required=False)
    return RunTables(root=root, kind=kind, spec=spec, manifest=manifest, tables=read)
