"""The ``functional`` study kind: extract → prompt → generate → execute → measure → analyze → report.

The functional-memorization method (DESIGN.md "The three methods" 1; the paper's §3): functions x from
a model's training data are completed from their signature (plus up to P context tokens) by a target
model (trained on x) and a reference model (not trained on x), greedily; x and both completions are
executed on the same input states and compared textually and structurally; each sample gets a verdict
(textually memorized, functionally memorized, neither, inconclusive). Stages meet only through the
run directory's tables (:mod:`calib.study.tables`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from calib._exceptions import CalibError, InvalidParameterError
from calib.study.runner import RunOptions, Stage, StageContext
from calib.study.spec import ORGANISM_MODEL_PREFIX, StudySpec
from calib.study.tables import CLAIMS_SCHEMA, GENERATIONS_SCHEMA, SAMPLES_SCHEMA

__all__ = ["DEDUP_STAGE", "ROLES", "STAGES", "Resources", "candidate_code", "corpus_documents", "functional_stages"]

ROLES = ("target", "reference")
_GENERATE_CHUNK = 8  # (sample, role) items: 4 samples, both roles
_EXECUTE_CHUNK = 4


class Resources:
    """Servers and the organism, made on first use (a stage that is skipped never starts a server)."""

    def __init__(self, spec: StudySpec) -> None:
        self.spec = spec
        self._organism: Any = None
        self._servers: dict[str, Any] = {}
        self.capabilities: dict[str, dict[str, Any]] = {}
        self.request_cache: Any = None
        self.cache_path: Path | None = None
        self.counts: dict[str, Any] = {}

    def organism(self, progress: Any = None) -> Any:
        """The built organism's paths (built once; cached on disk across runs)."""
        if self._organism is None:
            from calib.organism.build import build_organism

            org = self.spec.organism
            if org is None:
                raise InvalidParameterError("this study has no [organism] table")
            self._organism = build_organism(org.preset, seed=org.seed, cache_dir=org.cache_dir, progress=progress)
        return self._organism

    def server(self, name: str) -> Any:
        """The server ``name`` of the spec, built on first use (organism models resolved)."""
        if name not in self._servers:
            from calib.servers import RequestCache, create_server
            from calib.servers.registry import config_keys

            config = dict(self.spec.servers[name])
            model_dir = config.get("model_dir")
            if isinstance(model_dir, str) and model_dir.startswith(ORGANISM_MODEL_PREFIX):
                config["model_dir"] = str(getattr(self.organism(), model_dir[len(ORGANISM_MODEL_PREFIX):]))
            if "cache" in config_keys(config["kind"]) and self.cache_path is not None:
                if self.request_cache is None:
                    self.request_cache = RequestCache(self.cache_path)
                config["cache"] = self.request_cache
            self._servers[name] = create_server(name, config)
        return self._servers[name]

    def manifest(self, run: Any) -> dict[str, Any]:
        """What the manifest records about this run: servers probed, roles, the organism, counts."""
        info: dict[str, Any] = {"roles": {role: getattr(self.spec.models, role) for role in ROLES},
                                "servers": dict(self.capabilities), "counts": dict(self.counts)}
        if self._organism is not None:
            info["organism"] = {"preset": self.spec.organism.preset, "seed": self.spec.organism.seed,
                                "root": str(self._organism.root)}
        info["counts"].update(_table_counts(run))
        return info

    def started_servers(self) -> dict[str, Any]:
        """The servers this run built so far, by name (their provenance goes into the manifest)."""
        return dict(self._servers)

    async def probe(self, name: str) -> dict[str, Any]:
        caps = (await self.server(name).capabilities()).to_dict()
        self.capabilities[name] = caps
        return caps

    async def aclose(self) -> None:
        for server in self._servers.values():
            await server.aclose()
        self._servers.clear()

    def close(self) -> None:
        if self._servers:
            asyncio.run(self.aclose())
        if self.request_cache is not None:
            self.request_cache.close()
            self.request_cache = None


