"""Planted members of three kinds, their matched controls, and the ground-truth table.

Issue 4, "Planted members": membership is known by construction, so every claim calib makes about the
organism can be scored against :func:`truth_table`.

- ``verbatim``: a standard-library function from the member pool, trained on ``verbatim_repeats``
  times; audited against itself (textual memorization).
- ``business_rule``: a synthetic rule (:mod:`calib.organism.business`) trained on as ``business_forms``
  different surface forms, each ``business_repeats`` times, and audited in a form never trained on, so
  a target that reproduces the logic does so with low textual overlap (functional memorization).
- ``near_duplicate``: ``family_size`` lightly edited copies of a member-pool function (renamed local,
  changed constant, added comment, swapped independent assignments), each trained on
  ``family_repeats`` times; audited against the unedited base (a planted duplication effect).

Every member has a control of the same kind that is never trained on: length-matched control-pool
functions for the stdlib kinds, fresh rules of the same template for business rules. No control is a
near-copy (:class:`calib.organism.corpus.NearCopyIndex`) of any training text.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from calib._exceptions import InvalidParameterError
from calib.organism.business import FORMS, TEMPLATES, generate_rules, render
from calib.organism.corpus import CorpusSplit, Function, match_controls
from calib.organism.edits import family_copies
from calib.organism.nearcopy import NEAR_COPY_JACCARD, NearCopyIndex, jaccard, shingles

__all__ = [
    "KINDS",
    "PlantSpec",
    "PlantedItem",
    "TRUTH_SCHEMA",
    "plant",
    "target_training_texts",
    "truth_table",
    "write_truth",
]

KINDS: tuple[str, ...] = ("verbatim", "business_rule", "near_duplicate")

TRUTH_SCHEMA: dict[str, pl.DataType] = {
    "item_id": pl.Utf8,  # stable content hash (16 hex digits)
    "kind": pl.Utf8,  # verbatim | business_rule | near_duplicate
    "membership": pl.Utf8,  # member | control
    "family": pl.Utf8,  # near-duplicate family id; null otherwise
    "exposures": pl.Int64,  # times the target saw the item's logic (0 for controls)
    "n_variants": pl.Int64,  # distinct texts trained on (0 for controls)
    "signature": pl.Utf8,  # the def line(s) through the colon
    "prompt": pl.Utf8,  # what the models are prompted with: the signature, no trailing newline
    "audited": pl.Utf8,  # the text an audit compares generations against
    "constants": pl.List(pl.Utf8),  # the business rule's hidden table (keys and values, as str); else []
    "source": pl.Utf8,  # stdlib:<path>::<qualname> or synthetic
    "training_variants": pl.List(pl.Utf8),  # the texts trained on, each once (empty for controls)
}


@dataclass(frozen=True)
class PlantSpec:
    """How many members of each kind to plant and how often the target sees each one.

    Each member gets one control of its kind. ``business_forms`` must leave at least one form of
    :data:`calib.organism.business.FORMS` untrained, for the audit.
    """

    n_verbatim: int = 32
    verbatim_repeats: int = 12
    n_business: int = 24
    business_forms: int = 2
    business_repeats: int = 6
    n_families: int = 16
    family_size: int = 4
    family_repeats: int = 1

    def __post_init__(self) -> None:
        for name in ("n_verbatim", "n_business", "n_families"):
            if getattr(self, name) < 0:
                raise InvalidParameterError(f"PlantSpec.{name}={getattr(self, name)} must be >= 0")
        for name in ("verbatim_repeats", "business_repeats", "family_size", "family_repeats"):
            if getattr(self, name) < 1:
                raise InvalidParameterError(f"PlantSpec.{name}={getattr(self, name)} must be >= 1")
        if not 1 <= self.business_forms < len(FORMS):
            raise InvalidParameterError(
                f"PlantSpec.business_forms={self.business_forms} must be in [1, {len(FORMS) - 1}]: "
                f"one of the {len(FORMS)} forms must stay untrained for the audit"
            )

    def to_dict(self) -> dict[str, int]:
        """The spec as a JSON-ready dict."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class PlantedItem:
    """One planted member or control, with everything needed to score an audit of it.

    ``training_variants`` are the distinct texts the target trains on (each ``exposures /
    len(training_variants)`` times); ``audited`` is what generations are compared against; for
    business rules it is a form absent from ``training_variants``.
    """

    item_id: str
    kind: str
    membership: str
    family: str | None
    audited: str
    prompt: str
    signature: str
    training_variants: tuple[str, ...]
    exposures: int
    constants: tuple[int | float | str, ...]
    source: str

    @property
    def repeats(self) -> int:
        """Times each training variant is repeated (0 for controls)."""
        return self.exposures // len(self.training_variants) if self.training_variants else 0


