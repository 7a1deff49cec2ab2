"""The ``mitigation`` study kind's stages: pairs → train → generate → measure → benchmark → trajectory → report.

The functional-memorization paper's Appendix H on a finished functional audit (``mitigation.audit``): preference
pairs from its memorized set (:mod:`calib.mitigation.pairs`), NPO and DPO post-training of the target with LoRA
(:mod:`calib.mitigation.train`, a checkpoint per saved epoch under ``RUN/checkpoints/METHOD/epoch-K``), greedy
completions of every checkpoint on the memorized prompts and on held-out (retain) prompts, memorization
re-measured with the audit's own text metric, executor and thresholds, and utility: retain agreement, pass@1 on
held-out memorized functions and on benchmarks (docs/mitigation.md). The target and the reference are the audit's
own greedy completions (epoch 0).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import polars as pl

from calib._exceptions import CalibError, InputError
from calib.data.parseback import candidate_code
from calib.study.mitigation.audit import Audit, executor_for, load_audit
from calib.study.mitigation.tables import (
    BENCHMARK_RESULTS_SCHEMA,
    CHECKPOINTS_SCHEMA,
    MITIGATION_GENERATIONS_SCHEMA,
    MITIGATION_SCORES_SCHEMA,
    PAIRS_SCHEMA,
    TRAJECTORY_SCHEMA,
)
from calib.study.report_stage import report_done, write_report_stage
from calib.study.runner import RunOptions, Stage, StageContext
from calib.study.spec import StudySpec

__all__ = ["MITIGATION_STAGES", "SOURCE_OF"]

#: Where each method's preferred completions come from (NPO reads the rejected bodies only).
SOURCE_OF = {"npo": "ref", "dpo-ref": "ref", "dpo-target": "target", "dpo-rewrite": "rewrite"}
_MEASURE_CHUNK = 8


def _audit(spec: StudySpec) -> Audit:
    return load_audit(spec.mitigation.audit)  # type: ignore[union-attr]


def _split(spec: StudySpec, audit: Audit) -> tuple[list[Any], list[Any]]:
    """The audit's memorized set as (forget, held out) under ``mitigation.holdout`` (Audit.split)."""
    return audit.split(spec.mitigation.holdout, spec.study.seed)  # type: ignore[union-attr]


# --- pairs ----------------------------------------------------------------------------------------
def _pairs_settings(spec: StudySpec, options: RunOptions) -> Any:
    m = spec.mitigation
    sources = sorted({SOURCE_OF[x] for x in m.methods})  # type: ignore[union-attr]
    return {"audit": _audit(spec).fingerprint, "sources": sources, "seed": spec.study.seed,
            "holdout": m.holdout,  # type: ignore[union-attr]
            "target": spec.servers[spec.models.target] if "target" in sources else None,  # type: ignore[index]
            "rewriter": spec.servers[m.rewriter] if "rewrite" in sources else None}  # type: ignore[union-attr,index]


async def _pairs(ctx: StageContext) -> pl.DataFrame:
    from calib.mitigation.pairs import build_pairs

    spec, audit = ctx.spec, _audit(ctx.spec)
    memorized, _ = _split(spec, audit)
    if not memorized:
        raise InputError("mitigation.audit: the audit found no memorized member (verdict textual or functional); "
                         "there is nothing to mitigate", path=str(audit.root))
    sources = list(dict.fromkeys(SOURCE_OF[x] for x in spec.mitigation.methods))  # type: ignore[union-attr]
    generation = audit.spec.generation
    frames = []
    for source in sources:
        ctx.event("pairs", source=source, functions=len(memorized))
        frames.append(await build_pairs(
            memorized, source,
            target=ctx.resources.server(spec.models.target) if source == "target" else None,
            rewriter=ctx.resources.server(spec.mitigation.rewriter) if source == "rewrite" else None,  # type: ignore[union-attr,arg-type]
            executor=executor_for(audit.spec) if source != "ref" else None, seed=spec.study.seed,
            max_tokens=generation.max_tokens, stop=tuple(generation.stop)))
    return pl.concat(frames).cast(PAIRS_SCHEMA)


