"""CONV2D, CONV3D, DEPTHWISE_CONV2D, TRANSPOSE_CONV2D, FULLY_CONNECTED, MATMUL against the
scalar-loop oracles, in every integer mode, with the sharp cases of issue 2."""
import numpy as np
import pytest

import tosa_oracle as oracle
from qsim.errors import InvalidGraphError, UnpredictableError
from qsim.tosa import run

MODES = {  # mode -> (in dtype, in range, weight range, weight_t, out dtype, bounds)
    "8x8": (np.int8, (-128, 127), (-128, 127), None, np.int32, oracle.INT32),
    "8x4": (np.int8, (-128, 127), (-7, 7), "int4", np.int32, oracle.INT32),
    "16x8": (np.int16, (-32768, 32767), (-128, 127), None, np.int64, oracle.INT48),
}


def _rand(rng, shape, lo_hi, dtype):
    return rng.integers(lo_hi[0], lo_hi[1] + 1, size=shape).astype(dtype)


def _zps(rng, mode):
    if mode == "8x8":
        return int(rng.choice([-128, 127, int(rng.integers(-128, 128))])), int(rng.integers(-128, 128))
    if mode == "16x8":
        return 0, int(rng.integers(-128, 128))
    return int(rng.integers(-128, 128)), 0


def _attrs(weight, bias, weight_t, **kw):
    a = dict(weight=weight, bias=bias, **kw)
    if weight_t:
        a["weight_t"] = weight_t
    return a


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("case", range(6))
def test_conv2d_matches_oracle(rng, mode, case):
    in_dt, in_r, w_r, weight_t, out_dt, bounds = MODES[mode]
    rng = np.random.default_rng(case * 7 + len(mode))
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    sy, sx = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    dy, dx = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    pad = [int(v) for v in rng.integers(0, 3, size=4)]
    ic, oc = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    # pick IH/IW so that the strided window divides exactly (the ERROR_IF on OH/OW)
    ih = (kh - 1) * dy + 1 - pad[0] - pad[1] + sy * int(rng.integers(2, 5))
    iw = (kw - 1) * dx + 1 - pad[2] - pad[3] + sx * int(rng.integers(2, 5))
    ih, iw = max(ih, 1 + sy), max(iw, 1 + sx)
    ih += (-(ih - 1 + pad[0] + pad[1] - (kh - 1) * dy)) % sy
    iw += (-(iw - 1 + pad[2] + pad[3] - (kw - 1) * dx)) % sx
    x = _rand(rng, (2, ih, iw, ic), in_r, in_dt)
    w = _rand(rng, (oc, kh, kw, ic), w_r, np.int8)
    x.flat[0], w.flat[0] = in_r[0], w_r[0]          # -128 x -128 (or the mode's extremes)
    bias = rng.integers(-1000, 1000, size=oc).astype(out_dt)
    izp, wzp = _zps(rng, mode)
    got, = run("CONV2D", [x], _attrs(w, bias, weight_t, pad=pad, stride=(sy, sx), dilation=(dy, dx),
                                     input_zp=izp, weight_zp=wzp), backend="reference")
    want, overflow = oracle.conv_nd(x, w, bias, pad, (sy, sx), (dy, dx), izp, wzp, bounds)
    assert not overflow
    assert got.dtype == out_dt
    assert np.array_equal(got, want)


@pytest.mark.parametrize("mode", list(MODES))
def test_conv3d_matches_oracle(rng, mode):
    in_dt, in_r, w_r, weight_t, out_dt, bounds = MODES[mode]
    x = _rand(rng, (1, 4, 5, 4, 2), in_r, in_dt)
    w = _rand(rng, (3, 2, 3, 2, 2), w_r, np.int8)
    bias = rng.integers(-50, 50, size=3).astype(out_dt)
    izp, wzp = _zps(rng, mode)
    pad, stride, dil = (1, 1, 1, 1, 0, 1), (2, 1, 1), (1, 1, 2)
    got, = run("CONV3D", [x], _attrs(w, bias, weight_t, pad=pad, stride=stride, dilation=dil,
                                     input_zp=izp, weight_zp=wzp), backend="reference")
    want, _ = oracle.conv_nd(x, w, bias, pad, stride, dil, izp, wzp, bounds)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("stride,dilation,pad", [((1, 1), (1, 1), (1, 1, 1, 1)), ((2, 2), (1, 1), (0, 1, 0, 1)),
                                                 ((1, 2), (2, 1), (2, 2, 0, 1))])
