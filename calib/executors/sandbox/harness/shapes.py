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


#: Texts in the shape a function of the standard library that x hands a parameter to parses
#: (``socket.inet_aton(s)``, ``json.loads(text)``), by the function's name
PARSERS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("inet_aton", "inet_pton", "ip_address", "IPv4Address", "IPv6Address", "ip_interface"),
                    ("192.168.1.10", "::1")),
    **dict.fromkeys(("ip_network", "IPv4Network", "IPv6Network"), ("10.0.0.0/8", "fe80::/64")),
    **dict.fromkeys(("urlparse", "urlsplit", "urlopen", "urljoin"), ("https://user@example.com:8080/a/b?q=1#top",)),
    **dict.fromkeys(("fromisoformat", "strptime"), ("2024-01-31", "2024-01-31T12:34:56")),
    "loads": ('{"name": "example", "values": [1, 2]}', "[1, 2, 3]"), "literal_eval": ("[1, 2, 3]", "{'a': 1}"),
    **dict.fromkeys(("b64decode", "urlsafe_b64decode", "standard_b64decode"), ("aGVsbG8gd29ybGQ=",)),
    **dict.fromkeys(("unhexlify", "a2b_hex", "fromhex"), ("deadbeef",)),
    "UUID": ("12345678-1234-5678-1234-567812345678",), "Decimal": ("3.14", "-2.5e3"),
    **dict.fromkeys(("parse_qs", "parse_qsl"), ("a=1&b=two&b=3",)), "unquote": ("a%20b%2Fc",),
    **dict.fromkeys(("parsedate", "parsedate_tz", "parsedate_to_datetime"), ("Tue, 01 Jul 2003 10:52:37 +0200",)),
}


def shaped(hints: Any) -> list[str]:  # a .hints.Hints
    """:data:`SHAPES` texts for x's parameters and the attributes of ``self`` it reads, in their order; then
    :data:`PARSERS` texts for the parameters x hands to those functions."""
    out: list[str] = []
    for p in [*hints.params, *hints.self_params]:
        if p.types and not {"str", "any", "none"} & set(p.types):
            continue  # a number, a list, an object ...: not a text whatever its name
        out += [t for names, texts in SHAPES if set(p.name.lower().split("_")) & set(names.split()) for t in texts
                if t not in out]
    return (out + [t for t in parsed(hints) if t not in out])[:8]


def parsed(hints: Any) -> list[str]:
    """:data:`PARSERS` texts for each parameter x passes to one of those functions (``inet_pton(AF_INET6,
    s)``: any argument), in the order of the calls."""
    import ast  # noqa: PLC0415 - loaded with the hints already

    if hints.node is None:
        return []
    names = {p.name for p in hints.params}
    out: list[str] = []
    for n in ast.walk(hints.node):
        if not isinstance(n, ast.Call):
            continue
        name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
        texts = PARSERS.get(name)
        if texts and any(isinstance(a, ast.Name) and a.id in names for a in n.args[:2]):
            out += [t for t in texts if t not in out]
    return out


def put(v: Any, at: int, want: Any) -> Any:
    """``v`` with ``want`` at ``at`` (padded to reach it), as bytes or text as ``want`` is (latin-1 either way). A
    negative ``at`` counts from the end (``s[-1] == ")"``); where that would overwrite the start, ``want`` is added
    at the end instead (``"("`` becomes ``"()"``, not ``")"``: ``s[0] == "("`` held already)."""
    if type(v) is not type(want):
        v = v.encode("latin-1", "replace") if type(v) is str else v.decode("latin-1")
    if at < 0:
        at = len(v) + at
        if at < 1:
            return v + want
    pad = (b"\x00" if type(want) is bytes else " ") * max(0, at - len(v))
    return v[:at] + pad + want + v[at + len(want):]
