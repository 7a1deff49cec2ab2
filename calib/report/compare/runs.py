"""Reading the runs ``calib compare-runs`` compares, and refusing runs that cannot be compared.

Every run must be a run directory with its tables (:func:`calib.report.load_run`), all runs must be of
one study kind, and all must share one operating point: the rates of runs judged with different
thresholds, text metrics, confidence levels or validity criteria measure different things, so their
difference means nothing (docs/compare-runs.md, "Refusals").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calib._exceptions import InputError
from calib.report.run import RunData, RunTables, load_run, setting

__all__ = ["OPERATING_KEYS", "SUPPORTED_KINDS", "ComparedRun", "check_operating_points", "load_runs", "model_of"]

#: The spec keys (with the spec's defaults) that make up a run's operating point, per study kind: a
#: functional run's ``[analyze]`` thresholds and the executor's validity criteria (N, N_in, C, N_out); an
#: extraction run's target level α (the claims), the confidence and the BH level; a probes run's sampling
#: temperature, prompt style, shown tests, completion budget and confidence.
OPERATING_KEYS: dict[str, dict[str, Any]] = {
    "functional": {"analyze.text_metric": "bleu", "analyze.tau_text": 0.75, "analyze.tau_func": 0.8,
                   "analyze.confidence": 0.95, "execute.n_inputs": 10, "execute.min_valid": 8,
                   "execute.coverage": 0.8, "execute.min_distinct": 2},
    "extraction": {"analyze.alpha": 0.001, "analyze.confidence": 0.95, "analyze.fdr": 0.05},
    "probes": {"probes.temperature": 0.0, "probes.confidence": 0.95, "probes.style": "mbpp",
               "probes.shown_tests": 3, "probes.max_tokens": 512},
}

#: The study kinds compare-runs compares (a census run is about one document pair at a time: its own report).
SUPPORTED_KINDS = tuple(OPERATING_KEYS)


def _value(key: str, value: Any) -> Any:
    """A spec value as compared: a target level α written as a string (``"1e-3"``, ``"1/1000"``) as its number."""
    if key == "analyze.alpha" and isinstance(value, str):
        from calib.stats import parse_alpha

        try:
            return parse_alpha(value)
        except ValueError:
            return value
    return value


@dataclass(frozen=True)
class ComparedRun:
    """One run of the comparison: its ``label`` (unique among the runs), directory and loaded tables."""

    label: str
    root: Path
    kind: str
    data: RunData | RunTables

    @property
    def spec(self) -> dict[str, Any]:
        """The run's resolved spec (``spec.json``)."""
        return self.data.spec

    def operating_point(self) -> dict[str, Any]:
        """The values of :data:`OPERATING_KEYS` of this run's kind (the spec's, else the default)."""
        keys = OPERATING_KEYS[self.kind]
        return {key: _value(key, setting(self.spec, key, default)) for key, default in keys.items()}


def _labels(roots: list[Path]) -> list[str]:
    """Each run's folder name, or its whole path where two runs share a folder name."""
    names = [root.name or str(root) for root in roots]
    return [name if names.count(name) == 1 else str(root) for name, root in zip(names, roots, strict=True)]


def load_runs(paths: list[str | Path]) -> list[ComparedRun]:
    """Load every run directory of ``paths`` (at least two, none twice).

    Raises
    ------
    InputError
        One line: fewer than two runs, a run given twice, a path that is not a run directory or lacks a
        table (naming it), runs of different study kinds, or a kind compare-runs does not compare yet.
    """
    roots = [Path(p) for p in paths]
    if len(roots) < 2:
        raise InputError(f"compare-runs needs at least two run directories, got {len(roots)}; give two or more "
                         "RUN directories written by `calib study SPEC`")
    seen: dict[Path, Path] = {}
    for root in roots:
        key = root.resolve()
        if key in seen:
            raise InputError(f"the run directory is given twice ({seen[key]} and {root}); give each run once",
                             path=str(root))
        seen[key] = root
    labels = _labels(roots)
    # the kinds first (spec.json alone), so that runs of other kinds are refused before their tables are read
    kinds = [_kind(root) for root in roots]
    for label, kind in zip(labels[1:], kinds[1:], strict=True):
        if None not in (kinds[0], kind) and kind != kinds[0]:
            raise InputError(f"runs {labels[0]} and {label} differ in study.kind ({kinds[0]!r} vs {kind!r}); "
                             "compare runs of one study kind")
    if kinds[0] is not None and kinds[0] not in SUPPORTED_KINDS:
        raise InputError(f"study.kind = {kinds[0]!r}: compare-runs compares {', '.join(SUPPORTED_KINDS)} runs; "
                         "compare the runs' own reports (`calib report RUN`) instead", path=str(roots[0] / "spec.json"))
    runs = []
    for root, label in zip(roots, labels, strict=True):
        data = load_run(root)  # a missing or unreadable file or table: one line naming it
        runs.append(ComparedRun(label=label, root=root, kind="functional" if isinstance(data, RunData) else data.kind,
                                data=data))
    return runs


def _kind(root: Path) -> str | None:
    """The study kind in ``root/spec.json``; None when it cannot be read (:func:`load_run` then says why)."""
    try:
        spec = json.loads((root / "spec.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    kind = setting(spec, "study.kind", "functional") if isinstance(spec, dict) else None
    return kind if isinstance(kind, str) else None


def _shown(value: Any) -> str:
    return json.dumps(value)


def check_operating_points(runs: list[ComparedRun]) -> dict[str, Any]:
    """The operating point the runs share (:data:`OPERATING_KEYS`); an InputError naming the first difference.

    The message names the two runs (the first run and the one that differs), the key and both values.
    """
    first = runs[0]
    point = first.operating_point()
    for run in runs[1:]:
        other = run.operating_point()
        for key, value in point.items():
            if other[key] != value:
                raise InputError(
                    f"runs {first.label} and {run.label} differ in {key} ({_shown(value)} vs {_shown(other[key])}); "
                    "compare-runs compares runs at one operating point; re-run one study with the other's "
                    f"[{key.split('.')[0]}] settings")
    return point


def model_of(spec: dict[str, Any], role: str) -> str | None:
    """``SERVER (MODEL)``: the server a run's spec names for ``role`` (``models.ROLE``) and its model; None if none."""
    server = setting(spec, f"models.{role}")
    if server is None:
        return None
    model = setting(spec, f"servers.{server}.model") or setting(spec, f"servers.{server}.model_dir")
    return f"{server} ({model})" if model else str(server)
