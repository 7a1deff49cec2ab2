"""Bijections on Python integers for the I/O-isomorphism probe.

An isomorphism T_θ: V → V with T⁻¹(T(v)) = v re-encodes every integer a task consumes or produces
while leaving the algorithm untouched (Rajput et al., "Memorization Diagnostics for Code LLMs Should
be Scale-Aware", §5.4). Three families are implemented, the paper's affine map and the two of its
ablation (§7.1): base conversion and a cubic polynomial. All arithmetic is exact integer arithmetic,
so the round trip holds for integers of any size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Protocol, runtime_checkable

from calib._exceptions import CalibError, InvalidParameterError

__all__ = [
    "FAMILIES",
    "Affine",
    "BaseDigits",
    "Bijection",
    "Cubic",
    "NotInDomain",
    "RoundTripError",
    "check_roundtrip",
    "count_ints",
    "integer_cube_root",
    "make_bijection",
    "map_ints",
]


class NotInDomain(CalibError, ValueError):
    """A value lies outside the domain of T (``forward``) or the image of T (``inverse``).

    Parameters
    ----------
    value
        The offending integer.
    reason
        Why it is outside the domain, in a few words.
    """

    def __init__(self, value: int, reason: str) -> None:
        self.value = value
        self.reason = reason
        super().__init__(f"{value!r}: {reason}")


class RoundTripError(CalibError, AssertionError):
    """T⁻¹(T(v)) ≠ v for some v: a bug in a bijection, never a property of a task."""


@runtime_checkable
class Bijection(Protocol):
    """An exact bijection T between a subset of the integers and its image."""

    @property
    def family(self) -> str:
        """``"affine"``, ``"base"`` or ``"cubic"``."""

    def forward(self, v: int) -> int:
        """T(v); raises :class:`NotInDomain` outside the domain."""

    def inverse(self, u: int) -> int:
        """T⁻¹(u); raises :class:`NotInDomain` when u is not in the image of T."""

    def formula(self) -> str:
        """T written for people, e.g. ``"T(v) = 3·v + 5"``."""

    def inverse_formula(self) -> str:
        """T⁻¹ written for people."""

    def python_source(self, encode_name: str = "encode", decode_name: str = "decode") -> str:
        """Source of two self-contained Python functions implementing T and T⁻¹."""

    def params(self) -> dict[str, int]:
        """The parameters θ of T, by name."""


def _check_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterError(f"{name} must be an int, got {value!r}")


def integer_cube_root(n: int) -> int:
    """The real cube root of n rounded toward zero, exactly, for an integer n of any size.

    Newton's method for x³ = n in integer arithmetic, x ← ⌊(2x + ⌊n/x²⌋)/3⌋, started above the root.
    By the AM–GM inequality (2x + n/x²)/3 ≥ ∛n, so every iterate stays ≥ ⌊∛n⌋, and while x > ⌊∛n⌋ the
    next iterate is strictly smaller; the first non-decreasing step therefore stops at ⌊∛n⌋. No floating
    point, so 10**300 works.
    """
    _check_int("n", n)
    if n < 0:
        return -integer_cube_root(-n)
    if n < 2:
        return n
    x = 1 << -(-n.bit_length() // 3)  # 2**ceil(bits/3) > ∛n
    while True:
        y = (2 * x + n // (x * x)) // 3
        if y >= x:
            return x
        x = y


def _signed(term: str, constant: int) -> str:
    if constant == 0:
        return term
    return f"{term} + {constant}" if constant > 0 else f"{term} - {-constant}"


@dataclass(frozen=True)
class Affine:
    """T(v) = a·v + b on all integers; T⁻¹(u) = (u − b) / a where a divides u − b.

    Parameters
    ----------
    a : int
        Slope, a ≠ 0 (and not the identity a = 1, b = 0).
    b : int
        Offset.
    """

    a: int = 3
    b: int = 5
    family: ClassVar[str] = "affine"

    def __post_init__(self) -> None:
        _check_int("a", self.a)
        _check_int("b", self.b)
        if self.a == 0:
            raise InvalidParameterError("a must be a non-zero integer (a = 0 maps every value to b), got 0")
        if (self.a, self.b) == (1, 0):
            raise InvalidParameterError("a=1, b=0 is the identity, which changes nothing; choose another a or b")

    def forward(self, v: int) -> int:
        return self.a * v + self.b

    def inverse(self, u: int) -> int:
        q, r = divmod(u - self.b, self.a)
        if r:
            raise NotInDomain(
                u, f"not in the image of {self.formula()}: u - b = {u - self.b} is not divisible by {self.a}")
        return q

    def formula(self) -> str:
        return f"T(v) = {_signed(f'{self.a}·v', self.b)}"

    def inverse_formula(self) -> str:
        return f"T⁻¹(u) = ({_signed('u', -self.b)}) / {self.a if self.a > 0 else f'({self.a})'}"

    def python_source(self, encode_name: str = "encode", decode_name: str = "decode") -> str:
        return (
            f"def {encode_name}(v):\n"
            f"    return {self.a} * v + {self.b}\n\n\n"
            f"def {decode_name}(u):\n"
            f"    q, r = divmod(u - {self.b}, {self.a})\n"
            f"    if r:\n"
            f"        raise ValueError(f'{{u!r}} is not an encoded integer')\n"
            f"    return q\n"
        )

    def params(self) -> dict[str, int]:
        return {"a": self.a, "b": self.b}


@dataclass(frozen=True)
class BaseDigits:
    """T(v) reads the decimal digits of |v| as a base-``base`` numeral, keeping the sign.

    With base 7, T(25) = 2·7 + 5 = 19 and T⁻¹(19) = 25 (Rajput et al., §7.1). For base < 10, T is
    defined only on integers whose decimal digits are all < base, and T⁻¹ on every integer. For
    base > 10, T is defined everywhere and T⁻¹ only where every base-``base`` digit is ≤ 9.

    Parameters
    ----------
    base : int
        2 ≤ base ≤ 36, base ≠ 10.
    """

    base: int = 7
    family: ClassVar[str] = "base"

    def __post_init__(self) -> None:
        _check_int("base", self.base)
        if not 2 <= self.base <= 36 or self.base == 10:
            raise InvalidParameterError(f"base must be in 2..36 and not 10 (base 10 is the identity), got {self.base}")

    def forward(self, v: int) -> int:
        try:
            digits = str(abs(v))
        except ValueError as exc:  # beyond sys.get_int_max_str_digits()
            raise NotInDomain(v, "too many decimal digits to convert") from exc
        if self.base < 10:
            for d in digits:
                if int(d) >= self.base:
                    raise NotInDomain(v, f"decimal digit {d} is not a base-{self.base} digit")
        value = int(digits, self.base)
        return -value if v < 0 else value

    def inverse(self, u: int) -> int:
        n, digits = abs(u), []
        while True:
            n, d = divmod(n, self.base)
            if d > 9:
                raise NotInDomain(u, f"its base-{self.base} digits include {d}, which is not a decimal digit")
            digits.append(str(d))
            if n == 0:
                break
        value = int("".join(reversed(digits)))
        return -value if u < 0 else value

    def _example(self) -> int:
        return 25 if self.base > 5 else int(f"1{self.base - 1}")

    def formula(self) -> str:
        v = self._example()
        return (f"T(v) = the decimal digits of |v| read as a base-{self.base} numeral, sign kept "
                f"(e.g. T({v}) = {self.forward(v)})")

    def inverse_formula(self) -> str:
        v = self._example()
        return (f"T⁻¹(u) = the base-{self.base} digits of |u| read as a decimal numeral, sign kept "
                f"(e.g. T⁻¹({self.forward(v)}) = {v})")

    def python_source(self, encode_name: str = "encode", decode_name: str = "decode") -> str:
        b = self.base
        return (
            f"def {encode_name}(v):\n"
            f"    digits = str(abs(v))\n"
            f"    if any(int(d) >= {b} for d in digits):\n"
            f"        raise ValueError(f'{{v!r}} has a decimal digit that is not a base-{b} digit')\n"
            f"    value = int(digits, {b})\n"
            f"    return -value if v < 0 else value\n\n\n"
            f"def {decode_name}(u):\n"
            f"    n, digits = abs(u), ''\n"
            f"    while True:\n"
            f"        n, d = divmod(n, {b})\n"
            f"        if d > 9:\n"
            f"            raise ValueError(f'{{u!r}} is not an encoded integer')\n"
            f"        digits = str(d) + digits\n"
            f"        if n == 0:\n"
            f"            break\n"
            f"    value = int(digits)\n"
            f"    return -value if u < 0 else value\n"
        )

    def params(self) -> dict[str, int]:
        return {"base": self.base}


@dataclass(frozen=True)
class Cubic:
    """T(v) = v³ + c on all integers; T⁻¹(u) = ∛(u − c) where u − c is a perfect cube (Rajput et al., §7.1).

    Parameters
    ----------
    c : int
        Offset added to the cube.
    """

    c: int = 1
    family: ClassVar[str] = "cubic"

    def __post_init__(self) -> None:
        _check_int("c", self.c)

    def forward(self, v: int) -> int:
        return v**3 + self.c

    def inverse(self, u: int) -> int:
        w = u - self.c
        r = integer_cube_root(w)
        if r**3 != w:
            raise NotInDomain(u, f"not in the image of {self.formula()}: u - c = {w} is not a perfect cube")
        return r

    def formula(self) -> str:
        return f"T(v) = {_signed('v³', self.c)}"

    def inverse_formula(self) -> str:
        return f"T⁻¹(u) = ∛({_signed('u', -self.c)}), the exact integer cube root (negative for negative values)"

    def python_source(self, encode_name: str = "encode", decode_name: str = "decode") -> str:
        return (
            f"def {encode_name}(v):\n"
            f"    return v ** 3 + {self.c}\n\n\n"
            f"def {decode_name}(u):\n"
            f"    w = u - {self.c}\n"
            f"    n = abs(w)\n"
            f"    r = n\n"
            f"    if n >= 2:\n"
            f"        r = 1 << -(-n.bit_length() // 3)\n"
            f"        while True:\n"
            f"            y = (2 * r + n // (r * r)) // 3\n"
            f"            if y >= r:\n"
            f"                break\n"
            f"            r = y\n"
            f"    if r ** 3 != n:\n"
            f"        raise ValueError(f'{{u!r}} is not an encoded integer')\n"
            f"    return -r if w < 0 else r\n"
        )

    def params(self) -> dict[str, int]:
        return {"c": self.c}


FAMILIES: dict[str, type] = {"affine": Affine, "base": BaseDigits, "cubic": Cubic}


def make_bijection(family: str, **params: int) -> Bijection:
    """Build a bijection of a family; omitted parameters take the paper's defaults.

    Parameters
    ----------
    family : str
        ``"affine"`` (a=3, b=5), ``"base"`` (base=7, the paper's example) or ``"cubic"`` (c=1).
    **params : int
        The family's parameters: ``a``, ``b`` / ``base`` / ``c``.
    """
    cls = FAMILIES.get(family)
    if cls is None:
        raise InvalidParameterError(f"family must be one of {', '.join(sorted(FAMILIES))}, got {family!r}")
    allowed = tuple(f.name for f in fields(cls))
    for name in params:
        if name not in allowed:
            raise InvalidParameterError(
                f"{family} bijection has no parameter {name!r}; its parameters are {', '.join(allowed)}")
    return cls(**params)


def check_roundtrip(bijection: Bijection, v: int) -> int:
    """Return T(v) after asserting T⁻¹(T(v)) = v; a failure raises :class:`RoundTripError` (a bug)."""
    u = bijection.forward(v)
    try:
        back = bijection.inverse(u)
    except NotInDomain as exc:
        raise RoundTripError(f"{bijection!r}: T({v!r}) = {u!r} but T⁻¹ rejects it: {exc}") from exc
    if back != v:
        raise RoundTripError(f"{bijection!r}: T⁻¹(T({v!r})) = {back!r}, not {v!r}")
    return u


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def map_ints(value: Any, fn: Callable[[int], int]) -> Any:
    """A copy of ``value`` with every ``int`` (not ``bool``) replaced by ``fn(int)``.

    Recurses into lists, tuples, sets, frozensets and dicts (keys and values); floats, strings,
    bytes, ``None`` and anything else are returned unchanged. Containers come back as the plain
    built-in type (``list``, ``tuple``, ``dict``, ``set``, ``frozenset``).
    """
    if _is_int(value):
        return fn(value)
    if isinstance(value, list):
        return [map_ints(item, fn) for item in value]
    if isinstance(value, tuple):
        return tuple(map_ints(item, fn) for item in value)
    if isinstance(value, dict):
        return {map_ints(k, fn): map_ints(v, fn) for k, v in value.items()}
    if isinstance(value, frozenset):
        return frozenset(map_ints(item, fn) for item in value)
    if isinstance(value, set):
        return {map_ints(item, fn) for item in value}
    return value


def count_ints(value: Any) -> int:
    """How many ``int`` values (not ``bool``) :func:`map_ints` would replace in ``value``."""
    if _is_int(value):
        return 1
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(count_ints(item) for item in value)
    if isinstance(value, dict):
        return sum(count_ints(k) + count_ints(v) for k, v in value.items())
    return 0