def test_depthwise_matches_oracle(rng, mode, stride, dilation, pad):
    in_dt, in_r, w_r, weight_t, out_dt, bounds = MODES[mode]
    kh, kw, c, m = 3, 2, 3, 2
    ih = 7 + (-(7 - 1 + pad[0] + pad[1] - (kh - 1) * dilation[0])) % stride[0]
    iw = 6 + (-(6 - 1 + pad[2] + pad[3] - (kw - 1) * dilation[1])) % stride[1]
    x = _rand(rng, (1, ih, iw, c), in_r, in_dt)
    w = _rand(rng, (kh, kw, c, m), w_r, np.int8)
    bias = rng.integers(-99, 99, size=c * m).astype(out_dt)
    izp, wzp = _zps(rng, mode)
    got, = run("DEPTHWISE_CONV2D", [x], _attrs(w, bias, weight_t, pad=pad, stride=stride, dilation=dilation,
                                               input_zp=izp, weight_zp=wzp), backend="reference")
    want, _ = oracle.depthwise(x, w, bias, pad, stride, dilation, izp, wzp, bounds)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("stride,out_pad", [((1, 1), (0, 0, 0, 0)), ((2, 2), (0, 0, 0, 0)),
                                            ((2, 3), (1, 0, 0, 2))])
def test_transpose_conv2d_matches_oracle(rng, mode, stride, out_pad):
    in_dt, in_r, w_r, weight_t, out_dt, bounds = MODES[mode]
    n, ih, iw, ic, oc, kh, kw = 1, 3, 4, 2, 3, 3, 2
    oh = (ih - 1) * stride[0] - out_pad[0] - out_pad[1] + kh
    ow = (iw - 1) * stride[1] - out_pad[2] - out_pad[3] + kw
    x = _rand(rng, (n, ih, iw, ic), in_r, in_dt)
    w = _rand(rng, (oc, kh, kw, ic), w_r, np.int8)
    bias = rng.integers(-99, 99, size=oc).astype(out_dt)
    izp, wzp = _zps(rng, mode)
    attrs = _attrs(w, bias, weight_t, out_pad=out_pad, stride=stride, out_shape=(n, oh, ow, oc),
                   input_zp=izp, weight_zp=wzp)
    got, = run("TRANSPOSE_CONV2D", [x], attrs, backend="reference")
    want, _ = oracle.transpose_conv2d(x, w, bias, out_pad, stride, (n, oh, ow, oc), izp, wzp, bounds)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("mode", list(MODES))
def test_fully_connected_matches_oracle(rng, mode):
    in_dt, in_r, w_r, weight_t, out_dt, bounds = MODES[mode]
    x = _rand(rng, (3, 17), in_r, in_dt)
    w = _rand(rng, (5, 17), w_r, np.int8)
    bias = rng.integers(-99, 99, size=5).astype(out_dt)
    izp, wzp = _zps(rng, mode)
    got, = run("FULLY_CONNECTED", [x], _attrs(w, bias, weight_t, input_zp=izp, weight_zp=wzp),
               backend="reference")
    # FC is CONV2D over a 1x1 image: [N,IC] -> [N,1,1,IC]
    want, _ = oracle.conv_nd(x.reshape(3, 1, 1, 17), w.reshape(5, 1, 1, 17), bias, (0,) * 4, (1, 1), (1, 1),
                             izp, wzp, bounds)
    assert np.array_equal(got, want.reshape(3, 5))


@pytest.mark.parametrize("in_dt,zps,out_dt,bounds", [(np.int8, (-128, 127), np.int32, oracle.INT32),
                                                      (np.int16, (0, 0), np.int64, oracle.INT48)])
def test_matmul_matches_oracle(rng, in_dt, zps, out_dt, bounds):
    info = np.iinfo(in_dt)
    a = rng.integers(info.min, info.max + 1, size=(2, 3, 9)).astype(in_dt)
    b = rng.integers(info.min, info.max + 1, size=(2, 9, 4)).astype(in_dt)
    a[0, 0, :] = info.min
    b[0, :, 0] = info.min      # min x min products
    got, = run("MATMUL", [a, b], dict(A_zp=zps[0], B_zp=zps[1]), backend="reference")
    want, _ = oracle.matmul(a, b, zps[0], zps[1], bounds)
    assert got.dtype == out_dt and np.array_equal(got, want)


def test_conv2d_padding_with_nonzero_input_zp_skips_taps():
    # 1x1 image of value 5, input_zp 3, 3x3 all-ones kernel, pad 1: only the centre tap exists,
    # so the result is (5-3)*1 = 2 (padding contributes nothing, not (0-3)).
    x = np.full((1, 1, 1, 1), 5, np.int8)
    w = np.ones((1, 3, 3, 1), np.int8)
    out, = run("CONV2D", [x], dict(weight=w, bias=np.zeros(1, np.int32), pad=(1, 1, 1, 1), stride=(1, 1),
                                   dilation=(1, 1), input_zp=3, weight_zp=0), backend="reference")
    assert out.tolist() == [[[[2]]]]


