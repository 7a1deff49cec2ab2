"""The ``functional`` study's execute stage: x and both completions run on the same input states.

Each sample's function and its target and reference candidates go to the study's executor (the
sandbox, a native executor for C, C++, Java, Rust and Go, or the ``llm`` / ``agent`` executors over a
chat server); the ``executions`` table holds one row per (sample, role) (docs/execution.md).

Each row also records the cost of its sample's comparison (the functional-memorization paper's Table 1):
``runs`` (the executor's executions) and, for the ``llm`` and ``agent`` executors, the ``input_tokens`` and
``output_tokens`` their chat requests reported (:class:`_MeteredServer` counts them per sample). The wall
clock seconds of each comparison (from when the sample got its worker slot) go to events.jsonl as a
``sample_cost`` event, not into the table: tables hold what a run found, byte for byte the same when the
run is repeated (docs/architecture.md), and time is not.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from typing import Any

import polars as pl

from calib._exceptions import CalibError
from calib.data.parseback import candidate_code
from calib.executors.base import NO_GENERATION
from calib.study.resources import ROLES
from calib.study.runner import RunOptions, Stage, StageContext
from calib.study.spec import StudySpec
from calib.study.tables import EXECUTIONS_TABLE_SCHEMA

__all__ = ["candidate_code", "candidates", "execute_stage"]

#: The token counter of the sample whose comparison is running (each sample's task sets its own).
_USAGE: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar("calib_execute_usage", default=None)


class _MeteredServer:
    """A chat server whose answers' token usage is added to the running sample's counter (:data:`_USAGE`).

    Everything else is the wrapped server's; an answer without usage counts in ``missing``.
    """

    def __init__(self, server: Any) -> None:
        self._server = server

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)

    async def chat(self, *args: Any, **kwargs: Any) -> Any:
        response = await self._server.chat(*args, **kwargs)
        usage = _USAGE.get()
        if usage is not None:
            inputs, outputs = getattr(response, "input_tokens", None), getattr(response, "output_tokens", None)
            usage["input_tokens"] += inputs or 0
            usage["output_tokens"] += outputs or 0
            usage["missing"] += inputs is None or outputs is None
        return response

_EXECUTE_CHUNK = 4


def candidates(samples: pl.DataFrame, generations: pl.DataFrame) -> dict[str, dict[str, str]]:
    """role -> sample_id -> the candidate code (:func:`candidate_code`), for generations that came back."""
    signatures = dict(samples.select("sample_id", "signature").iter_rows())
    out: dict[str, dict[str, str]] = {role: {} for role in ROLES}
    for g in generations.iter_rows(named=True):
        code = candidate_code(signatures.get(g["sample_id"], ""), g["function"], g["text"])
        if code is not None and g["role"] in out:
            out[g["role"]][g["sample_id"]] = code
    return out


# --- execute ------------------------------------------------------------------------------------
def _execute_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    server = spec.execute.server
    return {"execute": spec.execute.settings(), "seed": spec.study.seed,
            "server": spec.servers.get(server) if server is not None and spec.execute.executor != "sandbox" else None}


def _executor_config(spec: StudySpec, jobs: int) -> Any:
    return spec.execute.executor_config(spec.study.seed, workers=spec.execute.workers or jobs)


def _executor(spec: StudySpec, jobs: int, resources: Any = None) -> Any:
    """The study's executor: ``sandbox``, or ``llm`` / ``agent`` over ``execute.server`` (a chat server)."""
    from calib.executors import create_executor

    e = spec.execute
    config = _executor_config(spec, jobs)
    options: dict[str, Any] = {}
    if e.executor == "llm":
        options = {"server": _MeteredServer(resources.server(e.server)), "level": e.level}
    elif e.executor == "agent":
        options = {"server": _MeteredServer(resources.server(e.server)), "max_turns": e.agent_max_turns,
                   "max_seconds": e.agent_max_seconds}
    return create_executor(e.executor, config, **options)


def _save_transcript(ctx: StageContext, sample_id: str, transcript: Any) -> None:
    """The agent's conversation on one sample, whole, as ``RUN/transcripts/SAMPLE_ID.json``."""
    import dataclasses

    folder = ctx.run.root / "transcripts"
    folder.mkdir(exist_ok=True)
    messages = [dataclasses.asdict(m) if dataclasses.is_dataclass(m) else m for m in transcript]
    path = folder / f"{sample_id}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(messages, indent=1, default=str), encoding="utf-8")
    tmp.replace(path)


