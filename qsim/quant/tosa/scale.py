"""Real scale → TOSA (multiplier, shift), the one place qsim does this (TOSA 0.30 1.9.2).

A scale s > 0 is written as s = m * 2^e with 1 <= m < 2 and stored as
    multiplier = round(m * 2^F),  shift = F - e,
where F = 30 for apply_scale_32 (multiplier in [2^30, 2^31)) and F = 14 for
apply_scale_16 (multiplier in [2^14, 2^15)): the normalized multipliers of 1.9.2.
The spec supports 2^12 down to 2^-32 for both widths with a normalized multiplier,
i.e. exponents e in [-32, 12]; shift then lies in [18, 62] (32-bit) or [2, 46] (16-bit),
inside the REQUIRE(2 <= shift <= 62) of apply_scale. A scale whose rounded exponent
leaves that range is an error (UnsupportedError naming the tensor), never clamped.

Arithmetic is exact: scales are converted to fractions.Fraction (exact for binary
floats), products/quotients of scales (1.9.3: input_scale * weight_scale /
output_scale) are formed exactly, and the multiplier is the nearest integer to
s * 2^shift with ties rounded up. So the result does not depend on the order of
float operations, and multiplier * 2^-shift is within half a multiplier unit of s.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable

import numpy as np

from ...errors import UnsupportedError
from ...tosa import arith

MIN_EXPONENT = -32   # 1.9.2: "a scaling range of 2^{+12} down to 2^{-32} is supported"
MAX_EXPONENT = 12


class ScaleWidth(enum.Enum):
    """Multiplier width of RESCALE (its `scale32` attribute); value = fraction bits F."""
    SCALE32 = 30     # apply_scale_32: int32 multiplier, normalized in [2^30, 2^31)
    SCALE16 = 14     # apply_scale_16: int16 multiplier, normalized in [2^14, 2^15)

    @property
    def fraction_bits(self) -> int:
        return self.value

    @property
    def scale32(self) -> bool:
        return self is ScaleWidth.SCALE32


@dataclass(frozen=True)
class FixedPointScale:
    """Per-tensor (length 1) or per-channel (length C) multipliers and shifts for RESCALE.

    multiplier/shift are int64 arrays of equal length; every multiplier is normalized
    for `width` and every shift is in [2, 62].
    """
    multiplier: np.ndarray
    shift: np.ndarray
    width: ScaleWidth

    @property
    def channels(self) -> int:
        return int(self.multiplier.shape[0])

    @property
    def scale32(self) -> bool:
        return self.width.scale32

    def as_fractions(self) -> list[Fraction]:
        """The exact scales represented: multiplier * 2^-shift."""
        return [Fraction(int(m), 1 << int(s)) for m, s in zip(self.multiplier, self.shift)]

    def apply(self, value, double_round: bool = False, context: str = ""):
        """Scales `value` (channels on the last axis when per-channel) with qsim.tosa.arith."""
        if self.scale32:
            return arith.apply_scale_32(value, self.multiplier, self.shift, double_round, context)
        if double_round:
            # RESCALE ERROR_IF(!scale32 && double_round): callers must not ask for it.
            raise UnsupportedError(f"{context or 'RESCALE'}: double rounding needs a 32-bit "
                                   "multiplier (TOSA 2.13.2 ERROR_IF(!scale32 && double_round))")
        return arith.apply_scale_16(value, self.multiplier, self.shift, context)


def exact(value) -> Fraction:
    """A scale as an exact fraction (floats convert exactly; NaN/inf are rejected by callers)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, (int, np.integer)):
        return Fraction(int(value))
    return Fraction(float(value))


def exact_ratio(numerators: Iterable, denominators: Iterable = ()) -> Fraction:
    """Exact product of `numerators` divided by the product of `denominators`."""
    result = Fraction(1)
    for v in numerators:
        result *= exact(v)
    for v in denominators:
        d = exact(v)
        if d == 0:
            raise UnsupportedError("a quantization scale is zero",
                                   hint="scales must be positive; check the tensor's range")
        result /= d
    return result


