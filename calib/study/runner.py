"""The stage runner: resumable, fingerprinted stages over a run directory.

A study kind is a list of :class:`Stage` objects. Each stage reads tables, writes one table, and has a
**fingerprint**: a hash of its name, version, the spec settings it depends on and the fingerprints of
the tables it reads. A stage whose fingerprint matches the manifest's (and whose table exists) is
skipped, so re-running a finished study with an unchanged spec sends no server request and runs no
execution, and changing one setting redoes exactly the stages downstream of it.

Long stages work in chunks (:meth:`StageContext.chunked`): each finished chunk is written to
``RUN/chunks/STAGE-FINGERPRINT/`` at once, so a run killed mid-stage resumes with the chunks it has not
finished; the stage's table is assembled from its chunks in order, which makes a resumed run's tables
equal to an uninterrupted run's.

A stage is skipped only over a table that is intact: the manifest records each table's sha256 when it
is written, and a table whose bytes differ (or that is missing) makes its stage run again, with a
one-line warning on stderr. A ``manifest.json`` that is not a JSON object is set aside with a warning;
each table then written under the stage fingerprint the spec gives now (recorded in the table's
Parquet metadata) is adopted as it is, and only the other stages run again.

A stage giving :meth:`StageContext.chunked` a :class:`~calib.scale.runner.RemoteWork` has its chunks run as Ray
tasks under ``[runner] kind = "ray"`` (docs/scale.md), written to the same chunk files: resume does not change.

Progress goes to stderr: rich bars on a terminal, else lines (:class:`calib._progress.LineProgress`)
at least every ``$CALIB_PROGRESS_SECONDS`` seconds per stage.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from calib._exceptions import InvalidParameterError
from calib._progress import LineProgress, use_lines
from calib._version import __version__
from calib.scale.runner import runner_for
from calib.study.provenance import collect as collect_provenance
from calib.study.rundir import RunDir, file_sha256, now_iso
from calib.study.spec import StudySpec, spec_hash

__all__ = ["RunOptions", "RunResult", "Stage", "StageContext", "run_stages"]


@dataclass(frozen=True)
class RunOptions:
    """Command-line choices that are not part of the spec (``--limit`` is: it changes what is audited)."""

    limit: int | None = None
    jobs: int = 1
    until: str | None = None
    progress: bool = True


@dataclass(frozen=True)
class Stage:
    """One stage of a study kind.

    ``settings(spec, options)`` returns what of the spec the stage's output depends on (part of its
    fingerprint); ``run(ctx)`` computes the table (``None`` for a stage that writes files, the report).
    ``offline``: the stage sends no server request (reading data, extracting functions), so a run that
    stops after such stages (``--stage extract``) probes no server.
    """

    name: str
    reads: tuple[str, ...]
    writes: str | None
    version: str
    settings: Callable[[StudySpec, RunOptions], Any]
    run: Callable[[StageContext], Awaitable[pl.DataFrame | None]]
    done: Callable[[RunDir], bool] | None = None
    offline: bool = False


@dataclass
class RunResult:
    """What :func:`run_stages` did: stages run and skipped, seconds, the run directory."""

    run_dir: Path
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    #: Why the finished study measured nothing (its kind's ``StudyKind.empty``), else None.
    empty: str | None = None


class StageContext:
    """What a running stage sees: the spec, the run directory, shared resources and progress."""

    def __init__(self, spec: StudySpec, run: RunDir, options: RunOptions, resources: Any, progress: Any) -> None:
        self.spec = spec
        self.run = run
        self.options = options
        self.resources = resources
        self._progress = progress
        self.stage = ""
        self.fingerprint = ""
        self.save_manifest: Callable[..., None] = lambda **fields: None
        self.runner: Any = None  # the Ray runner of [runner] kind = "ray" (calib.scale.runner), else None

    def phase_progress(self, label: str) -> Callable[[str, int, int], None]:
        """A ``progress(phase, done, total)`` callback drawing one bar (for work outside :meth:`chunked`)."""
        tasks: dict[str, Any] = {}

        def update(phase: str, done: int, total: int) -> None:
            if self._progress is None:
                return
            if phase not in tasks:
                tasks[phase] = self._progress.add(f"{label}: {phase}", total)
            self._progress.bar.update(tasks[phase], completed=done, total=total)

        return update

    def table(self, name: str) -> pl.DataFrame:
        return self.run.read_table(name)

    def event(self, event: str, **fields: Any) -> None:
        self.run.event(event, stage=self.stage, **fields)

    def _over_budget(self, reached: list[str]) -> bool:
        """Whether a ``[budget]`` cap is reached (noted in ``reached``); always False without ``[budget]``."""
        if getattr(self.spec, "budget", None) is None or not hasattr(self.resources, "started_servers"):
            return False
        from calib.study.spending import over_budget

        why = over_budget(self.resources)
        if why is not None and not reached:
            reached.append(why)
        return why is not None

    async def chunked(self, items: Sequence[Any], size: int, work: Callable[[list[Any]], Awaitable[pl.DataFrame]],
                      schema: dict[str, pl.DataType], *, label: str | None = None,
                      concurrency: int = 1, remote: Any = None, usual_size: int | None = None) -> pl.DataFrame:
        """Run ``work`` over ``items`` in chunks of ``size``; finished chunks are kept across a kill.

        Chunks are numbered in item order; up to ``concurrency`` run at once; the result is their tables in order.
        ``remote``: the same work as a :class:`~calib.scale.runner.RemoteWork`, for the Ray runner's cluster.
        ``usual_size``: the stage's own size when ``size`` is the user's (``[runner] chunk_size``): chunks of another
        size are kept apart (their folder's key names the size), so a resume never mixes two numberings."""
        chunks = [list(items[i:i + size]) for i in range(0, len(items), size)]
        key = self.fingerprint if usual_size is None or size == usual_size else f"{self.fingerprint}-n{size}"
        done = self.run.done_chunks(self.stage, key)
        task = self._progress.add(label or self.stage, len(items)) if self._progress is not None else None
        for index in done:
            if index < len(chunks) and task is not None:
                self._progress.advance(task, len(chunks[index]), resumed=True)
        if done:
            self.event("resume", chunks_done=len(done), chunks=len(chunks))
        semaphore = asyncio.Semaphore(max(1, concurrency))
        reached: list[str] = []  # the [budget] cap that stopped new chunks (calib.study.spending)

        async def one(index: int, chunk: list[Any]) -> None:
            async with semaphore:
                if reached or self._over_budget(reached):
                    return  # no new chunk once a cap is reached; those in flight finish and are kept
                finished(index, await work(chunk), [], {})

        def finished(index: int, frame: pl.DataFrame, events: list[tuple[str, dict[str, Any]]],
                     where: dict[str, Any]) -> None:
            for name, fields in events:
                self.event(name, **fields)
            self.run.write_chunk(self.stage, key, index, frame.cast(schema))
            self.event("chunk", index=index, rows=frame.height, **where)
            if task is not None:
                self._progress.advance(task, len(chunks[index]))

        if remote is not None and self.runner is not None:
            await self.runner.map(remote, [(i, c) for i, c in enumerate(chunks) if i not in done], finished,
                                  lambda: bool(reached) or self._over_budget(reached))
        else:
            await asyncio.gather(*(one(i, c) for i, c in enumerate(chunks) if i not in done))
        if task is not None:
            self._progress.finish(task)
        paths = self.run.done_chunks(self.stage, key)
        if reached and len(paths) < len(chunks):
            from calib.study.spending import BudgetReached, spent

            self.resources.facts["spending"] = spent(self.resources)
            self.event("budget_reached", cap=reached[0], chunks_done=len(paths), chunks=len(chunks))
            raise BudgetReached(f"the study's budget is reached: {reached[0]}; stage {self.stage} stopped with "
                                f"{len(paths)} of {len(chunks)} chunks done, all kept: raise [budget] (or keep it) "
                                "and run calib study again to continue")
        frames = [pl.read_parquet(paths[i]) for i in range(len(chunks))]
        return pl.concat(frames, how="vertical") if frames else pl.DataFrame(schema=schema)


class _Progress:
    """Progress on stderr (counts, rate, ETA), one bar or line series per long stage: Rich bars on a terminal;
    without one (``nohup``, CI, a pipe) :class:`~calib._progress.LineProgress` lines, which take the same calls."""

    def __init__(self, enabled: bool) -> None:
        self.lines: LineProgress | None = None
        self.started: dict[Any, float] = {}
        self.bar: Any
        if enabled and use_lines():
            self.bar = self.lines = LineProgress(prefix="calib study: ")
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.bar = Progress(TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[rate]}"),
                            TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                            console=Console(stderr=True), disable=not enabled, transient=False)

    def __enter__(self) -> _Progress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(*exc)

    def add(self, label: str, total: int) -> Any:
        task = self.bar.add_task(label, total=total, rate="")
        self.started[task] = time.monotonic()
        return task

    def advance(self, task: Any, n: int, *, resumed: bool = False) -> None:
        if self.lines is not None:
            self.lines.update(task, advance=n, resumed=n if resumed else None)
            return
        self.bar.advance(task, n)
        done = self.bar.tasks[task].completed if isinstance(task, int) else 0
        seconds = max(1e-9, time.monotonic() - self.started[task])
        self.bar.update(task, rate=f"{done / seconds:6.2f}/s")

    def finish(self, task: Any) -> None:
        self.bar.update(task, completed=self.bar.tasks[task].total)

    def begin_stage(self, name: str) -> Any:
        """Lines only: a ``NAME: running`` line now, and again whenever no other line came for a while."""
        return self.lines.add_task(name) if self.lines is not None else None

    def end_stage(self, task: Any) -> None:
        if task is not None and self.lines is not None:
            self.lines.stop_task(task)

    def note(self, text: str) -> None:
        if self.lines is not None:
            self.lines.note(text)
        else:
            self.bar.console.print(text)


