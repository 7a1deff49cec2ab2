"""One registry for everything calib lets a package add: server kinds, executors, metrics, study kinds.

A :class:`Registry` maps a name to a factory. Built-ins are named with the module that defines them
and registers them on import (``@REGISTRY.register("name")``), so ``calib --help`` imports none of
them and a built-in's optional dependency may be missing until it is used. Third-party packages add
names through an entry-point group (``[project.entry-points."calib.<group>"]`` in their
``pyproject.toml``); docs/architecture.md ("Adding a plugin") has a worked example.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from importlib import import_module
from importlib.metadata import entry_points
from typing import Generic, TypeVar

__all__ = ["Registry"]

F = TypeVar("F", bound=Callable[..., object])


class Registry(Generic[F]):
    """Factories by name: built-ins (module paths, imported lazily), registered ones, entry points.

    Parameters
    ----------
    what:
        What a name names, for messages ("server kind", "metric", ...).
    group:
        The entry-point group third-party packages register under (``calib.servers``, ...).
    builtins:
        Each built-in name and the module whose import registers it.
    """

    def __init__(self, what: str, group: str, builtins: Mapping[str, str]) -> None:
        self.what = what
        self.group = group
        self.builtins: dict[str, str] = dict(builtins)
        self.factories: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        """Decorator registering ``factory`` under ``name`` (a later registration replaces an earlier one)."""

        def decorate(factory: F) -> F:
            self.factories[name] = factory
            return factory

        return decorate

    def get(self, name: str) -> F | None:
        """The factory of ``name``: registered, built-in (imported now) or from an entry point; None if unknown."""
        if name in self.factories:
            return self.factories[name]
        if name in self.builtins:
            import_module(self.builtins[name])
            return self.factories.get(name)
        for ep in entry_points(group=self.group):
            if ep.name == name:
                self.factories[name] = ep.load()
                return self.factories[name]
        return None

    def names(self) -> list[str]:
        """Every name known: built-ins, registered ones and the group's entry points, sorted."""
        return sorted(set(self.builtins) | set(self.factories) | {ep.name for ep in entry_points(group=self.group)})

    def unknown(self, name: object) -> str:
        """The message for an unknown name: what it is and the known names."""
        return f"unknown {self.what} {name!r}; known {self.what}s: {', '.join(self.names())}"

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
