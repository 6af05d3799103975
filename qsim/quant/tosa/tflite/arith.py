"""TFLite's integer arithmetic where it differs from qsim's own rules, for tensors whose
parameters came from a .tflite model (QuantInfo.source "tflite"): the lowering then gives
LiteRT's reference kernels' results bit for bit (docs/tflite.md lists what is and is not).

Sources of the formulas (TFLite kernels, read for facts): kernel_util.cc
CalculateActivationRangeQuantized (fused activation bounds: zero point + round(bound / scale),
the division in float32, round half away from zero); reference leaky_relu.h and hard_swish.h
(the int8 functions tabulated here for all 256 inputs with TFLite's fixed-point steps).
"""
from __future__ import annotations

import numpy as np

from .... import ir
from .fixedpoint import hard_swish_int8, rounding_divide_by_pot, srdhm

TFLITE = "tflite"


def is_tflite(*quants: ir.QuantInfo | None) -> bool:
    return any(q is not None and q.source == TFLITE for q in quants)


def round_half_away(x):
    """std::round: half away from zero."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def activation_bound(value: float, scale: float, zero_point: int) -> int:
    """zero_point + round(value / scale), the quotient in float32 (TFLite's QuantizeValue)."""
    quotient = np.float32(value) / np.float32(scale)
    return int(zero_point) + int(round_half_away(float(quotient)))


def activation_range(quant: ir.QuantInfo, lo: float | None, hi: float | None, qmin: int, qmax: int):
    """The integer clamp of a fused activation with real bounds [lo, hi] (None: open)."""
    s, zp = float(quant.scales()[0]), int(quant.zero_points()[0])
    qlo = qmin if lo is None else max(qmin, activation_bound(lo, s, zp))
    qhi = qmax if hi is None else min(qmax, activation_bound(hi, s, zp))
    return qlo, qhi


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier as TOSA (multiplier, shift): real = q * 2^e (frexp, q in
    [0.5, 1)), multiplier = round(q * 2^31) (half away from zero; 2^31 carries into e),
    shift = 31 - e; real 0 (or below 2^-31 after TFLite's flush) gives (0, 31).

    With double_round=true, TOSA apply_scale_32(v, multiplier, shift) equals TFLite's
    MultiplyByQuantizedMultiplier(v, multiplier, e): for e <= 0 (shift >= 31) TFLite rounds
    v * multiplier / 2^31 half up (SaturatingRoundingDoublingHighMul; the saturating case
    needs multiplier = -2^31, never produced), then divides by 2^-e rounding half away from
    zero (RoundingDivideByPOT); TOSA adds 2^(shift-1) + sign(v) 2^30 and floors once, the same
    integer for every v (the two roundings' ties fall on the same values). For e > 0, TFLite
    first computes v * 2^e in int32 (wrapping on overflow, undefined in C++) where TOSA keeps
    64 bits and REQUIREs |v| < 2^(shift-2): they differ only where TFLite's product overflows,
    and TOSA then refuses the value instead of giving a wrapped one."""
    if real <= 0.0:
        return 0, 31
    q, e = np.frexp(np.float64(real))
    m = int(round_half_away(float(q) * (1 << 31)))
    if m == 1 << 31:
        m //= 2
        e += 1
    if e < -31:
        return 0, 31
    return m, 31 - int(e)


def add_multipliers(s1: float, s2: float, s_out: float, left_shift: int):
    """TFLite's ADD/SUB rescaling (add.cc PrepareGeneralSubOp/Prepare): both inputs, shifted
    left by `left_shift` (20 for int8), scaled to twice the larger input scale, summed, then
    scaled to the output; the real multipliers formed in double from the float32 scales."""
    twice_max = 2.0 * float(max(np.float32(s1), np.float32(s2)))
    real1 = float(np.float32(s1)) / twice_max
    real2 = float(np.float32(s2)) / twice_max
    real_out = twice_max / ((1 << left_shift) * float(np.float32(s_out)))
    return quantize_multiplier(real1), quantize_multiplier(real2), quantize_multiplier(real_out)


def multiply_by_quantized_multiplier(x, multiplier: int, shift: int):
    """TFLite's reference MultiplyByQuantizedMultiplier for a (multiplier, TOSA shift) of
    quantize_multiplier: SaturatingRoundingDoublingHighMul then RoundingDivideByPOT."""
    exponent = 31 - shift
    x = np.asarray(x, np.int64) * (1 << max(exponent, 0))
    return rounding_divide_by_pot(srdhm(x, multiplier), max(-exponent, 0))


def float32_ratio(*factors: float, divisor: float) -> float:
    """A product of float32 scales divided by one, in float32 arithmetic (what TFLite's kernels
    compute where they divide `float` parameters without a cast to double)."""
    value = np.float32(1.0)
    for f in factors:
        value = np.float32(value * np.float32(f))
    return float(np.float32(value / np.float32(divisor)))


def leaky_relu_table(in_quant: ir.QuantInfo, out_quant: ir.QuantInfo, alpha: float, lo: int, hi: int) -> np.ndarray:
    """The int8 -> int8 LEAKY_RELU of TFLite's reference kernel (leaky_relu.h) for all 256
    inputs: the identity or alpha multiplier by the input's sign, output zero point, clamp."""
    s_in, zp_in = float(in_quant.scales()[0]), int(in_quant.zero_points()[0])
    s_out, zp_out = float(out_quant.scales()[0]), int(out_quant.zero_points()[0])
    identity = quantize_multiplier(float32_ratio(s_in, divisor=s_out))
    slope = quantize_multiplier(float32_ratio(s_in, alpha, divisor=s_out))
    v = np.arange(-128, 128, dtype=np.int64) - zp_in
    out = np.where(v >= 0, multiply_by_quantized_multiplier(v, *identity),
                   multiply_by_quantized_multiplier(v, *slope)) + zp_out
    return np.clip(out, lo, hi).astype(np.int8)


def is_hard_swish(function) -> bool:
    """Whether a chain's float function is x * relu6(x + 3) / 6 (checked on a grid covering its
    three pieces): the chain TFLite's HARD_SWISH imports as."""
    x = np.linspace(-8.0, 8.0, 161)
    # (the imported chain multiplies by float32(1/6): equal to float32 precision)
    return bool(np.allclose(function(x), x * np.clip(x + 3.0, 0.0, 6.0) / 6.0, rtol=0, atol=1e-5))


def hard_swish_table(in_quant: ir.QuantInfo, out_quant: ir.QuantInfo) -> np.ndarray:
    """The int8 TABLE of TFLite's HARD_SWISH for all 256 inputs."""
    return hard_swish_int8(np.arange(-128, 128), float(in_quant.scales()[0]), int(in_quant.zero_points()[0]),
                           float(out_quant.scales()[0]), int(out_quant.zero_points()[0]))


def mean_multiplier(input_scale: float, output_scale: float, count: int) -> tuple[int, int]:
    """TFLite's int8/int16 MEAN (reference QuantizedMeanOrSum): the multiplier of
    input_scale / output_scale (QuantizeMultiplier, exponent e) with 1/count folded in by
    integer division, (m << k) // count with k = floor(log2 count) clamped to 32 and 31 + e,
    exponent e - k; as TOSA (multiplier, shift). The centred sum times it (MultiplyBy-
    QuantizedMultiplier) plus the output zero point is the result."""
    multiplier, shift = quantize_multiplier(float(np.float32(input_scale)) / float(np.float32(output_scale)))
    exponent = 31 - shift
    k = min(int(count).bit_length() - 1, 32, 31 + exponent)
    return (multiplier << k) // int(count), 31 - (exponent - k)
