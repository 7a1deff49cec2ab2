"""What stays real in an always-mocked module (runs inside the sandbox; stdlib only).

A module of the always-mocked list (:data:`.scaffold.MOCKED_MODULES`: network clients, ``subprocess``)
binds recording stand-ins, so that code talking to a server runs and its calls are part of the output
state. Some of their names do no input or output at all: ``socket``'s constants (``socket.AF_INET``,
compared with an address family by dnspython's ``low_level_address_tuple``), its address conversions
(``socket.inet_aton``, which tldextract's ``looks_like_ip`` calls to test a text, relying on the
``OSError`` it raises) and its ``error`` class (``OSError``). As stand-ins, ``af == socket.AF_INET`` held
or not by a draw, and ``inet_aton`` accepted every text. These names are the real ones; everything else
in the module (``socket.socket``, ``create_connection``, ``getaddrinfo``, ``gethostbyname`` ...) is still a
stand-in. A stand-in's failure (:class:`.standins.CalibStandInError`, an ``OSError``) is still caught by
``except socket.error``.
"""

from __future__ import annotations

import re

from .standins import CalibStandIn

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the harness does not import typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

#: Per mocked module, the pure functions and classes that stay real (constants are matched below).
PURE: dict[str, frozenset[str]] = {
    "socket": frozenset({"inet_aton", "inet_ntoa", "inet_pton", "inet_ntop", "htons", "htonl", "ntohs", "ntohl",
                         "error"}),
}
#: Constant names that stay real: integers named in capitals with one of these prefixes.
_CONSTANT = re.compile(r"^(AF|SOCK|IPPROTO|SOL|SO|EAI|TCP|MSG|INADDR|SHUT|AI|NI|IPV6|IP)_[A-Z0-9_]+$")


def real(module: str, name: str) -> tuple[bool, Any]:
    """(True, the real object) when ``module.name`` stays real in a mocked module, else (False, None)."""
    if module not in PURE or not (name in PURE[module] or _CONSTANT.match(name)):
        return False, None
    try:
        loaded = __import__(module)
        value = getattr(loaded, name)
    except (ImportError, AttributeError):
        return False, None
    if name not in PURE[module] and not isinstance(value, int):
        return False, None
    return True, value


_REAL: dict[str, dict[str, Any]] = {}  # per module, the names that stay real (found once per process)


def partly_real(module: str, bound: str) -> CalibStandIn:
    """The stand-in bound by ``import module``, with the names that stay real already in place: reading
    another attribute gives a stand-in as before."""
    standin = CalibStandIn(bound)
    if module in PURE:
        if module not in _REAL:
            try:
                names = dir(__import__(module))
            except ImportError:
                names = []
            _REAL[module] = {name: value for name in names for ok, value in [real(module, name)] if ok}
        object.__getattribute__(standin, "_calib_attrs").update(_REAL[module])
    return standin
