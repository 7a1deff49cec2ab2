"""The tables of a run directory (docs/architecture.md "Run directory"): their schemas, declared once, here.

Every stage writes Parquet files under ``<run>/tables/`` with these columns; the report reads only
these tables plus ``spec.json`` (the resolved spec) and ``manifest.json`` (what ran: versions, servers,
counts, stage fingerprints). Ids are stable content hashes.
"""

from __future__ import annotations

import polars as pl

from calib.dedup.counts import DUPLICATES_SCHEMA
from calib.executors.base import EXECUTIONS_SCHEMA
from calib.metrics.base import SIMILARITIES_SCHEMA

__all__ = ["BUDGETS_SCHEMA", "CENSUS_SCHEMA", "CLAIMS_SCHEMA", "CONTROL_SCREEN_SCHEMA", "EXECUTIONS_SCHEMA",
           "EXTRACTION_CLAIMS_SCHEMA", "EXTRACTION_TABLES", "CENSUS_TABLES", "GENERATIONS_SCHEMA",
           "OPERATING_POINTS_SCHEMA", "PAIRED_SCHEMA",
           "SAMPLES_SCHEMA", "SCORES_SCHEMA", "SIMILARITIES_SCHEMA", "TABLES", "WINDOWS_SCHEMA",
           "tables_of"]

#: One row per audited function x.
SAMPLES_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String(),  # stable content hash
    "language": pl.String(),  # python | c | cpp | java | rust | go
    "membership": pl.String(),  # member (in the target's training data) | control
    "kind": pl.String(),  # organism: verbatim | business_rule | near_duplicate; corpus: null
    "source": pl.String(),  # where x came from (file path, table row, stdlib:<path>::<qualname>)
    "context": pl.String(),  # the code before x in its file (the prompt keeps its last tokens)
    "signature": pl.String(),  # x's signature line(s), no trailing newline
    "body": pl.String(),  # x's body
    "function": pl.String(),  # x itself: what generations are compared with (signature + body)
    "prompt": pl.String(),  # what both models are prompted with: context tail + signature
    "prompt_context_tokens": pl.Int64(),  # context tokens kept in the prompt (target server's tokenizer)
}

#: One row per (sample, role): a model's greedy completion of the sample's prompt.
GENERATIONS_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String(),
    "role": pl.String(),  # target | reference
    "model": pl.String(),  # the server's model name
    "params_hash": pl.String(),  # sha256 of the sampling parameters (16 hex digits)
    "text": pl.String(),  # the raw completion
    "function": pl.String(),  # the completed function (signature + completion cut where it ends); null if none
    "finish_reason": pl.String(),  # stop | length | ...
    "error": pl.String(),  # why there is no function (request failed, unparsable); null otherwise
    "reply": pl.String(),  # the chat route: the reply as the host sent it (text is read back from it); else null
}

#: One row per sample: the per-sample verdicts the report counts (functional-memorization paper §3).
CLAIMS_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String(),
    "membership": pl.String(),
    "kind": pl.String(),
    "text_target": pl.Float64(),  # SIM_text(x, x_T) (the text metric, BLEU by default); null: no generation
    "text_reference": pl.Float64(),  # SIM_text(x, x_R)
    "func_target": pl.Float64(),  # SIM_func(x, x_T); null when inconclusive or no generation
    "func_reference": pl.Float64(),  # SIM_func(x, x_R)
    "conclusive": pl.Boolean(),  # the execution of x met the validity criteria
    "reason": pl.String(),  # why the sample is inconclusive or unscored; null otherwise
    "textual_target": pl.Boolean(),  # text_target >= tau_text
    "textual_reference": pl.Boolean(),  # text_reference >= tau_text
    "functional_target": pl.Boolean(),  # func_target >= tau_func (null when inconclusive)
    "functional_reference": pl.Boolean(),  # func_reference >= tau_func (null when inconclusive)
    "textually_memorized": pl.Boolean(),  # textual_target and not textual_reference
    "functionally_memorized": pl.Boolean(),  # functional_target, not functional_reference, not textual_target
    "verdict": pl.String(),  # textual | functional | none | inconclusive | unscored
}

