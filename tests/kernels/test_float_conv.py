"""The float executor's compiled depthwise convolution (qsim/kernels/float_conv.py) gives the
bits of the definition written out: per output one fused multiply-add chain over the taps in
row-major order, acc = fma(w0, x0, +0.0), acc = fma(wk, xk, acc) (each rounded once; the exact
numpy emulation qsim.runtime.float_ops.fma, itself checked against C's fmaf), then + bias as
numpy adds it."""
import numpy as np
import pytest

from qsim.kernels import float_conv
from qsim.kernels.cpu_features import forced_isa, supported_isas
from qsim.runtime.float_ops.conv_gemm import conv_im2col_gemm
from qsim.runtime.float_ops.fma import fma_f32


def loop_depthwise(x, w, m, stride, dilation, before, out_size, exact=False):
    """The definition, written out: padded input, one fused multiply-add (one rounding) per tap;
    with exact, float64 inputs summed in float64 (the oracle of the error bounds)."""
    B, C, H, W = x.shape
    KH, KW = w.shape[2:]
    (sy, sx), (dy, dx), (OH, OW) = stride, dilation, out_size
    pad = 16                            # more than any case reads outside the input
    dtype = np.float64 if exact else np.float32
    xp = np.zeros((B, C, H + 2 * pad, W + 2 * pad), dtype=dtype)
    xp[:, :, pad:pad + H, pad:pad + W] = x
    xr = np.repeat(xp, m, axis=1)       # output channel c*m + i reads input channel c
    out = np.zeros((B, C * m, OH, OW), dtype=dtype)
    for ky in range(KH):
        for kx in range(KW):
            ys, xs = pad - before[0] + ky * dy, pad - before[1] + kx * dx
            win = xr[:, :, ys:ys + sy * (OH - 1) + 1:sy, xs:xs + sx * (OW - 1) + 1:sx]
            wk = w[None, :, 0, ky, kx, None, None]
            out = out + wk * win if exact else fma_f32(wk, win, out)    # out starts at +0.0
    return out