def _table_counts(run: Any) -> dict[str, Any]:
    """Counts at every filter, read from the tables that exist."""
    counts: dict[str, Any] = {}
    if run.has_table("samples"):
        samples = run.read_table("samples")
        counts.update(samples=samples.height, members=int((samples["membership"] == "member").sum()),
                      controls=int((samples["membership"] == "control").sum()))
    if run.has_table("generations"):
        gen = run.read_table("generations")
        counts["generated"] = {r: int(gen.filter(pl.col("role") == r)["text"].is_not_null().sum()) for r in ROLES}
        counts["parsed"] = {r: int(gen.filter(pl.col("role") == r)["function"].is_not_null().sum()) for r in ROLES}
    if run.has_table("windows"):
        windows = run.read_table("windows")
        counts.update(windows=int(windows["error"].is_null().sum()),
                      windows_skipped=int(windows["error"].is_not_null().sum()))
    if run.has_table("scores"):
        scores = run.read_table("scores")
        counts.update(scores=int(scores["error"].is_null().sum()), unscored=int(scores["error"].is_not_null().sum()))
    if run.has_table("executions"):
        target = run.read_table("executions").filter(pl.col("role") == "target")
        counts.update(executed=target.height, conclusive=int(target["conclusive"].sum()))
    return counts


