"""The ``functional`` study's measure and analyze stages: similarities to x, then each sample's verdict."""

from __future__ import annotations

from typing import Any

import polars as pl

from calib.study.functional.execute import candidates
from calib.study.requests import record_requests
from calib.study.resources import ROLES
from calib.study.runner import RunOptions, Stage, StageContext
from calib.study.sections.functional import SERVER_SUFFIX
from calib.study.spec import StudySpec
from calib.study.tables import CLAIMS_SCHEMA

__all__ = ["analyze_stage", "measure_stage"]


# --- measure ------------------------------------------------------------------------------------
def _measure_settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    """The measure stage's fingerprint: ``[measure]`` and the tables of its servers.

    The first judge and embedding server are keyed ``judge`` and ``embedding`` as when a spec could name only
    one (a one-server spec keeps its fingerprint: its similarities are not recomputed); each further server
    is keyed ``judge@NAME`` / ``embedding@NAME``.
    """
    m = spec.measure
    servers: dict[str, Any] = {}
    for role, names in (("judge", m.judge_servers), ("embedding", m.embedding_servers)):
        for i, name in enumerate(names):
            servers[role if i == 0 else f"{role}{SERVER_SUFFIX}{name}"] = spec.servers[name]
    return {"measure": m.model_dump(mode="json", exclude={"workers"}), "servers": servers}


def _metric(ctx: StageContext, name: str, metric: str, server: str | None) -> Any:
    """The metric ``metric`` on ``server`` (a judge's chat server, an embedding server), recorded as ``name``."""
    from calib.metrics import create_metric
    from calib.servers import ChatParams

    m = ctx.spec.measure
    options: dict[str, Any] = {}
    if metric.startswith("judge_"):
        options = {"server": ctx.resources.server(server),
                   "params": ChatParams(max_tokens=m.judge_max_tokens, temperature=0.0, seed=ctx.spec.study.seed)}
    elif metric == "embedding" and server is not None:
        options = {"server": ctx.resources.server(server)}
    made = create_metric(metric, **options)
    if name != metric:  # a further server's metric: its own name in the table, the fingerprint and the cache key
        made.name = name
    return made


async def _measure(ctx: StageContext) -> pl.DataFrame:
    from calib.metrics.run import acompute_similarities
    from calib.servers import RequestCache

    m = ctx.spec.measure
    samples = ctx.table("samples")
    by_role = candidates(samples, ctx.table("generations"))
    rows = [{"sample_id": s["sample_id"], "role": role, "reference": s["function"],
             "candidate": by_role[role].get(s["sample_id"]), "language": s["language"]}
            for s in samples.iter_rows(named=True) for role in ROLES]
    pairs = pl.DataFrame(rows, schema={"sample_id": pl.String(), "role": pl.String(), "reference": pl.String(),
                                       "candidate": pl.String(), "language": pl.String()})
    metrics = [_metric(ctx, name, metric, server) for name, metric, server in m.measured()]
    task = ctx._progress.add("measure", pairs.height) if ctx._progress is not None else None

    def progress(group: str, done: int, total: int) -> None:
        if task is not None:
            ctx._progress.bar.update(task, completed=min(done, pairs.height))

    runner = ctx.runner  # the Ray runner scores the CPU-bound metrics' chunks on its cluster
    with RequestCache(ctx.run.cache_path) as cache:
        table = await acompute_similarities(pairs, metrics, cache=cache, workers=m.workers or ctx.options.jobs,
                                            progress=progress, pool=runner.starmap if runner is not None else None)
    if runner is not None and runner.where:
        ctx.event("remote_chunks", chunks=len(runner.where), where=runner.where)
        runner.where.clear()
    for server in dict.fromkeys(server for _, _, server in m.measured() if server is not None):
        record_requests(ctx, server)  # each judge and embedding server's requests and tokens, apart
    return table


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



measure_stage = Stage("measure", ("samples", "generations"), "similarities", "2", _measure_settings, _measure)
analyze_stage = Stage("analyze", ("samples", "similarities", "executions"), "claims", "1", _analyze_settings, _analyze)
