"""The registry of study kinds: what a ``study.kind`` names, found the way servers, metrics and executors are.

A :class:`StudyKind` record says everything the study core needs of a kind: its name, its own spec
section (or None), its stages for a spec, the tables it writes, how its report is made and, for
``calib check``, what it needs of each server, what it measures and what it will ask of the servers. Built-in
kinds register themselves when their package (``calib.study.<kind>``) is imported; a third-party kind
registers through the ``calib.study_kinds`` entry-point group, its entry point naming the record
(docs/architecture.md, "Adding a plugin"). No kind imports another; all of them import the study core.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from calib._registry import Registry

__all__ = ["BUILTIN_KINDS", "KINDS", "Needs", "StudyKind", "study_kind"]


class Needs(dict[str, list[str]]):
    """Server name -> capabilities, in the order first asked for; what a kind's ``needs(spec)`` builds."""

    def add(self, name: str | None, capability: str | None = None) -> None:
        """Record that server ``name`` (None: nothing recorded) needs ``capability`` (None: only listed)."""
        if name is None:
            return
        wanted = self.setdefault(name, [])
        if capability is not None and capability not in wanted:
            wanted.append(capability)


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
    section:
        A plugin kind's own spec section: a pydantic model (subclass
        :class:`calib.study.sections.Section`) that validates the spec's ``[<spec_section>]`` table, read
        as ``spec.<spec_section>``. None for the built-in kinds, whose sections are fields of
        :class:`calib.study.spec.StudySpec`.
    validate:
        ``validate(spec)``: checks across sections for this kind, raising ``ValueError`` with a message
        that starts with the key it is about (``"models.target: ..."``); it runs when the spec is loaded.
        None: the built-in rules only.
    needs:
        ``needs(spec)``: server name -> the capabilities (``calib.servers.base.Capabilities`` fields)
        the study needs of it beyond completion, for ``calib check``. None: the target and reference
        models need completion only.
    describe:
        ``describe(spec)``: what ``calib check`` reports the study measures (a JSON object). None: nothing.
    empty:
        ``empty(summary)``: why a finished run measured nothing, in one sentence naming the dominant
        cause, read from its report's summary.json; None when it measured something. ``calib study``
        then exits 3. None (the field): the kind makes no such claim.
    estimate:
        ``await estimate(spec, resources, caps)``: for ``calib check --estimate``, the requests and tokens
        each of the kind's stages will ask of each server (a :class:`calib.study.estimate.Estimate`);
        ``caps`` maps a server's name to its probed capabilities (None: not probed). It may run the
        kind's offline stage to count samples but sends no generation request. None: no estimate.
    """

    name: str
    spec_section: str | None
    stages: Callable[[Any], tuple[Any, ...]]
    tables: Callable[[], dict[str, Any]]
    report: Callable[[Any], tuple[dict[str, Any], list[Any]]]
    section: type | None = None
    validate: Callable[[Any], None] | None = None
    needs: Callable[[Any], dict[str, list[str]]] | None = None
    describe: Callable[[Any], dict[str, Any]] | None = None
    empty: Callable[[dict[str, Any]], str | None] | None = None
    estimate: Callable[[Any, Any, dict[str, Any]], Awaitable[Any]] | None = None

    def __call__(self) -> StudyKind:
        """The record itself: a registry entry is a factory, and a kind needs no building."""
        return self


#: Study kinds by name: the built-ins (each package registers its kinds on import) and entry points.
KINDS: Registry[Callable[[], StudyKind]] = Registry("study kind", "calib.study_kinds", {
    "functional": "calib.study.functional",
    "extraction": "calib.study.extraction",
    "census": "calib.study.extraction",
    "probes": "calib.study.probes",
    "mitigation": "calib.study.mitigation",
})

#: The kinds calib itself defines (their spec sections are fields of the spec model).
BUILTIN_KINDS: tuple[str, ...] = tuple(KINDS.builtins)


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

