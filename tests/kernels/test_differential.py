"""Differential tests, part 1: the multiply-accumulate and pooling kernels against the TOSA
reference on every ISA path, over hypothesis-drawn shapes, attributes and spec modes (int8,
int8 x int4, int16 x int8 / int16 x int16 with int48 accumulators). Every drawn call passes
the spec's ERROR_IF; where a REQUIRE fails (accumulator overflow), both backends must raise.
Part 2 (elementwise, RESCALE, TABLE, CLAMP, reductions, CVM): test_differential_elementwise.py.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from diff_strategies import RANGES, arrays, conv_operands, diff_settings, fill, fit_padding, zero_point
from kernel_harness import check_all_paths, differential

SMALL = st.integers(1, 7)


@st.composite
def windows_2d(draw, ih, iw):
    """((KH, KW), {pad, stride, dilation}) of a 2-D window passing the output-size ERROR_IF;
    padding up to larger than the kernel."""
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sy, sx, dy, dx = (draw(st.integers(1, 3)) for _ in range(4))
    pt, pb, pl, pr = (draw(st.integers(0, 5)) for _ in range(4))
    pb = fit_padding(ih, pt, pb, kh, dy, sy)
    pr = fit_padding(iw, pl, pr, kw, dx, sx)
    return (kh, kw), dict(pad=(pt, pb, pl, pr), stride=(sy, sx), dilation=(dy, dx))


@st.composite
def conv2d_calls(draw):
    n, ih, iw = draw(st.integers(1, 2)), draw(SMALL), draw(SMALL)
    ic, oc = draw(st.integers(1, 9)), draw(st.sampled_from((1, 3, 16, 17, 64, 65)))
    (kh, kw), window = draw(windows_2d(ih, iw))
    x, attrs = draw(conv_operands((n, ih, iw, ic), (oc, kh, kw, ic), oc))
    return [x], dict(attrs, **window)


@diff_settings(250)
@given(conv2d_calls())
def test_conv2d(call):
    differential("CONV2D", *call)


@st.composite
def conv3d_calls(draw):
    n = draw(st.integers(1, 2))
    spatial = [draw(st.integers(1, 5)) for _ in range(3)]
    kernel = [draw(st.integers(1, 3)) for _ in range(3)]
    stride = [draw(st.integers(1, 2)) for _ in range(3)]
    dilation = [draw(st.integers(1, 2)) for _ in range(3)]
    pad = []
    for i in range(3):
        p0, p1 = draw(st.integers(0, 3)), draw(st.integers(0, 3))
        pad += [p0, fit_padding(spatial[i], p0, p1, kernel[i], dilation[i], stride[i])]
    ic, oc = draw(st.integers(1, 6)), draw(st.integers(1, 20))
    x, attrs = draw(conv_operands((n, *spatial, ic), (oc, *kernel, ic), oc))
    attrs.update(pad=tuple(pad), stride=tuple(stride), dilation=tuple(dilation))
    return [x], attrs


@diff_settings(150)
@given(conv3d_calls())
def test_conv3d(call):
    differential("CONV3D", *call)


@st.composite
def transpose_conv2d_calls(draw):
    n, ih, iw = draw(st.integers(1, 2)), draw(st.integers(1, 5)), draw(st.integers(1, 5))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sy, sx = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    full_h, full_w = (ih - 1) * sy + kh, (iw - 1) * sx + kw
    # out_pad up to the whole output but one row/column: it may crop more than KH - 1
    opt = draw(st.integers(0, full_h - 1))
    opb = draw(st.integers(0, full_h - 1 - opt))
    opl = draw(st.integers(0, full_w - 1))
    opr = draw(st.integers(0, full_w - 1 - opl))
    ic, oc = draw(st.integers(1, 8)), draw(st.sampled_from((1, 5, 18, 64, 70)))
    x, attrs = draw(conv_operands((n, ih, iw, ic), (oc, kh, kw, ic), oc))
    attrs.update(out_pad=(opt, opb, opl, opr), stride=(sy, sx),
                 out_shape=(n, full_h - opt - opb, full_w - opl - opr, oc))
    return [x], attrs


@diff_settings(250)
@given(transpose_conv2d_calls())
def test_transpose_conv2d(call):
    differential("TRANSPOSE_CONV2D", *call)


@st.composite
def fully_connected_calls(draw):
    n, ic = draw(st.integers(1, 5)), draw(st.integers(1, 300))
    oc = draw(st.sampled_from((1, 2, 15, 64, 65, 130)))
    x, attrs = draw(conv_operands((n, ic), (oc, ic), oc))
    return [x], attrs


@diff_settings(250)
@given(fully_connected_calls())
def test_fully_connected(call):
    differential("FULLY_CONNECTED", *call)


@st.composite
def depthwise_calls(draw):
    n, ih, iw = draw(st.integers(1, 2)), draw(SMALL), draw(SMALL)
    c, m = draw(st.sampled_from((1, 3, 16, 33, 40))), draw(st.integers(1, 3))
    (kh, kw), window = draw(windows_2d(ih, iw))
    x, attrs = draw(conv_operands((n, ih, iw, c), (kh, kw, c, m), c * m))
    return [x], dict(attrs, **window)


@diff_settings(250)
@given(depthwise_calls())
def test_depthwise_conv2d(call):
    differential("DEPTHWISE_CONV2D", *call)


@st.composite
def matmul_calls(draw):
    in_t = draw(st.sampled_from(("int8", "int16")))
    n, h, c, w = (draw(st.integers(1, 3)), draw(st.integers(1, 10)), draw(st.integers(1, 100)),
                  draw(st.sampled_from((1, 3, 33, 64, 70))))
    a, b = draw(arrays((n, h, c), in_t)), draw(arrays((n, c, w), in_t))
    return [a, b], dict(A_zp=draw(zero_point(in_t)), B_zp=draw(zero_point(in_t)))


@diff_settings(200)
@given(matmul_calls())
def test_matmul(call):
    differential("MATMUL", *call)


@st.composite
def pool_calls(draw):
    """(inputs, attrs, avg): pad < kernel (ERROR_IF), IH chosen so the output size divides."""
    in_t = draw(st.sampled_from(("int8", "int16")))
    ky, kx = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sy, sx = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pt, pb = draw(st.integers(0, ky - 1)), draw(st.integers(0, ky - 1))
    pl, pr = draw(st.integers(0, kx - 1)), draw(st.integers(0, kx - 1))
    sizes = []
    for k, p, s in ((ky, pt + pb, sy), (kx, pl + pr, sx)):
        size = k - p + s * draw(st.integers(0, 4))      # size + p - k is a multiple of s
        while size < 1:
            size += s
        sizes.append(size)
    n, c = draw(st.integers(1, 2)), draw(st.sampled_from((1, 5, 16, 33)))
    x = draw(arrays((n, *sizes, c), in_t))
    attrs = dict(kernel=(ky, kx), stride=(sy, sx), pad=(pt, pb, pl, pr))
    avg = draw(st.booleans())
    if avg:
        attrs.update(input_zp=draw(zero_point(in_t)), output_zp=draw(zero_point(in_t)))
    return [x], attrs, avg


@diff_settings(250)
@given(pool_calls())
def test_avg_pool2d_and_max_pool2d(call):
    inputs, attrs, avg = call
    differential("AVG_POOL2D" if avg else "MAX_POOL2D", inputs, attrs)


# Shapes that cross the GEMM's blocking (kernels/qgemm.h): more than 240 rows (one A block),
# K above 2048 (a single-tap K is split into blocks of 1024), several 64-column panels.
@pytest.mark.parametrize("n,ic,oc", [(241, 4, 65), (7, 2049, 130), (300, 4100, 63), (1, 2047, 1),
                                     (250, 2100, 70)])
def test_large_fully_connected(n, ic, oc):
    @diff_settings(8)
    @given(conv_operands((n, ic), (oc, ic), oc))
    def check(operands):
        differential("FULLY_CONNECTED", [operands[0]], operands[1])
    check()


@pytest.mark.parametrize("c,oc", [(64, 130), (9, 65)])
def test_large_conv2d(c, oc):
    # 3x3 over 16 x 16 pixels: 256 rows of 9 taps
    @diff_settings(8)
    @given(conv_operands((1, 16, 16, c), (oc, 3, 3, c), oc))
    def check(operands):
        attrs = dict(operands[1], pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1))
        differential("CONV2D", [operands[0]], attrs)
    check()


# ---------------------------------------------------------------- accumulations near the limits

@diff_settings(40)
@given(st.integers(-700, 300), st.sampled_from((-128, 127)), st.booleans(), st.integers(0, 2**32 - 1))
def test_int8_accumulation_at_the_int32_limit(k_offset, izp, conv, seed):
    # 255 * 255 * 33025 = 2147450625 <= 2^31 - 1 < 255 * 255 * 33026: K around the last K the
    # static bound allows, data at the extremes (|x - zp| = |w - zp| = 255 where the values
    # sit at the far end), a bias pushing towards the limit; overflow -> REQUIRE on both sides
    k = 33025 + k_offset
    far = -128 if izp == 127 else 127
    x = fill("extremes", seed, (1, k), "int8")
    x[0, : k // 2 + 1] = far
    w = np.full((2, k), far, np.int8)
    w[1, ::3] = -1 - far                               # the other end of int8
    bias = np.array([-(1 << 31) + 1000, (1 << 31) - 1000], np.int32)
    attrs = dict(weight=w, bias=bias, input_zp=izp, weight_zp=izp)
    if conv:
        differential("CONV2D", [x.reshape(1, 1, 1, k)],
                     dict(attrs, weight=w.reshape(2, 1, 1, k), pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1)))
    else:
        differential("FULLY_CONNECTED", [x], attrs)
    differential("MATMUL", [x.reshape(1, 1, k), w.T.reshape(1, k, 2).copy()], dict(A_zp=izp, B_zp=izp))


@diff_settings(40)
@given(st.integers(1, 40), st.sampled_from((-128, 127)), st.integers(-3, 3), st.booleans())
def test_int16_accumulation_at_the_int48_limit(k, wzp, margin, conv):
    # int16 x int8 with a weight zero point: products up to 32768 * 255; the bias sits next to
    # +-2^47 so that the last apply_add lands just inside or just outside int48
    x = np.full((2, k), -32768, np.int16)
    x[1] = 32767
    w = np.full((3, k), 127 if wzp == -128 else -128, np.int8)
    total = k * -32768 * (int(w[0, 0]) - wzp)          # row 0's sum of products, hand-derived
    limit = RANGES["int48"][0] if total > 0 else RANGES["int48"][1]
    bias = np.array([limit - total + margin] * 3, np.int64)
    bias = np.clip(bias, *RANGES["int48"])
    attrs = dict(weight=w, bias=bias, input_zp=0, weight_zp=wzp)
    if conv:
        differential("CONV2D", [x.reshape(1, 2, 1, k)],
                     dict(attrs, weight=w.reshape(3, 1, 1, k), pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1)))
    else:
        differential("FULLY_CONNECTED", [x], attrs)


def test_sixteen_by_eight_weight_zero_point_regression():
    # found by hand and kept (issue 11): int16 input with weight_zp = 5 ignored by the kernels
    x = np.array([[100, -200]], np.int16)
    attrs = dict(weight=np.array([[10, 20]], np.int8), bias=np.zeros(1, np.int64), input_zp=0, weight_zp=5)
    assert check_all_paths("FULLY_CONNECTED", [x], attrs)[0].tolist() == [[100 * 5 - 200 * 15]]
