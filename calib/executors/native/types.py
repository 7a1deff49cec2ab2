"""Language-neutral parameter types and seeded input synthesis for the native executors.

A :class:`Type` is what the harness of every language can read from and write to JSON: integers (with
their width and signedness), floats, booleans, single characters, strings, arrays of those, and (C) structs
of scalars. A
:class:`Param` is one logical argument: its name, type and whether the function may change it (its
post-call state is then part of the output). A :class:`Signature` is what a language's parser returns.

Input synthesis (:func:`synthesize`) is deterministic for a seed: small values near 0 most of the
time, the type's boundaries now and then, strings of length 0-8, arrays of length 0-5.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["LineCoverage", "Param", "Signature", "Type", "Unsupported", "args_of", "check_state", "synthesize"]


class Unsupported(Exception):  # noqa: N818 - a reason, not an error of calib
    """A parameter or return type the harness cannot read or write (``unsupported: <type>``)."""


@dataclass(frozen=True)
class Type:
    """A value type of the JSON protocol: ``int``, ``float``, ``bool``, ``char``, ``str`` or ``list``."""

    kind: str
    bits: int = 64
    signed: bool = True
    elem: Type | None = None
    native: str = ""  # the type as the source spells it (for messages and the glue)
    fields: tuple[tuple[str, Type], ...] = ()  # a struct's fields, in declaration order

    def __post_init__(self) -> None:
        if self.kind not in ("int", "float", "bool", "char", "str", "list", "struct", "void"):
            raise ValueError(f"kind={self.kind!r}: need int, float, bool, char, str, list, struct or void")
        if (self.kind == "list") != (self.elem is not None):
            raise ValueError("elem: a list type needs an element type, no other type takes one")


@dataclass(frozen=True)
class Param:
    """One argument of the function under test, as the input state names it."""

    name: str
    type: Type
    mutable: bool = False  # report the argument's post-call state
    length: str = ""  # C: the name of the integer parameter that carries this array's length
    by_pointer: bool = False  # C: a struct passed as a pointer to one local struct
    capacity: int = 0  # C: a pointer to numbers with no length parameter: a zeroed buffer this long


@dataclass(frozen=True)
class Signature:
    """The function's name, its logical parameters (those an input state assigns) and return type."""

    name: str
    params: tuple[Param, ...]
    returns: Type
    raw_params: tuple[str, ...] = ()  # C: every parameter name in order, length parameters included
    preamble: tuple[tuple[str, str], ...] = ()  # C: (struct name, definition) every variant needs


def _int_value(rng: random.Random, t: Type) -> int:
    lo = -(1 << (t.bits - 1)) if t.signed else 0
    hi = (1 << (t.bits - 1)) - 1 if t.signed else (1 << t.bits) - 1
    roll = rng.random()
    if roll < 0.05:
        return rng.choice([lo, hi, lo + 1, hi - 1])
    if roll < 0.2:
        value = rng.randint(-1000, 1000)
    else:
        value = rng.randint(-10, 10)
    if not t.signed:
        value = abs(value)
    return max(lo, min(hi, value))


_ALPHABET = "abcdexyz ABZ019_-"


def _value(rng: random.Random, t: Type) -> Any:
    if t.kind == "int":
        return _int_value(rng, t)
    if t.kind == "float":
        roll = rng.random()
        if roll < 0.2:
            return float(rng.randint(-3, 3))
        return round(rng.uniform(-100.0, 100.0) if roll < 0.4 else rng.uniform(-10.0, 10.0), 3)
    if t.kind == "bool":
        return rng.random() < 0.5
    if t.kind == "char":
        return rng.choice(_ALPHABET)
    if t.kind == "str":
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 8)))
    if t.kind == "list":
        assert t.elem is not None
        elem = t.elem
        if elem.kind == "int":  # array elements: small, so that sums and products stay in range
            return [rng.randint(-10, 20) if elem.signed else rng.randint(0, 20) for _ in range(rng.randint(0, 5))]
        return [_value(rng, elem) for _ in range(rng.randint(0, 5))]
    if t.kind == "struct":
        return {name: _value(rng, ft) for name, ft in t.fields}
    raise Unsupported(t.native or t.kind)


def synthesize(sig: Signature, count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` distinct input states for ``sig`` (fewer if its parameters admit fewer), seeded by ``seed``.

    The first state is all-zero/empty (the base case most functions handle); the others are drawn with
    a :class:`random.Random` seeded by ``seed`` and the signature, so each run draws the same states."""
    rng = random.Random(f"{seed}:{sig.name}:{[(p.name, p.type) for p in sig.params]}")
    zero = {"int": 0, "float": 0.0, "bool": False, "char": "a", "str": "", "list": []}
    states: list[dict[str, Any]] = []
    seen: set[str] = set()
    def empty(t: Type) -> Any:
        return {name: empty(ft) for name, ft in t.fields} if t.kind == "struct" else zero[t.kind]

    first = {p.name: empty(p.type) for p in sig.params}
    for attempt in range(count * 20):
        state = first if attempt == 0 else {p.name: _value(rng, p.type) for p in sig.params}
        key = json.dumps(state, sort_keys=True)
        if key not in seen:
            seen.add(key)
            states.append(state)
        if len(states) == count:
            break
    return states


def check_state(sig: Signature, state: Any) -> list[Any]:
    """The argument values of a user-given input state, in parameter order; ValueError when it does not
    assign exactly the function's parameters."""
    if not isinstance(state, dict):
        raise ValueError(f"input state {state!r}: need a mapping of parameter name to value")
    names = [p.name for p in sig.params]
    if sorted(state) != sorted(names):
        raise ValueError(f"input state {state!r}: need exactly the parameters {names}")
    return [state[n] for n in names]


def _wire(t: Type, value: Any) -> Any:
    """A value as the harness reads it: a struct (a JSON object in the state) as the array of its fields."""
    if t.kind == "struct" and isinstance(value, dict):
        return [_wire(ft, value.get(name)) for name, ft in t.fields]
    return value


def args_of(sig: Signature, states: Sequence[dict[str, Any]]) -> list[list[Any]]:
    """The JSON the harness reads: one array of argument values per state."""
    return [[_wire(p.type, s[p.name]) for p in sig.params] for s in states]


@dataclass(frozen=True)
class LineCoverage:
    """What the inputs reached of x's own executable lines."""

    value: float  # executed / executable lines of x's function
    executable: int
    executed: int
    uncovered: tuple[int, ...]  # x's lines (1 = the first line of x's source) no input reached