#: The executions table as the functional study writes it: the executor's columns (:data:`EXECUTIONS_SCHEMA`)
#: and the cost of each sample's comparison (functional-memorization paper, Table 1). One comparison runs x
#: and both candidates, so these four are per sample, the same on each of its rows.
EXECUTIONS_TABLE_SCHEMA: dict[str, pl.DataType] = {
    **EXECUTIONS_SCHEMA,
    "runs": pl.Int64(),  # executions the executor ran for the sample (x and candidates); null when not executed
    "input_tokens": pl.Int64(),  # llm/agent: input tokens of the executor's chat requests; null: sandbox, native
    "output_tokens": pl.Int64(),  # llm/agent: output tokens of the executor's chat requests; null: sandbox, native
}

#: The duplicates table of a functional study with ``[dedup]``: the near-duplicate pairs
#: (calib/dedup/counts.py :data:`DUPLICATES_SCHEMA`) and what the report shows of each corpus document.
DUPLICATES_TABLE_SCHEMA: dict[str, pl.DataType] = {
    **DUPLICATES_SCHEMA,
    "corpus_source": pl.String(),  # where the document came from (file path, organism document id)
    "corpus_text": pl.String(),  # the document's text, cut to its first 2,000 characters
}

#: Table name -> schema, in stage order.
TABLES: dict[str, dict[str, pl.DataType]] = {
    "samples": SAMPLES_SCHEMA,
    "generations": GENERATIONS_SCHEMA,
    "executions": EXECUTIONS_TABLE_SCHEMA,
    "similarities": SIMILARITIES_SCHEMA,
    "claims": CLAIMS_SCHEMA,
}


# --- extraction and census studies (docs/architecture.md "The three methods" 2, "Statistics") -----------------
#: One row per (sample, suffix length, window): a prefix of prefix_tokens tokens and the suffix of
#: suffix_tokens tokens that follows it, cut with the target server's tokenizer. A sample too short for
#: any window, or whose cut does not round-trip through the tokenizer, gets one row with ``error`` set
#: and nulls in the window columns.
WINDOWS_SCHEMA: dict[str, pl.DataType] = {
    "window_id": pl.String(),  # stable content hash of (sample_id, prefix_tokens, suffix_tokens, start_token)
    "sample_id": pl.String(),
    "membership": pl.String(),  # member | control; census: candidate (the audited document) | control
    "kind": pl.String(),  # the sample's kind (organism: verbatim | ... | extra_control), or null
    "document": pl.String(),  # census: the pair's name; extraction: null
    "prefix_tokens": pl.Int64(),  # ℓ_p
    "suffix_tokens": pl.Int64(),  # ℓ_s
    "start_token": pl.Int64(),  # token offset of the prefix in the sample's text
    "char_start": pl.Int64(),  # character offset of the suffix in the sample's text (half-open range)
    "char_end": pl.Int64(),
    "prefix": pl.String(),  # the prompt (detokenized prefix)
    "suffix": pl.String(),  # the continuation scored (detokenized suffix)
    "error": pl.String(),  # why the sample has no window; null for a window
}

#: One row per (window, role, procedure): how readily the procedure generates the suffix after the prefix.
SCORES_SCHEMA: dict[str, pl.DataType] = {
    "window_id": pl.String(),
    "sample_id": pl.String(),
    "role": pl.String(),  # target | reference
    "model": pl.String(),
    "procedure": pl.String(),  # greedy | top_k | base | base_t<T> | near_verbatim_greedy | near_verbatim
    "suffix_tokens": pl.Int64(),
    "value": pl.Float64(),  # probability (or 0/1 for greedy scores); 0 where it underflows a double
    "log10_value": pl.Float64(),  # log10 of the score, exact below 1e-308; -inf for 0; null when unscored
    "detail": pl.String(),  # JSON: near-verbatim edit distance and generation, n_tokens; null otherwise
    "error": pl.String(),  # why the window is unscored (request failed, ...); null otherwise
}

