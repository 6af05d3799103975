"""TOSA 0.30 integer arithmetic helpers (spec 1.9 and 3.3), defined once for all of qsim.

Each helper is a literal transcription of the spec pseudocode, vectorized over
numpy arrays (int64 intermediates: every bound below is from the spec text).
REQUIRE failures raise UnpredictableError naming the caller's context.
"""
from __future__ import annotations

import numpy as np

from ..errors import UnpredictableError

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT48_MIN, INT48_MAX = -(1 << 47), (1 << 47) - 1


def _require(cond, what: str, context: str) -> None:
    if not np.all(cond):
        where = f"{context}: " if context else ""
        raise UnpredictableError(f"{where}REQUIRE({what}) fails")


def apply_scale_32(value, multiplier, shift, double_round=False, context: str = ""):
    """int32 value * int32 multiplier >> shift with rounding (spec 1.9.2).

    Broadcasts value against multiplier/shift (per-channel scales). Returns int32.
    Bound: |value| < 2^(shift-2) and multiplier < 2^31, so value*multiplier < 2^(shift+29)
    and after >> shift the result fits 32 bits; the int64 sum stays below 2^62 + 2^61.
    """
    value = np.asarray(value, dtype=np.int64)
    multiplier = np.asarray(multiplier, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    _require(multiplier >= 0, "multiplier >= 0", context)
    _require((shift >= 2) & (shift <= 62), "2 <= shift && shift <= 62", context)
    shift_b = np.broadcast_to(shift, np.broadcast_shapes(value.shape, shift.shape))
    lo = -(np.int64(1) << (shift_b - 2))
    hi = np.int64(1) << (shift_b - 2)
    _require((value >= lo) & (value < hi), "value >= (-1<<(shift-2)) && value < (1<<(shift-2))", context)
    round_ = np.int64(1) << (shift_b - 1)
    if double_round:
        big = shift_b > 31
        round_ = np.where(big & (value >= 0), round_ + (1 << 30), round_)
        round_ = np.where(big & (value < 0), round_ - (1 << 30), round_)
    result = (value * multiplier + round_) >> shift_b
    return result.astype(np.int32)


def apply_scale_16(value, multiplier, shift, context: str = ""):
    """int48 value * int16 multiplier >> shift with rounding (spec 1.9.2). Returns int32.

    Bound: |value| < 2^47, multiplier < 2^15: product < 2^62, plus round <= 2^61.
    """
    value = np.asarray(value, dtype=np.int64)
    multiplier = np.asarray(multiplier, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    _require(multiplier >= 0, "multiplier >= 0", context)
    _require((shift >= 2) & (shift <= 62), "2 <= shift && shift <= 62", context)
    round_ = np.int64(1) << (shift - 1)
    result = (value * multiplier + round_) >> shift
    _require((result >= INT32_MIN) & (result <= INT32_MAX),
             "result >= minimum<int32_t> && result <= maximum<int32_t>", context)
    return result.astype(np.int32)


def count_leading_zeros(value, bits: int = 32):
    """Leading zero bits of `value` as an unsigned `bits`-wide integer (CLZ(0) = bits)."""
    v = np.asarray(value, dtype=np.int64) & ((1 << bits) - 1)
    out = np.full(v.shape, bits, dtype=np.int64)
    nz = v != 0
    # floor(log2) via bit_length on exact integers: frexp is exact for v < 2^53.
    _, exp = np.frexp(v[nz].astype(np.float64))
    out[nz] = bits - exp
    return out


def reciprocal_scale(value, context: str = ""):
    """(multiplier, shift) with multiplier * 2^-shift ~= 1/value (spec 1.9.2).

    Returns int64 arrays (multiplier fits int32: (1<<30) <= multiplier < (1<<31)).
    """
    value = np.asarray(value, dtype=np.int64)
    _require(value > 0, "value > 0", context)
    k = 32 - count_leading_zeros(value - 1)          # (1 << k) / 2 < value <= (1 << k)
    numerator = ((np.int64(1) << 30) + 1) << k
    multiplier = numerator // value
    shift = 30 + k
    return multiplier, shift


def apply_clip(value, min_val, max_val):
    """Clamps to [min_val, max_val] (spec 3.3: REQUIRE(min_val <= max_val) is the caller's)."""
    return np.minimum(np.maximum(value, min_val), max_val)


def apply_lookup(table, value, context: str = ""):
    """16-bit table lookup with 7-bit interpolation (spec 1.9.5). Returns int32 (23 significant bits).

    `table` has 513 int16 entries; `value` is any integer array.
    """
    table = np.asarray(table, dtype=np.int64)
    clipped = apply_clip(np.asarray(value, dtype=np.int64), -32768, 32767)
    index = (clipped + 32768) >> 7
    fraction = clipped & 0x7F
    base = table[index]
    nxt = table[index + 1]
    slope = nxt - base
    _require((slope >= -32768) & (slope <= 32767),
             "slope >= minimum<int16_t> && slope <= maximum<int16_t>", context)
    return ((base << 7) + slope * fraction).astype(np.int32)


def generate_lookup_table(reference) -> np.ndarray:
    """513-entry int16 table from `reference(i)` for i in [-256, 256] (spec 1.9.5)."""
    values = np.array([reference(i) for i in range(-256, 257)], dtype=np.int64)
    return apply_clip(values, -32768, 32767).astype(np.int16)


def apply_add(a, b, lo: int, hi: int, context: str = ""):
    """a + b in exact int64 with REQUIRE(c >= minimum<in_t> && c <= maximum<in_t>) (spec 3.3.1).

    `lo`/`hi` are the in_t bounds (e.g. INT32_MIN/INT32_MAX). Operands must be
    within +-2^62 so the int64 sum is exact. Returns int64.
    """
    c = np.asarray(a, dtype=np.int64) + np.asarray(b, dtype=np.int64)
    _require((c >= lo) & (c <= hi), "c >= minimum<in_t> && c <= maximum<in_t> in apply_add", context)
    return c


def apply_sub(a, b, lo: int, hi: int, context: str = ""):
    """a - b in exact int64 with REQUIRE(c >= minimum<in_t> && c <= maximum<in_t>) (spec 3.3.1)."""
    c = np.asarray(a, dtype=np.int64) - np.asarray(b, dtype=np.int64)
    _require((c >= lo) & (c <= hi), "c >= minimum<in_t> && c <= maximum<in_t> in apply_sub", context)
    return c


def require_running_sums(terms, lo: int, hi: int, context: str = "", axis: int = -1):
    """REQUIRE of `acc = apply_add(acc, term)` repeated along `axis`, from acc = 0 (spec 3.3.1).

    Every partial sum, in the spec's loop order, must stay within [lo, hi].
    `terms` is an int64 array with the loop order along `axis`; returns the total.
    """
    partial = np.cumsum(np.asarray(terms, dtype=np.int64), axis=axis)
    _require((partial >= lo) & (partial <= hi),
             "c >= minimum<acc_t> && c <= maximum<acc_t> in apply_add (accumulator overflow)", context)
    return np.take(partial, -1, axis=axis) if partial.shape[axis] else np.zeros(
        np.delete(np.asarray(partial.shape), axis % max(partial.ndim, 1)), dtype=np.int64)