# --- train ----------------------------------------------------------------------------------------
def _train_settings(spec: StudySpec, options: RunOptions) -> Any:
    m = spec.mitigation.model_dump(mode="json", exclude={"retain_prompts", "threads", "audit", "benchmarks",  # type: ignore[union-attr]
                                                         "benchmark_limit", "benchmark_max_tokens"})
    return {"mitigation": m, "target": spec.servers[spec.models.target], "seed": spec.study.seed}  # type: ignore[index]


def _config(spec: StudySpec, method: str) -> Any:
    from calib.mitigation.train import TrainConfig

    m = spec.mitigation
    assert m is not None
    return TrainConfig(method="npo" if method == "npo" else "dpo", epochs=m.epochs, save_epochs=m.save_epochs,
                       learning_rate=m.npo_learning_rate if method == "npo" else m.dpo_learning_rate,
                       batch_size=m.batch_size, beta=m.beta, lora_r=m.lora_r, lora_alpha=m.lora_alpha,
                       lora_dropout=m.lora_dropout, seed=spec.study.seed, threads=m.threads)


async def _train(ctx: StageContext) -> pl.DataFrame:
    from calib.mitigation.train import Pair, train

    pairs = ctx.table("pairs")
    base = ctx.resources.server(ctx.spec.models.target).model_dir  # type: ignore[arg-type]

    async def work(chunk: list[str]) -> pl.DataFrame:
        method = chunk[0]
        config = _config(ctx.spec, method)
        rows = pairs.filter(pl.col("source") == SOURCE_OF[method]).to_dicts()
        kept = [Pair(r["prompt"], r["chosen"] or "", r["rejected"]) for r in rows
                if method == "npo" or (r["chosen"] or "").strip()]
        if not kept:
            raise InputError(f"mitigation.methods: {method} has no pair with a preferred completion to train on")
        folder = ctx.run.root / "checkpoints" / method
        result = await asyncio.to_thread(train, base, kept, folder, config)
        ctx.event("trained", method=method, pairs=len(kept), steps=result.steps, epoch_losses=result.epoch_losses)
        return pl.DataFrame([{"method": method, "epoch": epoch, "point": f"{method}@{epoch}",
                              "folder": str(path.relative_to(ctx.run.root)), "pairs": len(kept),
                              "left_out": len(rows) - len(kept), "learning_rate": config.lr,
                              "loss": result.epoch_losses[epoch - 1], "pairs_fingerprint": result.fingerprint}
                             for epoch, path in sorted(result.checkpoints.items())], schema=CHECKPOINTS_SCHEMA)

    return await ctx.chunked(list(ctx.spec.mitigation.methods), 1, work, CHECKPOINTS_SCHEMA,  # type: ignore[union-attr]
                             label="train")


# --- generate -------------------------------------------------------------------------------------
def _retain_ids(audit: Audit, memorized: set[str], n: int, seed: int) -> list[str]:
    """A seeded draw of ``n`` audit samples outside the memorized set whose target completion came back."""
    targets = audit.tables["generations"].filter((pl.col("role") == "target") & pl.col("text").is_not_null())
    ids = sorted(set(targets["sample_id"]) - memorized)
    random.Random(seed).shuffle(ids)
    return sorted(ids[:n])


def _prompts(spec: StudySpec, audit: Audit) -> list[tuple[str, str, str, str, str]]:
    """(sample_id, set, prompt, signature, language) of the memorized set (forget), the held-out memorized functions
    (the benchmark), then of the retain draw."""
    forget, heldout = _split(spec, audit)
    ids = {m.sample_id for m in forget + heldout}
    out = [(m.sample_id, "memorized", m.prompt, m.signature, m.language) for m in forget]
    out += [(m.sample_id, "heldout", m.prompt, m.signature, m.language) for m in heldout]
    samples = {r["sample_id"]: r for r in audit.tables["samples"].iter_rows(named=True)}
    for sid in _retain_ids(audit, ids, spec.mitigation.retain_prompts, spec.study.seed):  # type: ignore[union-attr]
        s = samples[sid]
        out.append((sid, "retain", s["prompt"], s["signature"], s["language"]))
    return out


def _generate_settings(spec: StudySpec, options: RunOptions) -> Any:
    audit = _audit(spec)
    return {"audit": audit.fingerprint, "retain_prompts": spec.mitigation.retain_prompts,  # type: ignore[union-attr]
            "holdout": spec.mitigation.holdout,  # type: ignore[union-attr]
            "generation": audit.spec.generation.model_dump(mode="json"), "seed": spec.study.seed}


