"""The model organism: tiny target/reference code models whose members are known by construction.

This package holds the organism's world (issue 4): the standard-library background corpus and its
split (``corpus.py``), the synthetic business-rule functions (``business.py``) and the planted members
with their matched controls and the ground-truth table (``planted.py``).
"""

from calib.organism.business import FORMS, TEMPLATES, BusinessRule, Template, generate_rules, probe_inputs, render
from calib.organism.corpus import (
    CorpusSplit,
    Function,
    NearCopyIndex,
    corpus_fingerprint,
    extract_functions,
    jaccard,
    load_stdlib_functions,
    match_controls,
    shingles,
    split_corpus,
    stdlib_files,
    stdlib_root,
)
from calib.organism.planted import (
    KINDS,
    TRUTH_SCHEMA,
    PlantedItem,
    PlantSpec,
    plant,
    target_training_texts,
    truth_table,
    write_truth,
)

__all__ = [
    "BusinessRule",
    "CorpusSplit",
    "FORMS",
    "Function",
    "KINDS",
    "NearCopyIndex",
    "PlantSpec",
    "PlantedItem",
    "TEMPLATES",
    "TRUTH_SCHEMA",
    "Template",
    "corpus_fingerprint",
    "extract_functions",
    "generate_rules",
    "jaccard",
    "load_stdlib_functions",
    "match_controls",
    "plant",
    "probe_inputs",
    "render",
    "shingles",
    "split_corpus",
    "stdlib_files",
    "stdlib_root",
    "target_training_texts",
    "truth_table",
    "write_truth",
]
