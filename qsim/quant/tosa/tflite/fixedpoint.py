"""TFLite's int8 SOFTMAX arithmetic in numpy (reference softmax.h with gemmlowp's fixed point,
read for the formulas): the tables rules_softmax.py looks up, and the whole kernel as a
reference for the tests. Values are int64 arrays holding int32 raw fixed-point numbers.

Identities used (derived from gemmlowp's definitions):
- SaturatingRoundingDoublingHighMul(a, b) = floor((a b + 2^30) / 2^31) for every pair but
  a = b = -2^31 (its nudge 1 - 2^30 for negative products with truncating division rounds half
  up, as 2^30 with flooring does): TOSA MUL with shift 31.
- RoundingDivideByPOT(x, e) rounds half away from zero; for x >= 0 it is TOSA
  ARITHMETIC_RIGHT_SHIFT with round (half up).
"""
from __future__ import annotations

import numpy as np

I64 = np.int64
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
SCALED_DIFF_INTEGER_BITS = 5      # softmax.h kScaledDiffIntegerBits
ACCUMULATION_INTEGER_BITS = 12    # kAccumulationIntegerBits
# exp_on_negative_values' barrel shifter: (exponent, exp(-2^exponent) in Q0.31)
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
               (3, 720401), (4, 242))
EXP_MINUS_ONE_EIGHTH = 1895147668     # exp(-1/8) in Q0.31
ONE_THIRD = 715827883                 # 1/3 in Q0.31
FORTY_EIGHT_SEVENTEENTHS = 1515870810      # 48/17 in Q2.29
MINUS_THIRTY_TWO_SEVENTEENTHS = -1010580540  # -32/17 in Q2.29


def wrap32(x):
    return ((np.asarray(x, I64) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def srdhm(a, b):
    a, b = np.asarray(a, I64), np.asarray(b, I64)
    out = np.floor_divide(a * b + (1 << 30), 1 << 31)
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, out)


def rounding_divide_by_pot(x, exponent):
    x, e = np.asarray(x, I64), np.asarray(exponent, I64)
    mask = np.left_shift(1, e) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + ((x & mask) > threshold)


def saturating_multiply_by_pot(x, exponent: int):
    x = np.asarray(x, I64)
    threshold = (1 << (31 - exponent)) - 1
    out = wrap32(x << exponent)
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, out))


def _exp_on_quarter_interval(a):
    """exp(a) for a in [-1/4, 0), Q0.31 in and out (a Taylor series around -1/8)."""
    x = wrap32(a + (1 << 28))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    poly = rounding_divide_by_pot(wrap32(srdhm(wrap32(x4_over_4 + x3), ONE_THIRD) + x2), 1)
    return wrap32(EXP_MINUS_ONE_EIGHTH + srdhm(EXP_MINUS_ONE_EIGHTH, wrap32(x + poly)))