async def _complete(server: Any, prompts: list[str], params: Any) -> list[Any]:
    """Greedy completions of ``prompts``, each within what the model's context leaves after it (the audit's rule,
    calib.servers.context.completion_budgets): prompts are asked in groups of equal budget."""
    from dataclasses import replace

    from calib.servers.context import completion_budgets

    caps = (await server.capabilities()).to_dict()
    budgets = await completion_budgets(server, caps, prompts, params.max_tokens)
    outs: list[Any] = [[None]] * len(prompts)
    for budget in sorted(set(budgets)):
        index = [i for i, b in enumerate(budgets) if b == budget]
        if budget < 1:
            continue  # the prompt fills the context: no completion (an unscored row)
        got = await server.complete([prompts[i] for i in index], replace(params, max_tokens=budget))
        for i, out in zip(index, got):
            outs[i] = out
    return outs


def _answers(folder: str, threads: int | None, prompts: list[str], max_tokens: int,
             stop: tuple[str, ...]) -> tuple[list[tuple[str, str] | None], str | None]:
    """In a worker process: the checkpoint in ``folder`` served by calib's embedded server, its greedy completions
    of ``prompts`` as ``(text, finish_reason)`` (None: no room in the context), or the error that stopped it."""
    from calib.servers import create_server
    from calib.servers.messages import SamplingParams

    config: dict[str, Any] = {"kind": "embedded", "model_dir": folder}
    if threads is not None:
        config["threads"] = threads

    async def go() -> tuple[list[tuple[str, str] | None], str | None]:
        server = create_server("checkpoint", config)
        try:
            outs = await _complete(server, prompts, SamplingParams(max_tokens=max_tokens, temperature=0.0, stop=stop))
            return [None if o[0] is None else (o[0].text, o[0].finish_reason) for o in outs], None
        except CalibError as exc:  # a checkpoint that cannot answer: recorded, its rows unscored
            return [None] * len(prompts), str(exc)
        finally:
            await server.aclose()

    return asyncio.run(go())


async def _generate(ctx: StageContext) -> pl.DataFrame:
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    from calib.data.parseback import parse_back

    audit = _audit(ctx.spec)
    prompts = _prompts(ctx.spec, audit)
    g = audit.spec.generation
    threads = ctx.spec.servers[ctx.spec.models.target].get("threads")  # type: ignore[index]
    checkpoints = ctx.table("checkpoints").to_dicts()
    # one process per checkpoint being asked (greedy decoding of a small model is Python-bound: threads in one
    # process would share one core), as many at once as there are CPUs; each loads the checkpoint once
    workers = max(1, min(len(checkpoints), os.cpu_count() or 1))
    loop = asyncio.get_running_loop()

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        async def work(chunk: list[dict[str, Any]]) -> pl.DataFrame:
            row = chunk[0]
            outs, error = await loop.run_in_executor(pool, _answers, str(ctx.run.root / row["folder"]), threads,
                                                     [p[2] for p in prompts], g.max_tokens, tuple(g.stop))
            rows = []
            for (sid, which, _, signature, language), out in zip(prompts, outs):
                text, finish = out if out is not None else (None, None)
                rows.append({"point": row["point"], "sample_id": sid, "set": which, "text": text,
                             "function": parse_back(language, signature, text).function if text is not None else None,
                             "finish_reason": finish, "error": error})
            return pl.DataFrame(rows, schema=MITIGATION_GENERATIONS_SCHEMA)

        return await ctx.chunked(checkpoints, 1, work, MITIGATION_GENERATIONS_SCHEMA, label="generate",
                                 concurrency=workers)


# --- benchmark ------------------------------------------------------------------------------------
def _benchmark_settings(spec: StudySpec, options: RunOptions) -> Any:
    m, models = spec.mitigation, spec.models
    assert m is not None
    return {"benchmarks": list(m.benchmarks), "limit": m.benchmark_limit, "max_tokens": m.benchmark_max_tokens,
            "target": spec.servers[models.target],  # type: ignore[index]
            "reference": spec.servers[models.reference] if models.reference else None,
            "unsafe": _audit(spec).spec.execute.unsafe_no_sandbox}


