"""The ``probes`` study kind: scale-aware diagnostics (docs/architecture.md "The three methods" 3; docs/probes.md).

tasks → prompts → generate → execute → pass_at_k → model_pairs → opcodes → codec → codec_scores → report.

Every model of the panel (``models.panel``, smallest first: the scale axis) answers every task under
every condition n times; each program is run on the condition's tests in the sandbox; pass@k with
bootstrap intervals, paired changes from ``original`` and between models, opcode-profile divergence and
the CoDeC likelihood probe follow (Rajput et al., "scale-aware diagnostics", §5–§7).

Before any model is asked, the reference solution of every task is run on its own tests (a task whose
reference fails is left out, with an event), and under each isomorphism the known-correct transformed
solution T∘f∘T⁻¹ is run on the rewritten tests: the proof-by-test that the rewrite preserves the task.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import polars as pl

from calib._exceptions import CalibError, InputError
from calib.study.probes.analysis import codec_scores_table, model_pairs_table, opcodes_table, pass_at_k_table
from calib.study.probes.codec import codec_stage
from calib.study.probes.generate import generate, generate_settings
from calib.study.probes.tables import (
    PROBE_PROMPTS_SCHEMA,
    PROBE_TASKS_SCHEMA,
    TEST_RESULTS_SCHEMA,
)
from calib.study.report_stage import report_done, write_report_stage
from calib.study.runner import RunOptions, Stage, StageContext
from calib.study.sections.probes import ISO_CONDITIONS
from calib.study.spec import StudySpec

__all__ = ["PROBES_STAGES", "labels"]

_EXECUTE_CHUNK = 40  # programs per chunk of the execute stage


def labels(spec: StudySpec) -> list[tuple[str, str, str | None]]:
    """(label, condition, family) of every condition the study runs, in the spec's order."""
    assert spec.probes is not None
    out: list[tuple[str, str, str | None]] = []
    for condition in spec.probes.conditions:
        if condition in ISO_CONDITIONS:
            out += [(f"{condition}:{family}", condition, family) for family in spec.probes.families]
        else:
            out.append((condition, condition, None))
    return out


def _bijection(spec: StudySpec, family: str) -> Any:
    from calib.probes.transforms import make_bijection

    b = spec.probes.bijection  # type: ignore[union-attr]
    params = {"affine": {"a": b.affine_a, "b": b.affine_b}, "base": {"base": b.base}, "cubic": {"c": b.cubic_c}}
    return make_bijection(family, **params[family])


def _hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _sandbox(spec: StudySpec) -> Any:
    from calib.executors.sandbox import Sandbox, SandboxUnavailable

    try:
        return Sandbox(unsafe=spec.probes.unsafe_no_sandbox)  # type: ignore[union-attr]
    except SandboxUnavailable as exc:
        raise CalibError(f"{exc} (or set probes.unsafe_no_sandbox = true on a throw-away machine)") from None


def _workers(spec: StudySpec) -> int:
    import os

    return spec.probes.workers or max(1, os.cpu_count() or 1)  # type: ignore[union-attr]


async def _run_tests(spec: StudySpec, jobs: list[tuple[str, tuple[str, ...], str]]) -> list[Any]:
    """Run (program, tests, setup) jobs in the sandbox; results in order."""
    from calib.probes.testrun import TestJob, run_many

    if not jobs:
        return []
    timeout = spec.probes.test_timeout  # type: ignore[union-attr]
    return await run_many(_sandbox(spec), [TestJob(p, t, s, timeout) for p, t, s in jobs],
                          concurrency=_workers(spec))


# --- tasks --------------------------------------------------------------------------------------
def _tasks_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    p = spec.probes
    assert p is not None
    organism = spec.organism.model_dump(mode="json", exclude={"cache_dir"}) if spec.organism else None
    return {"tasks": p.tasks, "limit": options.limit or p.limit, "organism": organism, "timeout": p.test_timeout}


def _load(ctx: StageContext) -> list[Any]:
    p = ctx.spec.probes
    assert p is not None
    limit = ctx.options.limit or p.limit or None
    if p.tasks == "organism:business":
        from calib.probes.organism_tasks import business_tasks

        tasks = business_tasks(ctx.resources.organism().truth)
        return tasks[:limit] if limit else tasks
    from calib.probes.tasks import load_tasks

    found = load_tasks(p.tasks, limit=limit)
    for problem in found.problems:
        ctx.event("bad_task", row=problem.row, error=problem.message)
    return list(found.tasks)


