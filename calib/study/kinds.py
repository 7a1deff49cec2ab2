"""The registry of study kinds: what a ``study.kind`` names, found the way servers, metrics and executors are.

A :class:`StudyKind` record says everything the study core needs of a kind: its name, its own spec
section (or None), its stages for a spec, the tables it writes and how its report is made. Built-in
kinds register themselves when their package (``calib.study.<kind>``) is imported; a third-party kind
registers through the ``calib.study_kinds`` entry-point group, its entry point naming the record
(docs/architecture.md, "Adding a plugin"). No kind imports another; all of them import the study core.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from calib._registry import Registry

__all__ = ["KINDS", "StudyKind", "study_kind"]


@dataclass(frozen=True)
class StudyKind:
    """One study kind.

    Attributes
    ----------
    name:
        The ``study.kind`` of a spec.
    spec_section:
        The name of the kind's own spec section (``"probes"``), or None when it reads only shared ones.
    stages:
        ``stages(spec)``: the kind's stages, in order, for that spec.
    tables:
        ``tables()``: the tables the kind writes (name -> polars schema), in stage order.
    report:
        ``report(run)``: the summary and the report's blocks of a loaded run directory
        (:func:`calib.report.load_run`).
    """

    name: str
    spec_section: str | None
    stages: Callable[[Any], tuple[Any, ...]]
    tables: Callable[[], dict[str, Any]]
    report: Callable[[Any], tuple[dict[str, Any], list[Any]]]

    def __call__(self) -> StudyKind:
        """The record itself: a registry entry is a factory, and a kind needs no building."""
        return self


#: Study kinds by name: the built-ins (each package registers its kinds on import) and entry points.
KINDS: Registry[Callable[[], StudyKind]] = Registry("study kind", "calib.study_kinds", {
    "functional": "calib.study.functional",
    "extraction": "calib.study.extraction",
    "census": "calib.study.extraction",
    "probes": "calib.study.probes",
})


def study_kind(name: str) -> StudyKind:
    """The registered kind ``name``.

    Raises
    ------
    KeyError
        When no kind of that name is registered (the message lists the known kinds).
    """
    factory = KINDS.get(name)
    if factory is None:
        raise KeyError(KINDS.unknown(name))
    return factory()

