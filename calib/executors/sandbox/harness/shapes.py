"""Texts in the shape the name of a parameter says (runs inside the sandbox; stdlib only): part of what x's
source says about its inputs (:mod:`.hints`)."""

from __future__ import annotations

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any


#: Texts in the shape a word of a parameter's name says (``ip_string``, ``uri_component``)
SHAPES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("url uri href link endpoint", ("https://user@example.com:8080/a/b?q=1&r=x%20y#top", "http://example.com/")),
    ("host hostname domain netloc authority", ("example.com", "user@example.org:8080")),
    ("ip addr address ipaddr cidr subnet network", ("192.168.1.10", "10.0.0.0/8", "fe80::1")),
    ("mac eui", ("00-1B-77-49-54-FD", "00:1b:77:49:54:fd")), ("email mail", ("user@example.com",)),
    ("encoding charset codec", ("utf-8", "latin-1", "ascii")), ("version ver", ("1.2.3", "2.0.0-rc.1+build.5")),
    ("component quoted query percent", ("a%20b%2Fc", "x=1&y=%C3%A9")), ("date", ("2024-01-31",)),
    ("datetime timestamp iso", ("2024-01-31T12:34:56",)), ("time clock", ("12:34:56",)))


def shaped(hints: Any) -> list[str]:  # a .hints.Hints
    """:data:`SHAPES` texts for x's parameters and the attributes of ``self`` it reads, in their order."""
    out: list[str] = []
    for p in [*hints.params, *hints.self_params]:
        if p.types and not {"str", "any", "none"} & set(p.types):
            continue  # a number, a list, an object ...: not a text whatever its name
        out += [t for names, texts in SHAPES if set(p.name.lower().split("_")) & set(names.split()) for t in texts
                if t not in out]
    return out[:8]