CASES = [   # (B, C, H, W), m, K, stride, dilation, before, out_size
    ((1, 130, 9, 8), 1, (3, 3), (1, 1), (1, 1), (1, 1), (9, 8)),
    ((2, 70, 7, 7), 1, (5, 5), (2, 2), (1, 1), (2, 2), (4, 4)),
    ((1, 64, 6, 11), 1, (3, 2), (2, 1), (2, 3), (0, 2), (2, 12)),
    ((1, 5, 8, 8), 1, (3, 3), (1, 1), (1, 1), (-1, -2), (4, 3)),       # negative padding crops
    ((1, 1, 4, 4), 1, (1, 1), (1, 1), (1, 1), (0, 0), (4, 4)),
    ((2, 3, 7, 6), 2, (3, 3), (2, 1), (1, 2), (1, 2), (4, 6)),         # multiplier 2: plane loop
    ((1, 4, 6, 150), 1, (3, 3), (1, 1), (1, 1), (1, 1), (6, 150)),     # wide rows,
    ((1, 3, 6, 80), 1, (3, 3), (2, 2), (1, 2), (1, -1), (3, 38)),      # full and partial blocks
    ((1, 5, 9, 70), 1, (3, 3), (2, 2), (1, 1), (2, 2), (5, 35)),       # stride 2, even first column
    ((1, 4, 10, 67), 1, (3, 3), (3, 3), (2, 2), (1, 0), (3, 21)),      # stride 3 with dilation
    ((2, 3, 8, 40), 2, (5, 5), (2, 2), (1, 1), (2, 1), (4, 19)),       # multiplier 2, stride 2
    ((1, 2, 5, 5), 1, (1, 1), (2, 2), (1, 1), (0, 0), (3, 3)),         # 1x1 taps, stride 2
    # the AVX-512 row loop (float_dw_rows.h: rows wider than the channel blocks take, strides 1
    # and 2, kernels up to 8 wide): strips of 64 columns, masked edges, padding rows, crops
    ((1, 3, 12, 56), 1, (3, 3), (1, 1), (1, 1), (1, 1), (12, 56)),     # MobileNetV2's 56x56, 3x3
    ((1, 2, 9, 113), 1, (3, 3), (2, 2), (1, 1), (1, 1), (5, 57)),      # odd width, stride 2
    ((1, 2, 7, 130), 1, (5, 5), (2, 1), (1, 1), (2, 2), (4, 130)),     # 5x5: 3 strips, the last of 2
    ((1, 2, 8, 61), 1, (5, 5), (1, 2), (1, 1), (2, 2), (8, 31)),       # 5x5, stride 2 in x only
    ((2, 2, 6, 47), 2, (3, 3), (1, 1), (2, 2), (2, 2), (6, 47)),       # multiplier 2, dilation 2
    ((1, 3, 9, 70), 1, (2, 4), (2, 2), (1, 1), (0, 1), (4, 34)),       # even kernel, generic width
    ((1, 2, 8, 40), 1, (3, 3), (1, 1), (1, 1), (-1, -2), (6, 34)),     # crops (negative padding)
    ((1, 2, 6, 33), 1, (1, 8), (1, 1), (1, 1), (0, 4), (6, 33)),       # widest kernel row of the loop
    ((1, 2, 6, 36), 1, (1, 9), (1, 1), (1, 1), (0, 4), (6, 36)),       # one past it: the plane loop
    ((1, 2, 3, 40), 1, (3, 3), (2, 2), (1, 1), (3, 1), (3, 20)),       # rows wholly in the padding
    ((1, 20, 10, 28), 1, (3, 3), (1, 1), (1, 1), (1, 1), (10, 28)),    # 28 wide: 2 rows of 2 vectors
    ((1, 17, 9, 37), 1, (5, 5), (2, 2), (1, 1), (2, 2), (5, 19)),      # 19 wide, odd rows of the pair
    ((2, 3, 7, 13), 2, (3, 3), (1, 1), (1, 1), (1, 1), (7, 13)),       # 13 wide: 4 rows of 1 vector
]


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("shape,m,k,stride,dilation,before,out_size", CASES)
def test_depthwise_gives_the_loops_bits_on_every_path(rng, monkeypatch, threads, shape, m, k, stride,
                                                      dilation, before, out_size):
    monkeypatch.setenv("QSIM_THREADS", threads)
    x = rng.standard_normal(shape).astype(np.float32)
    x[..., 0, 0] = -0.0                 # signed zeros and their sums must come out the same
    w = rng.standard_normal((shape[1] * m, 1) + k).astype(np.float32)
    bias = rng.standard_normal(shape[1] * m).astype(np.float32)
    want = loop_depthwise(x, w, m, stride, dilation, before, out_size)
    with_bias = want + bias.reshape(-1, 1, 1)
    for isa in supported_isas():
        with forced_isa(isa):
            got = float_conv.depthwise2d(x, w, m, stride, dilation, before, out_size)
            got_b = float_conv.depthwise2d(x, w, m, stride, dilation, before, out_size, bias)
        assert got.dtype == np.float32 and got.shape == want.shape and got.flags.c_contiguous
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=isa.value)
        np.testing.assert_array_equal(got_b.view(np.uint32), with_bias.view(np.uint32), err_msg=isa.value)
        # a fused relu / relu6: numpy's maximum then minimum of the biased values, beside them
        # or (bound_only) in their place
        for lo, hi in ((0.0, 1.0), (-0.25, None)):
            bounded = np.maximum(with_bias, np.float32(lo))
            bounded = bounded if hi is None else np.minimum(bounded, np.float32(hi))
            with forced_isa(isa):
                out, y = float_conv.depthwise2d(x, w, m, stride, dilation, before, out_size, bias, (lo, hi))
                none, only = float_conv.depthwise2d(x, w, m, stride, dilation, before, out_size, bias, (lo, hi),
                                                    True)
            assert none is None
            np.testing.assert_array_equal(out.view(np.uint32), with_bias.view(np.uint32), err_msg=isa.value)
            for got_bounded in (y, only):
                np.testing.assert_array_equal(got_bounded.view(np.uint32), bounded.view(np.uint32),
                                              err_msg=isa.value)