def _fingerprint(stage: Stage, spec: StudySpec, options: RunOptions, manifest: dict[str, Any]) -> str:
    inputs = {name: manifest.get("tables", {}).get(name) for name in stage.reads}
    return spec_hash({"stage": stage.name, "version": stage.version, "settings": stage.settings(spec, options),
                      "inputs": inputs})


def run_stages(stages: Sequence[Stage], spec: StudySpec, spec_text: str, run_dir: str | Path, *,
               options: RunOptions, resources: Any, manifest_extra: Callable[[], dict[str, Any]] | None = None,
               before_work: Callable[[], Awaitable[None]] | None = None) -> RunResult:
    """Run ``stages`` in order (skipping those already done under the same fingerprint).

    ``before_work()`` runs once, in the run's event loop, before the first stage that is not up to
    date (a finished study re-run sends nothing) — unless every stage up to ``options.until`` is
    offline; what it raises stops the run before any work.
    """
    names = [s.name for s in stages]
    if options.until is not None and options.until not in names:
        raise InvalidParameterError(f"--stage {options.until!r}: the {spec.study.kind} study's stages are "
                                    f"{', '.join(names)}")
    run = RunDir(run_dir)
    run.root.mkdir(parents=True, exist_ok=True)
    (run.root / "study.toml").write_text(spec_text, encoding="utf-8")
    run.write_json("spec.json", spec.public())
    result = RunResult(run_dir=run.root)
    end = names.index(options.until) + 1 if options.until is not None else len(stages)
    if all(stage.offline for stage in stages[:end]):
        before_work = None  # nothing up to --stage asks a server
    manifest, damaged = run.read_manifest()
    if damaged is not None:
        _warn(run, result, f"{run.root / 'manifest.json'} is {damaged}; the stages whose tables cannot be "
                           "verified run again")
    for key in ("stages", "tables", "checksums"):
        manifest.setdefault(key, {})
    manifest.update({"calib_version": __version__, "study": {"name": spec.study.name, "kind": spec.study.kind,
                                                             "description": spec.study.description}})
    manifest.setdefault("started_at", now_iso())
    started = time.monotonic()
    run.event("run_start", spec=spec.study.name, until=options.until, limit=options.limit, jobs=options.jobs)
    def save_manifest(**fields: Any) -> None:
        """Merge what the resources know (servers, counts) and ``fields`` into the manifest; write it."""
        manifest.update(fields)
        for key, value in (manifest_extra() if manifest_extra is not None else {}).items():
            if isinstance(value, dict) and isinstance(manifest.get(key), dict):
                manifest[key].update(value)
            else:
                manifest[key] = value
        manifest["provenance"] = collect_provenance(spec, resources, run, manifest.get("provenance"))
        run.write_json("manifest.json", manifest)

    # One event loop for the whole run: server clients made in one stage are used in the next ones,
    # and their connection pools belong to the loop that opened them.
    with _Progress(options.progress) as progress, asyncio.Runner() as loop:
        ctx = StageContext(spec, run, options, resources, progress)
        ctx.save_manifest = save_manifest
        ctx.runner = runner_for(spec.runner)
        changed: set[str] = set()
        try:
            for stage in stages:
                fingerprint = _fingerprint(stage, spec, options, manifest)
                if _up_to_date(stage, fingerprint, manifest, run, result, changed):
                    result.skipped.append(stage.name)
                    run.event("stage_skip", stage=stage.name, fingerprint=fingerprint)
                else:
                    if before_work is not None:
                        loop.run(before_work())
                        before_work = None
                    before = manifest["checksums"].get(stage.writes)
                    _run_one(stage, ctx, fingerprint, manifest, run, progress, loop)
                    if before is not None and manifest["checksums"].get(stage.writes) != before:
                        changed.add(stage.writes)  # its readers' tables were computed from other content
                    result.ran.append(stage.name)
                if stage.name == options.until:
                    break
        finally:
            if ctx.runner is not None:
                ctx.runner.close()
            save_manifest()
            aclose = getattr(resources, "aclose", None)
            if aclose is not None:
                loop.run(aclose())
            close = getattr(resources, "close", None)
            if close is not None:
                close()
    if len(result.ran) + len(result.skipped) == len(stages):
        manifest["finished_at"] = now_iso()
        run.write_json("manifest.json", manifest)
    result.seconds = time.monotonic() - started
    run.event("run_done", ran=result.ran, skipped=result.skipped, seconds=round(result.seconds, 2))
    return result


