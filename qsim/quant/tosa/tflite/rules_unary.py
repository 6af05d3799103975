"""TFLite's int8 RSQRT as one TOSA 0.30 TABLE: the reference kernel (elementwise.cc,
RsqrtEvalQuantized) is a function of the input code alone, so tabulating it for all 256
codes with its own fixed-point steps (transcribed here in numpy) is exact.

Per code q: v = q - zp_in; v = 0 gives 127 (TFLite: "close to 0 is the maximum"); else
1/sqrt(v) in fixed point (GetInvSqrtQuantizedMultiplierExp: the input normalised by bit pairs
into [2^27, 2^29), five Newton steps x <- x (3 - v x^2) / 2 in Q3.28, times sqrt(2)/2), turned
into an integer with 20 fraction bits (MultiplyByQuantizedMultiplier(1, ., shift + 20)), then
scaled by 1 / (sqrt(s_in) s_out) (sqrt and product in float32, the reciprocal in double;
QuantizeMultiplier) with the shift less 20, output zero point, int8 clamp. Codes below the
input zero point (a negative real input) make LiteRT stop with an error; the table gives
them 127, as for v = 0 (there is no TFLite result to match).

NEG on int8 tensors: LiteRT's reference resolver negates the code itself, wrapping in int8
(-(-128) = -128) and reading neither zero point (its generic Negate; the zero-point form
zp_in + zp_out - q of reference_integer_ops is not what it runs), so the table is that. The
float NEG the converter puts between DEQUANTIZE and QUANTIZE (inside LayerNormalization)
imports as a chain DEQUANTIZE's math.iden -> math.neg and takes qsim's element-wise TABLE,
round(-(s_in (q - zp_in)) / s_out) + zp_out: the integer TFLite's float32 steps give, since
the quotient is within 255 * 2^-23 of it (docs/tflite.md).
"""
from __future__ import annotations

import numpy as np

from .... import ir
from .arith import is_tflite, multiply_by_quantized_multiplier, quantize_multiplier
from .fixedpoint import INT32_MAX, rounding_divide_by_pot, saturating_multiply_by_pot, srdhm, wrap32

HALF_THREE_Q3 = (1 << 28) + (1 << 27)        # 1.5 in Q3.28
ONE_Q3 = 1 << 28
HALF_SQRT_2_Q0 = 1518500250                  # sqrt(2)/2 in Q0.31
FRACTION_BITS = 20                           # the kernel's kShift
# int8 NEG as LiteRT computes it: the code negated, wrapped (index i is code i - 128)
NEG_TABLE = (-np.arange(-128, 128)).astype(np.int8)


def inv_sqrt_multiplier(value: int) -> tuple[int, int]:
    """(multiplier, left shift) with multiplier * 2^shift / 2^31 ~ 1/sqrt(value) (TFLite's
    GetInvSqrtQuantizedMultiplierExp with reverse_shift -1), for one int32 value >= 0."""
    if value <= 1:
        return INT32_MAX, 0
    shift = 11
    while value >= 1 << 29:
        value //= 4
        shift += 1
    pairs = (31 - value.bit_length()) // 2 - 1     # (CLZ - 1) / 2 - 1
    shift -= pairs
    value <<= 2 * pairs
    half_input = int(rounding_divide_by_pot(value >> 1, 1))
    x = ONE_Q3
    for _ in range(5):
        x3 = int(saturating_multiply_by_pot(srdhm(srdhm(x, x), x), 6))
        diff = int(wrap32(int(srdhm(HALF_THREE_Q3, x)) - int(srdhm(half_input, x3))))
        x = int(saturating_multiply_by_pot(diff, 3))
    x = int(srdhm(x, HALF_SQRT_2_Q0))
    if shift < 0:
        x = int(wrap32(x << -shift))
        shift = 0
    return x, -shift


def rsqrt_output_multiplier(input_scale: float, output_scale: float) -> tuple[int, int]:
    """1 / (sqrt(s_in) s_out), sqrt and product in float32, reciprocal in double, as TOSA
    (multiplier, shift) (quantize_multiplier)."""
    product = np.float32(np.sqrt(np.float32(input_scale))) * np.float32(output_scale)
    return quantize_multiplier(1.0 / float(np.float32(product)))


def _multiply(x: int, multiplier: int, left_shift: int) -> int:
    """MultiplyByQuantizedMultiplier with TFLite's signed (left) shift."""
    return int(multiply_by_quantized_multiplier(x, multiplier, 31 - left_shift))


def rsqrt_table(in_quant: ir.QuantInfo, out_quant: ir.QuantInfo) -> np.ndarray:
    """The int8 -> int8 RSQRT of TFLite's reference kernel for codes -128..127."""
    zp_in, zp_out = int(in_quant.zero_points()[0]), int(out_quant.zero_points()[0])
    m, s = rsqrt_output_multiplier(float(in_quant.scales()[0]), float(out_quant.scales()[0]))
    out_shift = 31 - s                             # TFLite's signed exponent
    table = np.empty(256, np.int64)
    for i, q in enumerate(range(-128, 128)):
        v = q - zp_in
        if v <= 0:
            table[i] = 127
            continue
        inv, inv_shift = inv_sqrt_multiplier(v)
        data = _multiply(1, inv, inv_shift + FRACTION_BITS)
        table[i] = _multiply(data, m, out_shift - FRACTION_BITS) + zp_out
    return np.clip(table, -128, 127).astype(np.int8)


def tflite_table(kind: str, in_quant: ir.QuantInfo, out_quant: ir.QuantInfo) -> np.ndarray | None:
    """The int8 TABLE of TFLite's kernel for a single math.rsqrt / math.neg on tensors of a
    .tflite model, else None (qsim's own table applies)."""
    if not is_tflite(in_quant) or in_quant.bits != 8 or out_quant.bits != 8:
        return None
    if kind == "math.rsqrt":
        return rsqrt_table(in_quant, out_quant)
    if kind == "math.neg":
        return NEG_TABLE
    return None
