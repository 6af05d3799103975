"""qsim.numerics against independent definitions: exact decimal arithmetic for rounding, Python's
int operators for division, and a Taylor series in 60-digit decimals for erf."""
from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qsim import numerics

SETTINGS = settings(derandomize=True, deadline=None, max_examples=400)

INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
finite_f64 = st.floats(allow_nan=False, allow_infinity=False)
# values where floor(x + 0.5) in floats goes wrong, and ties, and the ends of the float ranges
TRICKY = [0.49999999999999994, -0.49999999999999994, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.0, -0.0,
          2.0 ** 52 + 1, -(2.0 ** 52 + 1), 2.0 ** 53 - 1, 2.0 ** 52 - 0.5, -(2.0 ** 52 - 0.5),
          4503599627370495.5, 1e308, -1e308, 5e-324, -5e-324, float(np.finfo(np.float64).max)]


def exact_round(x: float) -> float:
    """floor(x + 1/2) in exact decimal arithmetic (Decimal(x) is the float's exact value)."""
    with localcontext() as ctx:
        ctx.prec = 1000
        return float((Decimal(x) + Decimal("0.5")).to_integral_value(rounding=ROUND_FLOOR))


def exact_round_half_down(x: float) -> float:
    with localcontext() as ctx:
        ctx.prec = 1000
        return float((Decimal(x) - Decimal("0.5")).to_integral_value(rounding=ROUND_CEILING))


# ---- nnef_round ------------------------------------------------------------------------------

@SETTINGS
@given(st.one_of(finite_f64, st.sampled_from(TRICKY)))
def test_round_is_floor_of_x_plus_half_exactly(x):
    r = numerics.nnef_round(x)
    assert isinstance(r, float)
    assert r == exact_round(x)
    assert numerics.nnef_round(np.array([x]))[0] == exact_round(x)


def test_round_ties_go_up_and_float_traps_are_avoided():
    assert [numerics.nnef_round(v) for v in (2.5, -2.5, 0.5, -0.5, -1.5)] == [3.0, -2.0, 1.0, 0.0, -1.0]
    assert numerics.nnef_round(0.49999999999999994) == 0.0       # float floor(x + 0.5) gives 1
    assert numerics.nnef_round(2.0 ** 52 + 1) == 2.0 ** 52 + 1   # float floor(x + 0.5) gives x + 1
    f32 = np.array([np.nextafter(np.float32(0.5), np.float32(0)), 2 ** 23 + 1, -2.5], np.float32)
    out = numerics.nnef_round(f32)
    assert out.dtype == np.float32 and out.tolist() == [0.0, 2 ** 23 + 1, -2.0]


def test_round_zero_signs_and_non_finite():
    # floor(-0.0 + 0.5) and floor(-0.3 + 0.5) are +0.0, as the spec's formula gives in IEEE arithmetic
    for v in (-0.0, -0.3, -0.5, 0.0):
        assert math.copysign(1.0, numerics.nnef_round(v)) == 1.0
    out = numerics.nnef_round(np.array([np.inf, -np.inf, np.nan]))
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])
    assert numerics.nnef_round(math.inf) == math.inf


def test_round_keeps_float_dtypes_and_makes_ints_float64():
    assert numerics.nnef_round(np.zeros(3, np.float16)).dtype == np.float16
    ints = numerics.nnef_round(np.array([1, -2], np.int32))
    assert ints.dtype == np.float64 and ints.tolist() == [1.0, -2.0]
    assert numerics.nnef_round(7) == 7.0
    assert numerics.nnef_round(2.5).astype(np.int64) == 3        # a numpy scalar, as quant uses it
    scalar32 = numerics.nnef_round(np.float32(1.5))
    assert isinstance(scalar32, np.float32) and scalar32 == 2.0


@SETTINGS
@given(st.one_of(finite_f64, st.sampled_from(TRICKY)))
def test_round_half_down_is_ceil_of_x_minus_half_exactly(x):
    assert numerics.round_half_down(x) == exact_round_half_down(x)
    assert numerics.round_half_down(np.array([x]))[0] == exact_round_half_down(x)


def test_resize_rounding_methods():
    x = np.array([-0.5, 0.5, 1.5, 1.2, 1.7])
    got = {name: fn(x).tolist() for name, fn in numerics.RESIZE_ROUNDING.items()}
    assert got == {"FLOOR": [-1, 0, 1, 1, 1], "CEIL": [-0.0, 1, 2, 2, 2],
                   "ROUND_PREFER_FLOOR": [-1, 0, 1, 1, 2], "ROUND_PREFER_CEIL": [0, 1, 2, 1, 2]}


# ---- integer division ------------------------------------------------------------------------

