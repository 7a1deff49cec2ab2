"""The registry of server kinds: built-ins register by decorator, third-party kinds by entry point.

A kind is a factory ``(name, config) -> Server``; ``config`` is the server's table from a study spec
(``kind``, ``base_url`` or ``base_urls``, ``model``, ``api_key_env``, ...). Third-party packages add
kinds through ``[project.entry-points."calib.servers"]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

from calib._exceptions import InvalidParameterError
from calib._registry import Registry
from calib.servers.base import Server

__all__ = ["KINDS", "REGISTRY", "config_keys", "create_server", "register"]

Factory = Callable[[str, Mapping[str, Any]], Server]

# Built-in kinds live in their own modules and register on import; importing them lazily keeps
# `calib --help` fast and lets a kind's optional dependency be missing until it is used.
REGISTRY: Registry[Factory] = Registry("server kind", "calib.servers", {
    "openai": "calib.servers.openai",
    "tgi": "calib.servers.tgi",
    "anthropic": "calib.servers.anthropic",
    "embedded": "calib.servers.embedded.kind",
})
#: The kinds registered so far (built-ins appear once their module is imported).
KINDS: dict[str, Factory] = REGISTRY.factories
register = REGISTRY.register


def create_server(name: str, config: Mapping[str, Any]) -> Server:
    """Build the server ``name`` from its spec table ``config`` (which names its ``kind``)."""
    kind = config.get("kind")
    factory = REGISTRY.get(kind) if isinstance(kind, str) else None
    if factory is None:
        known = ", ".join(REGISTRY.names())
        raise InvalidParameterError(f"server {name!r}: unknown kind {kind!r}; known kinds: {known}")
    return factory(name, config)


def config_keys(kind: str) -> frozenset[str]:
    """The config keys a built-in kind accepts (empty for third-party kinds, which say nothing about theirs)."""
    if kind not in REGISTRY.builtins:
        return frozenset()
    return frozenset(getattr(import_module(REGISTRY.builtins[kind]), "_KEYS", ()))
