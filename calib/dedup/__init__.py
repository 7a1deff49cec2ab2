"""Near-duplicates of training data: textual (MinHash LSH) and semantic (embeddings), and their counts.

:func:`find_duplicates` lists every near-duplicate pair of audited functions in a training corpus;
:func:`duplicate_counts` counts them per function (docs/dedup.md). The building blocks live in
:mod:`calib.dedup.minhash` and :mod:`calib.dedup.semantic`.
"""

from calib.dedup.counts import (
    COUNTS_SCHEMA,
    DUPLICATES_SCHEMA,
    DedupConfig,
    afind_duplicates,
    duplicate_counts,
    find_duplicates,
)

__all__ = ["COUNTS_SCHEMA", "DUPLICATES_SCHEMA", "DedupConfig", "afind_duplicates", "duplicate_counts",
           "find_duplicates"]