@pytest.mark.parametrize("shape,m,k,stride,dilation,before,out_size", CASES[::3])
def test_the_gemm_and_the_depthwise_loops_give_one_definition(rng, shape, m, k, stride, dilation, before,
                                                             out_size):
    """A depthwise conv run through the conv GEMM (groups of one input channel) takes the same
    fma chain over the same taps in the same order: bit for bit the depthwise loops' result, on
    every path; and both within the fma chain's bound of the exact sum, gamma(K + 1) * sum |w x|
    (+ |bias|): K roundings of the chain and one of the bias add, u = 2**-24 each."""
    B, C, H, W = shape
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((C * m, 1) + k).astype(np.float32)
    bias = rng.standard_normal(C * m).astype(np.float32)
    K = k[0] * k[1]
    w3 = w.reshape(C, m, K)
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    exact = loop_depthwise(xd, wd, m, stride, dilation, before, out_size, exact=True) + bias.reshape(-1, 1, 1)
    mag = loop_depthwise(np.abs(xd), np.abs(wd), m, stride, dilation, before, out_size, exact=True) + \
        np.abs(bias.astype(np.float64)).reshape(-1, 1, 1)
    u = 2.0 ** -24
    gamma = (K + 1) * u / (1 - (K + 1) * u)
    for isa in supported_isas():
        with forced_isa(isa):
            loops = float_conv.depthwise2d(x, w, m, stride, dilation, before, out_size, bias)
            gemm, _ = conv_im2col_gemm(x, w3, k, stride, dilation, before, out_size, bias)
        np.testing.assert_array_equal(gemm.reshape(loops.shape).view(np.uint32), loops.view(np.uint32),
                                      err_msg=isa.value)
        assert np.all(np.abs(loops - exact) <= gamma * mag), isa.value


def test_non_finite_values_propagate_like_the_loop(rng):
    x = rng.standard_normal((1, 20, 5, 5)).astype(np.float32)
    x[0, 3, 2, 2], x[0, 4, 1, 1], x[0, 5, 0, 0] = np.nan, np.inf, -np.inf
    w = rng.standard_normal((20, 1, 3, 3)).astype(np.float32)
    w[7] = 0.0
    x[0, 7, 2, 2] = np.inf              # 0 * inf = NaN
    want = loop_depthwise(x, w, 1, (1, 1), (1, 1), (1, 1), (5, 5))
    for isa in supported_isas():
        with forced_isa(isa):
            got = float_conv.depthwise2d(x, w, 1, (1, 1), (1, 1), (1, 1), (5, 5))
        np.testing.assert_array_equal(got, want, err_msg=isa.value)
    assert np.isnan(got[0, 3]).sum() > 0 and np.isnan(got[0, 7]).sum() > 0


@pytest.mark.parametrize("width", [5, 60])      # the channel blocks and the plane or row loops
def test_an_infinite_weight_makes_nan_in_the_padding_on_every_path(rng, width):
    """The definition multiplies the padding's +0.0 too: inf * 0 = NaN in every output whose
    window reaches the padding (the row loop's masked loads read +0.0 there, as the copy did)."""
    x = rng.standard_normal((1, 3, 6, width)).astype(np.float32)
    w = rng.standard_normal((3, 1, 3, 3)).astype(np.float32)
    w[1, 0, 0, 0] = np.inf
    want = loop_depthwise(x, w, 1, (1, 1), (1, 1), (1, 1), (6, width))
    assert np.isnan(want[0, 1, 0]).all() and np.isnan(want[0, 1, :, 0]).all()
    for isa in supported_isas():
        with forced_isa(isa):
            got = float_conv.depthwise2d(x, w, 1, (1, 1), (1, 1), (1, 1), (6, width))
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=isa.value)