def _fc(x, w, bias, izp=0, wzp=0):
    return run("FULLY_CONNECTED", [x], dict(weight=w, bias=bias, input_zp=izp, weight_zp=wzp),
               backend="reference")[0]


def test_accumulator_reaches_int32_max_exactly():
    # (-128-127) * (-128-127) = 65025 per term; K terms plus bias hit 2^31-1 exactly
    k = (2 ** 31 - 1) // 65025
    rest = 2 ** 31 - 1 - k * 65025
    x = np.full((1, k), -128, np.int8)
    w = np.full((1, k), -128, np.int8)
    out = _fc(x, w, np.array([rest], np.int32), izp=127, wzp=127)
    assert out.tolist() == [[2 ** 31 - 1]]
    with pytest.raises(UnpredictableError, match="bias"):
        _fc(x, w, np.array([rest + 1], np.int32), izp=127, wzp=127)


def test_accumulator_partial_sum_overflow_is_unpredictable_even_if_final_fits():
    # input_zp = 127, weight_zp = 0: terms (-255)*(-128) = 32640 then (-255)*127 = -32385
    k_pos = (2 ** 31) // 32640 + 1
    x = np.full((1, 2 * k_pos), -128, np.int8)
    w = np.concatenate([np.full(k_pos, -128), np.full(k_pos, 127)]).astype(np.int8)[None, :]
    total = k_pos * 32640 - k_pos * 32385
    assert total < 2 ** 31 and k_pos * 32640 > 2 ** 31 - 1
    with pytest.raises(UnpredictableError, match="partial sum"):
        _fc(x, w, np.zeros(1, np.int32), izp=127)
    # reversed order: negative terms first stay in range (-k*32385 > -2^31), final fits
    out = _fc(x, w[:, ::-1].copy(), np.zeros(1, np.int32), izp=127)
    assert out.tolist() == [[total]]


def test_int48_accumulator_overflow_through_bias():
    x = np.full((1, 4), 1000, np.int16)
    w = np.full((1, 4), 100, np.int8)
    bias = np.array([2 ** 47 - 1 - 400000], np.int64)
    assert _fc(x, w, bias).tolist() == [[2 ** 47 - 1]]
    with pytest.raises(UnpredictableError, match="bias"):
        _fc(x, w, bias + 1)


def test_matmul_overflow_is_unpredictable():
    k = 2 ** 31 // 16384 + 1
    a = np.full((1, 1, k), -128, np.int8)
    with pytest.raises(UnpredictableError, match=r"MATMUL.*\[0, 0, 0\]"):
        run("MATMUL", [a, a.reshape(1, k, 1)], dict(A_zp=0, B_zp=0), backend="reference")


def test_transpose_conv2d_overflow_is_unpredictable():
    x = np.full((1, 1, 1, 1), 100, np.int8)
    w = np.full((1, 1, 1, 1), 100, np.int8)
    attrs = dict(weight=w, bias=np.array([2 ** 31 - 1 - 10000], np.int32), out_pad=(0, 0, 0, 0), stride=(1, 1),
                 out_shape=(1, 1, 1, 1), input_zp=0, weight_zp=0)
    assert run("TRANSPOSE_CONV2D", [x], attrs, backend="reference")[0].tolist() == [[[[2 ** 31 - 1]]]]
    attrs["bias"] = np.array([2 ** 31 - 10000], np.int32)
    with pytest.raises(UnpredictableError, match="partial sum"):
        run("TRANSPOSE_CONV2D", [x], attrs, backend="reference")


CONV_BASE = dict(pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1), input_zp=0, weight_zp=0)


@pytest.mark.parametrize("change,match", [
    (dict(stride=(0, 1)), r"ERROR_IF\(stride_y < 1 \|\| stride_x < 1\)"),
    (dict(dilation=(1, 0)), r"dilation_y < 1"),
    (dict(pad=(0, -1, 0, 0)), r"pad_top < 0"),
    (dict(stride=(2, 1)), r"OH != idiv_check"),
])
def test_conv2d_error_if(change, match):
    x = np.zeros((1, 4, 4, 1), np.int8)
    attrs = dict(CONV_BASE, weight=np.zeros((1, 3, 3, 1), np.int8), bias=np.zeros(1, np.int32))
    attrs.update(change)
    with pytest.raises(InvalidGraphError, match=match):
        run("CONV2D", [x], attrs)


