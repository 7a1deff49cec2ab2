"""One build of x's module for the whole input search (runs inside the sandbox; stdlib only).

The search runs x about 150 times, and building x's module from the scaffold (executing the file
context statement by statement) was about half of each run. :class:`Reuse` builds it at the search's
first run, as a fresh build would be made (under that input's environment, inside its timer), and
before each later run puts back what that build left: the module's global names (so rebinding one is
undone), each stand-in's attributes, the warnings shown, what the build printed and the build's
warnings list. What it cannot put back is a change inside an object (a module-level dict or a class
attribute that x changed), and a build that reads anything that differs between inputs (the clock,
randomness, the environment) would differ too.

So the search's runs only guide the search: :func:`verify` runs each chosen input again on a fresh
build, as the search did before this existed, and the batch reports those fresh runs. If one differs
from what the search saw, the module keeps state between runs, and the search is done again with a
fresh build per run (:mod:`.batch`). A build that used the clock, randomness or object ids, or printed
more than a capture keeps, is not reused at all.
"""

from __future__ import annotations

import gc
import random

from . import env, scaffold
from .standins import CalibStandIn

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .record import Record


def _process_state() -> tuple[Any, ...]:
    """What a build could change outside its namespace that later runs would read: the random sources,
    the frozen clock and the object ids handed out."""
    return random.getstate(), env._rng.getstate(), tuple(env._clock.values()), len(env._numbered)


class Reuse:
    """Builds ``module`` once (:meth:`build` at the first run) and restores that build at every later run."""

    def __init__(self, module: scaffold.Module) -> None:
        self.module = module
        self.ns: dict[str, Any] | None = None
        self.usable = True  # False: every run builds afresh (the build read state that varies)
        self.names: dict[str, Any] = {}
        self.attrs: list[tuple[CalibStandIn, dict[str, Any]]] = []
        self.printed = ("", "")
        self.warnings: list[str] = []

    def settle(self) -> None:
        """After a search run (which ended collecting its garbage): what is alive now (the build, the
        search's records) is left out of later collections (``gc.freeze``), as the harness does after
        its first build, so that each run's collection looks only at what that run made (the records
        piled up, and every run's collection went through all of them)."""
        if self.ns is not None:
            gc.freeze()

    def build(self, stdout: env.Capture, stderr: env.Capture) -> dict[str, Any]:
        """The module's namespace for this run (``stdout``/``stderr``: the run's captures)."""
        if not self.usable:
            return self.module.build()
        if self.ns is None:
            return self._first(stdout, stderr)
        ns = self.ns
        ns.clear()
        ns.update(self.names)
        for standin, attrs in self.attrs:
            held = object.__getattribute__(standin, "_calib_attrs")
            held.clear()
            held.update(attrs)
        scaffold._forget_warnings()
        self.module.warnings = list(self.warnings)
        if self.printed[0]:
            stdout.write(self.printed[0])
        if self.printed[1]:
            stderr.write(self.printed[1])
        return ns

    def _first(self, stdout: env.Capture, stderr: env.Capture) -> dict[str, Any]:
        before = _process_state()
        ns = self.module.build()
        if (_process_state() != before or stdout.size > env.MAX_CAPTURE or stderr.size > env.MAX_CAPTURE
                or stdout.rest is not None or stderr.rest is not None):
            self.usable = False
            return ns
        self.ns, self.names = ns, dict(ns)
        self.attrs = [(v, dict(object.__getattribute__(v, "_calib_attrs"))) for v in ns.values()
                      if type(v) is CalibStandIn]
        self.printed = (stdout.value(), stderr.value())
        self.warnings = list(self.module.warnings)
        return ns


def same(a: Record, b: Record) -> bool:
    """Whether two runs of one input gave the same result (validity, status, output state, lines)."""
    return a.valid == b.valid and a.status == b.status and a.output == b.output and a.lines == b.lines


def verify(chosen: list[Record], run: Callable[[dict[str, Any]], Record]) -> tuple[list[Record], bool]:
    """Run each chosen input again on a fresh build (``run`` with reuse off): those runs, and whether
    every one gave what the search saw."""
    again = [run(r.state) for r in chosen]
    for old, new in zip(chosen, again):
        new.values = old.values
    return again, all(same(a, b) for a, b in zip(chosen, again))