ints = st.integers(min_value=-2 ** 70, max_value=2 ** 70)
nonzero = ints.filter(lambda v: v != 0)
int64s = st.integers(INT64_MIN, INT64_MAX)
int64_nonzero = int64s.filter(lambda v: v != 0)


def _c_quotient(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


@SETTINGS
@given(ints, nonzero)
def test_python_int_division_matches_the_definitions(a, b):
    assert numerics.floor_div(a, b) == a // b
    assert numerics.floor_mod(a, b) == a - (a // b) * b
    assert numerics.ceil_div(a, b) == -((-a) // b)
    assert numerics.trunc_div(a, b) == _c_quotient(a, b)
    assert numerics.floor_div(a, b) * b + numerics.floor_mod(a, b) == a
    for r in (numerics.floor_div(a, b), numerics.ceil_div(a, b), numerics.trunc_div(a, b)):
        assert type(r) is int


def _fits(v: int) -> bool:
    return INT64_MIN <= v <= INT64_MAX


@SETTINGS
@given(st.lists(st.tuples(st.one_of(int64s, st.sampled_from([INT64_MIN, INT64_MAX, 0, -1, 1])),
                          st.one_of(int64_nonzero, st.sampled_from([INT64_MIN, INT64_MAX, -1, 1, 2, -2]))),
                min_size=1, max_size=20))
def test_int64_array_division_matches_python_ints_up_to_the_int64_limits(pairs):
    pairs = [(a, b) for a, b in pairs if not (a == INT64_MIN and b == -1)]   # the one overflow
    if not pairs:
        return
    a = np.array([p[0] for p in pairs], np.int64)
    b = np.array([p[1] for p in pairs], np.int64)
    for fn, exact in ((numerics.floor_div, lambda x, y: x // y), (numerics.floor_mod, lambda x, y: x % y),
                      (numerics.ceil_div, lambda x, y: -((-x) // y)), (numerics.trunc_div, _c_quotient)):
        got = fn(a, b)
        assert got.dtype == np.int64
        want = [exact(x, y) for x, y in pairs]
        assert all(_fits(w) for w in want)
        assert got.tolist() == want, fn.__name__


def test_division_rounding_directions():
    assert (numerics.floor_div(-7, 2), numerics.ceil_div(-7, 2), numerics.trunc_div(-7, 2)) == (-4, -3, -3)
    assert (numerics.floor_div(7, -2), numerics.ceil_div(7, -2), numerics.trunc_div(7, -2)) == (-4, -3, -3)
    assert (numerics.floor_mod(-7, 2), numerics.floor_mod(7, -2)) == (1, -1)
    # at INT64_MIN, -((-a) // b) on int64 would wrap: ceil_div does not negate
    assert numerics.ceil_div(np.array([INT64_MIN]), np.array([2])).tolist() == [-2 ** 62]
    assert numerics.trunc_div(np.array([INT64_MIN + 1], np.int64), np.array([2])).tolist() == [-(2 ** 62) + 1]
    # int32 stays int32 (the TOSA reference casts nothing back)
    assert numerics.trunc_div(np.array([-7], np.int32), np.array([2], np.int32)).dtype == np.int32


# ---- erf -------------------------------------------------------------------------------------

_PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899")


def series_erf(x: float) -> float:
    """2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)) in 80-digit decimals (|x| <= 4)."""
    with localcontext() as ctx:
        ctx.prec = 80
        d = Decimal(x)
        term, total, n = d, Decimal(0), 0
        while True:
            add = term / (2 * n + 1)
            total += add
            if add == 0 or abs(add) < Decimal(10) ** -70:
                break
            n += 1
            term = -term * d * d / n
        return float(2 / _PI.sqrt() * total)


@settings(derandomize=True, deadline=None, max_examples=200)
@given(st.floats(min_value=-4.0, max_value=4.0))
def test_erf_matches_its_series_within_one_ulp(x):
    want = series_erf(x)
    got = numerics.erf(x)
    assert abs(got - want) <= math.ulp(want)
    assert numerics.erf(np.array([x]))[0] == got


def test_erf_limits_symmetry_and_types():
    assert numerics.erf(7.0) == 1.0 and numerics.erf(-7.0) == -1.0
    assert numerics.erf(math.inf) == 1.0 and math.isnan(numerics.erf(math.nan))
    assert math.copysign(1.0, numerics.erf(-0.0)) == -1.0
    a = np.array([[0.5, -0.5], [2.0, -2.0]], np.float32)
    out = numerics.erf(a)
    assert out.dtype == np.float64 and out.shape == (2, 2)
    assert out[0, 0] == -out[0, 1] and out[1, 0] == -out[1, 1]
    assert numerics.erf(np.zeros((0, 3))).shape == (0, 3)


if __name__ == "__main__":
    pytest.main([__file__])
