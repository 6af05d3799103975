"""Hand-checked values of the TOSA 1.9 helpers, worked out from the spec text."""
import numpy as np
import pytest

from qsim.errors import UnpredictableError
from qsim.tosa.arith import (apply_clip, apply_lookup, apply_scale_16, apply_scale_32,
                             count_leading_zeros, reciprocal_scale)


def test_apply_scale_32_identity_scale():
    # spec: scaling of 1.0 is shift=30, multiplier=1<<30
    v = np.array([-(1 << 28), -1, 0, 1, 12345, (1 << 28) - 1])
    assert np.array_equal(apply_scale_32(v, 1 << 30, 30), v)


def test_apply_scale_32_rounds_half_up():
    # x * 2^30 >> 31 is x/2: +2.5 -> 3, -2.5 -> -2 (round = 1<<30, then arithmetic shift)
    assert apply_scale_32(np.array([5, -5, 3, -3]), 1 << 30, 31).tolist() == [3, -2, 2, -1]


def test_apply_scale_32_double_round():
    # shift 33, multiplier 2^30: x/8. x=4 -> 0.5: single round gives 1.
    # double round adds 2^30 to round for x>=0: (4*2^30 + 2^32 + 2^30) >> 33 = 5*2^30+2^32 = 9*2^30 >> 33 = 1
    # x=3 -> 0.375: single (3*2^30 + 2^32)>>33 = 7*2^30>>33 = 0; double: 8*2^30 >> 33 = 1
    assert apply_scale_32(np.array([3]), 1 << 30, 33).tolist() == [0]
    assert apply_scale_32(np.array([3]), 1 << 30, 33, double_round=True).tolist() == [1]
    # negative side: x=-3: single (-3*2^30 + 2^32) >> 33 = 2^30>>33 = 0; double: (-3*2^30+2^32-2^30)=0 -> 0
    assert apply_scale_32(np.array([-3]), 1 << 30, 33, double_round=True).tolist() == [0]
    # x=-5: single: (-5*2^30+4*2^30)=-2^30 >> 33 = -1; double: -2*2^30 >> 33 = -1
    assert apply_scale_32(np.array([-5]), 1 << 30, 33, double_round=True).tolist() == [-1]
    # shift <= 31: double_round has no effect
    assert apply_scale_32(np.array([5]), 1 << 30, 31, double_round=True).tolist() == [3]


@pytest.mark.parametrize("kwargs,msg", [
    (dict(value=1, multiplier=-1, shift=30), "multiplier >= 0"),
    (dict(value=1, multiplier=1, shift=1), "2 <= shift"),
    (dict(value=1, multiplier=1, shift=63), "2 <= shift"),
    (dict(value=1 << 28, multiplier=1, shift=30), r"value >= \(-1<<\(shift-2\)\)"),
])
def test_apply_scale_32_requires(kwargs, msg):
    with pytest.raises(UnpredictableError, match=msg):
        apply_scale_32(np.array(kwargs["value"]), kwargs["multiplier"], kwargs["shift"])


def test_apply_scale_32_shift_limits():
    # shift 2: value range [-1, 1): only -1 and 0. -1 * m + 2 >> 2
    assert apply_scale_32(np.array([-1, 0]), 3, 2).tolist() == [(-3 + 2) >> 2, 0]
    # shift 62: the whole int32 range allowed; 2^31-1 * (2^31-1) + 2^61 >> 62 == 1
    m = (1 << 31) - 1
    v = np.array([(1 << 31) - 1, -(1 << 31)])
    assert apply_scale_32(v, m, 62).tolist() == [(((1 << 31) - 1) * m + (1 << 61)) >> 62,
                                                 (-(1 << 31) * m + (1 << 61)) >> 62]


def test_apply_scale_16():
    assert apply_scale_16(np.array([1 << 40]), 1 << 14, 14 + 20).tolist() == [1 << 20]
    with pytest.raises(UnpredictableError, match="result >= minimum<int32_t>"):
        apply_scale_16(np.array([1 << 46]), 1 << 14, 14)


def test_reciprocal_scale_hand_values():
    # value 1: k = 32 - clz(0) = 0; numerator = 2^30+1; multiplier 2^30+1, shift 30
    # value 3: k = 32 - clz(2) = 2; numerator (2^30+1)*4; multiplier floor(4294967300/3) = 1431655766, shift 32
    # value 9: k = 4; (2^30+1)*16 / 9 = 17179869200/9 = 1908874355.5 -> 1908874355, shift 34
    m, s = reciprocal_scale(np.array([1, 3, 9]))
    assert m.tolist() == [1073741825, 1431655766, 1908874355]
    assert s.tolist() == [30, 32, 34]
    with pytest.raises(UnpredictableError, match="value > 0"):
        reciprocal_scale(np.array([0]))


def test_reciprocal_scale_divides_averages_exactly_enough():
    # AVG_POOL2D uses it: sum/count rounded. For 9 elements summing to 9*k the result is k.
    m, s = reciprocal_scale(np.array(9))
    sums = np.arange(-1000, 1000) * 9
    assert np.array_equal(apply_scale_32(sums, m, s), np.arange(-1000, 1000))


def test_count_leading_zeros():
    assert count_leading_zeros(np.array([0, 1, 2, 0x7FFFFFFF, 0x80000000])).tolist() == [32, 31, 30, 1, 0]


def test_apply_lookup_interpolates():
    table = np.arange(513, dtype=np.int64) * 10 - 2560   # linear table: slope 10 per entry
    # value -32768 -> index 0, fraction 0 -> base << 7
    assert apply_lookup(table, np.array([-32768])).tolist() == [-2560 << 7]
    # value 32767 -> index 511, fraction 127: (table[511] << 7) + 10 * 127
    assert apply_lookup(table, np.array([32767])).tolist() == [(table[511] << 7) + 1270]
    # clipped beyond the int16 range
    assert apply_lookup(table, np.array([100000])).tolist() == [(table[511] << 7) + 1270]


def test_apply_clip():
    assert apply_clip(np.array([-200, 0, 200]), -128, 127).tolist() == [-128, 0, 127]
