"""Studies: the spec (TOML -> validated model), the stage runner, the run directory (docs/architecture.md).

:func:`run_study` runs a spec's stages in its run directory (resumable; finished stages are skipped);
:func:`check_study` validates a spec and probes its servers without running anything.

The study core (:mod:`calib.study.runner`, :mod:`calib.study.rundir`, :mod:`calib.study.spec` and
:mod:`calib.study.sections`, :mod:`calib.study.tables`, :mod:`calib.study.resources`,
:mod:`calib.study.sampling`, :mod:`calib.study.requests`, :mod:`calib.study.budgets`,
:mod:`calib.study.provenance`, :mod:`calib.study.check`) serves every study kind; each kind is a
package (``calib.study.functional``, ``calib.study.extraction`` for ``extraction`` and ``census``,
``calib.study.probes``) registered in :data:`calib.study.kinds.KINDS`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from calib.study.runner import RunOptions, RunResult
from calib.study.spec import StudySpec, load_spec

__all__ = ["KINDS", "RunOptions", "RunResult", "StudySpec", "check_study", "default_run_dir", "load_spec",
           "run_study", "stages_of"]

#: The built-in study kinds (:data:`calib.study.kinds.KINDS` also knows those of installed plugins).
KINDS = ("functional", "extraction", "census", "probes")


def stages_of(spec: StudySpec) -> tuple[Any, ...]:
    """The stages of the spec's study kind (its :class:`~calib.study.kinds.StudyKind` record says)."""
    from calib.study.kinds import study_kind

    return study_kind(spec.study.kind).stages(spec)


def default_run_dir(spec: StudySpec) -> Path:
    """``runs/<study name>`` under the current folder."""
    return Path("runs") / spec.study.name


def run_study(spec_path: str | Path, *, run_dir: str | Path | None = None, options: RunOptions | None = None,
              fresh: bool = False) -> RunResult:
    """Run (or resume) the study at ``spec_path``; returns which stages ran and which were skipped."""
    from calib.study.check import verify_servers
    from calib.study.resources import Resources
    from calib.study.rundir import RunDir
    from calib.study.runner import run_stages

    spec = load_spec(spec_path)
    text = Path(spec_path).read_text(encoding="utf-8")
    root = Path(run_dir) if run_dir is not None else default_run_dir(spec)
    run = RunDir(root)
    if fresh:
        run.wipe()
    resources = Resources(spec)
    resources.cache_path = run.cache_path
    stages = stages_of(spec)
    result = run_stages(stages, spec, text, root, options=options or RunOptions(), resources=resources,
                        manifest_extra=lambda: resources.manifest(run),
                        before_work=lambda: verify_servers(spec, resources))
    result.empty = _nothing_measured(spec, run, finished=len(result.ran) + len(result.skipped) == len(stages))
    return result


def _nothing_measured(spec: StudySpec, run: Any, *, finished: bool) -> str | None:
    """Why a finished study measured nothing (its kind reads the report's summary.json), else None."""
    import json

    from calib.study.kinds import study_kind

    empty = study_kind(spec.study.kind).empty
    summary = run.report / "summary.json"
    if not finished or empty is None or not summary.is_file():
        return None
    return empty(json.loads(summary.read_text(encoding="utf-8")))


def check_study(spec_path: str | Path, *, probe: bool = True, estimate: bool = False) -> dict[str, Any]:
    """Validate the spec and probe every server it names; what would run, without running it
    (``estimate``: and what it will ask of the servers, :mod:`calib.study.estimate`)."""
    from calib.study.check import check

    spec = load_spec(spec_path)
    return asyncio.run(check(spec, probe=probe, estimate=estimate))
