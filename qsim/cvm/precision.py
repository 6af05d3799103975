"""CVM precision: the bit budget every CVM tensor carries (cvm-formalization, DLTensor).

A tensor of precision p (an int in (0, 32]) holds only values in [-alpha, alpha] with
alpha = 2^(p-1) - 1; precision 1 therefore admits only 0, precision 8 admits
[-127, 127] (never -128), precision 32 admits [-(2^31 - 1), 2^31 - 1] (never INT32_MIN).
"""
from __future__ import annotations

import numpy as np

from ..errors import DataError, InvalidGraphError

MIN_PRECISION = 1
MAX_PRECISION = 32


def alpha(precision: int) -> int:
    """Largest magnitude a `precision`-bit CVM value may have: 2^(p-1) - 1."""
    return (1 << (precision - 1)) - 1


def bit_length(n: int) -> int:
    """Number of bits of the non-negative integer n (0 for 0)."""
    return int(n).bit_length()


def magnitude_bits(values: np.ndarray) -> np.ndarray:
    """cvm_precision's per-element formula, vectorized: ceil(log2(|x| + 1)) for x != 0, 1 for x = 0.

    Computed exactly in integers: ceil(log2(|x| + 1)) is the bit length of |x|
    (|x| < 2^b  <=>  |x| + 1 <= 2^b). Accepts any integer array; works in int64 so
    |INT32_MIN| = 2^31 is exact (it has 32 bits).
    """
    mag = np.abs(np.asarray(values, dtype=np.int64))
    bits = np.zeros(mag.shape, dtype=np.int64)
    rest = mag.copy()
    # at most 32 rounds for int32 data; each round strips one bit off every element
    while True:
        nz = rest != 0
        if not nz.any():
            break
        bits += nz
        rest >>= 1
    return np.where(mag == 0, 1, bits)


def required_precision(max_magnitude: int) -> int:
    """Smallest precision p with max_magnitude <= alpha(p): bit_length(m) + 1, and 1 for m = 0."""
    m = abs(int(max_magnitude))
    return 1 if m == 0 else bit_length(m) + 1


def precision_of(array: np.ndarray) -> int:
    """The tightest precision of an array's values (may exceed 32 for INT32_MIN)."""
    if array.size == 0:
        return MIN_PRECISION
    a = np.asarray(array, dtype=np.int64)
    return required_precision(max(abs(int(a.max())), abs(int(a.min()))))


def check_precision_value(op: str, what: str, precision) -> int:
    """A declared precision must be an int in (0, 32] (the formalization's valid range)."""
    if isinstance(precision, (bool, np.bool_)) or not isinstance(precision, (int, np.integer)):
        raise InvalidGraphError(f"{op}: precision of {what} is {precision!r}, not an integer",
                                hint="precisions are ints in (0, 32]")
    p = int(precision)
    if not MIN_PRECISION <= p <= MAX_PRECISION:
        raise InvalidGraphError(f"{op}: precision of {what} is {p}; a CVM precision must be in (0, 32]",
                                hint="-1 (undefined) is written as None; precisions above 32 do not fit INT32")
    return p


def first_violation(array: np.ndarray, precision: int):
    """(index tuple, value) of the first element (C order) outside [-alpha, alpha], or None."""
    a = alpha(precision)
    flat = np.asarray(array).reshape(-1)
    bad = np.flatnonzero((flat > a) | (flat < -a))
    if bad.size == 0:
        return None
    pos = int(bad[0])
    return tuple(int(i) for i in np.unravel_index(pos, np.shape(array))), int(flat[pos])


def check_data(op: str, what: str, array: np.ndarray, precision: int) -> None:
    """Raises DataError naming the tensor and its first element outside the declared precision."""
    hit = first_violation(array, precision)
    if hit is not None:
        index, value = hit
        need = required_precision(value)
        raise DataError(
            f"{op}: {what} holds {value} at index {list(index)}, outside its declared precision "
            f"{precision} (values must lie in [-{alpha(precision)}, {alpha(precision)}])",
            hint=(f"declare precision {need} or more" if need <= MAX_PRECISION else
                  "the value needs more than 32 bits, which no CVM tensor has")
            + ", or clip the data with cvm_clip / cvm_right_shift")


def infer_data_precision(op: str, what: str, array: np.ndarray) -> int:
    """The precision of an input given without a declared one: its tightest precision."""
    p = precision_of(array)
    if p > MAX_PRECISION:
        hit = first_violation(array, MAX_PRECISION)
        index, value = hit
        raise DataError(f"{op}: {what} holds {value} at index {list(index)}, which no CVM precision "
                        f"admits (precision 32 allows [-{alpha(32)}, {alpha(32)}])",
                        hint="INT32_MIN is not a CVM value; clip the data to +-(2^31 - 1)")
    return p