def _benchmark_prompts(ctx: StageContext) -> list[Any]:
    from calib.study.mitigation.benchmarks import MBPP_SHOTS, benchmark_prompts, protocol_of

    m = ctx.spec.mitigation
    assert m is not None
    out = []
    for source in m.benchmarks:
        if source == "organism:business":
            from calib.probes.organism_tasks import business_tasks

            tasks = business_tasks(ctx.resources.organism().truth, memberships=("member",))
        else:
            from calib.probes.tasks import load_tasks

            tasks = list(load_tasks(source))
        if m.benchmark_limit:
            tasks = tasks[:m.benchmark_limit + (MBPP_SHOTS if protocol_of(source) == "mbpp-3shot" else 0)]
        try:
            out += benchmark_prompts(source, tasks)
        except ValueError as exc:
            raise InputError(f"mitigation.benchmarks: {exc}") from None
    return out


async def _benchmark(ctx: StageContext) -> pl.DataFrame:
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    from calib.executors.sandbox import Sandbox
    from calib.probes.testrun import TestJob, run_many
    from calib.servers.messages import SamplingParams
    from calib.study.mitigation.benchmarks import passed_row, program_of

    m, models = ctx.spec.mitigation, ctx.spec.models
    assert m is not None
    if not m.benchmarks:
        return pl.DataFrame(schema=BENCHMARK_RESULTS_SCHEMA)
    prompts = _benchmark_prompts(ctx)
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(p.stop, []).append(i)
    points = [("target", models.target, None)] + ([("reference", models.reference, None)] if models.reference else [])
    points += [(r["point"], None, str(ctx.run.root / r["folder"])) for r in ctx.table("checkpoints").to_dicts()]
    threads = ctx.spec.servers[models.target].get("threads")  # type: ignore[index]
    sandbox = Sandbox(unsafe=_audit(ctx.spec).spec.execute.unsafe_no_sandbox)
    workers = max(1, os.cpu_count() or 1)
    loop = asyncio.get_running_loop()

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        async def answers(server: str | None, folder: str | None) -> list[str | None]:
            texts: list[str | None] = [None] * len(prompts)
            for stop, index in groups.items():
                asked = [prompts[i].prompt for i in index]
                if server is not None:
                    params = SamplingParams(max_tokens=m.benchmark_max_tokens, temperature=0.0, stop=stop)
                    outs = await _complete(ctx.resources.server(server), asked, params)
                    got = [None if o[0] is None else o[0].text for o in outs]
                else:
                    pairs, _ = await loop.run_in_executor(pool, _answers, folder, threads, asked,
                                                          m.benchmark_max_tokens, stop)
                    got = [None if o is None else o[0] for o in pairs]
                for i, text in zip(index, got):
                    texts[i] = text
            return texts

        async def work(chunk: list[tuple[str, str | None, str | None]]) -> pl.DataFrame:
            point, server, folder = chunk[0]
            texts = await answers(server, folder)
            programs = [program_of(p, t) if t is not None else (None, None) for p, t in zip(prompts, texts)]
            runnable = [i for i, (program, _) in enumerate(programs) if program is not None]
            runs = await run_many(sandbox, [TestJob(programs[i][0], prompts[i].task.tests,  # type: ignore[arg-type]
                                                    prompts[i].task.setup) for i in runnable], concurrency=workers)
            by_index = dict(zip(runnable, runs))
            rows = [passed_row(point, p, programs[i][0], by_index.get(i),
                               programs[i][1] if texts[i] is not None else None) for i, p in enumerate(prompts)]
            return pl.DataFrame(rows, schema=BENCHMARK_RESULTS_SCHEMA)

        return await ctx.chunked(points, 1, work, BENCHMARK_RESULTS_SCHEMA, label="benchmark", concurrency=1)


# --- measure --------------------------------------------------------------------------------------
def _measure_settings(spec: StudySpec, options: RunOptions) -> Any:
    audit = _audit(spec)
    return {"audit": audit.fingerprint, "execute": audit.spec.execute.settings(),
            "text_metric": audit.spec.analyze.text_metric, "seed": audit.spec.study.seed}