def _warn(run: RunDir, result: RunResult, text: str) -> None:
    """One warning line on stderr (and in events.jsonl and :attr:`RunResult.warnings`)."""
    result.warnings.append(text)
    run.event("warning", message=text)
    print(f"calib study: warning: {text}", file=sys.stderr, flush=True)


def _up_to_date(stage: Stage, fingerprint: str, manifest: dict[str, Any], run: RunDir, result: RunResult,
                changed: set[str]) -> bool:
    """Whether ``stage`` can be skipped: done under ``fingerprint``, its table intact (else a warning).

    ``changed``: tables this run rewrote with other content than the manifest recorded (a damaged
    table whose stage gave another result); a stage reading one runs again.
    """
    if changed.intersection(stage.reads):
        run.event("inputs_changed", stage=stage.name, tables=sorted(changed.intersection(stage.reads)))
        return False
    recorded = manifest["stages"].get(stage.name, {}).get("fingerprint") == fingerprint
    if stage.done is not None:
        return recorded and stage.done(run)
    if stage.writes is None:
        return recorded
    name = stage.writes
    if not recorded:
        # Not in the manifest (a damaged one, or a kill between writing the table and the manifest):
        # a whole table written under this very fingerprint is still this stage's result.
        if run.table_fingerprint(name) != fingerprint:
            return False
        rows = pq.read_metadata(run.table_path(name)).num_rows
        manifest["stages"][stage.name] = {"fingerprint": fingerprint, "rows": rows, "recovered_at": now_iso()}
        manifest["tables"][name] = fingerprint
        manifest["checksums"][name] = file_sha256(run.table_path(name))
        run.write_json("manifest.json", manifest)
        run.event("table_recovered", stage=stage.name, table=name, rows=rows)
        return True
    problem = run.check_table(name, manifest["checksums"].get(name))
    if problem is None:
        return True
    _warn(run, result, f"{run.table_path(name)}: {problem}; running the {stage.name} stage again")
    return False


