"""The registry of server kinds: built-ins register by decorator, third-party kinds by entry point.

A kind is a factory ``(name, config) -> Server``; ``config`` is the server's table from a study spec
(``kind``, ``base_url`` or ``base_urls``, ``model``, ``api_key_env``, ...). Third-party packages add
kinds through ``[project.entry-points."calib.servers"]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from calib._exceptions import InvalidParameterError
from calib.servers.base import Server

__all__ = ["KINDS", "config_keys", "create_server", "register"]

Factory = Callable[[str, Mapping[str, Any]], Server]

KINDS: dict[str, Factory] = {}

# Built-in kinds live in their own modules and register on import; importing them lazily keeps
# `calib --help` fast and lets a kind's optional dependency be missing until it is used.
_BUILTIN = {
    "openai": "calib.servers.openai",
    "tgi": "calib.servers.tgi",
    "anthropic": "calib.servers.anthropic",
    "embedded": "calib.servers.embedded.kind",
}


def register(kind: str) -> Callable[[Factory], Factory]:
    """Class or function decorator registering a server kind under ``kind``."""

    def decorate(factory: Factory) -> Factory:
        KINDS[kind] = factory
        return factory

    return decorate


def _load(kind: str) -> Factory | None:
    if kind in KINDS:
        return KINDS[kind]
    if kind in _BUILTIN:
        import_module(_BUILTIN[kind])
        return KINDS.get(kind)
    for ep in entry_points(group="calib.servers"):
        if ep.name == kind:
            KINDS[kind] = ep.load()
            return KINDS[kind]
    return None


def create_server(name: str, config: Mapping[str, Any]) -> Server:
    """Build the server ``name`` from its spec table ``config`` (which names its ``kind``)."""
    kind = config.get("kind")
    factory = _load(kind) if isinstance(kind, str) else None
    if factory is None:
        known = sorted(set(_BUILTIN) | set(KINDS) | {ep.name for ep in entry_points(group="calib.servers")})
        raise InvalidParameterError(f"server {name!r}: unknown kind {kind!r}; known kinds: {', '.join(known)}")
    return factory(name, config)


def config_keys(kind: str) -> frozenset[str]:
    """The config keys a built-in kind accepts (empty for third-party kinds, which say nothing about theirs)."""
    if kind not in _BUILTIN:
        return frozenset()
    return frozenset(getattr(import_module(_BUILTIN[kind]), "_KEYS", ()))
