"""The audit a mitigation starts from: a finished functional run's spec, tables, memorized set and executor.

``calib mitigate pairs`` and the ``mitigation`` study kind both read the audit through this module, so that
candidates are checked and memorization is re-measured with the audit's own settings (its ``[execute]`` and
``[generation]`` sections, its text metric and thresholds).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from calib._exceptions import InputError

__all__ = ["AUDIT_TABLES", "Audit", "executor_for", "load_audit"]

#: The audit's tables a mitigation reads.
AUDIT_TABLES = ("samples", "generations", "claims")


@dataclass(frozen=True)
class Audit:
    """A finished functional run: its folder, resolved spec, the tables of :data:`AUDIT_TABLES` and their hash."""

    root: Path
    spec: Any
    tables: dict[str, pl.DataFrame]
    fingerprint: str

    def memorized(self) -> list[Any]:
        """The memorized set (:func:`calib.mitigation.pairs.memorized_set`)."""
        from calib.mitigation.pairs import memorized_set

        return memorized_set(self.tables["samples"], self.tables["generations"], self.tables["claims"])

    def split(self, holdout: float, seed: int) -> tuple[list[Any], list[Any]]:
        """The memorized set split into (forget, held out): ``holdout`` of it (rounded, at least one function when
        ``holdout`` > 0) is kept out of post-training and serves as the benchmark of functions the target can
        write (docs/mitigation.md). The draw is seeded and stratified by sample kind: the memorized set is shuffled,
        each kind's functions spread evenly over the order, and the first ones held out.

        Raises
        ------
        InputError
            When holding out would leave nothing to post-train on.
        """
        memorized = self.memorized()
        if holdout <= 0:
            return memorized, []
        order = list(memorized)
        random.Random(f"{seed}-holdout").shuffle(order)
        kinds: dict[str, list[Any]] = {}
        for m in order:
            kinds.setdefault(m.kind, []).append(m)
        spread = sorted(order, key=lambda m: ((kinds[m.kind].index(m) + 0.5) / len(kinds[m.kind]), m.sample_id))
        k = max(1, round(holdout * len(memorized)))
        if k >= len(memorized):
            raise InputError(f"mitigation.holdout: holding out {k} of the {len(memorized)} memorized functions "
                             "leaves none to post-train on; lower holdout", path=str(self.root))
        held = {m.sample_id for m in spread[:k]}
        return [m for m in memorized if m.sample_id not in held], [m for m in memorized if m.sample_id in held]


def load_audit(run: str | Path) -> Audit:
    """Read the functional run at ``run``.

    Raises
    ------
    InputError
        One line naming the folder or file: not a run directory, not a functional run, a missing table.
    """
    from pydantic import ValidationError

    from calib.study.spec import StudySpec

    root = Path(run)
    path = root / "spec.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        raise InputError("not a run directory (no spec.json); pass the folder `calib study` wrote",
                         path=str(root)) from None
    except ValueError as exc:
        raise InputError(f"spec.json is not JSON ({exc})", path=str(path)) from None
    kind = data.get("study", {}).get("kind", "functional") if isinstance(data, dict) else None
    if kind != "functional":
        raise InputError(f"a {kind} run; a mitigation starts from a functional study's run", path=str(path))
    try:
        spec = StudySpec.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"spec.json does not validate ({exc.errors()[0]['msg']})", path=str(path)) from None
    tables, digest = {}, hashlib.sha256()
    for name in AUDIT_TABLES:
        table_path = root / "tables" / f"{name}.parquet"
        if not table_path.is_file():
            raise InputError(f"the run has no {name} table; finish the study first (`calib study SPEC`)",
                             path=str(table_path))
        raw = table_path.read_bytes()
        digest.update(hashlib.sha256(raw).digest())
        tables[name] = pl.read_parquet(table_path)
    return Audit(root=root, spec=spec, tables=tables, fingerprint=digest.hexdigest()[:16])


def executor_for(spec: Any) -> Callable[[str], Any]:
    """language -> the executor with ``spec``'s execution settings (the sandbox for Python, else the native one)."""
    from calib.executors import create_executor

    config = spec.execute.executor_config(spec.study.seed)
    made: dict[str, Any] = {}

    def executor(language: str) -> Any:
        if language not in made:
            made[language] = create_executor("sandbox" if language == "python" else f"native-{language}", config)
        return made[language]

    return executor
