"""The tables of a run directory (DESIGN.md "Run directory"): their schemas, declared once, here.

Every stage writes Parquet files under ``<run>/tables/`` with these columns; the report reads only
these tables plus ``spec.json`` (the resolved spec) and ``manifest.json`` (what ran: versions, servers,
counts, stage fingerprints). Ids are stable content hashes.
"""

from __future__ import annotations

import polars as pl

from calib.executors.base import EXECUTIONS_SCHEMA
from calib.metrics.base import SIMILARITIES_SCHEMA

__all__ = ["CLAIMS_SCHEMA", "EXECUTIONS_SCHEMA", "GENERATIONS_SCHEMA", "SAMPLES_SCHEMA", "SIMILARITIES_SCHEMA",
           "TABLES"]

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

#: Table name -> schema, in stage order.
TABLES: dict[str, dict[str, pl.DataType]] = {
    "samples": SAMPLES_SCHEMA,
    "generations": GENERATIONS_SCHEMA,
    "executions": EXECUTIONS_SCHEMA,
    "similarities": SIMILARITIES_SCHEMA,
    "claims": CLAIMS_SCHEMA,
}