def _floor_log2(s: Fraction) -> int:
    """e with 2^e <= s < 2^(e+1), for s > 0, by exact integer comparison."""
    p, q = s.numerator, s.denominator
    e = p.bit_length() - q.bit_length()
    # p/q lies in (2^(e-1), 2^(e+1)); step down once if p/q < 2^e.
    if (p << max(-e, 0)) < (q << max(e, 0)):
        e -= 1
    return e


def _one(s: Fraction, width: ScaleWidth, what: str) -> tuple[int, int]:
    f = width.fraction_bits
    e = _floor_log2(s)
    shift = f - e
    # round(s * 2^shift) half up, = floor((2 num + den) / (2 den)) for any num/den equal to
    # s * 2^shift: plain integers, no Fraction (whose every result pays a gcd)
    num, den = (s.numerator << shift, s.denominator) if shift >= 0 else \
        (s.numerator, s.denominator << -shift)
    multiplier = (2 * num + den) // (2 * den)
    if multiplier == 1 << (f + 1):      # rounding carried out of [2^F, 2^(F+1))
        multiplier >>= 1
        e += 1
        shift -= 1
    if not MIN_EXPONENT <= e <= MAX_EXPONENT:
        raise UnsupportedError(
            f"{what}: scale {float(s):.6g} (about 2^{e}) is outside the range TOSA RESCALE "
            f"supports with a normalized multiplier, 2^{MIN_EXPONENT} .. 2^{MAX_EXPONENT} "
            "(TOSA 0.30 1.9.2)",
            hint="a tensor range is degenerate or extreme: check its calibration data, "
                 "or give it a @quantize scale")
    return multiplier, shift


def fixed_point_scale(scale, width: ScaleWidth = ScaleWidth.SCALE32,
                      what: str = "RESCALE") -> FixedPointScale:
    """(multiplier, shift) for a scalar scale (per tensor) or a 1-D sequence (per channel).

    `scale` holds floats, ints or Fractions; each must be finite and > 0. `what` names the
    tensor or operator in errors.
    """
    if isinstance(scale, (Fraction, int, float, np.integer, np.floating)):
        values = [scale]
    else:
        array = scale if isinstance(scale, (list, tuple)) else np.asarray(scale)
        if isinstance(array, np.ndarray):
            if array.ndim > 1:
                raise UnsupportedError(f"{what}: per-channel scales must be 1-D, got shape "
                                       f"{array.shape}")
            array = array.reshape(-1).tolist()
        values = list(array)
    if not values:
        raise UnsupportedError(f"{what}: no scale given")
    multipliers, shifts = [], []
    for k, v in enumerate(values):
        label = what if len(values) == 1 else f"{what} channel {k}"
        if not isinstance(v, Fraction) and not np.isfinite(float(v)):
            raise UnsupportedError(f"{label}: scale {v} is not finite",
                                   hint="calibration saw no finite values for this tensor")
        s = exact(v)
        if s <= 0:
            raise UnsupportedError(f"{label}: scale {float(s):.6g} is not positive",
                                   hint="scales must be > 0; a zero range gives no scale")
        m, sh = _one(s, width, label)
        multipliers.append(m)
        shifts.append(sh)
    return FixedPointScale(np.array(multipliers, dtype=np.int64),
                           np.array(shifts, dtype=np.int64), width)


def rescale_for_product(input_scale, weight_scale, output_scale,
                        width: ScaleWidth = ScaleWidth.SCALE32,
                        what: str = "RESCALE") -> FixedPointScale:
    """1.9.3: multiplier * 2^-shift = input_scale * weight_scale / output_scale, exactly formed.

    `weight_scale` may be per channel (1-D); the other two are per tensor.
    """
    weights = np.atleast_1d(np.asarray(weight_scale, dtype=object)).reshape(-1).tolist() \
        if not isinstance(weight_scale, (Fraction, int, float)) else [weight_scale]
    ratios = [exact_ratio([input_scale, w], [output_scale]) for w in weights]
    return fixed_point_scale(ratios if len(ratios) > 1 else ratios[0], width, what)
