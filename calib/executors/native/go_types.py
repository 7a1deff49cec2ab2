"""Go types for the native Go executor (:mod:`.go`): what the harness reads and writes, resolved through the
type declarations of x's file, and the :class:`GoSignature` the Go parser returns.

Supported (docs/native-executors.md, "Go"): ``int``/``int8``-``int64``, ``uint``/``uint8``-``uint64``/
``byte``/``uintptr``, ``rune`` (a character), ``float32``/``float64``, ``bool``, ``string``, slices ``[]T``
of supported types, and types declared in x's file: structs (their fields of supported types are the
input state; the others keep their zero value, maps an empty map) and named types over a supported type
(``type Celsius float64``, ``type Stack []int``, aliases).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from calib.executors.native.go_source import Decl, Import, entries
from calib.executors.native.types import Signature, Type, Unsupported

__all__ = ["GoSignature", "go_type", "shapes", "type_table"]

_INTS = {"int": (64, True), "int8": (8, True), "int16": (16, True), "int32": (32, True), "int64": (64, True),
         "uint": (64, False), "uint8": (8, False), "byte": (8, False), "uint16": (16, False),
         "uint32": (32, False), "uint64": (64, False), "uintptr": (64, False)}


@dataclass(frozen=True)
class GoSignature(Signature):
    """A Go function's or method's :class:`Signature`, with what the build needs of x's file.

    ``params`` starts with the receiver for a method (named ``receiver`` in the input state when the
    source leaves it unnamed); ``raw_params`` holds the number of results as its only item."""

    recv: str = ""  # the receiver's type name (``Stack`` for ``func (s *Stack) Push``); "" for a function
    spelled: tuple[str, ...] = ()  # each parameter's type as written (``*Stack``, ``[]int``, ``...int``)
    decls: tuple[Decl, ...] = ()  # the declarations of x's file (context and x's source) but x itself
    imports: tuple[Import, ...] = ()  # the imports of x's file

    @property
    def key(self) -> str:
        """x's declaration key: ``Name``, or ``Type.Name`` for a method."""
        return f"{self.recv}.{self.name}" if self.recv else self.name


def type_table(decls: list[Decl]) -> dict[str, str]:
    """Every type declared in ``decls``: name -> its definition (blanked text after the name; a later
    declaration of a name wins)."""
    out: dict[str, str] = {}
    for d in decls:
        out.update(d.types)
    return out


def _fields(name: str, definition: str, types: Mapping[str, str], seen: frozenset[str]) -> Type:
    """The struct type ``name`` (``definition``: ``struct { ... }``): fields of supported types, in order."""
    open_at, close_at = definition.find("{"), definition.rfind("}")
    fields: list[tuple[str, Type]] = []
    for spec in entries(definition[open_at + 1:close_at]):
        spec = re.sub(r"\s*[`\"][^`\"]*[`\"]\s*$", "", spec)  # a tag (blanked)
        m = re.match(r"([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s+(\S.*)$", spec)
        if m:
            names, spelled = [w.strip() for w in m.group(1).split(",")], m.group(2).strip()
        else:  # an embedded field: named by its type
            spelled = spec.strip()
            names = [spelled.lstrip("*").rsplit(".", 1)[-1]]
        try:
            t = go_type(spelled, types, seen)
        except Unsupported:
            continue  # not in the input state: zero value (a map: empty)
        fields += [(n, t) for n in names if n != "_"]
    return Type("struct", native=name, fields=tuple(fields))


def go_type(text: str, types: Mapping[str, str], seen: frozenset[str] = frozenset()) -> Type:
    """The protocol :class:`Type` of the Go type ``text``, with the type declarations ``types`` of x's
    file; :class:`Unsupported` when the harness cannot read it."""
    t = text.strip()
    if t in _INTS:
        bits, signed = _INTS[t]
        return Type("int", bits=bits, signed=signed, native=t)
    if t in ("float32", "float64"):
        return Type("float", native=t)
    if t == "bool":
        return Type("bool", native=t)
    if t == "string":
        return Type("str", native=t)
    if t == "rune":
        return Type("char", native=t)
    if t.startswith("[]"):
        elem = go_type(t[2:], types, seen)
        return Type("list", elem=elem, native=t)
    if re.fullmatch(r"[A-Za-z_]\w*", t) and t in types:
        if t in seen:
            raise Unsupported(f"recursive type {t}")
        definition = types[t].strip()
        if re.match(r"\[\s*[A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*\s+[^\]\s]", definition):  # [T any]
            raise Unsupported(f"generic type {t}{definition.split(']', 1)[0]}]")
        if definition.startswith("="):
            return go_type(definition[1:], types, seen | {t})
        if re.match(r"struct\s*\{", definition):
            return _fields(t, definition, types, seen | {t})
        under = go_type(definition, types, seen | {t})
        return Type(under.kind, bits=under.bits, signed=under.signed, elem=under.elem, native=t,
                    fields=under.fields)
    raise Unsupported(t)


def shapes(params: tuple, found: dict[str, tuple[str, ...]] | None = None) -> dict[str, tuple[str, ...]]:
    """The field names of every struct type among ``params``' types (nested ones too), by type name: the
    order in which the host sends a struct as a JSON array."""
    found = {} if found is None else found

    def walk(t: Type) -> None:
        if t.kind == "struct" and t.native not in found:
            found[t.native] = tuple(n for n, _ in t.fields)
            for _, ft in t.fields:
                walk(ft)
        elif t.elem is not None:
            walk(t.elem)

    for p in params:
        walk(p.type)
    return found