#: One row per (role, procedure, suffix length, control pool, target level α): the conformal test's
#: operating point (calib.stats.sweep) and the calibrated memorization rate of the members there.
OPERATING_POINTS_SCHEMA: dict[str, pl.DataType] = {
    "role": pl.String(),
    "model": pl.String(),
    "procedure": pl.String(),
    "suffix_tokens": pl.Int64(),
    "pool": pl.String(),  # all | decontaminated (the controls the decontaminate list and the control screen leave)
    "n_controls": pl.Int64(),  # N
    "alpha_dagger": pl.Float64(),  # α† of the control scores (1 when no atom)
    "alpha": pl.Float64(),  # the target level
    "k": pl.Int64(),  # K = floor(α(N+1))
    "certified_alpha": pl.Float64(),  # α_N = K/(N+1)
    "log10_threshold": pl.Float64(),  # log10 τ; null when K = 0; -inf when τ is a zero score
    "in_sample_fpr": pl.Float64(),  # #{controls > τ}/N (descriptive)
    "certifiable": pl.Boolean(),
    "at_atom": pl.Boolean(),
    "fpr_low": pl.Float64(),  # central interval of the Beta law of the realized FPR
    "fpr_high": pl.Float64(),
    "fpr_upper": pl.Float64(),  # one-sided upper quantile at the study's confidence
    "prob_exceeds_certified": pl.Float64(),  # P(α* > α_N)
    "n_members": pl.Int64(),
    "claims": pl.Int64(),  # members scoring > τ
    "member_rate": pl.Float64(),
    "calibrated_rate": pl.Float64(),  # member_rate − α_N
    "low": pl.Float64(),  # member Clopper–Pearson interval shifted down by α_N
    "high": pl.Float64(),
}

#: One row per (window, role, procedure) of the members and controls: the p-value, margin and claim at
#: the study's primary level ``analyze.alpha`` (full control pool unless decontaminated), and the
#: candidate-set multiple-testing statements.
EXTRACTION_CLAIMS_SCHEMA: dict[str, pl.DataType] = {
    "window_id": pl.String(),
    "sample_id": pl.String(),
    "membership": pl.String(),
    "kind": pl.String(),
    "role": pl.String(),
    "procedure": pl.String(),
    "suffix_tokens": pl.Int64(),
    "log10_value": pl.Float64(),
    "p_value": pl.Float64(),  # (1 + #{controls >= s})/(N + 1); for controls, against the other controls
    "margin": pl.Float64(),  # log10(score / τ) at analyze.alpha; null when no threshold or a binary score
    "claim": pl.Boolean(),  # score > τ at analyze.alpha (null when K = 0)
    "bh": pl.Boolean(),  # rejected by Benjamini–Hochberg at analyze.fdr over the members (null: controls)
    "bonferroni": pl.Boolean(),  # p <= analyze.fwer / m over the m members (null: controls)
    "contaminated": pl.Boolean(),  # a control the decontaminate list or the control screen removes
}

#: One row per (role, probabilistic procedure, suffix length, budget n): generation within n queries.
BUDGETS_SCHEMA: dict[str, pl.DataType] = {
    "role": pl.String(),
    "procedure": pl.String(),
    "suffix_tokens": pl.Int64(),
    "budget": pl.Float64(),  # n queries (a float: budgets reach 1e21)
    "confidence": pl.Float64(),  # c: generated at least once in n queries with probability >= c
    "log10_min_probability": pl.Float64(),  # log10 of the smallest p with 1 − (1 − p)^n >= c
    "n_members": pl.Int64(),
    "members_generated": pl.Int64(),  # members with p >= that probability
    "n_controls": pl.Int64(),
    "controls_generated": pl.Int64(),
    "members_extractable": pl.Int64(),  # members claimed at analyze.alpha and generated within n
    "member_rate": pl.Float64(),
    "control_rate": pl.Float64(),
    "extractable_rate": pl.Float64(),
}

#: One row per (procedure, suffix length, α): target vs reference claims on the same members.
PAIRED_SCHEMA: dict[str, pl.DataType] = {
    "procedure": pl.String(),
    "suffix_tokens": pl.Int64(),
    "alpha": pl.Float64(),
    "certified_alpha_target": pl.Float64(),
    "certified_alpha_reference": pl.Float64(),
    "n": pl.Int64(),  # members scored by both models
    "both": pl.Int64(),
    "target_only": pl.Int64(),
    "reference_only": pl.Int64(),
    "neither": pl.Int64(),
    "difference": pl.Float64(),  # target claim rate − reference claim rate
    "low": pl.Float64(),  # Newcombe (1998) method 10 paired interval
    "high": pl.Float64(),
}