def _codes(audit: Audit, generations: pl.DataFrame) -> tuple[list[str], dict[str, dict[str, str | None]]]:
    """The points in order (target, reference, then each checkpoint) and point -> sample_id -> scored code."""
    signatures = dict(audit.tables["samples"].select("sample_id", "signature").iter_rows())
    codes: dict[str, dict[str, str | None]] = {"target": {}, "reference": {}}
    for r in audit.tables["generations"].iter_rows(named=True):
        if r["role"] in codes:
            codes[r["role"]][r["sample_id"]] = candidate_code(signatures[r["sample_id"]], r["function"], r["text"])
    for r in generations.iter_rows(named=True):
        codes.setdefault(r["point"], {})[r["sample_id"]] = candidate_code(signatures[r["sample_id"]], r["function"],
                                                                      r["text"])
    return list(codes), codes


async def _measure(ctx: StageContext) -> pl.DataFrame:
    from calib.metrics.base import MetricUnavailable, create_metric

    audit = _audit(ctx.spec)
    generations = ctx.table("mitigation_generations")
    points, codes = _codes(audit, generations)
    metric = create_metric(audit.spec.analyze.text_metric)
    executor = executor_for(audit.spec)
    memorized = {m.sample_id: m for m in audit.memorized()}
    sets = dict(generations.select("sample_id", "set").unique().iter_rows())
    items = [(sets[sid], sid) for sid in memorized if sid in sets]
    items += [("retain", sid) for sid in sorted(s for s, w in sets.items() if w == "retain")]
    language = dict(audit.tables["samples"].select("sample_id", "language").iter_rows())

    def text(reference: str | None, candidate: str | None, lang: str) -> float | None:
        if reference is None or candidate is None:
            return None
        try:
            return metric.score(reference, candidate, lang)
        except MetricUnavailable:
            return None

    async def work(chunk: list[tuple[str, str]]) -> pl.DataFrame:
        rows = []
        for which, sid in chunk:
            if which == "retain":
                target = codes["target"].get(sid)
                rows += [{"point": p, "sample_id": sid, "set": "retain", "verdict": None,
                          "text": text(target, codes[p].get(sid), language[sid]), "func": None, "conclusive": None}
                         for p in points]
                continue
            m = memorized[sid]
            present = [p for p in points if codes[p].get(sid) is not None]
            comparison = await executor(m.language).compare(m.function, [codes[p][sid] for p in present],
                                                            context=m.context)
            sims = {p: c.sim_func for p, c in zip(present, comparison.candidates)}
            rows += [{"point": p, "sample_id": sid, "set": which, "verdict": m.verdict,
                      "text": text(m.function, codes[p].get(sid), m.language),
                      "func": sims.get(p) if comparison.conclusive else None, "conclusive": comparison.conclusive}
                     for p in points]
        return pl.DataFrame(rows, schema=MITIGATION_SCORES_SCHEMA)

    return await ctx.chunked(items, _MEASURE_CHUNK, work, MITIGATION_SCORES_SCHEMA, label="measure")


# --- trajectory -----------------------------------------------------------------------------------
def _trajectory_settings(spec: StudySpec, options: RunOptions) -> Any:
    a = _audit(spec).spec.analyze
    return {"tau_text": a.tau_text, "tau_func": a.tau_func, "confidence": a.confidence}


async def _trajectory(ctx: StageContext) -> pl.DataFrame:
    from calib.study.mitigation.trajectory import trajectory

    a = _audit(ctx.spec).spec.analyze
    return trajectory(ctx.table("mitigation_scores"), ctx.table("checkpoints"), tau_text=a.tau_text,
                      tau_func=a.tau_func, confidence=a.confidence,
                      benchmarks=ctx.table("benchmark_results")).cast(TRAJECTORY_SCHEMA)


MITIGATION_STAGES = (
    Stage("pairs", (), "pairs", "1", _pairs_settings, _pairs),
    Stage("train", ("pairs",), "checkpoints", "1", _train_settings, _train),
    Stage("generate", ("checkpoints",), "mitigation_generations", "2", _generate_settings, _generate),
    Stage("measure", ("mitigation_generations",), "mitigation_scores", "2", _measure_settings, _measure),
    Stage("benchmark", ("checkpoints",), "benchmark_results", "1", _benchmark_settings, _benchmark),
    Stage("trajectory", ("mitigation_scores", "checkpoints", "benchmark_results"), "trajectory", "4",
          _trajectory_settings, _trajectory,
          offline=True),
    Stage("report", ("trajectory",), None, "1", lambda s, o: None, write_report_stage, report_done),
)
