"""Bijections of the I/O-isomorphism probe: exact values, round trips, domains, nested mapping."""

from __future__ import annotations

import random

import pytest

from calib._exceptions import CalibError
from calib.probes.transforms import (
    Affine,
    BaseDigits,
    Bijection,
    Cubic,
    NotInDomain,
    RoundTripError,
    check_roundtrip,
    count_ints,
    integer_cube_root,
    make_bijection,
    map_ints,
)

ALL = [Affine(3, 5), Affine(-7, 2), Affine(2, -9), BaseDigits(7), BaseDigits(2), BaseDigits(16), BaseDigits(36),
       Cubic(1), Cubic(-4), Cubic(0)]
FIXED = [0, 1, -1, 2, -2, 5, 10, 25, -25, 100, 101, 1010, 123456, -654321, 10**30, -(10**30), 10**30 + 1, 3**80]


def _in_domain(t: Bijection, v: int) -> bool:
    try:
        t.forward(v)
    except NotInDomain:
        return False
    return True


def test_paper_base7_example():
    # Rajput et al. §7.1: "25" read in base 7 is 2*7 + 5 = 19, and 19 in base 7 is "25".
    t = make_bijection("base", base=7)
    assert t.forward(25) == 19
    assert t.inverse(19) == 25
    assert t.forward(-25) == -19 and t.inverse(-19) == -25


@pytest.mark.parametrize("t", ALL, ids=repr)
def test_roundtrip_fixed_values(t):
    checked = 0
    for v in FIXED:
        if _in_domain(t, v):
            assert t.inverse(t.forward(v)) == v
            checked += 1
    assert checked >= 4  # 0, 1, -1, 10, 100, 101, 1010, 10**30 are in every family's domain


@pytest.mark.parametrize("t", ALL, ids=repr)
def test_roundtrip_seeded_random(t):
    rng = random.Random(20240611)
    n = 0
    for _ in range(400):
        if rng.random() < 0.5:
            v = rng.randint(-10**6, 10**6)
        else:
            v = rng.choice([-1, 1]) * rng.getrandbits(rng.randint(1, 200))
        if t.family == "base" and t.base < 10:
            # Build v from base-b digits so it is in the domain half of the time as well.
            v = int("".join(str(rng.randrange(t.base)) for _ in range(rng.randint(1, 40)))) * rng.choice([-1, 1])
        assert t.inverse(t.forward(v)) == v
        n += 1
    assert n == 400


@pytest.mark.parametrize("t", ALL, ids=repr)
def test_inverse_then_forward_on_image(t):
    # T(T⁻¹(u)) = u wherever T⁻¹(u) is defined: T is a bijection onto its image.
    hits = 0
    for u in range(-3000, 3000):
        try:
            v = t.inverse(u)
        except NotInDomain:
            continue
        assert t.forward(v) == u
        hits += 1
    assert hits > 0


def test_hand_computed_values():
    assert Affine(3, 5).forward(2) == 11 and Affine(3, 5).inverse(20) == 5  # 3*2+5 ; (20-5)/3
    assert BaseDigits(2).forward(101) == 5 and BaseDigits(2).inverse(6) == 110  # 1*4+0*2+1 ; 6 = 0b110
    assert BaseDigits(16).forward(25) == 37 and BaseDigits(16).inverse(37) == 25  # 0x25 = 37
    assert Cubic(1).forward(-3) == -26 and Cubic(1).inverse(-26) == -3  # (-3)**3 + 1
    assert Cubic(1).forward(10**30) == 10**90 + 1 and Cubic(1).inverse(10**90 + 1) == 10**30


def test_integer_cube_root_is_exact_for_large_values():
    for n in [0, 1, 7, 8, 9, 26, 27, 28, 10**90 - 1, 10**90, 10**90 + 1, 3**300 - 1, 3**300, -27, -28, -(10**90)]:
        r = integer_cube_root(n)
        m = abs(n)
        # floor-cube-root characterisation, on |n| (rounding toward zero for negative n)
        assert abs(r) ** 3 <= m < (abs(r) + 1) ** 3
        assert (r < 0) == (n < 0) or r == 0


