"""Scale → (multiplier, shift) against exact rational arithmetic (TOSA 0.30 1.9.2).

The oracle here searches every shift 0..80 for the one whose rounded multiplier
lands in the normalized interval; it shares no code with qsim.quant.tosa.scale.
"""
from fractions import Fraction

import numpy as np
import pytest

from qsim.errors import QsimError, UnsupportedError
from qsim.quant.tosa.scale import (FixedPointScale, ScaleWidth, exact_ratio, fixed_point_scale,
                              rescale_for_product)

WIDTHS = [(ScaleWidth.SCALE32, 30), (ScaleWidth.SCALE16, 14)]


def oracle(s: Fraction, frac_bits: int):
    """All (multiplier, shift) with multiplier = floor(s*2^shift + 1/2) normalized."""
    found = []
    for shift in range(0, 81):
        m = s * (1 << shift)
        rounded = (m + Fraction(1, 2)).__floor__()
        if (1 << frac_bits) <= rounded < (1 << (frac_bits + 1)):
            found.append((rounded, shift))
    return found


def random_scales(rng, count_per_exponent=40):
    """Mantissas uniform in [1, 2) for every exponent of the supported range, plus edges."""
    out = []
    for e in range(-32, 13):
        mant = 1.0 + rng.random(count_per_exponent)
        out += [float(np.ldexp(m, e)) for m in mant]
        out += [float(np.ldexp(1.0, e)), float(np.ldexp(np.nextafter(2.0, 1.0), e - 1))]
    return out


@pytest.mark.parametrize("width,frac_bits", WIDTHS)
def test_matches_exact_rounding_over_whole_range(rng, width, frac_bits):
    scales = random_scales(rng)
    fps = fixed_point_scale(scales, width)
    assert fps.channels == len(scales)
    for s, m, sh in zip(scales, fps.multiplier.tolist(), fps.shift.tolist()):
        exact = Fraction(s)
        expected = oracle(exact, frac_bits)
        assert expected == [(m, sh)], (s, m, sh, expected)
        # invariants of 1.9.2
        assert (1 << frac_bits) <= m < (1 << (frac_bits + 1))
        assert 2 <= sh <= 62
        # nearest representable value: error at most half a multiplier unit
        assert abs(Fraction(m, 1 << sh) - exact) <= Fraction(1, 1 << (sh + 1))


@pytest.mark.parametrize("width,frac_bits", WIDTHS)
def test_spec_identity_values(width, frac_bits):
    # 1.9.2: scaling 1.0 is multiplier=1<<30, shift=30 (32-bit) and 1<<14, 14 (16-bit)
    fps = fixed_point_scale(1.0, width)
    assert fps.multiplier.tolist() == [1 << frac_bits]
    assert fps.shift.tolist() == [frac_bits]
    # 2^12 and 2^-32, the ends of the supported range: exact powers of two
    top = fixed_point_scale(2.0 ** 12, width)
    bottom = fixed_point_scale(2.0 ** -32, width)
    assert (top.multiplier[0], top.shift[0]) == (1 << frac_bits, frac_bits - 12)
    assert (bottom.multiplier[0], bottom.shift[0]) == (1 << frac_bits, frac_bits + 32)


def test_shift_bounds_at_range_ends():
    # 32-bit: shift = 30 - e in [18, 62]; 16-bit: shift = 14 - e in [2, 46]
    assert fixed_point_scale(2.0 ** -32).shift[0] == 62
    assert fixed_point_scale(2.0 ** 12, ScaleWidth.SCALE16).shift[0] == 2


def test_typical_tflite_style_value():
    # 0.75 = 1.5 * 2^-1 -> multiplier = 1.5 * 2^30 = 1610612736, shift 31 (hand-worked)
    fps = fixed_point_scale(0.75)
    assert (int(fps.multiplier[0]), int(fps.shift[0])) == (1610612736, 31)
    fps16 = fixed_point_scale(0.75, ScaleWidth.SCALE16)
    assert (int(fps16.multiplier[0]), int(fps16.shift[0])) == (24576, 15)