async def _tasks(ctx: StageContext) -> pl.DataFrame:
    tasks = await asyncio.to_thread(_load, ctx)
    if not tasks:
        raise InputError("no task to probe", path=ctx.spec.probes.tasks)  # type: ignore[union-attr]
    runs = await _run_tests(ctx.spec, [(t.code, t.tests, t.setup) for t in tasks])
    rows = []
    for task, run in zip(tasks, runs):
        if not run.all_passed:
            ctx.event("task_left_out", task_id=task.task_id, status=run.status,
                      error=(run.message or str(run.errors))[:300])
        rows.append({"task_id": task.task_id, "source": task.source, "entry_point": task.entry_point,
                     "statement": task.prompt, "code": task.code, "tests": list(task.tests), "setup": task.setup,
                     "reference_status": run.status, "reference_passed": run.all_passed})
    return pl.DataFrame(rows, schema=PROBE_TASKS_SCHEMA)


def _task_objects(frame: pl.DataFrame) -> list[Any]:
    from calib.probes.tasks import Task

    return [Task(task_id=r["task_id"], prompt=r["statement"], code=r["code"], entry_point=r["entry_point"],
                 tests=tuple(r["tests"]), setup=r["setup"] or "", source=r["source"] or "")
            for r in frame.filter(pl.col("reference_passed")).iter_rows(named=True)]


# --- prompts ------------------------------------------------------------------------------------
def _prompts_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    p = spec.probes
    assert p is not None
    first = spec.models.probed()[0]
    return {"conditions": p.conditions, "families": p.families, "bijection": p.bijection.model_dump(),
            "style": p.style, "shown_tests": p.shown_tests, "seed": spec.study.seed, "tokenizer": spec.servers[first],
            "timeout": p.test_timeout}


async def _token_counter(ctx: StageContext) -> Any:
    """Prompt lengths in the first model's tokens when its server can tokenize, else in code tokens."""
    from calib.probes.prompting import count_tokens

    name = ctx.spec.models.probed()[0]
    caps = await ctx.resources.probe(name)
    server = ctx.resources.server(name)
    if caps.get("tokenize") and hasattr(server, "tokenize"):
        async def count(text: str) -> int:
            return len(await server.tokenize(text))
        return count

    async def fallback(text: str) -> int:
        return count_tokens(text)
    return fallback


async def _prompts(ctx: StageContext) -> pl.DataFrame:
    from calib.probes.isomorphism import transformed_reference
    from calib.probes.prompting import build_prompt

    spec = ctx.spec
    p = spec.probes
    assert p is not None
    tasks = _task_objects(ctx.table("tasks"))
    count = await _token_counter(ctx)
    first_family = _bijection(spec, p.families[0])
    rows: list[dict[str, Any]] = []
    checks: list[tuple[int, tuple[str, tuple[str, ...], str]]] = []
    for task in tasks:
        original_tokens = None
        for label, condition, family in labels(spec):
            bijection = _bijection(spec, family) if family else None
            built = await asyncio.to_thread(build_prompt, task, condition, style=p.style, bijection=bijection,
                                            contract_bijection=first_family, seed=spec.study.seed,
                                            shown_tests=p.shown_tests)
            tokens = await count(built.prompt) if built.applicable else None
            if condition == "original":
                original_tokens = tokens
            row = {"prompt_id": _hash(task.task_id, label, built.prompt, built.tests), "task_id": task.task_id,
                   "label": label, "condition": condition, "family": family, "applicable": built.applicable,
                   "reason": built.reason, "prompt": built.prompt, "tests": list(built.tests), "setup": task.setup,
                   "entry_point": task.entry_point, "prompt_tokens": tokens,
                   "added_tokens": None if tokens is None or original_tokens is None else tokens - original_tokens,
                   "replaced": built.replaced, "eligible": built.eligible, "values_mapped": built.values_mapped,
                   "reference_passed": True if built.applicable else None, "original_passes": None}
            if built.applicable and condition in ISO_CONDITIONS:
                solution = transformed_reference(task.code, task.entry_point, condition, bijection)
                checks.append((len(rows), (solution, built.tests, task.setup)))
                checks.append((len(rows), (task.code, built.tests, task.setup)))
            rows.append(row)
    runs = await _run_tests(spec, [job for _, job in checks])
    for (index, _), transformed, original in zip(checks[::2], runs[::2], runs[1::2]):
        rows[index]["reference_passed"] = transformed.all_passed
        rows[index]["original_passes"] = original.all_passed
        if not transformed.all_passed:  # the rewrite broke the task: a bug, never a model's failure
            ctx.event("rewrite_check_failed", task_id=rows[index]["task_id"], label=rows[index]["label"],
                      status=transformed.status, error=(transformed.message or str(transformed.errors))[:300])
    return pl.DataFrame(rows, schema=PROBE_PROMPTS_SCHEMA)