def _run_one(stage: Stage, ctx: StageContext, fingerprint: str, manifest: dict[str, Any], run: RunDir,
             progress: _Progress, loop: asyncio.Runner) -> None:
    ctx.stage, ctx.fingerprint = stage.name, fingerprint
    for folder in (run.chunks.glob(f"{stage.name}-*") if run.chunks.is_dir() else []):
        if re.sub(r"-n\d+$", "", folder.name) != f"{stage.name}-{fingerprint}":  # -nSIZE: [runner] chunk_size
            shutil.rmtree(folder, ignore_errors=True)  # chunks of an older spec: useless now
    run.event("stage_start", stage=stage.name, fingerprint=fingerprint)
    began = time.monotonic()
    stage_task = progress.begin_stage(stage.name)
    try:
        frame = loop.run(stage.run(ctx))
    finally:
        progress.end_stage(stage_task)
    rows = 0
    if stage.writes is not None and frame is not None:
        manifest["checksums"][stage.writes] = run.write_table(stage.writes, frame, fingerprint=fingerprint)
        rows = frame.height
        manifest["tables"][stage.writes] = fingerprint
    run.clear_chunks(stage.name)
    seconds = time.monotonic() - began
    manifest["stages"][stage.name] = {"fingerprint": fingerprint, "rows": rows, "seconds": round(seconds, 3),
                                      "finished_at": now_iso()}
    # Downstream stages read the new fingerprint; save now so a kill after this point keeps the stage.
    run.write_json("manifest.json", manifest)
    run.event("stage_done", stage=stage.name, rows=rows, seconds=round(seconds, 3))
    if stage.writes is not None:
        progress.note(f"{stage.name}: {rows} rows in {seconds:.1f} s")
