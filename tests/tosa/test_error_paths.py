"""One ERROR_IF and one REQUIRE test for each operator whose pseudocode has them and that the
per-family test files do not already cover."""
import numpy as np
import pytest

from qsim.errors import InvalidGraphError, UnpredictableError
from qsim.tosa import run

I32_MAX = 2 ** 31 - 1


def _conv3d(x, bias, **kw):
    attrs = dict(weight=np.full((1, 1, 1, 1, 1), 100, np.int8), bias=bias, pad=(0,) * 6, stride=(1, 1, 1),
                 dilation=(1, 1, 1), input_zp=0, weight_zp=0)
    attrs.update(kw)
    return run("CONV3D", [x], attrs)


def _depthwise(x, bias, **kw):
    attrs = dict(weight=np.full((1, 1, 1, 1), 100, np.int8), bias=bias, pad=(0,) * 4, stride=(1, 1),
                 dilation=(1, 1), input_zp=0, weight_zp=0)
    attrs.update(kw)
    return run("DEPTHWISE_CONV2D", [x], attrs)


def _conv2d(x, bias, **kw):
    attrs = dict(weight=np.full((1, 1, 1, 1), 100, np.int8), bias=bias, pad=(0,) * 4, stride=(1, 1),
                 dilation=(1, 1), input_zp=0, weight_zp=0)
    attrs.update(kw)
    return run("CONV2D", [x], attrs)


@pytest.mark.parametrize("fn,shape", [(_conv2d, (1, 1, 1, 1)), (_conv3d, (1, 1, 1, 1, 1)),
                                      (_depthwise, (1, 1, 1, 1))])
def test_conv_family_accumulator_require(fn, shape):
    x = np.full(shape, 100, np.int8)
    # 100 * 100 = 10000 then the bias: exactly INT32_MAX is fine, one more overflows
    assert fn(x, np.array([I32_MAX - 10000], np.int32))[0].ravel().tolist() == [I32_MAX]
    with pytest.raises(UnpredictableError, match=r"apply_add"):
        fn(x, np.array([I32_MAX - 9999], np.int32))


@pytest.mark.parametrize("fn,shape,change,match", [
    (_conv3d, (1, 2, 2, 2, 1), dict(stride=(1, 0, 1)), r"stride_d < 1 \|\| stride_y < 1 \|\| stride_x < 1"),
    (_conv3d, (1, 2, 2, 2, 1), dict(pad=(0, 0, 0, 0, 0, -1)), r"pad_right < 0"),
    (_conv3d, (1, 2, 2, 2, 1), dict(dilation=(0, 1, 1)), r"dilation_d < 1"),
    (_depthwise, (1, 2, 2, 1), dict(stride=(1, 0)), r"stride_x < 1"),
    (_depthwise, (1, 2, 2, 1), dict(weight_zp=3, weight_t="int4", weight=np.ones((1, 1, 1, 1), np.int8)),
     r"weight_t != int8_t && weight_zp != 0"),
])
def test_conv_family_error_if(fn, shape, change, match):
    with pytest.raises(InvalidGraphError, match=match):
        fn(np.zeros(shape, np.int8), np.zeros(1, np.int32), **change)


def test_fully_connected_error_if():
    with pytest.raises(InvalidGraphError, match=r"in_t != int8_t && input_zp != 0"):
        run("FULLY_CONNECTED", [np.zeros((1, 2), np.int16)],
            dict(weight=np.zeros((1, 2), np.int8), bias=np.zeros(1, np.int64), input_zp=5, weight_zp=0))


@pytest.mark.parametrize("op,dtype", [("REDUCE_ALL", np.bool_), ("REDUCE_ANY", np.bool_), ("REDUCE_MAX", np.int8),
                                      ("REDUCE_MIN", np.int16), ("REDUCE_SUM", np.int32),
                                      ("REDUCE_PRODUCT", np.float32)])
def test_reduction_axis_error_if(op, dtype):
    with pytest.raises(InvalidGraphError, match=r"axis < 0 \|\| axis >= rank\(shape1\)"):
        run(op, [np.zeros((2, 3), dtype)], {"axis": -1})


def test_avg_pool_accumulator_require():
    # 257 x 256 window of int16 32767: the running sum passes 2^31 - 1 after 65538 values
    x = np.full((1, 257, 256, 1), 32767, np.int16)
    with pytest.raises(UnpredictableError, match=r"AVG_POOL2D: accumulator overflow"):
        run("AVG_POOL2D", [x], dict(kernel=(257, 256), stride=(1, 1), pad=(0, 0, 0, 0), input_zp=0, output_zp=0))
    # 256 x 256 = 65536 values of 32767 stay below 2^31: the average is exact
    out, = run("AVG_POOL2D", [x[:, :256]], dict(kernel=(256, 256), stride=(1, 1), pad=(0, 0, 0, 0),
                                                input_zp=0, output_zp=0))
    assert out.ravel().tolist() == [32767]


def test_logical_right_shift_require():
    with pytest.raises(UnpredictableError, match=r"REQUIRE\(0 <= value2 && value2 <= 31\)"):
        run("LOGICAL_RIGHT_SHIFT", [np.ones(1, np.int32), np.array([32], np.int32)], {})


def test_select_and_comparison_broadcast_error_if():
    with pytest.raises(InvalidGraphError, match=r"input1 of shape \[2\], dimension 0 against broadcast shape \[3\]"):
        run("SELECT", [np.ones(2, bool), np.ones(2, np.int8), np.ones(3, np.int8)], {})
    with pytest.raises(InvalidGraphError, match=r"rank\(out_shape\) != rank\(in_shape\)"):
        run("GREATER", [np.ones((2, 1), np.int32), np.ones(2, np.int32)], {})


def test_gather_error_if():
    with pytest.raises(InvalidGraphError, match=r"indices shape != \[N,W\]"):
        run("GATHER", [np.zeros((2, 3, 1), np.int8), np.zeros((1, 2), np.int32)], {})
