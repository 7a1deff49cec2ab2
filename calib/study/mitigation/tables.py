"""The ``mitigation`` study's tables (columns documented in docs/mitigation.md)."""

from __future__ import annotations

import polars as pl

from calib.mitigation.pairs import PAIRS_SCHEMA

__all__ = ["BENCHMARK_RESULTS_SCHEMA", "CHECKPOINTS_SCHEMA",
           "MITIGATION_GENERATIONS_SCHEMA", "MITIGATION_SCORES_SCHEMA", "MITIGATION_TABLES",
           "PAIRS_SCHEMA", "TRAJECTORY_SCHEMA"]

CHECKPOINTS_SCHEMA: dict[str, pl.DataType] = {
    "method": pl.String(),  # npo | dpo-ref | dpo-target | dpo-rewrite
    "epoch": pl.Int64(),
    "point": pl.String(),  # METHOD@EPOCH: the checkpoint's name in the other tables
    "folder": pl.String(),  # the checkpoint folder, relative to the run directory (checkpoints/METHOD/epoch-K)
    "pairs": pl.Int64(),  # pairs trained on
    "left_out": pl.Int64(),  # DPO: pairs without a preferred completion, left out
    "learning_rate": pl.Float64(),
    "loss": pl.Float64(),  # the epoch's mean loss
    "pairs_fingerprint": pl.String(),
}

MITIGATION_GENERATIONS_SCHEMA: dict[str, pl.DataType] = {
    "point": pl.String(),
    "sample_id": pl.String(),
    "set": pl.String(),  # memorized (forget) | heldout (memorized, kept out of post-training) | retain
    "text": pl.String(),  # the greedy completion
    "function": pl.String(),  # the completed function (parse-back); null when it does not parse
    "finish_reason": pl.String(),
    "error": pl.String(),  # why there is no completion (request failed); null otherwise
}

MITIGATION_SCORES_SCHEMA: dict[str, pl.DataType] = {
    "point": pl.String(),  # target | reference | METHOD@EPOCH
    "sample_id": pl.String(),
    "set": pl.String(),  # memorized | heldout | retain
    "verdict": pl.String(),  # memorized, heldout: the audit's verdict (textual | functional); retain: null
    "text": pl.Float64(),  # memorized, heldout: SIM_text(x, completion); retain: SIM_text(target's, completion)
    "func": pl.Float64(),  # SIM_func(x, completion), null when x's execution is inconclusive; retain: null
    "conclusive": pl.Boolean(),  # x's execution met the validity criteria; retain: null
}

BENCHMARK_RESULTS_SCHEMA: dict[str, pl.DataType] = {
    "point": pl.String(),  # target | reference | METHOD@EPOCH
    "benchmark": pl.String(),  # the source named in mitigation.benchmarks
    "task_id": pl.String(),
    "program": pl.String(),  # what ran on the tests (preamble + completed function, or MBPP's code); null: none
    # the test run's status (ok, syntax, program_error, timeout, died, ...; calib.probes.testrun), the reason there
    # is no program ("no function: ...", "no definition of f", ...), or no_completion (the request failed)
    "status": pl.String(),
    "passed": pl.Boolean(),  # every test passed; null when there is no completion (unscored)
    "tests_passed": pl.Int64(),
    "tests_total": pl.Int64(),
}

TRAJECTORY_SCHEMA: dict[str, pl.DataType] = {
    "point": pl.String(),
    "method": pl.String(),  # target | reference | a method
    "epoch": pl.Int64(),  # 0 for the target and the reference
    "n": pl.Int64(),  # memorized functions scored (the point's completion came back)
    "unscored": pl.Int64(),  # memorized functions without the point's completion (a failed request)
    "textual": pl.Int64(),  # completions with SIM_text >= tau_text
    "functional": pl.Int64(),  # conclusive functions with SIM_func >= tau_func
    "n_conclusive": pl.Int64(),
    "memorized": pl.Int64(),  # still counterfactually memorized (the audit's rule against the reference)
    "memorized_rate": pl.Float64(),
    "memorized_low": pl.Float64(),  # Clopper-Pearson interval at analyze.confidence
    "memorized_high": pl.Float64(),
    "mean_text": pl.Float64(),  # mean SIM_text over the textually memorized functions
    "mean_func": pl.Float64(),  # mean SIM_func over the functionally memorized, conclusive functions
    "memorization": pl.Float64(),  # the paper's axis: mean_text and mean_func weighted by their counts
    "retain_agreement": pl.Float64(),  # mean SIM_text against the target's completions of the retain prompts
    "retain_utility": pl.Float64(),  # retain agreement normalized by the target's
    "benchmark_n": pl.Int64(),  # held-out tasks scored (x conclusive, the completion came back); null: no holdout
    "benchmark_passed": pl.Int64(),  # tasks whose completion's output equals x's on every input state
    "pass_at_1": pl.Float64(),  # benchmark_passed / benchmark_n (greedy: pass@1)
    "pass_low": pl.Float64(),  # Clopper-Pearson interval at analyze.confidence
    "pass_high": pl.Float64(),
    "benchmark_utility": pl.Float64(),  # pass@1 normalized by the target's
    # JSON: benchmark -> {n, passed, pass_at_1, low, high, utility} for each of mitigation.benchmarks
    "benchmarks": pl.String(),
    "utility": pl.Float64(),  # aggregate: the mean of the normalized measures (1 for the target)
}

MITIGATION_TABLES: dict[str, dict[str, pl.DataType]] = {
    "pairs": PAIRS_SCHEMA,
    "checkpoints": CHECKPOINTS_SCHEMA,
    "benchmark_results": BENCHMARK_RESULTS_SCHEMA,
    "mitigation_generations": MITIGATION_GENERATIONS_SCHEMA,
    "mitigation_scores": MITIGATION_SCORES_SCHEMA,
    "trajectory": TRAJECTORY_SCHEMA,
}