def _sample_id(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _limit(frame: pl.DataFrame, limit: int, seed: int) -> pl.DataFrame:
    """At most ``limit`` rows (0: all), a seeded draw kept in table order."""
    if not limit or frame.height <= limit:
        return frame
    keep = np.sort(np.random.default_rng(seed).permutation(frame.height)[:limit])
    return frame[keep.tolist()]


# --- extract ------------------------------------------------------------------------------------
def _extract_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    limit = options.limit if options.limit is not None else spec.data.limit
    return {"data": spec.data.model_dump(mode="json"), "organism": spec.organism and spec.organism.model_dump(
        mode="json"), "seed": spec.study.seed, "limit": limit}


async def _extract(ctx: StageContext) -> pl.DataFrame:
    spec, data = ctx.spec, ctx.spec.data
    limit = ctx.options.limit if ctx.options.limit is not None else data.limit
    if data.source == "organism":
        frame = _organism_samples(ctx)
    else:
        frame = await asyncio.to_thread(_corpus_samples, ctx)
    functions = frame.height
    frame = _limit(frame, limit, spec.study.seed)
    ctx.resources.counts["functions"] = functions
    ctx.event("extracted", functions=functions, samples=frame.height, dropped=ctx.resources.counts.get("dropped"))
    if frame.height == 0:
        dropped = ctx.resources.counts.get("dropped", {})
        caps = ", data.max_file_bytes/max_line_chars" if {"too_large", "long_line"} & set(dropped) else ""
        listed = ", ".join(f"{k} {v}" for k, v in sorted(dropped.items()))
        raise CalibError(f"data ({data.source}): no function to audit; check data.paths, data.language and "
                         f"data.min_lines/max_lines ({data.min_lines}-{data.max_lines}){caps}"
                         + (f" (dropped: {listed})" if listed else ""))
    return frame


def _organism_samples(ctx: StageContext) -> pl.DataFrame:
    truth = pl.read_parquet(ctx.resources.organism(progress=ctx.phase_progress("organism")).truth)
    truth = truth.filter(pl.col("kind").is_in(list(ctx.spec.data.kinds)))
    rows = []
    for r in truth.iter_rows(named=True):
        signature, audited = r["signature"], r["audited"]
        body = audited[len(signature):] if audited.startswith(signature) else audited
        rows.append({"sample_id": r["item_id"], "language": "python", "membership": r["membership"],
                     "kind": r["kind"], "source": r["source"], "context": "", "signature": signature, "body": body,
                     "function": audited, "prompt": r["prompt"], "prompt_context_tokens": 0})
    return pl.DataFrame(rows, schema=SAMPLES_SCHEMA)


def corpus_documents(data: Any) -> Any:
    """The documents of a ``[data]`` section's corpus: its ``paths``, or its ``[data.hub]`` repository."""
    from calib.data.sources import CorpusSpec, iter_documents

    corpus = CorpusSpec(paths=data.paths, format=data.format, content_column=data.content_column,
                        metadata_columns=data.metadata_columns, extensions=data.extensions,
                        max_document_bytes=data.max_file_bytes)
    if data.hub is None:
        return iter_documents(corpus)
    from calib.data.hub import HubCorpus, iter_hub_documents

    hub = HubCorpus(data.hub.repo_id, data.hub.revision, files=data.hub.files,
                    allow_patterns=data.hub.allow_patterns, repo_type=data.hub.repo_type)
    return iter_hub_documents(hub, corpus)


def _corpus_samples(ctx: StageContext) -> pl.DataFrame:
    data = ctx.spec.data
    if data.source == "functions":
        functions = pl.concat([pl.read_parquet(p) for p in data.paths], how="diagonal_relaxed")
        missing = [c for c in ("signature", "body") if c not in functions.columns]
        if missing:
            raise CalibError(f"data.paths: the functions table lacks {missing} (write it with calib extract)")
        functions = functions.filter(pl.col("language").fill_null(data.language) == data.language) \
            if "language" in functions.columns else functions
    else:
        from calib.data.extract import Deduplicator, extract_document
        from calib.study._corpus_caps import count_dropped

        documents = corpus_documents(data)
        dedup = Deduplicator()
        rows: list[dict[str, Any]] = []
        dropped: dict[str, int] = {}
        for doc in documents:
            if doc.text is None:
                count_dropped(dropped, {doc.metadata.get("error", "unreadable"): 1}, doc.source, ctx.event)
                continue
            result = extract_document(doc.text, language=data.language, source=doc.source, path=doc.path,
                                      min_lines=data.min_lines, max_lines=data.max_lines, metadata=doc.metadata,
                                      deduplicator=dedup, max_document_bytes=data.max_file_bytes,
                                      max_line_chars=data.max_line_chars)
            rows.extend(result.functions)
            count_dropped(dropped, result.dropped, doc.source, ctx.event)
        ctx.resources.counts["dropped"] = dropped
        from calib.data.schema import FUNCTIONS_SCHEMA

        functions = pl.DataFrame(rows, schema=FUNCTIONS_SCHEMA)
    out = []
    for r in functions.iter_rows(named=True):
        signature, body = r["signature"], r["body"]
        sep = "" if body.startswith("\n") else "\n"
        sid = r.get("function_id") or _sample_id(data.language, r.get("source") or "", signature, body)
        out.append({"sample_id": sid, "language": data.language, "membership": r.get("membership") or "member",
                    "kind": r.get("kind"), "source": r.get("source") or r.get("path") or "",
                    "context": r.get("context") or "", "signature": signature, "body": body,
                    "function": signature + sep + body, "prompt": None, "prompt_context_tokens": None})
    return pl.DataFrame(out, schema=SAMPLES_SCHEMA).unique("sample_id", keep="first", maintain_order=True)


# --- prompt -------------------------------------------------------------------------------------
def _prompt_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    return {"prompt": spec.prompt.model_dump(mode="json"), "tokenizer": spec.servers[spec.models.target]}


async def _prompt(ctx: StageContext) -> pl.DataFrame:
    samples = ctx.table("functions")
    if ctx.spec.data.source == "organism":
        return samples  # the organism's prompts are the signatures (its models saw functions from position 0)
    from calib.data.prompts import build_prompts

    server = ctx.resources.server(ctx.spec.models.target)
    await ctx.resources.probe(ctx.spec.models.target)
    prompted = await build_prompts(server, samples, max_context_tokens=ctx.spec.prompt.max_context_tokens)
    return prompted.select(list(SAMPLES_SCHEMA)).cast(SAMPLES_SCHEMA)


# --- generate -----------------------------------------------------------------------------------
def _generation_params(spec: StudySpec) -> Any:
    from calib.servers import SamplingParams

    g = spec.generation
    return SamplingParams(max_tokens=g.max_tokens, temperature=g.temperature, stop=tuple(g.stop), seed=spec.study.seed)


def _generate_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    return {"generation": spec.generation.model_dump(mode="json", exclude={"concurrency"}),
            "servers": {role: spec.servers[getattr(spec.models, role)] for role in ROLES}, "seed": spec.study.seed}


async def _generate(ctx: StageContext) -> pl.DataFrame:
    from calib.data.parseback import parse_back
    from calib.servers import RequestFailed

    samples = ctx.table("samples").filter(pl.col("prompt").is_not_null())
    params = _generation_params(ctx.spec)
    params_hash = hashlib.sha256(json.dumps(params.to_dict(), sort_keys=True).encode()).hexdigest()[:16]
    models = {}
    for role in ROLES:
        name = getattr(ctx.spec.models, role)
        models[role] = (await ctx.resources.probe(name)).get("model") or name
    base = samples.select("sample_id", "language", "signature", "prompt").to_dicts()
    # Both roles of a sample in the same chunk: the two servers work at the same time.
    items = [{**r, "role": role} for r in base for role in ROLES]

    async def complete(role: str, chunk: list[dict[str, Any]]) -> list[dict[str, Any]]:
        server = ctx.resources.server(getattr(ctx.spec.models, role))
        budgets = await _budgets(server, ctx.resources.capabilities[getattr(ctx.spec.models, role)],
                                 [r["prompt"] for r in chunk], params.max_tokens)
        answers: list[Any] = [[] for _ in chunk]
        failures: list[str | None] = [None] * len(chunk)
        for budget in sorted(set(budgets)):  # one request per completion budget
            idx = [i for i, b in enumerate(budgets) if b == budget]
            if budget < 1:
                for i in idx:
                    failures[i] = "prompt fills the model's context"
                continue
            batch = replace(params, max_tokens=budget)
            try:
                got = await server.complete([chunk[i]["prompt"] for i in idx], batch)
            except (RequestFailed, CalibError) as exc:
                if len(idx) == 1:  # recorded per sample, never fatal
                    failures[idx[0]] = _failure(exc)
                    continue
                got = []
                for i in idx:  # one bad prompt must not sink the others of its batch: ask one by one
                    try:
                        got.extend(await server.complete([chunk[i]["prompt"]], batch))
                    except (RequestFailed, CalibError) as one:
                        got.append([])
                        failures[i] = _failure(one)
            for i, answer in zip(idx, got):
                answers[i] = answer
        rows = []
        for r, answer, failure in zip(chunk, answers, failures):
            completion = answer[0] if answer else None
            text = completion.text if completion is not None else None
            function, error = None, failure
            if text is not None:
                parsed = parse_back(r["language"], r["signature"], text)
                function = parsed.function
                error = None if function is not None else f"generation {parsed.outcome}"
            if error is not None:
                ctx.event("sample_error", sample_id=r["sample_id"], role=role, error=error)
            rows.append({"sample_id": r["sample_id"], "role": role, "model": models[role],
                         "params_hash": params_hash, "text": text, "function": function,
                         "finish_reason": completion.finish_reason if completion is not None else None,
                         "error": error})
        return rows

    async def work(chunk: list[dict[str, Any]]) -> pl.DataFrame:
        parts = {role: [r for r in chunk if r["role"] == role] for role in ROLES}
        done = await asyncio.gather(*(complete(role, part) for role, part in parts.items() if part))
        by_key = {(row["sample_id"], row["role"]): row for rows in done for row in rows}
        return pl.DataFrame([by_key[(r["sample_id"], r["role"])] for r in chunk], schema=GENERATIONS_SCHEMA)

    frame = await ctx.chunked(items, _GENERATE_CHUNK, work, GENERATIONS_SCHEMA, label="generate",
                              concurrency=ctx.spec.generation.concurrency)
    for role in ROLES:
        _record_requests(ctx, getattr(ctx.spec.models, role))
    return frame


def _failure(exc: Exception) -> str:
    why = exc.error if hasattr(exc, "error") else " ".join(str(exc).split())
    return f"request failed: {why}"[:500]


def _record_requests(ctx: StageContext, name: str) -> None:
    """One ``requests`` event per server: attempts, retries, failures after retries, cache hits."""
    stats = getattr(ctx.resources.server(name), "stats", None)
    if stats is not None:
        ctx.event("requests", server=name, attempts=stats.attempts, retries=stats.retries,
                  failures=stats.failures, cache_hits=stats.cache_hits)


async def _budgets(server: Any, caps: dict[str, Any], prompts: list[str], max_tokens: int) -> list[int]:
    """Completion tokens per prompt: ``max_tokens``, lowered to what the model's context leaves after the prompt.

    The paper generates up to 500 tokens; a model with a short context (the organism's 512) gets what
    fits, so that no request is refused. Needs the server's tokenizer and ``max_context``; without them
    every prompt gets ``max_tokens``.
    """
    limit = caps.get("max_context")
    if not limit or not caps.get("tokenize") or not hasattr(server, "tokenize"):
        return [max_tokens] * len(prompts)
    lengths = [len(await server.tokenize(p)) for p in prompts]
    return [min(max_tokens, int(limit) - n - 1) for n in lengths]


def _candidates(samples: pl.DataFrame, generations: pl.DataFrame) -> dict[str, dict[str, str]]:
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
    return {"execute": spec.execute.model_dump(mode="json", exclude={"workers"}), "seed": spec.study.seed,
            "server": spec.servers.get(server) if server is not None and spec.execute.executor != "sandbox" else None}


def _executor_config(spec: StudySpec, jobs: int) -> Any:
    from calib.executors import ExecutorConfig

    e = spec.execute
    return ExecutorConfig(n_inputs=e.n_inputs, min_valid=e.min_valid, coverage=e.coverage,
                          min_distinct=e.min_distinct, seed=spec.study.seed, input_timeout=e.input_timeout,
                          budget_runs=e.budget_runs, budget_seconds=e.budget_seconds, memory_mb=e.memory_mb,
                          workers=e.workers or jobs, unsafe_no_sandbox=e.unsafe_no_sandbox)


def _executor(spec: StudySpec, jobs: int, resources: Any = None) -> Any:
    """The study's executor: ``sandbox``, or ``llm`` / ``agent`` over ``execute.server`` (a chat server)."""
    from calib.executors import create_executor

    e = spec.execute
    config = _executor_config(spec, jobs)
    options: dict[str, Any] = {}
    if e.executor == "llm":
        options = {"server": resources.server(e.server), "level": e.level}
    elif e.executor == "agent":
        options = {"server": resources.server(e.server), "max_turns": e.agent_max_turns,
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


async def _execute(ctx: StageContext) -> pl.DataFrame:
    from calib.executors import EXECUTIONS_SCHEMA, execution_rows

    samples = ctx.table("samples")
    by_role = _candidates(samples, ctx.table("generations"))
    executor = _executor(ctx.spec, ctx.options.jobs, ctx.resources)
    natives: dict[str, Any] = {}
    items = samples.select("sample_id", "context", "function", "language").to_dicts()
    gate = asyncio.Semaphore(max(1, ctx.spec.execute.workers or ctx.options.jobs))

    async def one(r: dict[str, Any]) -> pl.DataFrame:
        roles = [role for role in ROLES if by_role[role].get(r["sample_id"])]
        runner = executor
        if r["language"] != "python":
            if ctx.spec.execute.executor != "sandbox":
                return _missing_rows(r["sample_id"], ROLES, f"the {ctx.spec.execute.executor} executor runs python "
                                     f"only, not {r['language']}", ctx.spec.execute.executor)
            try:
                runner = _native(ctx.spec, ctx.options.jobs, r["language"], natives)
            except CalibError as exc:  # a missing compiler: say which, for every sample of that language
                return _missing_rows(r["sample_id"], ROLES, " ".join(str(exc).split())[:300],
                                     f"native-{r['language']}")
        async with gate:
            try:
                candidates = [by_role[role][r["sample_id"]] for role in roles]
                if hasattr(runner, "compare_with_transcript"):  # the agent: its whole conversation is kept
                    comparison, transcript = await runner.compare_with_transcript(
                        r["function"], candidates, context=r["context"] or "", names=roles)
                    _save_transcript(ctx, r["sample_id"], transcript)
                else:
                    comparison = await runner.compare(r["function"], candidates, context=r["context"] or "",
                                                      names=roles)
            except CalibError:
                raise
            except Exception as exc:  # noqa: BLE001 - one bad sample is recorded and skipped
                ctx.event("sample_error", sample_id=r["sample_id"], error=f"{type(exc).__name__}: {exc}")
                return _missing_rows(r["sample_id"], ROLES, f"executor error: {type(exc).__name__}", "sandbox")
        rows = execution_rows(r["sample_id"], comparison, roles) if roles else pl.DataFrame(schema=EXECUTIONS_SCHEMA)
        missing = [role for role in ROLES if role not in roles]
        if missing:
            extra = _missing_rows(r["sample_id"], missing, "no generation (the request failed)", comparison.executor)
            extra = extra.with_columns(pl.lit(comparison.valid_inputs).alias("valid_inputs"),
                                       pl.lit(comparison.coverage).alias("coverage"),
                                       pl.lit(comparison.distinct_outputs).alias("distinct_outputs"),
                                       pl.lit(comparison.conclusive).alias("conclusive"))
            rows = pl.concat([rows, extra.cast(EXECUTIONS_SCHEMA)])
        return rows

    async def work(chunk: list[dict[str, Any]]) -> pl.DataFrame:
        frames = await asyncio.gather(*(one(r) for r in chunk))
        return pl.concat([f.cast(EXECUTIONS_SCHEMA) for f in frames])

    return await ctx.chunked(items, _EXECUTE_CHUNK, work, EXECUTIONS_SCHEMA, label="execute",
                             concurrency=max(1, ctx.options.jobs))


def candidate_code(signature: str, function: str | None, text: str | None) -> str | None:
    """What a generation is compared as: its parsed-back function, else the signature plus the raw completion.

    A completion that does not parse back is still a candidate (the paper compares every generation):
    its text similarity is measured on what the model wrote, and executing it fails on every input, a
    non-match. Only a generation that never came back (a failed request) has no candidate.
    """
    if function is not None:
        return function
    return None if text is None else signature + text


def _missing_rows(sample_id: str, roles: list[str] | tuple[str, ...], reason: str, executor: str) -> pl.DataFrame:
    from calib.executors import EXECUTIONS_SCHEMA

    return pl.DataFrame([{"sample_id": sample_id, "role": role, "executor": executor, "valid_inputs": 0,
                          "coverage": 0.0, "distinct_outputs": 0, "conclusive": False, "reason": reason,
                          "sim_func": None, "matches": []} for role in roles], schema=EXECUTIONS_SCHEMA)


# --- measure ------------------------------------------------------------------------------------
def _measure_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    m = spec.measure
    servers = {k: spec.servers[v] for k, v in (("judge", m.judge_server), ("embedding", m.embedding_server)) if v}
    return {"measure": m.model_dump(mode="json", exclude={"workers"}), "servers": servers}


async def _measure(ctx: StageContext) -> pl.DataFrame:
    from calib.metrics import create_metric
    from calib.metrics.run import acompute_similarities
    from calib.servers import ChatParams, RequestCache

    m = ctx.spec.measure
    samples = ctx.table("samples")
    by_role = _candidates(samples, ctx.table("generations"))
    rows = [{"sample_id": s["sample_id"], "role": role, "reference": s["function"],
             "candidate": by_role[role].get(s["sample_id"]), "language": s["language"]}
            for s in samples.iter_rows(named=True) for role in ROLES]
    pairs = pl.DataFrame(rows, schema={"sample_id": pl.String(), "role": pl.String(), "reference": pl.String(),
                                       "candidate": pl.String(), "language": pl.String()})
    metrics = []
    for name in m.metrics:
        options: dict[str, Any] = {}
        if name.startswith("judge_"):
            options = {"server": ctx.resources.server(m.judge_server),
                       "params": ChatParams(max_tokens=m.judge_max_tokens, temperature=0.0, seed=ctx.spec.study.seed)}
        elif name == "embedding" and m.embedding_server:
            options = {"server": ctx.resources.server(m.embedding_server)}
        metrics.append(create_metric(name, **options))
    task = ctx._progress.add("measure", pairs.height) if ctx._progress is not None else None

    def progress(group: str, done: int, total: int) -> None:
        if task is not None:
            ctx._progress.bar.update(task, completed=min(done, pairs.height))

    with RequestCache(ctx.run.cache_path) as cache:
        return await acompute_similarities(pairs, metrics, cache=cache, workers=m.workers or ctx.options.jobs,
                                           progress=progress)


# --- analyze ------------------------------------------------------------------------------------
def _analyze_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    return {"analyze": spec.analyze.model_dump(mode="json", exclude={"confidence", "fpr_levels"})}


async def _analyze(ctx: StageContext) -> pl.DataFrame:
    a = ctx.spec.analyze
    samples = ctx.table("samples").select("sample_id", "membership", "kind")
    sims = ctx.table("similarities").filter(pl.col("metric") == a.text_metric)
    text = {(r["sample_id"], r["role"]): r["value"] for r in sims.iter_rows(named=True)}
    execs = ctx.table("executions")
    runs = {(r["sample_id"], r["role"]): r for r in execs.iter_rows(named=True)}
    rows = []
    for s in samples.iter_rows(named=True):
        sid = s["sample_id"]
        tt, tr = text.get((sid, "target")), text.get((sid, "reference"))
        et, er = runs.get((sid, "target")), runs.get((sid, "reference"))
        conclusive = bool(et and et["conclusive"] and er and er["conclusive"])
        ft = et["sim_func"] if et and conclusive else None
        fr = er["sim_func"] if er and conclusive else None
        textual_t = None if tt is None else tt >= a.tau_text
        textual_r = None if tr is None else tr >= a.tau_text
        functional_t = None if ft is None else ft >= a.tau_func
        functional_r = None if fr is None else fr >= a.tau_func
        reason = None
        if tt is None or tr is None:
            verdict, reason = "unscored", "no text score for " + ("target" if tt is None else "reference")
        else:
            textual = textual_t and not textual_r
            if textual:
                verdict = "textual"
            elif not conclusive or ft is None or fr is None:
                verdict = "inconclusive"
                reason = next((e["reason"] for e in (et, er) if e and e["reason"]), "inconclusive")
            elif functional_t and not functional_r and not textual_t:
                verdict = "functional"
            else:
                verdict = "none"
        rows.append({"sample_id": sid, "membership": s["membership"], "kind": s["kind"], "text_target": tt,
                     "text_reference": tr, "func_target": ft, "func_reference": fr, "conclusive": conclusive,
                     "reason": reason, "textual_target": textual_t, "textual_reference": textual_r,
                     "functional_target": functional_t, "functional_reference": functional_r,
                     "textually_memorized": None if textual_t is None or textual_r is None
                     else bool(textual_t and not textual_r),
                     "functionally_memorized": None if ft is None or fr is None or textual_t is None
                     else bool(functional_t and not functional_r and not textual_t),
                     "verdict": verdict})
    return pl.DataFrame(rows, schema=CLAIMS_SCHEMA)


# --- dedup --------------------------------------------------------------------------------------
def _dedup_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    d = spec.dedup
    return {"dedup": d.model_dump(mode="json", exclude={"redis_url"}),
            "organism": spec.organism and spec.organism.model_dump(mode="json", exclude={"cache_dir"}),
            "language": spec.data.language,
            "embedding": spec.servers[d.embedding_server] if d.embedding_server else None}


def _dedup_corpus(ctx: StageContext) -> tuple[list[str], list[str], dict[str, int]]:
    """(ids, texts, copies) of the training corpus ``[dedup]`` names."""
    d, language = ctx.spec.dedup, ctx.spec.data.language
    if d.source == "organism":
        from calib.organism.build import training_corpus

        corpus = training_corpus(ctx.resources.organism())
        return [c[0] for c in corpus], [c[1] for c in corpus], {c[0]: c[2] for c in corpus}
    if d.source == "functions":
        functions = pl.concat([pl.read_parquet(p) for p in d.paths], how="diagonal_relaxed")
    else:
        from calib.data.extract import Deduplicator, extract_document
        from calib.data.schema import FUNCTIONS_SCHEMA
        from calib.data.sources import CorpusSpec, iter_documents
        from calib.study._corpus_caps import count_dropped

        corpus = CorpusSpec(paths=d.paths, format=d.format, content_column=d.content_column, extensions=d.extensions,
                            max_document_bytes=d.max_file_bytes)
        rows: list[dict[str, Any]] = []
        dedup = Deduplicator()
        dropped: dict[str, int] = {}
        for doc in iter_documents(corpus):
            if doc.text is None:
                count_dropped(dropped, {doc.metadata.get("error", "unreadable"): 1}, doc.source, ctx.event)
                continue
            result = extract_document(doc.text, language=language, source=doc.source, path=doc.path,
                                      min_lines=d.min_lines, max_lines=10**6, metadata=doc.metadata,
                                      deduplicator=dedup, max_document_bytes=d.max_file_bytes,
                                      max_line_chars=d.max_line_chars)
            rows.extend(result.functions)
            count_dropped(dropped, result.dropped, doc.source, ctx.event)
        ctx.resources.counts["dedup_dropped"] = dropped
        functions = pl.DataFrame(rows, schema=FUNCTIONS_SCHEMA)
    ids, texts = [], []
    for r in functions.iter_rows(named=True):
        body = r["body"]
        text = r["signature"] + ("" if body.startswith("\n") else "\n") + body
        ids.append(r.get("function_id") or _sample_id(language, r.get("source") or "", r["signature"], body))
        texts.append(text)
    return ids, texts, {}


async def _dedup(ctx: StageContext) -> pl.DataFrame:
    from calib.dedup import DedupConfig, afind_duplicates

    d = ctx.spec.dedup
    samples = ctx.table("samples")
    ids, texts, copies = await asyncio.to_thread(_dedup_corpus, ctx)
    ctx.event("dedup_corpus", documents=len(ids))
    config = DedupConfig(jaccard=d.jaccard, num_perm=d.num_perm, shingle_tokens=d.shingle_tokens,
                         seed=ctx.spec.study.seed + 1, cosine=d.cosine, semantic=d.semantic, storage=d.redis_url,
                         index=d.index)
    server = ctx.resources.server(d.embedding_server) if d.embedding_server else None
    pairs = await afind_duplicates(ids, texts, samples["sample_id"].to_list(), samples["function"].to_list(),
                                   config=config, server=server, copies=copies)
    ctx.resources.counts["dedup_corpus"] = len(ids)
    return pairs


# --- report -------------------------------------------------------------------------------------
def _report_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    return {"analyze": spec.analyze.model_dump(mode="json"), "report": spec.report.model_dump(mode="json"),
            "study": spec.study.model_dump(mode="json")}


async def _report(ctx: StageContext) -> None:
    from calib.report import write_report
    from calib.study.rundir import now_iso

    ctx.save_manifest(finished_at=now_iso())  # the report states when the audit's work ended
    await asyncio.to_thread(write_report, ctx.run.root)
    return None


STAGES: tuple[Stage, ...] = (
    Stage("extract", (), "functions", "1", _extract_settings, _extract),
    Stage("prompt", ("functions",), "samples", "1", _prompt_settings, _prompt),
    Stage("generate", ("samples",), "generations", "1", _generate_settings, _generate),
    Stage("execute", ("samples", "generations"), "executions", "2", _execute_settings, _execute),
    Stage("measure", ("samples", "generations"), "similarities", "2", _measure_settings, _measure),
    Stage("analyze", ("samples", "similarities", "executions"), "claims", "1", _analyze_settings, _analyze),
    Stage("report", ("samples", "generations", "executions", "similarities", "claims"), None, "1",
          _report_settings, _report, done=lambda run: (run.report / "report.html").is_file()),
)

#: The duplication stage of a functional study with a ``[dedup]`` table (after the samples are known).
DEDUP_STAGE = Stage("dedup", ("samples",), "duplicates", "1", _dedup_settings, _dedup)


def functional_stages(spec: StudySpec) -> tuple[Stage, ...]:
    """The functional study's stages; with ``[dedup]`` the dedup stage runs after prompt and the report reads it."""
    if spec.dedup is None:
        return STAGES
    report = STAGES[-1]
    report = replace(report, reads=(*report.reads, "duplicates"))
    return (*STAGES[:2], DEDUP_STAGE, *STAGES[2:-1], report)
