"""The tables of a ``probes`` study (scale-aware diagnostics; docs/probes.md documents every column).

Stage order: tasks → prompts → probe_generations → test_results → pass_at_k → model_pairs → opcodes →
codec → codec_scores. Conditions are named by a **label**: the condition itself (``original``,
``syn20``, ``syn40``, ``dead_code``) or, for the isomorphisms, ``CONDITION:FAMILY`` (``iso:affine``,
``iso_dec:base``).
"""

from __future__ import annotations

import polars as pl

__all__ = ["CODEC_SCHEMA", "CODEC_SCORES_SCHEMA", "MODEL_PAIRS_SCHEMA", "OPCODES_SCHEMA", "PASS_AT_K_SCHEMA",
           "PROBES_TABLES", "PROBE_GENERATIONS_SCHEMA", "PROBE_PROMPTS_SCHEMA", "PROBE_TASKS_SCHEMA",
           "TEST_RESULTS_SCHEMA"]

#: One row per task (a problem with a reference solution and tests).
PROBE_TASKS_SCHEMA: dict[str, pl.DataType] = {
    "task_id": pl.String(),
    "source": pl.String(),  # the task file, mbpp@<revision>, or organism:business
    "entry_point": pl.String(),  # the function the tests call
    "statement": pl.String(),  # the natural-language task
    "code": pl.String(),  # the reference solution
    "tests": pl.List(pl.String()),  # assert statements
    "setup": pl.String(),  # imports run before the tests
    "reference_status": pl.String(),  # the sandbox run of the reference on its tests: ok | syntax | ...
    "reference_passed": pl.Boolean(),  # the reference passes every test (else the task is left out)
}

#: One row per (task, condition label): the prompt the models see and the tests a generation must pass.
PROBE_PROMPTS_SCHEMA: dict[str, pl.DataType] = {
    "prompt_id": pl.String(),  # hash of (task, label, prompt text, tests)
    "task_id": pl.String(),
    "label": pl.String(),  # original | syn20 | syn40 | dead_code | iso:FAMILY | iso_enc:FAMILY | iso_dec:FAMILY
    "condition": pl.String(),
    "family": pl.String(),  # affine | base | cubic for the isomorphisms; null otherwise
    "applicable": pl.Boolean(),  # false: the condition cannot be built for this task (see reason)
    "reason": pl.String(),
    "prompt": pl.String(),
    "tests": pl.List(pl.String()),  # the tests shown and checked (rewritten through T for the isomorphisms)
    "setup": pl.String(),
    "entry_point": pl.String(),
    "prompt_tokens": pl.Int64(),  # tokens of the prompt (the first model's tokenizer, else words)
    "added_tokens": pl.Int64(),  # prompt_tokens minus the original prompt's
    "replaced": pl.Int64(),  # synonym fuzzing: words replaced
    "eligible": pl.Int64(),  # synonym fuzzing: words that could be replaced
    "values_mapped": pl.Int64(),  # isomorphisms: integers the bijection rewrote in the tests
    "reference_passed": pl.Boolean(),  # the known-correct solution of this condition passes these tests
    "original_passes": pl.Boolean(),  # isomorphisms: the untransformed reference passes them too (f commutes
    # with T on these tests: the prompt cannot tell a model that follows the contract from one that ignores it)
}

#: One row per (prompt, model, sample index): a completion and the program taken from it.
PROBE_GENERATIONS_SCHEMA: dict[str, pl.DataType] = {
    "prompt_id": pl.String(),
    "task_id": pl.String(),
    "label": pl.String(),
    "model": pl.String(),  # the server's name in the spec ([servers.NAME])
    "model_name": pl.String(),  # the model the server reports
    "sample_index": pl.Int64(),  # 0 .. n-1
    "text": pl.String(),  # the raw completion (null when the request failed)
    "program": pl.String(),  # the code run against the tests (null when none could be taken)
    "finish_reason": pl.String(),  # "length": the completion was cut at max_tokens (truncated)
    "error": pl.String(),  # why there is no program (request failed, no code found); null otherwise
    "max_tokens": pl.Int64(),  # the budget asked: the same for every condition of the problem (null: overflow)
    "missing": pl.String(),  # request_failed | overflow: no generation (left out of pass@k); null when completed
}

#: One row per generation: its tests run in the sandbox.
TEST_RESULTS_SCHEMA: dict[str, pl.DataType] = {
    "prompt_id": pl.String(),
    "task_id": pl.String(),
    "label": pl.String(),
    "model": pl.String(),
    "sample_index": pl.Int64(),
    "status": pl.String(),  # ok | syntax | program_error | timeout | died | no_program | ...; missing
    # generations: request_failed | overflow (passed and tests_passed null, never counted as failures)
    "passed": pl.Boolean(),  # every test passed
    "tests_passed": pl.Int64(),
    "tests_total": pl.Int64(),
    "errors": pl.List(pl.String()),  # per test: null (passed) or the error (AssertionError, timeout, ...)
    "seconds": pl.Float64(),
}

