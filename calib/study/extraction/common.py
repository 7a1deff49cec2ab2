"""What the ``extraction`` and ``census`` stages share: the scored roles, the procedures' names, stable ids."""

from __future__ import annotations

import hashlib
from typing import Any

from calib.study.resources import ROLES
from calib.study.sections.extraction import PROBABILISTIC
from calib.study.spec import StudySpec

__all__ = ["base_name", "is_probabilistic", "procedure_names", "scored_roles", "stable_hash"]


def scored_roles(spec: StudySpec) -> list[tuple[str, str]]:
    """(role, server name) of the models the study scores: the target, and the reference when set."""
    return [(role, name) for role in ROLES if (name := getattr(spec.models, role)) is not None]


def procedure_names(spec: StudySpec) -> list[str]:
    """The procedure of every score row: ``base`` expands to ``base`` (T = 1) and ``base_t<T>`` per temperature."""
    out = []
    for procedure in spec.extraction.procedures:
        if procedure == "base":
            out.extend(base_name(t) for t in spec.extraction.temperatures)
        else:
            out.append(procedure)
    return out


def base_name(temperature: float) -> str:
    """The procedure name of the base policy at ``temperature``: ``base`` (T = 1) or ``base_t<T>``."""
    return "base" if float(temperature) == 1.0 else f"base_t{float(temperature):g}"


def is_probabilistic(procedure: str) -> bool:
    """Whether the procedure's score is a probability (else it is 0/1)."""
    return procedure in PROBABILISTIC or procedure.startswith("base_t")


def stable_hash(*parts: Any) -> str:
    """SHA-256 (16 hex digits) of ``parts`` joined by the unit separator: a sample's or a window's id."""
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]
