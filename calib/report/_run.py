"""Reading a run directory for the report: the five tables, ``spec.json`` and ``manifest.json``.

The report depends on nothing but these files (DESIGN.md "Run directory"), so it declares here the
columns it reads; a missing file or column is an :class:`~calib._exceptions.InputError` naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from calib._exceptions import InputError

__all__ = ["REQUIRED_COLUMNS", "RunData", "load_run", "setting"]

#: The columns the report reads from each table (calib/study/tables.py declares the full schemas).
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "samples": ("sample_id", "language", "membership", "kind", "source", "function"),
    "generations": ("sample_id", "role", "model", "text", "function", "finish_reason", "error"),
    "executions": ("sample_id", "role", "executor", "valid_inputs", "coverage", "distinct_outputs", "conclusive",
                   "reason", "sim_func", "matches"),
    "similarities": ("sample_id", "role", "metric", "value", "reason"),
    "claims": ("sample_id", "textually_memorized", "functionally_memorized"),
}

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
    """

    root: Path
    spec: dict[str, Any]
    manifest: dict[str, Any]
    samples: pl.DataFrame
    generations: pl.DataFrame
    executions: pl.DataFrame
    similarities: pl.DataFrame
    claims: pl.DataFrame


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


def _read_table(root: Path, name: str) -> pl.DataFrame:
    path = root / "tables" / f"{name}.parquet"
    if not path.is_file():
        raise InputError(f"no {name} table in the run directory; {_FIX}", path=str(path))
    try:
        frame = pl.read_parquet(path)
    except Exception as exc:  # polars raises several unrelated types for a damaged file
        raise InputError(f"cannot read the {name} table ({type(exc).__name__}); re-run `calib study SPEC`",
                         path=str(path)) from None
    missing = [c for c in REQUIRED_COLUMNS[name] if c not in frame.columns]
    if missing:
        raise InputError(f"the {name} table lacks column(s) {', '.join(missing)}; re-run `calib study SPEC` "
                         "with this version of calib", path=str(path))
    return frame


def load_run(run_dir: str | Path) -> RunData:
    """Read the tables, spec and manifest of the run directory ``run_dir``.

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
    tables = {name: _read_table(root, name) for name in REQUIRED_COLUMNS}
    manifest = _read_json(root / "manifest.json", required=False)
    return RunData(root=root, spec=spec, manifest=manifest, **tables)