def _native(spec: StudySpec, jobs: int, language: str, cache: dict[str, Any]) -> Any:
    """The native executor of ``language`` (C, C++, Java, Rust, Go), made once per study run."""
    if language not in cache:
        from calib.executors.native import NativeExecutor

        cache[language] = NativeExecutor(_executor_config(spec, jobs), language)
    return cache[language]


def _cost(rows: pl.DataFrame, runs: int | None, usage: dict[str, int] | None) -> pl.DataFrame:
    """``rows`` with the sample's cost columns; the tokens are null when no model was asked (``usage`` None) or
    when an answer did not report its usage (the sum would undercount)."""
    known = usage is not None and not usage["missing"]
    tokens = {key: usage[key] if known else None for key in ("input_tokens", "output_tokens")}  # type: ignore[index]
    return rows.with_columns(pl.lit(runs, dtype=pl.Int64).alias("runs"),
                             *[pl.lit(v, dtype=pl.Int64).alias(k) for k, v in tokens.items()])


async def _compare_one(spec: StudySpec, workers: int, executor: Any, natives: dict[str, Any], r: dict[str, Any],
                       by_role: dict[str, dict[str, str]], gate: asyncio.Semaphore, event: Any,
                       transcripts: Any = None) -> pl.DataFrame:
    """One sample's executions rows: x and the candidates that came back, compared by the study's executor.

    The same code runs here (the local runner) and in a Ray task (:func:`execute_chunk`); ``event(name,
    **fields)`` records the sample's events, ``transcripts(sample_id, transcript)`` keeps the agent's.
    """
    from calib.executors import EXECUTIONS_SCHEMA, execution_rows

    schema = EXECUTIONS_TABLE_SCHEMA
    kind = spec.execute.executor
    metered = kind in ("llm", "agent")
    roles = [role for role in ROLES if by_role[role].get(r["sample_id"])]
    runner = executor
    if r["language"] != "python":
        if kind != "sandbox":
            return _missing_rows(r["sample_id"], ROLES, f"the {kind} executor runs python only, not {r['language']}",
                                 kind)
        try:
            runner = _native(spec, workers, r["language"], natives)
        except CalibError as exc:  # a missing compiler: say which, for every sample of that language
            return _missing_rows(r["sample_id"], ROLES, " ".join(str(exc).split())[:300], f"native-{r['language']}")
    usage = {"input_tokens": 0, "output_tokens": 0, "missing": 0}
    async with gate:
        _USAGE.set(usage)  # this sample's task only (asyncio tasks run in a copy of the context)
        start = time.perf_counter()
        try:
            candidates = [by_role[role][r["sample_id"]] for role in roles]
            if hasattr(runner, "compare_with_transcript"):  # the agent: its whole conversation is kept
                comparison, transcript = await runner.compare_with_transcript(
                    r["function"], candidates, context=r["context"] or "", names=roles)
                transcripts(r["sample_id"], transcript)
            else:
                comparison = await runner.compare(r["function"], candidates, context=r["context"] or "", names=roles)
        except CalibError:
            raise
        except Exception as exc:  # noqa: BLE001 - one bad sample is recorded and skipped
            event("sample_error", sample_id=r["sample_id"], error=f"{type(exc).__name__}: {exc}")
            made = f"native-{r['language']}" if runner is not executor else kind
            rows = _missing_rows(r["sample_id"], ROLES, f"executor error: {type(exc).__name__}", made)
            event("sample_cost", sample_id=r["sample_id"], seconds=round(time.perf_counter() - start, 6))
            return _cost(rows, None, usage if metered and runner is executor else None)
        event("sample_cost", sample_id=r["sample_id"], seconds=round(time.perf_counter() - start, 6))
    rows = execution_rows(r["sample_id"], comparison, roles) if roles else pl.DataFrame(schema=EXECUTIONS_SCHEMA)
    missing = [role for role in ROLES if role not in roles]
    if missing:
        extra = _missing_rows(r["sample_id"], missing, NO_GENERATION, comparison.executor)
        extra = extra.select(list(EXECUTIONS_SCHEMA)).with_columns(
            pl.lit(comparison.valid_inputs).alias("valid_inputs"), pl.lit(comparison.coverage).alias("coverage"),
            pl.lit(comparison.distinct_outputs).alias("distinct_outputs"),
            pl.lit(comparison.conclusive).alias("conclusive"))
        rows = pl.concat([rows, extra.cast(EXECUTIONS_SCHEMA)])
    return _cost(rows, comparison.runs, usage if metered and runner is executor else None).cast(schema)