def test_conv_zero_point_only_for_int8():
    x = np.zeros((1, 4, 4, 1), np.int16)
    attrs = dict(CONV_BASE, weight=np.zeros((1, 3, 3, 1), np.int8), bias=np.zeros(1, np.int64), input_zp=1)
    with pytest.raises(InvalidGraphError, match=r"in_t != int8_t && input_zp != 0"):
        run("CONV2D", [x], attrs)
    attrs = dict(CONV_BASE, weight=np.zeros((1, 3, 3, 1), np.int8), bias=np.zeros(1, np.int32),
                 weight_zp=1, weight_t="int4")
    with pytest.raises(InvalidGraphError, match=r"weight_t != int8_t && weight_zp != 0"):
        run("CONV2D", [np.zeros((1, 4, 4, 1), np.int8)], attrs)


def test_int4_weight_range_is_checked():
    attrs = dict(CONV_BASE, weight=np.full((1, 1, 1, 1), 8, np.int8), bias=np.zeros(1, np.int32),
                 weight_t="int4")
    with pytest.raises(InvalidGraphError, match=r"int4_t \[-7, 7\]"):
        run("CONV2D", [np.zeros((1, 2, 2, 1), np.int8)], attrs)


def test_weight_and_bias_shapes_are_checked():
    attrs = dict(CONV_BASE, weight=np.zeros((2, 1, 1, 3), np.int8), bias=np.zeros(2, np.int32))
    with pytest.raises(InvalidGraphError, match=r"weight shape"):
        run("CONV2D", [np.zeros((1, 2, 2, 1), np.int8)], attrs)
    attrs = dict(CONV_BASE, weight=np.zeros((2, 1, 1, 1), np.int8), bias=np.zeros(3, np.int32))
    with pytest.raises(InvalidGraphError, match=r"bias shape"):
        run("CONV2D", [np.zeros((1, 2, 2, 1), np.int8)], attrs)


def test_matmul_and_transpose_error_if():
    a = np.zeros((1, 2, 3), np.int16)
    with pytest.raises(InvalidGraphError, match=r"in_t != int8_t && \(A_zp != 0"):
        run("MATMUL", [a, np.zeros((1, 3, 2), np.int16)], dict(A_zp=1, B_zp=0))
    with pytest.raises(InvalidGraphError, match=r"B shape"):
        run("MATMUL", [a, np.zeros((1, 4, 2), np.int16)], dict(A_zp=0, B_zp=0))
    attrs = dict(weight=np.zeros((1, 2, 2, 1), np.int8), bias=np.zeros(1, np.int32), out_pad=(0, 0, 0, 0),
                 stride=(1, 1), out_shape=(1, 5, 5, 1), input_zp=0, weight_zp=0)
    with pytest.raises(InvalidGraphError, match=r"OH != \(IH - 1\) \* stride_y"):
        run("TRANSPOSE_CONV2D", [np.zeros((1, 3, 3, 1), np.int8)], attrs)
    attrs.update(out_shape=(1, 4, 4, 1), out_pad=(0, -1, 0, 0))
    with pytest.raises(InvalidGraphError, match=r"out_pad_top < 0 \|\| out_pad_bottom < 0"):
        run("TRANSPOSE_CONV2D", [np.zeros((1, 3, 3, 1), np.int8)], attrs)


def test_transpose_conv2d_partial_sum_order():
    # one output element fed by two input pixels: bias + (+x) then (-x). With the positive term
    # first the running sum leaves int32 (REQUIRE); in the other order it stays inside.
    x = np.array([127, 127], np.int8).reshape(1, 1, 2, 1)
    w = np.array([127, -128], np.int8).reshape(1, 1, 2, 1)        # kx = 0, 1
    # stride_x 1, out_pad 0: ox = ix + kx. Output ox=1 gets ix=0,kx=1 (first) then ix=1,kx=0.
    attrs = dict(weight=w, bias=np.array([0], np.int32), out_pad=(0, 0, 0, 0), stride=(1, 1),
                 out_shape=(1, 1, 3, 1), input_zp=0, weight_zp=0)
    # ox=1 terms in loop order: (ix=0, kx=1) = 127*-128 = -16256, then (ix=1, kx=0) = 127*127 = 16129
    attrs["bias"] = np.array([-(2 ** 31) + 16255], np.int32)
    with pytest.raises(UnpredictableError, match=r"\[0, 0, 1, 0\]"):
        run("TRANSPOSE_CONV2D", [x], attrs, backend="reference")
    attrs["bias"] = np.array([-(2 ** 31) + 16256], np.int32)
    out, = run("TRANSPOSE_CONV2D", [x], attrs, backend="reference")
    assert out.ravel().tolist() == [-(2 ** 31) + 16256 + 16129, -(2 ** 31) + 16256 - 16256 + 16129,
                                    -(2 ** 31) + 16256 - 16256]