@pytest.mark.parametrize("groups,c,oc,k,stride", [(1, 16, 24, 3, 1), (1, 3, 8, 7, 2), (32, 32, 32, 5, 1),
                                                  (1, 40, 12, 1, 1)])
def test_float_conv_within_float32_rounding_of_onnxruntime(rng, groups, c, oc, k, stride):
    """The float executor's conv (im2col + BLAS, or the depthwise loops) and onnxruntime's Conv
    both round in float32: each differs from the exact sum by at most about K * eps32 *
    sum|w x| (K products per output), so they differ from each other by at most twice that."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper
    from qsim.runtime.float_ops import run_op
    x = rng.standard_normal((1, c, 15, 13)).astype(np.float32)
    w = rng.standard_normal((oc, c // groups, k, k)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    p = k // 2
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=groups, strides=[stride] * 2,
                            pads=[p] * 4)
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel()),
                               helper.make_tensor("b", TensorProto.FLOAT, b.shape, b)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    got = run_op("nn.conv", [x, w, b], dict(stride=[stride] * 2, padding=[p] * 4, groups=groups))[0]
    assert got.shape == want.shape and got.dtype == np.float32
    # sum |w x| + |b| per output, in float64 (the same convolution of the absolute values)
    magnitude = run_op("nn.conv", [np.abs(x).astype(np.float64), np.abs(w).astype(np.float64),
                                   np.abs(b).astype(np.float64)],
                       dict(stride=[stride] * 2, padding=[p] * 4, groups=groups))[0]
    terms = (c // groups) * k * k + 1
    bound = 2 * terms * np.finfo(np.float32).eps * magnitude
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)


@pytest.mark.parametrize("shape,k,stride,dilation,before,out_size", [
    ((2, 3, 9, 11), (3, 3), (1, 1), (1, 1), (1, 1), (9, 11)),
    ((1, 4, 10, 9), (7, 7), (2, 2), (1, 1), (3, 3), (5, 5)),
    ((1, 2, 8, 8), (3, 2), (2, 3), (2, 1), (0, 2), (2, 4)),
    ((1, 2, 8, 8), (3, 3), (1, 1), (1, 1), (-1, -2), (4, 3)),
])
def test_the_gemm_packs_the_window_copy(rng, shape, k, stride, dilation, before, out_size):
    """The conv GEMM's im2col packing (kernels/float_gemm.h), bit for bit: with one-hot weights
    (output channel q takes k row q alone) every output is fma(1, x, 0) then fma(0, x', acc): the
    window copy itself, on every ISA path"""
    x = rng.standard_normal(shape).astype(np.float32)
    pad = 16
    xp = np.zeros(shape[:2] + (shape[2] + 2 * pad, shape[3] + 2 * pad), np.float32)
    xp[:, :, pad:pad + shape[2], pad:pad + shape[3]] = x
    want = np.empty(shape[:2] + (k[0] * k[1],) + out_size, np.float32)
    for ky in range(k[0]):
        for kx in range(k[1]):
            ys, xs = pad - before[0] + ky * dilation[0], pad - before[1] + kx * dilation[1]
            want[:, :, ky * k[1] + kx] = xp[:, :, ys:ys + stride[0] * (out_size[0] - 1) + 1:stride[0],
                                            xs:xs + stride[1] * (out_size[1] - 1) + 1:stride[1]]
    B, C = shape[:2]
    K = C * k[0] * k[1]
    one_hot = np.eye(K, dtype=np.float32).reshape(1, K, K)
    for isa in supported_isas():
        with forced_isa(isa):
            got, _ = conv_im2col_gemm(x, one_hot, k, stride, dilation, before, out_size, None)
        np.testing.assert_array_equal(got.view(np.uint32), want.reshape(B, K, -1).view(np.uint32))