#: One row per (census pair, role, procedure): the census of the document against its matched control.
CENSUS_SCHEMA: dict[str, pl.DataType] = {
    "document": pl.String(),  # the pair's name
    "role": pl.String(),
    "procedure": pl.String(),
    "suffix_tokens": pl.Int64(),
    "document_length": pl.Int64(),  # characters
    "n_windows": pl.Int64(),
    "n_control_windows": pl.Int64(),  # after decontamination
    "removed_control_windows": pl.Int64(),  # windows the decontaminate list removed
    "log10_threshold": pl.Int64(),  # threshold exponent; null when every control window scores 0
    "max_control_score_log10": pl.Float64(),
    "windows_above": pl.Int64(),
    "covered_characters": pl.Int64(),
    "coverage": pl.Float64(),
    "max_margin": pl.Float64(),
    "budget": pl.Float64(),
    "budget_confidence": pl.Float64(),
    "min_log10_score_within_budget": pl.Float64(),
    "windows_within_budget": pl.Int64(),
    "coverage_within_budget": pl.Float64(),
    # the shared τ_global of (role, procedure): every pair's decontaminated control windows pooled (§5)
    "log10_threshold_global": pl.Int64(),  # exponent of τ_global; null when no pooled control window scores > 0
    "n_control_windows_global": pl.Int64(),  # distinct control windows in the pool
    "windows_above_global": pl.Int64(),
    "covered_characters_global": pl.Int64(),
    "coverage_global": pl.Float64(),
    # deterministic recovery (App. F.4): the role's greedy generations (the near_verbatim scores' detail)
    "recovery_windows": pl.Int64(),  # document windows with a greedy generation; null without near_verbatim
    "recovered_verbatim": pl.Int64(),  # windows whose greedy generation reproduces the suffix (0 token edits)
    "recovered_near_verbatim": pl.Int64(),  # within extraction.epsilon token edits
    "recovery_coverage_verbatim": pl.Float64(),
    "recovery_coverage_near_verbatim": pl.Float64(),
    "recovery_coverage_beyond_budget": pl.Float64(),  # near-verbatim recovered, above τ, p below the budget's
    "error": pl.String(),  # why there is no census (no windows, no threshold); null otherwise
}

#: One row per control sample of an extraction study with ``[extraction.screen]`` (the ``screen`` stage; an optional
#: table, like the functional study's ``duplicates``): the control against every member sample and, when the
#: screen has a ``source``, every training-corpus document (extraction paper App. D.2, E.1). Document keys are
#: ``member:<sample_id>`` or ``corpus:<document id>``.
CONTROL_SCREEN_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String(),  # the control
    "source": pl.String(),  # where the control came from
    "ngrams": pl.Int64(),  # distinct token n-grams of the control (screen.ngram_tokens tokens; 1 for a shorter text)
    "overlap": pl.Float64(),  # largest share of those n-grams found in one screened document (0: none found)
    "overlap_match": pl.String(),  # that document; null when no n-gram is found anywhere
    "jaccard": pl.Float64(),  # exact Jaccard of shingle sets with jaccard_match (0 when there is no match)
    "jaccard_match": pl.String(),  # best MinHash LSH match verified at screen.jaccard, else overlap_match
    "minhash_jaccard": pl.Float64(),  # datasketch's MinHash estimate of that Jaccard (screen.num_perm permutations)
    "flagged": pl.Boolean(),  # overlap >= screen.overlap or jaccard >= screen.jaccard: removed from the screened pool
    "reason": pl.String(),  # why flagged (the test, its value and threshold, the document); null otherwise
}

#: The extraction study's tables, in stage order.
EXTRACTION_TABLES: dict[str, dict[str, pl.DataType]] = {
    "samples": SAMPLES_SCHEMA,
    "windows": WINDOWS_SCHEMA,
    "scores": SCORES_SCHEMA,
    "operating_points": OPERATING_POINTS_SCHEMA,
    "extraction_claims": EXTRACTION_CLAIMS_SCHEMA,
    "budgets": BUDGETS_SCHEMA,
    "paired": PAIRED_SCHEMA,
}

#: The census study's tables, in stage order.
CENSUS_TABLES: dict[str, dict[str, pl.DataType]] = {
    "samples": SAMPLES_SCHEMA,
    "windows": WINDOWS_SCHEMA,
    "scores": SCORES_SCHEMA,
    "census": CENSUS_SCHEMA,
}


def tables_of(kind: str) -> dict[str, dict[str, pl.DataType]]:
    """The tables a study kind writes (name -> schema), in stage order (the kind's :class:`StudyKind` says)."""
    from calib.study.kinds import study_kind

    return study_kind(kind).tables()