def test_domain_errors_name_value_and_reason():
    with pytest.raises(NotInDomain, match=r"^79: decimal digit 7 is not a base-7 digit") as info:
        BaseDigits(7).forward(79)  # both 7 and 9 are >= 7; the first offending digit is named
    with pytest.raises(NotInDomain, match=r"^-19: decimal digit 9"):
        BaseDigits(7).forward(-19)
    assert info.value.value == 79 and isinstance(info.value, ValueError) and isinstance(info.value, CalibError)
    with pytest.raises(NotInDomain, match=r"^7: .*not divisible by 3"):
        Affine(3, 5).inverse(7)  # (7 - 5) / 3 is not an integer
    with pytest.raises(NotInDomain, match=r"^10: .*not a perfect cube"):
        Cubic(1).inverse(10)  # 9 is not a cube
    with pytest.raises(NotInDomain, match=r"digits include 10"):
        BaseDigits(16).inverse(10)  # 10 is "a" in base 16


def test_python_source_matches_methods():
    for t in ALL:
        ns: dict = {}
        exec(t.python_source(), ns)
        for v in FIXED + list(range(-50, 50)):
            if not _in_domain(t, v):
                with pytest.raises(ValueError):
                    ns["encode"](v)
                continue
            assert ns["encode"](v) == t.forward(v)
            assert ns["decode"](t.forward(v)) == v
        for u in range(-200, 200):
            try:
                expected = t.inverse(u)
            except NotInDomain:
                with pytest.raises(ValueError):
                    ns["decode"](u)
            else:
                assert ns["decode"](u) == expected
    ns = {}
    exec(Affine(3, 5).python_source("enc", "dec"), ns)
    assert ns["enc"](2) == 11 and ns["dec"](11) == 2 and "encode" not in ns


def test_formulas():
    assert Affine(3, 5).formula() == "T(v) = 3·v + 5"
    assert Affine(3, 5).inverse_formula() == "T⁻¹(u) = (u - 5) / 3"
    assert Affine(-2, -1).formula() == "T(v) = -2·v - 1"
    assert Cubic(1).formula() == "T(v) = v³ + 1"
    assert "T(25) = 19" in BaseDigits(7).formula() and "T⁻¹(19) = 25" in BaseDigits(7).inverse_formula()
    assert "T(11) = 3" in BaseDigits(2).formula()  # "11" read in base 2


def test_make_bijection_defaults_and_errors():
    assert make_bijection("affine") == Affine(3, 5)
    assert make_bijection("base") == BaseDigits(7)
    assert make_bijection("cubic") == Cubic(1)
    assert make_bijection("affine", b=0, a=2).params() == {"a": 2, "b": 0}
    assert all(isinstance(t, Bijection) for t in ALL)
    assert [t.family for t in (Affine(), BaseDigits(), Cubic())] == ["affine", "base", "cubic"]
    with pytest.raises(ValueError, match="affine, base, cubic"):
        make_bijection("quadratic")
    with pytest.raises(ValueError, match="'base'.*parameters are c"):
        make_bijection("cubic", base=3)
    with pytest.raises(ValueError, match="a must be a non-zero"):
        Affine(0, 1)
    with pytest.raises(ValueError, match="identity"):
        Affine(1, 0)
    with pytest.raises(ValueError, match="base must be in 2..36 and not 10"):
        BaseDigits(10)
    with pytest.raises(ValueError, match="base must be in 2..36"):
        BaseDigits(37)
    with pytest.raises(ValueError, match="c must be an int"):
        Cubic(True)


def test_check_roundtrip_catches_a_broken_bijection():
    class Broken(Affine):
        def inverse(self, u):
            return super().inverse(u) + 1

    assert check_roundtrip(Affine(3, 5), 4) == 17
    with pytest.raises(RoundTripError):
        check_roundtrip(Broken(3, 5), 4)


def test_map_ints_nested_and_bool_untouched():
    value = {1: [2, (3, True), {4, 5}], "k": frozenset({6}), 7.0: None, False: "s", (8,): 2.5}
    out = map_ints(value, lambda v: v * 10)
    assert out == {10: [20, (30, True), {40, 50}], "k": frozenset({60}), 7.0: None, False: "s", (80,): 2.5}
    assert type(out[10][1]) is tuple and type(out["k"]) is frozenset and type(out[10][2]) is set
    assert out[10][1][1] is True and False in out  # bools are never mapped, as keys or values
    assert count_ints(value) == 7  # keys 1 and 8 (inside (8,)); values 2, 3, 4, 5, 6
    assert count_ints([True, False, 1.0, "1", None]) == 0
    assert map_ints(True, lambda v: v + 1) is True
    assert value == {1: [2, (3, True), {4, 5}], "k": frozenset({6}), 7.0: None, False: "s", (8,): 2.5}  # no mutation
