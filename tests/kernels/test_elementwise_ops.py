"""ADD, SUB, MAXIMUM, MINIMUM, MUL with broadcasting and REDUCE_SUM/MAX/MIN: kernels vs the
TOSA reference on every ISA path, over random shapes and broadcast patterns, the int32 limits,
MUL's rounding shift (ties, shift 1 and 63) and the REQUIRE failures."""
import numpy as np
import pytest

from kernel_harness import check_all_paths, ints, tosa_run
from qsim.errors import UnpredictableError
from qsim.kernels.registry import KERNELS


def broadcast_pair(rng, rank):
    """Two shapes of one rank whose dimensions are equal or 1 (spec 1.8.4)."""
    out = [int(v) for v in rng.integers(1, 6, rank)]
    a = [n if rng.random() < 0.7 else 1 for n in out]
    b = [n if rng.random() < 0.7 else 1 for n in out]
    return tuple(a), tuple(b)


@pytest.mark.parametrize("op", ["ADD", "SUB", "MAXIMUM", "MINIMUM"])
def test_int32_binary_broadcasting(rng, op):
    for rank in (0, 1, 2, 3, 4, 5, 6):
        for _ in range(4):
            sa, sb = broadcast_pair(rng, rank)
            # operands within +-2^30: ADD and SUB cannot leave int32
            a = ints(rng, sa, np.int32, -(1 << 30), 1 << 30)
            b = ints(rng, sb, np.int32, -(1 << 30), 1 << 30)
            check_all_paths(op, [a, b], {})


def test_int32_limits_and_overflow_requires():
    big = np.array([2 ** 31 - 1, -2 ** 31, 0, -1], np.int32)
    check_all_paths("ADD", [big, np.array([0, 0, 2 ** 31 - 1, -2 ** 31 + 1], np.int32)], {})
    check_all_paths("SUB", [big, np.array([0, 0, -2 ** 31 + 1, 2 ** 31 - 1], np.int32)], {})
    check_all_paths("MAXIMUM", [big, big[::-1].copy()], {})
    for op, a, b in (("ADD", 2 ** 31 - 1, 1), ("ADD", -2 ** 31, -1), ("SUB", -2 ** 31, 1),
                     ("SUB", 0, -2 ** 31)):
        x = np.full((2, 3), 5, np.int32)
        x[1, 2] = a
        y = np.array([[0, 0, b]], np.int32)                # broadcast along dimension 0
        for backend in ("reference", "kernels"):
            with pytest.raises(UnpredictableError, match="apply_"):
                tosa_run(op, [x, y], {}, backend=backend)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
def test_mul_without_shift_broadcasting(rng, dtype):
    for rank in (1, 3, 4):
        sa, sb = broadcast_pair(rng, rank)
        a, b = ints(rng, sa, dtype), ints(rng, sb, dtype)
        a.flat[0] = np.iinfo(dtype).min
        b.flat[0] = np.iinfo(dtype).min                    # -128 x -128, -2^31 x -2^31 (wraps)
        check_all_paths("MUL", [a, b], dict(shift=0))


def test_mul_shift_rounding(rng):
    # 3 * 1 >> 1 = 1.5 -> 2, -3 >> 1 = -1.5 -> -1 (round half up); shift 63 of -2^31 * -2^31 = 2^62
    a = np.array([3, -3, 5, -5, 1, -1], np.int32)
    got = check_all_paths("MUL", [a, np.ones(6, np.int32)], dict(shift=1))[0]
    assert got.tolist() == [2, -1, 3, -2, 1, 0]
    # shift 63: 2^62 / 2^63 = 1/2 rounds up to 1; (2^31-1)^2 / 2^63 < 1/2 rounds to 0
    a = np.array([-2 ** 31, 2 ** 31 - 1, -2 ** 31], np.int32)
    b = np.array([-2 ** 31, 2 ** 31 - 1, 2 ** 31 - 1], np.int32)
    got = check_all_paths("MUL", [a, b], dict(shift=63))[0]
    assert got.tolist() == [1, 0, 0]
    for shift in (2, 31, 32, 40):
        lim = 1 << min(31, (31 + shift) // 2 - 1)        # |x * y| >> shift stays in int32
        x = ints(rng, (3, 1, 7), np.int32, -lim, lim - 1)
        y = ints(rng, (1, 4, 7), np.int32, -lim, lim - 1)
        check_all_paths("MUL", [x, y], dict(shift=shift))


def test_mul_shift_require():
    a = np.array([2 ** 31 - 1], np.int32)
    for backend in ("reference", "kernels"):
        with pytest.raises(UnpredictableError, match="product"):
            tosa_run("MUL", [a, a], dict(shift=1), backend=backend)


@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
def test_reduce_max_min(rng, op, dtype):
    for shape in ((7,), (3, 5), (2, 3, 4), (2, 1, 3, 9)):
        x = ints(rng, shape, dtype)
        x.flat[0] = np.iinfo(dtype).min
        x.flat[-1] = np.iinfo(dtype).max
        for axis in range(len(shape)):
            check_all_paths(op, [x], dict(axis=axis))


def test_reduce_sum_partial_sums(rng):
    for shape in ((9,), (4, 6), (3, 5, 2), (2, 3, 4, 5)):
        x = ints(rng, shape, np.int32, -(1 << 20), 1 << 20)
        for axis in range(len(shape)):
            check_all_paths("REDUCE_SUM", [x], dict(axis=axis))
    # total fits, but the running sum in index order passes INT32_MAX first: REQUIRE fails
    x = np.array([[2 ** 31 - 1, 1, -5]], np.int32)
    for backend in ("reference", "kernels"):
        with pytest.raises(UnpredictableError, match="accumulator overflow"):
            tosa_run("REDUCE_SUM", [x], dict(axis=1), backend=backend)
    # the same values in another order never leave int32
    ok = np.array([[-5, 2 ** 31 - 1, 1]], np.int32)
    assert check_all_paths("REDUCE_SUM", [ok], dict(axis=1))[0].tolist() == [[2 ** 31 - 1 - 4]]


def test_kernels_are_registered():
    for op in ("ADD", "SUB", "MAXIMUM", "MINIMUM", "MUL", "REDUCE_SUM", "REDUCE_MAX", "REDUCE_MIN"):
        assert op in KERNELS