def exp_on_negative_values(a, integer_bits: int = SCALED_DIFF_INTEGER_BITS):
    """gemmlowp exp_on_negative_values: a <= 0 in Q(integer_bits).(31 - integer_bits) -> Q0.31."""
    a = np.asarray(a, I64)
    fraction_bits = 31 - integer_bits
    quarter = 1 << (fraction_bits - 2)
    a_mod_quarter = wrap32((a & (quarter - 1)) - quarter)
    result = _exp_on_quarter_interval(saturating_multiply_by_pot(a_mod_quarter, integer_bits))
    remainder = wrap32(a_mod_quarter - a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = 1 << (fraction_bits + exponent)
            result = np.where(remainder & bit, srdhm(result, multiplier), result)
    return np.where(a == 0, INT32_MAX, result)


def softmax_scaling(input_scale: float, beta: float = 1.0) -> tuple[int, int, int]:
    """PreprocessSoftmaxScaling and CalculateInputRadius: (input multiplier, left shift,
    diff_min) of an int8 softmax."""
    real = min(float(beta) * float(input_scale) * (1 << (31 - SCALED_DIFF_INTEGER_BITS)), (1 << 31) - 1.0)
    q, e = np.frexp(real)
    multiplier = int(np.floor(q * (1 << 31) + 0.5))
    if multiplier == 1 << 31:
        multiplier //= 2
        e += 1
    radius = int(np.floor(((1 << SCALED_DIFF_INTEGER_BITS) - 1) * (1 << (31 - SCALED_DIFF_INTEGER_BITS))
                          / (1 << int(e))))
    return multiplier, int(e), -radius


def softmax_exp(diff, input_scale: float, beta: float = 1.0):
    """exp of (x - row max) as the kernel computes it (Q0.31), 0 where diff < diff_min."""
    multiplier, left_shift, diff_min = softmax_scaling(input_scale, beta)
    diff = np.asarray(diff, I64)
    rescaled = srdhm(wrap32(diff << left_shift), multiplier)
    return np.where(diff >= diff_min, exp_on_negative_values(rescaled), 0)


def one_over_one_plus_x(a):
    """gemmlowp one_over_one_plus_x_for_x_in_0_1 (a >= 0 in Q0.31) -> Q0.31; three Newton steps
    in Q2.29. RoundingHalfSum(a, One) is (a >> 1) + 2^30 for a >= 0."""
    half_denominator = (np.asarray(a, I64) >> 1) + (1 << 30)
    x = wrap32(FORTY_EIGHT_SEVENTEENTHS + srdhm(half_denominator, MINUS_THIRTY_TWO_SEVENTEENTHS))
    for _ in range(3):
        error = wrap32((1 << 29) - srdhm(half_denominator, x))
        x = wrap32(x + saturating_multiply_by_pot(srdhm(x, error), 2))
    return saturating_multiply_by_pot(x, 1)


def clz32(x):
    x = np.asarray(x, I64)
    bits = np.zeros(x.shape, I64)
    for k in range(32):
        bits = np.where(x >= (1 << k), k + 1, bits)
    return 32 - bits


def softmax_int8(x, input_scale: float, beta: float = 1.0) -> np.ndarray:
    """TFLite's reference int8 softmax over the last axis (output scale 1/256, zero point -128)."""
    x = np.asarray(x, I64)
    diff = x - x.max(axis=-1, keepdims=True)
    e = softmax_exp(diff, input_scale, beta)
    total = rounding_divide_by_pot(e, ACCUMULATION_INTEGER_BITS).sum(axis=-1, keepdims=True)
    headroom = clz32(total)
    scale = one_over_one_plus_x(wrap32((total << headroom) - (1 << 31)))
    shift = ACCUMULATION_INTEGER_BITS - headroom + 31 - 8
    out = rounding_divide_by_pot(srdhm(scale, e), shift) - 128
    return np.clip(out, -128, 127).astype(np.int8)


def _srdhm16(a, b):
    a, b = np.asarray(a, I64), np.asarray(b, I64)
    out = np.floor_divide(a * b + (1 << 14), 1 << 15)
    return np.where((a == -32768) & (b == -32768), 32767, out)


def _saturate16(x):
    return np.clip(np.asarray(x, I64), -32768, 32767)


def _multiplier16(real: float) -> tuple[int, int]:
    """QuantizeMultiplier, then DownScaleInt32ToInt16Multiplier: (int16 multiplier, exponent)."""
    q, e = np.frexp(np.float64(real))
    m = int(np.floor(q * (1 << 31) + 0.5))
    if m == 1 << 31:
        m //= 2
        e += 1
    m16 = 32767 if m >= INT32_MAX - (1 << 15) else (m + (1 << 15)) >> 16
    return m16, int(e)


def hard_swish_int8(q, input_scale: float, input_zp: int, output_scale: float, output_zp: int):
    """TFLite's reference int8 HARD_SWISH (hard_swish.h) of the codes q: 16-bit fixed point,
    a 'relu-ish' gate on the scale where 3.0 is 2^15, multiplied without rounding
    (SaturatingDoublingHighMul), the multipliers from float32 scales."""
    hires = np.float32(np.float32(1.0 / 128.0) * np.float32(input_scale))
    out_m, out_e = _multiplier16(float(np.float32(hires / np.float32(output_scale))))
    relu_m, relu_e = _multiplier16(float(np.float32(hires / np.float32(3.0 / 32768.0))))
    v = (np.asarray(q, I64) - input_zp) * 128
    preshift = _srdhm16(v, out_m)
    reluish = v
    if relu_e > 0:
        reluish = _saturate16(reluish * (1 << (relu_e - 1)))
    reluish = _srdhm16(reluish, relu_m)
    if relu_e > 0:
        reluish = _saturate16(reluish * 2)
    if relu_e < 0:
        reluish = rounding_divide_by_pot(reluish, -relu_e)
    reluish = (reluish + (1 << 15)) >> 1
    product = reluish * preshift
    high = np.where((reluish == -32768) & (preshift == -32768), 32767,
                    np.sign(product) * (np.abs(product) >> 15))          # C++ division truncates
    out = rounding_divide_by_pot(high, -out_e) + output_zp
    return np.clip(out, -128, 127).astype(np.int8)