#: Per Ray worker process: the event loop and the executors of the study whose chunks it runs (by settings).
_WORKER: dict[str, Any] = {}


def execute_chunk(shared: tuple[StudySpec, int, dict[str, dict[str, str]]],
                  chunk: list[dict[str, Any]]) -> tuple[pl.DataFrame, list[tuple[str, dict[str, Any]]]]:
    """A chunk of the execute stage in a Ray task (:class:`calib.scale.runner.RemoteWork`): its rows and events.

    ``shared``: the spec, the sandbox's worker processes per task (``runner.cpus_per_task``) and the candidates
    (role -> sample_id -> code). The executors live as long as the worker process, on one event loop, so the
    sandbox's fork servers serve every chunk the process runs.
    """
    from calib.study.spec import spec_hash

    spec, workers, by_role = shared
    key = spec_hash({"execute": _execute_settings(spec, RunOptions()), "workers": workers})
    if _WORKER.get("key") != key:
        for made in [_WORKER.get("executor"), *_WORKER.get("natives", {}).values()]:
            if hasattr(made, "close"):
                made.close()
        loop = _WORKER.get("loop") or asyncio.new_event_loop()
        _WORKER.update(key=key, loop=loop, executor=_executor(spec, workers), natives={})
    events: list[tuple[str, dict[str, Any]]] = []
    loop = _WORKER["loop"]

    async def run() -> list[pl.DataFrame]:
        gate = asyncio.Semaphore(workers)
        return await asyncio.gather(*(_compare_one(spec, workers, _WORKER["executor"], _WORKER["natives"], r, by_role,
                                                   gate, lambda name, **fields: events.append((name, fields)))
                                      for r in chunk))

    frames = loop.run_until_complete(run())
    return pl.concat([f.cast(EXECUTIONS_TABLE_SCHEMA) for f in frames]), events


async def _execute(ctx: StageContext) -> pl.DataFrame:
    from calib.scale.runner import RemoteWork

    schema = EXECUTIONS_TABLE_SCHEMA
    samples = ctx.table("samples")
    by_role = candidates(samples, ctx.table("generations"))
    workers = ctx.spec.execute.workers or ctx.options.jobs
    executor = _executor(ctx.spec, ctx.options.jobs, ctx.resources)
    natives: dict[str, Any] = {}
    items = samples.select("sample_id", "context", "function", "language").to_dicts()
    gate = asyncio.Semaphore(max(1, workers))

    async def work(chunk: list[dict[str, Any]]) -> pl.DataFrame:
        frames = await asyncio.gather(*(_compare_one(ctx.spec, ctx.options.jobs, executor, natives, r, by_role, gate,
                                                     ctx.event, lambda sid, t: _save_transcript(ctx, sid, t))
                                        for r in chunk))
        return pl.concat([f.cast(schema) for f in frames])

    remote = None
    if ctx.spec.execute.executor == "sandbox":  # the llm and agent executors ask a server: they run here
        cpus = ctx.spec.runner.cpus_per_task  # a task's sandbox workers: the CPUs Ray gave it
        spec = ctx.spec.model_copy(update={"execute": ctx.spec.execute.model_copy(update={"workers": cpus})})
        needed = {s["sample_id"] for s in items}
        shared = {role: {k: v for k, v in codes.items() if k in needed} for role, codes in by_role.items()}
        remote = RemoteWork(execute_chunk, (spec, cpus, shared))
    return await ctx.chunked(items, ctx.spec.runner.chunk_size or _EXECUTE_CHUNK, work, schema, label="execute",
                             concurrency=max(1, ctx.options.jobs), remote=remote, usual_size=_EXECUTE_CHUNK)


def _missing_rows(sample_id: str, roles: list[str] | tuple[str, ...], reason: str, executor: str) -> pl.DataFrame:
    """Rows for roles that were not executed: not conclusive, ``reason`` why, no cost (null runs and tokens)."""
    return pl.DataFrame([{"sample_id": sample_id, "role": role, "executor": executor, "valid_inputs": 0,
                          "coverage": 0.0, "distinct_outputs": 0, "conclusive": False, "reason": reason,
                          "sim_func": None, "matches": []} for role in roles], schema=EXECUTIONS_TABLE_SCHEMA)



#: 3: the cost columns runs, input_tokens, output_tokens (and sample_cost events with the seconds)
execute_stage = Stage("execute", ("samples", "generations"), "executions", "3", _execute_settings, _execute)
