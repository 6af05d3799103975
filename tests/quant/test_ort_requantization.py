"""Can a TOSA RESCALE reproduce onnxruntime's requantization? (docs/onnx.md, QDQ parity)

onnxruntime's fused integer kernels requantize an exact int32 accumulator as
nearbyint(float32(float32(acc) * float32 scale)): a float32 product, rounded half to even. A TOSA
RESCALE computes (acc * multiplier + round) >> shift with a data-independent rounding constant
(spec 1.9.2 apply_scale_32). With the multiplier taken from the float32 scale's 24-bit mantissa
(exactly: multiplier = mantissa << 7, shift to match) RESCALE multiplies by onnxruntime's scale
exactly; what it cannot express is the tie rule: with or without double_round it rounds a tie
up (with double_round and a shift over 31, a negative tie away from zero), never to even. These tests hold that: every difference is an exact tie or a
product within float32 rounding of one (single round), and ties do differ (either rounding).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from qsim.tosa.arith import apply_scale_32


def float32_scale_multiplier(scale: np.float32) -> tuple[int, int]:
    """(multiplier, shift) with multiplier * 2^-shift == scale exactly (a float32 has a 24-bit
    mantissa; the multiplier holds 31 bits)."""
    m, e = math.frexp(float(scale))          # scale = m * 2^e, 0.5 <= m < 1
    multiplier = int(m * (1 << 31))
    assert Fraction(multiplier, 1 << (31 - e)) == Fraction(float(scale))
    return multiplier, 31 - e


def onnxruntime_requantize(acc: np.ndarray, scale: np.float32) -> np.ndarray:
    return np.rint(acc.astype(np.float32) * scale).astype(np.int64)


@pytest.mark.parametrize("double_round", [False, True])
def test_only_ties_and_float32_products_differ(double_round):
    rng = np.random.default_rng(27)
    tie_differences = 0
    for round_ in range(40):
        if round_ % 2:                     # any float32 scale: ties need accumulators past 2^24
            scale = np.float32(rng.uniform(2.0 ** -12, 0.5))
        else:                              # odd / 2^p: acc = 2^(p-1) * odd is an exact tie
            p = int(rng.integers(9, 15))
            scale = np.float32(int(rng.integers(0, 128)) * 2 + 1) / np.float32(1 << p)
        multiplier, shift = float32_scale_multiplier(scale)
        acc = rng.integers(-(1 << 20), 1 << 20, size=4000).astype(np.int64)
        if not round_ % 2:
            acc[:400] = (1 << (p - 1)) * (2 * rng.integers(-(1 << (20 - p)), 1 << (20 - p), size=400) + 1)
        ours = apply_scale_32(acc, multiplier, shift, double_round).astype(np.int64)
        theirs = onnxruntime_requantize(acc, scale)
        for a, o, t in zip(acc[ours != theirs], ours[ours != theirs], theirs[ours != theirs]):
            exact = Fraction(int(a)) * Fraction(float(scale))
            frac = exact - math.floor(exact)
            assert abs(int(o) - int(t)) == 1
            if frac == Fraction(1, 2):
                tie_differences += 1
                # RESCALE's fixed rule (half up; with double_round and shift > 31, a negative
                # tie goes down: away from zero) vs half to even
                away = double_round and shift > 31 and a < 0
                assert o == math.floor(exact) + (0 if away else 1) and t % 2 == 0
            elif not double_round:     # double_round's first rounding (to 2^-31) moves more than ties
                assert abs(exact - math.floor(exact) - Fraction(1, 2)) <= abs(exact) * Fraction(1, 1 << 24)
    assert tie_differences > 0        # the tie rule is not expressible: ties do differ


def test_ties_round_up_whatever_the_rounding_attribute():
    """A product k + 1/2 (acc = 2k+1, scale 1/2) comes out as k + 1 from RESCALE with and
    without double_round (it only matters for shift > 31), never k when k is even."""
    acc = np.arange(-9, 10, 2, dtype=np.int64)
    for double_round in (False, True):
        got = apply_scale_32(acc, 1 << 30, 31, double_round)
        assert np.array_equal(got, (acc + 1) // 2)
    assert not np.array_equal((acc + 1) // 2, np.rint(acc / 2).astype(np.int64))