#: One row per (model, label, k): pass@k over the tasks the condition applies to.
PASS_AT_K_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "label": pl.String(),
    "condition": pl.String(),
    "family": pl.String(),
    "k": pl.Int64(),
    "n_problems": pl.Int64(),
    "estimate": pl.Float64(),  # mean unbiased pass@k (Chen et al. 2021, eq. 1)
    "low": pl.Float64(),  # percentile bootstrap over problems
    "high": pl.Float64(),
    "original": pl.Float64(),  # pass@k of original on the same problems
    "difference": pl.Float64(),  # estimate − original (paired over problems)
    "difference_low": pl.Float64(),
    "difference_high": pl.Float64(),
    "relative_change": pl.Float64(),  # difference / original; null when original is 0
    "confidence": pl.Float64(),
    "n_resamples": pl.Int64(),
    "generations_missing": pl.Int64(),  # this label's generations missing (request failed or overflow)
    "problems_missing": pl.Int64(),  # problems with fewer than k completed generations (no pass@k cell)
    "dropped_failed": pl.Int64(),  # problems dropped from the comparison with original: a missing cell
    "dropped_overflow": pl.Int64(),  # in either condition, by a failed request / an overflow
}

#: One row per (label, k, pair of models): the paired difference on the same problems.
MODEL_PAIRS_SCHEMA: dict[str, pl.DataType] = {
    "label": pl.String(),
    "k": pl.Int64(),
    "model_a": pl.String(),  # the earlier model of the panel
    "model_b": pl.String(),
    "n_problems": pl.Int64(),
    "estimate_a": pl.Float64(),
    "estimate_b": pl.Float64(),
    "difference": pl.Float64(),  # estimate_b − estimate_a
    "low": pl.Float64(),
    "high": pl.Float64(),
    "dropped_failed": pl.Int64(),  # problems dropped from this comparison: a missing cell for either model,
    "dropped_overflow": pl.Int64(),  # by a failed request / an overflow
}

#: One row per (model, task, label): opcode profiles pooled over the generations, and JSD from original.
OPCODES_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "task_id": pl.String(),
    "label": pl.String(),
    "programs": pl.Int64(),  # programs that compiled
    "passing": pl.Int64(),  # of those, programs that passed every test
    "histogram": pl.String(),  # JSON opcode -> count, pooled over the programs
    "passing_histogram": pl.String(),  # the same over passing programs; null when none passed
    "entropy": pl.Float64(),  # bits
    "passing_entropy": pl.Float64(),
    "jsd": pl.Float64(),  # Jensen–Shannon divergence (bits) from original, same model and task
    "passing_jsd": pl.Float64(),  # over passing programs of both conditions
}

#: One row per (model, codec dataset, sample): log-likelihood without and with in-context examples.
CODEC_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "dataset": pl.String(),
    "seen": pl.Boolean(),
    "sample_id": pl.String(),
    "tokens": pl.Int64(),
    "ll_without": pl.Float64(),  # mean per-token log-prob (natural log)
    "ll_with": pl.Float64(),
    "delta": pl.Float64(),  # ll_with − ll_without
    "context_ids": pl.List(pl.String()),
    "error": pl.String(),
}

#: One row per (model, codec dataset): the contamination score and the model's seen/unseen AUC.
CODEC_SCORES_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "dataset": pl.String(),
    "seen": pl.Boolean(),
    "n": pl.Int64(),
    "decreased": pl.Int64(),  # samples whose log-likelihood fell with context
    "score": pl.Float64(),  # decreased / n
    "low": pl.Float64(),  # Clopper–Pearson
    "high": pl.Float64(),
    "mean_delta": pl.Float64(),
    "auc": pl.Float64(),  # the model's AUC of seen vs unseen dataset scores (ties count one half)
}

#: The probes study's tables, in stage order.
PROBES_TABLES: dict[str, dict[str, pl.DataType]] = {
    "tasks": PROBE_TASKS_SCHEMA,
    "prompts": PROBE_PROMPTS_SCHEMA,
    "probe_generations": PROBE_GENERATIONS_SCHEMA,
    "test_results": TEST_RESULTS_SCHEMA,
    "pass_at_k": PASS_AT_K_SCHEMA,
    "model_pairs": MODEL_PAIRS_SCHEMA,
    "opcodes": OPCODES_SCHEMA,
    "codec": CODEC_SCHEMA,
    "codec_scores": CODEC_SCORES_SCHEMA,
}
