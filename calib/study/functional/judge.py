"""The ``judge`` stage of a functional study with ``[data.judge]``: audit functions with meaningful logic only.

The functional-memorization paper (§4, "Data filtering") has an LLM judge rate functions drawn at random
until 5,000 pass, so that the audit studies code whose leak would matter rather than getters and
boilerplate. This stage does the same with :func:`calib.data.judge.judge_filter`: the extracted
functions are drawn in the order of a permutation seeded by ``study.seed`` and judged until
``data.limit`` pass (every function when the limit is 0); every verdict — severity 1-10, the judge's
reason, its raw answer, an unparsable answer or a failed request — is a row of the ``judgments`` table,
and the prompt stage keeps the functions that passed. The report's funnel states how many were judged,
how many passed and the severity labels (docs/study-spec.md "[data.judge]").
"""

from __future__ import annotations

import hashlib
from typing import Any

import polars as pl

from calib._exceptions import CalibError
from calib.study.requests import record_requests
from calib.study.runner import RunOptions, Stage, StageContext
from calib.study.spec import StudySpec

__all__ = ["JUDGE_STAGE", "JUDGMENTS_SCHEMA", "judge_wanted", "judged_functions"]

#: One row per judged function, in the order they were drawn (calib.data.judge.VERDICTS_SCHEMA by sample).
JUDGMENTS_SCHEMA: dict[str, pl.DataType] = {
    "order": pl.Int64(), "sample_id": pl.String(), "severity": pl.Int64(), "reason": pl.String(),
    "passed": pl.Boolean(), "error": pl.String(), "answer": pl.String()}


def judge_wanted(spec: StudySpec, options: RunOptions) -> int:
    """How many passing functions the judge draws for: ``--limit``, else ``data.limit``; 0 is every function."""
    return options.limit if options.limit is not None else spec.data.limit


def _prompt(spec: StudySpec) -> Any:
    from calib.data.judge import load_judge_prompt

    return load_judge_prompt(spec.data.judge.prompt if spec.data.judge is not None else None)


def _settings(spec: StudySpec, options: RunOptions) -> dict[str, Any]:
    judge = spec.data.judge
    assert judge is not None  # the stage exists only with [data.judge]
    prompt = _prompt(spec)
    template = hashlib.sha256(prompt.template.encode()).hexdigest()
    return {"judge": judge.model_dump(mode="json", exclude={"concurrency", "prompt"}),
            "server": spec.servers[judge.server],
            "prompt": {"name": prompt.name, "version": prompt.version, "sha256": template},
            "want": judge_wanted(spec, options), "seed": spec.study.seed}


async def _judge(ctx: StageContext) -> pl.DataFrame:
    from calib.data.judge import judge_filter

    judge = ctx.spec.data.judge
    assert judge is not None
    functions = ctx.table("functions")
    want = judge_wanted(ctx.spec, ctx.options) or functions.height
    prompt = _prompt(ctx.spec)
    table = functions.select(pl.col("sample_id").alias("function_id"), "language", "signature", "body")
    result = await judge_filter(ctx.resources.server(judge.server), table, want=want, seed=ctx.spec.study.seed,
                                threshold=judge.threshold, concurrency=judge.concurrency, prompt=prompt)
    record_requests(ctx, judge.server)
    verdicts = result.verdicts.rename({"function_id": "sample_id"}).select(list(JUDGMENTS_SCHEMA))
    passed, failed = int(verdicts["passed"].sum()), int(verdicts["error"].is_not_null().sum())
    ctx.resources.facts["judge"] = {"server": judge.server, "prompt": f"{prompt.name}.v{prompt.version}",
                                    "threshold": judge.threshold, "want": want}
    ctx.event("judged", judged=verdicts.height, passed=passed, want=want, unanswered=failed,
              exhausted=result.exhausted)
    return verdicts.cast(JUDGMENTS_SCHEMA)


def judged_functions(ctx: StageContext, functions: pl.DataFrame) -> pl.DataFrame:
    """The functions whose judgment passed, in the order they were drawn; none passing is an error naming why."""
    judge = ctx.spec.data.judge
    assert judge is not None
    judgments = ctx.table("judgments")
    passed = judgments.filter(pl.col("passed")).sort("order")["sample_id"]
    if passed.len() == 0:
        failed = int(judgments["error"].is_not_null().sum())
        raise CalibError(f"data.judge: none of the {judgments.height} judged functions reached severity "
                         f"{judge.threshold} ({failed} answers unparsable or failed; the judgments table has each "
                         "verdict); lower data.judge.threshold or check the judge server and prompt")
    order = pl.DataFrame({"sample_id": passed, "_drawn": range(passed.len())})
    return functions.join(order, on="sample_id", how="inner").sort("_drawn").drop("_drawn")


#: The judge stage (after extract; the prompt stage then reads the functions that passed).
JUDGE_STAGE = Stage("judge", ("functions",), "judgments", "1", _settings, _judge)