def _item(kind: str, membership: str, source: str, signature: str, audited: str, variants: Sequence[str] = (),
          repeats: int = 0, family: str | None = None, constants: tuple[int | float | str, ...] = ()) -> PlantedItem:
    digest = hashlib.sha256("\0".join([kind, membership, source, audited]).encode()).hexdigest()[:16]
    return PlantedItem(item_id=digest, kind=kind, membership=membership, family=family, audited=audited,
                       prompt=signature.rstrip("\n"), signature=signature, training_variants=tuple(variants),
                       exposures=repeats * len(variants), constants=constants, source=source)


def _stdlib_source(function: Function) -> str:
    return f"stdlib:{function.path}::{function.qualname}"


# -- planting ---------------------------------------------------------------------------------------


def _unique_signature(functions: Sequence[Function], split: CorpusSplit) -> list[Function]:
    # A prompt must name one function: candidates whose signature occurs once in the whole corpus.
    counts = Counter(f.signature for part in (split.background, split.member_pool, split.control_pool) for f in part)
    return [f for f in functions if counts[f.signature] == 1]


def plant(split: CorpusSplit, spec: PlantSpec, *, seed: int) -> list[PlantedItem]:
    """Plant the members ``spec`` asks for, each with one control of its kind; deterministic in ``seed``.

    Members and controls are drawn only among functions whose signature is unique in the corpus (so
    the prompt identifies them), members are never near-copies of one another, and controls are never
    near-copies of any training text. Raises :class:`InvalidParameterError` when the pools are too small.
    """
    rng = random.Random(f"calib.organism.plant:{seed}")
    candidates = _unique_signature(split.member_pool, split)
    rng.shuffle(candidates)
    chosen: list[tuple[Function, Any]] = []
    verbatim: list[Function] = []
    families: list[tuple[Function, list[str]]] = []
    for function in candidates:
        if len(verbatim) == spec.n_verbatim and len(families) == spec.n_families:
            break
        sh = shingles(function.source)
        if any(jaccard(sh, other) >= NEAR_COPY_JACCARD for _, other in chosen):
            continue
        if len(verbatim) < spec.n_verbatim:
            verbatim.append(function)
        else:
            copies = family_copies(function.source, spec.family_size, rng)
            if copies is None:
                continue
            families.append((function, copies))
        chosen.append((function, sh))
    if len(verbatim) < spec.n_verbatim or len(families) < spec.n_families:
        raise InvalidParameterError(
            f"member pool has only {len(verbatim) + len(families)} usable functions for "
            f"n_verbatim={spec.n_verbatim} + n_families={spec.n_families}: lower them or raise member_share"
        )

    items: list[PlantedItem] = []
    for function in verbatim:
        items.append(_item("verbatim", "member", _stdlib_source(function), function.signature, function.source,
                           [function.source], spec.verbatim_repeats))
    templates = sorted(TEMPLATES)
    rng.shuffle(templates)
    paired = [t for t in templates for _ in range(2)]
    rules = generate_rules(2 * spec.n_business, seed=f"{seed}", templates=paired)
    for rule in rules[::2]:
        forms = rng.sample(FORMS, spec.business_forms + 1)
        variants = [render(rule, form, rename_seed=f"{seed}:train:{i}") for i, form in enumerate(forms[:-1])]
        audited = render(rule, forms[-1], rename_seed=f"{seed}:audit")
        items.append(_item("business_rule", "member", "synthetic", rule.signature, audited, variants,
                           spec.business_repeats, constants=rule.constants))
    for base, copies in families:
        family = "family-" + hashlib.sha256(base.source.encode()).hexdigest()[:12]
        items.append(_item("near_duplicate", "member", _stdlib_source(base), base.signature, base.source, copies,
                           spec.family_repeats, family=family))

    trained = NearCopyIndex([text for item in items for text in item.training_variants])
    pool = [f for f in _unique_signature(split.control_pool, split) if not trained.is_near_copy(f.source)]
    controls = match_controls(verbatim + [base for base, _ in families], pool, seed=seed)
    for function in controls[: len(verbatim)]:
        items.append(_item("verbatim", "control", _stdlib_source(function), function.signature, function.source))
    for rule in rules[1::2]:
        forms = list(FORMS)
        rng.shuffle(forms)
        texts = (render(rule, form, rename_seed=f"{seed}:audit") for form in forms)
        audited = next((t for t in texts if not trained.is_near_copy(t)), None)
        if audited is None:
            raise InvalidParameterError(f"seed={seed}: every form of control rule {rule.name} is a near-copy "
                                        "of a trained rule; choose another seed")
        items.append(_item("business_rule", "control", "synthetic", rule.signature, audited,
                           constants=rule.constants))
    for function in controls[len(verbatim):]:
        items.append(_item("near_duplicate", "control", _stdlib_source(function), function.signature,
                           function.source))
    return items