def test_ties_round_up():
    # s = 1 + 2^-31: s * 2^30 = 2^30 + 1/2 exactly -> multiplier 2^30 + 1
    s = Fraction((1 << 31) + 1, 1 << 31)
    fps = fixed_point_scale(s)
    assert (int(fps.multiplier[0]), int(fps.shift[0])) == ((1 << 30) + 1, 30)


def test_carry_renormalizes():
    # just below 2: rounds to 2^31 at shift 30, so it becomes 2^30 at shift 29
    s = float(np.nextafter(2.0, 1.0))
    fps = fixed_point_scale(s)
    assert (int(fps.multiplier[0]), int(fps.shift[0])) == (1 << 30, 29)


def test_just_below_bottom_rounds_into_range():
    s = float(np.nextafter(2.0 ** -32, 0.0))      # rounds up to exactly 2^-32
    fps = fixed_point_scale(s)
    assert (int(fps.multiplier[0]), int(fps.shift[0])) == (1 << 30, 62)


@pytest.mark.parametrize("width", [ScaleWidth.SCALE32, ScaleWidth.SCALE16])
@pytest.mark.parametrize("bad", [2.0 ** 13, 5e4, 2.0 ** -33, 1e-12,
                                 float(np.nextafter(2.0 ** 13, 0.0))])
def test_outside_supported_range_is_an_error(width, bad):
    with pytest.raises(UnsupportedError) as info:
        fixed_point_scale(bad, width, what="conv1 output")
    message = str(info.value)
    assert "conv1 output" in message and "2^-32 .. 2^12" in message


@pytest.mark.parametrize("bad", [0.0, -0.5, float("nan"), float("inf")])
def test_non_positive_or_non_finite_scale_is_an_error(bad):
    with pytest.raises(QsimError) as info:
        fixed_point_scale([0.5, bad], what="fc weights")
    assert "fc weights channel 1" in str(info.value)


def test_two_dimensional_scales_are_rejected():
    with pytest.raises(UnsupportedError):
        fixed_point_scale(np.ones((2, 2)))


def test_rescale_for_product_is_formed_exactly():
    # 1.9.3: input_scale * weight_scale / output_scale, as exact rationals of the floats
    i, w, o = 0.1, [0.2, 0.003], 0.3
    fps = rescale_for_product(i, w, o)
    for wk, m, sh in zip(w, fps.multiplier.tolist(), fps.shift.tolist()):
        exact = Fraction(i) * Fraction(wk) / Fraction(o)
        assert oracle(exact, 30) == [(m, sh)]
    assert exact_ratio([0.5, 0.25], [0.125]) == 1


def test_apply_scales_values_like_the_exact_product(rng):
    # apply_scale_32 rounds half up: result = floor(v * m / 2^shift + 1/2)
    fps = fixed_point_scale([0.0123, 0.77, 3.5])
    values = rng.integers(-(1 << 15), 1 << 15, size=(50, 3))
    out = fps.apply(values)
    for row, res in zip(values.tolist(), out.tolist()):
        for c in range(3):
            m, sh = int(fps.multiplier[c]), int(fps.shift[c])
            assert res[c] == (Fraction(row[c] * m, 1 << sh) + Fraction(1, 2)).__floor__()


def test_sixteen_bit_apply_rejects_double_round():
    fps = fixed_point_scale(0.5, ScaleWidth.SCALE16)
    assert isinstance(fps, FixedPointScale) and not fps.scale32
    with pytest.raises(UnsupportedError, match="double rounding"):
        fps.apply(np.array([4]), double_round=True)
    assert fps.apply(np.array([5, -5])).tolist() == [3, -2]   # 2.5 -> 3, -2.5 -> -2