# --- execute ------------------------------------------------------------------------------------
def _execute_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    p = spec.probes
    assert p is not None
    return {"timeout": p.test_timeout, "unsafe": p.unsafe_no_sandbox}


async def _execute(ctx: StageContext) -> pl.DataFrame:
    prompts = ctx.table("prompts")
    tests = {r["prompt_id"]: (tuple(r["tests"]), r["setup"] or "") for r in prompts.iter_rows(named=True)}
    generations = ctx.table("probe_generations").to_dicts()

    async def work(chunk: list[dict[str, Any]]) -> pl.DataFrame:
        runnable = [g for g in chunk if g["program"]]
        runs = await _run_tests(ctx.spec, [(g["program"], *tests[g["prompt_id"]]) for g in runnable])
        outcome = {id(g): run for g, run in zip(runnable, runs)}
        rows = []
        for g in chunk:
            head = {k: g[k] for k in ("prompt_id", "task_id", "label", "model", "sample_index")}
            n_tests = len(tests[g["prompt_id"]][0])
            run = outcome.get(id(g))
            if g.get("missing"):  # the request failed or the prompt overflowed: no generation, no result
                rows.append({**head, "status": g["missing"], "passed": None, "tests_passed": None,
                             "tests_total": n_tests, "errors": [], "seconds": 0.0})
            elif run is None:
                rows.append({**head, "status": "no_program", "passed": False, "tests_passed": 0,
                             "tests_total": n_tests, "errors": ["no_program"] * n_tests, "seconds": 0.0})
            else:
                rows.append({**head, "status": run.status, "passed": run.all_passed, "tests_passed": run.n_passed,
                             "tests_total": n_tests, "errors": list(run.errors), "seconds": run.seconds})
        return pl.DataFrame(rows, schema=TEST_RESULTS_SCHEMA)

    return await ctx.chunked(generations, _EXECUTE_CHUNK, work, TEST_RESULTS_SCHEMA, label="execute")


# --- analysis -----------------------------------------------------------------------------------
def _analysis_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    p = spec.probes
    assert p is not None
    return {"k": p.k, "bootstrap": p.bootstrap, "confidence": p.confidence, "seed": spec.study.seed,
            "panel": spec.models.probed()}


async def _pass_at_k(ctx: StageContext) -> pl.DataFrame:
    p = ctx.spec.probes
    assert p is not None
    return await asyncio.to_thread(pass_at_k_table, ctx.table("test_results"), ctx.table("prompts"), ks=p.k,
                                   resamples=p.bootstrap, confidence=p.confidence, seed=ctx.spec.study.seed)


async def _model_pairs(ctx: StageContext) -> pl.DataFrame:
    p = ctx.spec.probes
    assert p is not None
    return await asyncio.to_thread(model_pairs_table, ctx.table("test_results"), ctx.spec.models.probed(), ks=p.k,
                                   resamples=p.bootstrap, confidence=p.confidence, seed=ctx.spec.study.seed)


async def _opcodes(ctx: StageContext) -> pl.DataFrame:
    return await asyncio.to_thread(opcodes_table, ctx.table("probe_generations"), ctx.table("test_results"))


async def _codec_scores(ctx: StageContext) -> pl.DataFrame:
    return codec_scores_table(ctx.table("codec"), confidence=ctx.spec.probes.confidence)  # type: ignore[union-attr]


# --- report -------------------------------------------------------------------------------------
def _report_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    return {"probes": spec.probes.model_dump(mode="json") if spec.probes else None,
            "report": spec.report.model_dump(mode="json"), "study": spec.study.model_dump(mode="json")}


_ANALYSED = ("prompts", "probe_generations", "test_results")

PROBES_STAGES: tuple[Stage, ...] = (
    Stage("tasks", (), "tasks", "1", _tasks_settings, _tasks, offline=True),
    Stage("prompts", ("tasks",), "prompts", "2", _prompts_settings, _prompts),
    Stage("generate", ("tasks", "prompts"), "probe_generations", "2", generate_settings, generate),
    Stage("execute", ("prompts", "probe_generations"), "test_results", "2", _execute_settings, _execute),
    Stage("pass_at_k", _ANALYSED, "pass_at_k", "2", _analysis_settings, _pass_at_k),
    Stage("model_pairs", _ANALYSED, "model_pairs", "2", _analysis_settings, _model_pairs),
    Stage("opcodes", _ANALYSED, "opcodes", "1", _analysis_settings, _opcodes),
    codec_stage,
    Stage("codec_scores", ("codec",), "codec_scores", "1", _analysis_settings, _codec_scores),
    Stage("report", tuple(_ANALYSED) + ("tasks", "pass_at_k", "model_pairs", "opcodes", "codec", "codec_scores"),
          None, "1", _report_settings, write_report_stage, done=report_done),
)