def target_training_texts(items: Sequence[PlantedItem], *, seed: int | None = None) -> list[str]:
    """Every member's training variants, each repeated as planted, in a shuffled (deterministic) order.

    Controls contribute nothing. ``seed`` defaults to one derived from the items' ids.
    """
    texts = [text for item in items for text in item.training_variants for _ in range(item.repeats)]
    if seed is None:
        seed = int(hashlib.sha256("".join(item.item_id for item in items).encode()).hexdigest()[:16], 16)
    random.Random(f"calib.organism.training:{seed}").shuffle(texts)
    return texts


def truth_table(items: Sequence[PlantedItem]) -> pl.DataFrame:
    """The ground truth as a Polars table, one row per item, with the columns of :data:`TRUTH_SCHEMA`."""
    rows = {
        "item_id": [i.item_id for i in items],
        "kind": [i.kind for i in items],
        "membership": [i.membership for i in items],
        "family": [i.family for i in items],
        "exposures": [i.exposures for i in items],
        "n_variants": [len(i.training_variants) for i in items],
        "signature": [i.signature for i in items],
        "prompt": [i.prompt for i in items],
        "audited": [i.audited for i in items],
        "constants": [[str(c) for c in i.constants] for i in items],
        "source": [i.source for i in items],
        "training_variants": [list(i.training_variants) for i in items],
    }
    return pl.DataFrame(rows, schema=TRUTH_SCHEMA)


def _atomic_write(path: Path, data: bytes | pl.DataFrame) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if isinstance(data, pl.DataFrame):
        data.write_parquet(tmp)
    else:
        tmp.write_bytes(data)
    os.replace(tmp, path)


def write_truth(items: Sequence[PlantedItem], directory: str | Path, *, spec: PlantSpec | None = None,
                seed: int | None = None, extra: Mapping[str, Any] | None = None) -> tuple[Path, Path]:
    """Write ``organism.json`` (summary) and ``truth.parquet`` (:func:`truth_table`) into ``directory``.

    The summary holds the counts per kind and membership, ``spec`` and ``seed`` when given, and the
    entries of ``extra``. Both files are written atomically (temporary file, then rename).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    counts = {kind: {m: sum(1 for i in items if i.kind == kind and i.membership == m) for m in ("member", "control")}
              for kind in KINDS}
    summary: dict[str, Any] = {
        "format": 1,
        "truth": "truth.parquet",
        "n_items": len(items),
        "counts": counts,
        "exposures": {kind: sum(i.exposures for i in items if i.kind == kind) for kind in KINDS},
        "seed": seed,
        "spec": spec.to_dict() if spec is not None else None,
    }
    summary.update(extra or {})
    json_path, parquet_path = directory / "organism.json", directory / "truth.parquet"
    _atomic_write(parquet_path, truth_table(items))
    _atomic_write(json_path, (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode())
    return json_path, parquet_path
