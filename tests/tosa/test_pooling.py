"""ARGMAX, AVG_POOL2D, MAX_POOL2D against scalar oracles and hand-worked values."""
import numpy as np
import pytest

import tosa_oracle as oracle
from qsim.errors import InvalidGraphError
from qsim.tosa import run


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
@pytest.mark.parametrize("kernel,stride,pad", [((2, 2), (2, 2), (0, 0, 0, 0)), ((3, 3), (1, 1), (1, 1, 1, 1)),
                                               ((3, 2), (2, 1), (2, 0, 1, 1))])
def test_avg_pool_matches_oracle(rng, dtype, kernel, stride, pad):
    info = np.iinfo(dtype)
    ih = 7 + (-(7 + pad[0] + pad[1] - kernel[0])) % stride[0]
    iw = 6 + (-(6 + pad[2] + pad[3] - kernel[1])) % stride[1]
    x = rng.integers(info.min, info.max + 1, size=(2, ih, iw, 3)).astype(dtype)
    x[0, :3, :3, 0] = info.min
    zps = [(0, 0)] if dtype == np.int16 else [(0, 0), (-128, 127), (127, -128), (5, -3)]
    for izp, ozp in zps:
        got, = run("AVG_POOL2D", [x], dict(kernel=kernel, stride=stride, pad=pad, input_zp=izp, output_zp=ozp),
                   backend="reference")
        want = oracle.avg_pool(x, kernel, stride, pad, izp, ozp, int(info.min), int(info.max))
        assert got.dtype == dtype and np.array_equal(got, want)


def test_avg_pool_hand_values():
    # 2x2 window of [1, 2, 3, 4]: sum 10, count 4. reciprocal_scale(4) = (2^30 + 1, 32), slightly
    # above 1/4: (10 * (2^30 + 1) + 2^31) >> 32 = (12 * 2^30 + 10) >> 32 = 3.
    # For -10: (-10 * (2^30 + 1) + 2^31) >> 32 = (-8 * 2^30 - 10) >> 32 = -3 (not -2: the
    # multiplier's excess pushes the tie -2.5 below it).
    x = np.stack([np.array([[1, 2], [3, 4]]), np.array([[-1, -2], [-3, -4]])], axis=-1)[None].astype(np.int8)
    out, = run("AVG_POOL2D", [x], dict(kernel=(2, 2), stride=(1, 1), pad=(0, 0, 0, 0), input_zp=0, output_zp=0))
    assert out.tolist() == [[[[3, -3]]]]
    # padding is not counted: a corner window of a 3x3 pool over a constant 7 image stays 7
    x = np.full((1, 2, 2, 1), 7, np.int8)
    out, = run("AVG_POOL2D", [x], dict(kernel=(3, 3), stride=(1, 1), pad=(1, 1, 1, 1), input_zp=0, output_zp=0))
    assert out.ravel().tolist() == [7, 7, 7, 7]
    # output zero point added after scaling and clipped: (-128 - 127) = -255 averaged -> -255 + 100 -> -128
    x = np.full((1, 1, 1, 1), -128, np.int8)
    out, = run("AVG_POOL2D", [x], dict(kernel=(1, 1), stride=(1, 1), pad=(0, 0, 0, 0), input_zp=127, output_zp=100))
    assert out.tolist() == [[[[-128]]]]


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_max_pool_matches_oracle(rng, dtype):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, size=(1, 5, 6, 2)).astype(dtype)
    x[0, :, :, 1] = info.min          # all-minimum channel
    for kernel, stride, pad in (((2, 2), (1, 2), (0, 1, 0, 0)), ((3, 3), (2, 2), (1, 1, 1, 0))):
        got, = run("MAX_POOL2D", [x], dict(kernel=kernel, stride=stride, pad=pad), backend="reference")
        assert np.array_equal(got, oracle.max_pool(x, kernel, stride, pad))


@pytest.mark.parametrize("op", ["AVG_POOL2D", "MAX_POOL2D"])
@pytest.mark.parametrize("change,match", [
    (dict(kernel=(0, 2)), r"kernel_y < 1"), (dict(stride=(1, 0)), r"stride_y < 1 \|\| stride_x < 1"),
    (dict(pad=(0, 0, 2, 0)), r"pad_right >= kernel_x \|\| pad_left >= kernel_x"),
    (dict(pad=(-1, 0, 0, 0)), r"pad_top < 0"), (dict(stride=(3, 2)), r"OH != idiv_check"),
])
def test_pool_error_if(op, change, match):
    attrs = dict(kernel=(2, 2), stride=(2, 2), pad=(0, 0, 0, 0))
    if op == "AVG_POOL2D":
        attrs.update(input_zp=0, output_zp=0)
    attrs.update(change)
    with pytest.raises(InvalidGraphError, match=match):
        run(op, [np.zeros((1, 4, 4, 1), np.int8)], attrs)


def test_avg_pool_zero_point_only_int8():
    with pytest.raises(InvalidGraphError, match=r"in_out_t != int8_t && output_zp != 0"):
        run("AVG_POOL2D", [np.zeros((1, 2, 2, 1), np.int16)],
            dict(kernel=(2, 2), stride=(1, 1), pad=(0, 0, 0, 0), input_zp=0, output_zp=3))


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_argmax_first_maximum(rng, dtype):
    info = np.iinfo(dtype)
    x = rng.integers(-3, 3, size=(3, 4, 5)).astype(dtype)      # many ties
    x[0, 0, :] = info.min
    for axis in range(3):
        got, = run("ARGMAX", [x], dict(axis=axis))
        assert got.dtype == np.int32
        moved = np.moveaxis(x, axis, -1)
        want = [[row.tolist().index(max(row.tolist())) for row in plane] for plane in moved.reshape(-1, 1, x.shape[axis])]
        assert got.ravel().tolist() == [w[0] for w in want]


def test_argmax_error_if():
    with pytest.raises(InvalidGraphError, match=r"axis < 0 \|\| axis >= rank\(shape1\)"):
        run("ARGMAX", [np.zeros((2, 2), np.int8)], dict(axis=2))
    with pytest.raises(InvalidGraphError, match=r"rank 5"):
        run("ARGMAX", [np.zeros((1,) * 5, np.int8)], dict(axis=0))
