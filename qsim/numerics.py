"""The numeric formulas several stages share, defined once.

Each function takes a Python scalar (and returns a Python scalar) or a numpy array (and returns an
array of the shape numpy broadcasting gives). They are exact where the specification is exact:

- `nnef_round`: NNEF's `round`, floor(x + 0.5) on the real value of x (NNEF 1.0 4.2.1; the NNEF
  2.0 draft's `round` (2.4 built-ins, 4.2.1 operator `math.round`) does not restate it). Ties go
  towards +inf: 2.5 → 3, -2.5 → -2. Computed as floor(x) + (frac(x) >= 1/2), which is exact for
  every float; the literal `floor(x + 0.5)` is not (x + 0.5 rounds for 0.49999999999999994 and for
  odd integers past 2**52, giving 1.0 and x + 1).
- `round_half_down`: ceil(x - 0.5), the ROUND_PREFER_FLOOR of `image.nearest_resize` (NNEF 2.0
  4.5); `RESIZE_ROUNDING` maps each `rounding_method` of that operator to its formula.
- `floor_div`, `ceil_div`, `floor_mod`: SkriptND's int operators `/` (rounds downwards), `\\`
  (rounds upwards) and `%` (modulo, the remainder of `/`: a == floor_div(a, b) * b + floor_mod(a, b),
  so it has the sign of b) (NNEF 2.0 draft 2.4, "Operators").
- `trunc_div`: C integer division, rounding toward zero (TOSA 0.30 3.3.2 `idiv`, 2.5.6 INTDIV;
  CVM `broadcast_div`).
- `erf`: the error function per element at double precision (the standard `nn.gelu`/`nn.erf`
  use it; 2.4's list of built-ins lacks it).

Divisors must be nonzero (callers report a zero divisor with the place it came from). On int64
arrays the result must fit int64: the only quotient that does not, INT64_MIN / -1, wraps as in
numpy; Python ints are unbounded.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np


# ---- rounding --------------------------------------------------------------------------------

def _float_array(x) -> np.ndarray:
    a = np.asarray(x)
    return a if a.dtype.kind == "f" else a.astype(np.float64)


def _round_half_up(a: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):       # inf - inf is nan, which compares false: inf stays inf
        lower = np.floor(a)
        # a - floor(a) is exact, and so the comparison with the representable 1/2 is exact; when it
        # holds a is not an integer, so |a| < 2**(mantissa bits) and lower + 1 is exact too.
        # + 0.0 turns the -0.0 of floor(-0.0) or of -1 + 1 into the +0.0 of floor(-0.0 + 0.5).
        return np.where(a - lower >= 0.5, lower + 1, lower) + a.dtype.type(0.0)


def nnef_round(x):
    """NNEF `round`: floor(x + 0.5) exactly, ties towards +inf (NNEF 1.0 4.2.1).

    A float array keeps its dtype, an int array becomes float64; a scalar gives a numpy scalar
    (np.float64 for a Python number: a float that also has the array methods, e.g. astype).
    """
    if isinstance(x, np.ndarray):
        return _round_half_up(_float_array(x))
    if isinstance(x, (int, float)):
        x = np.float64(x)
    return _round_half_up(_float_array(x))[()]


def round_half_down(x):
    """ceil(x - 0.5) exactly, ties towards -inf (ROUND_PREFER_FLOOR of NNEF 2.0 4.5)."""
    return -nnef_round(-_float_array(x)) if isinstance(x, np.ndarray) else -nnef_round(-x)


# image.nearest_resize's `rounding_method` (NNEF 2.0 4.5): source coordinate → source index.
RESIZE_ROUNDING: dict[str, Callable] = {
    "FLOOR": np.floor, "CEIL": np.ceil,
    "ROUND_PREFER_FLOOR": round_half_down, "ROUND_PREFER_CEIL": nnef_round,
}


# ---- integer division ------------------------------------------------------------------------

def _is_array(*values) -> bool:
    return any(isinstance(v, (np.ndarray, np.generic)) for v in values)


def floor_div(a, b):
    """SkriptND `/` on ints: the quotient rounded downwards (2.4)."""
    return np.floor_divide(a, b) if _is_array(a, b) else a // b


def floor_mod(a, b):
    """SkriptND `%` on ints: a - floor_div(a, b) * b, with the sign of b (2.4)."""
    return np.mod(a, b) if _is_array(a, b) else a % b


def ceil_div(a, b):
    """SkriptND `\\` on ints: the quotient rounded upwards (2.4).

    floor + 1 where the division is inexact; unlike -((-a) // b) this never negates a, so it
    is right on int64 arrays at INT64_MIN too."""
    if _is_array(a, b):
        return np.floor_divide(a, b) + (np.mod(a, b) != 0)
    return a // b + (a % b != 0)


def trunc_div(a, b):
    """C integer division: the quotient rounded toward zero (TOSA 0.30 3.3.2 idiv)."""
    if _is_array(a, b):
        inexact_negative = (np.mod(a, b) != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0))
        return np.floor_divide(a, b) + inexact_negative
    q = a // b
    return q + 1 if a % b != 0 and (a < 0) != (b < 0) else q


# ---- special functions -----------------------------------------------------------------------

_erf_each = np.vectorize(math.erf, otypes=[np.float64])


def erf(x):
    """The error function per element, at double precision (float64 array, or a float)."""
    if isinstance(x, np.ndarray):
        return _erf_each(x)
    return math.erf(x)
