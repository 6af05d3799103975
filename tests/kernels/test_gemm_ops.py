"""CONV2D, CONV3D, TRANSPOSE_CONV2D, FULLY_CONNECTED, MATMUL kernels vs the TOSA reference."""
import numpy as np
import pytest

from kernel_harness import check_all_paths, ints, tosa_run
from qsim.errors import InvalidGraphError, UnpredictableError
from qsim.kernels.registry import KERNELS


def conv_attrs(rng, w, oc, *, izp=None, wzp=0, pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1),
               bias_range=1000, out="int32"):
    izp = int(rng.integers(-128, 128)) if izp is None else izp
    bias_dtype = np.int64 if out == "int48" else np.int32
    return dict(weight=w, bias=ints(rng, (oc,), bias_dtype, -bias_range, bias_range), pad=pad,
                stride=stride, dilation=dilation, input_zp=izp, weight_zp=wzp)


def fc_attrs(rng, w, oc, **kw):
    attrs = conv_attrs(rng, w, oc, **kw)
    for name in ("pad", "stride", "dilation"):
        del attrs[name]
    return attrs


def out_size(i, p0, p1, k, s, d):
    num = i - 1 + p0 + p1 - (k - 1) * d
    return num // s + 1 if num >= 0 and num % s == 0 else None


def random_conv2d_case(rng):
    """Random shape/attributes satisfying the ERROR_IF output-size rule."""
    while True:
        kh, kw = rng.integers(1, 4, 2)
        sy, sx = rng.integers(1, 3, 2)
        dy, dx = rng.integers(1, 3, 2)
        pad = tuple(int(v) for v in rng.integers(0, 3, 4))
        ih, iw = rng.integers(3, 12, 2)
        oh = out_size(ih, pad[0], pad[1], kh, sy, dy)
        ow = out_size(iw, pad[2], pad[3], kw, sx, dx)
        if oh and ow and oh > 0 and ow > 0:
            return (int(kh), int(kw)), (int(sy), int(sx)), (int(dy), int(dx)), pad, (int(ih), int(iw))


def test_conv2d_random_int8(rng):
    for _ in range(12):
        (kh, kw), stride, dil, pad, (ih, iw) = random_conv2d_case(rng)
        n, ic, oc = int(rng.integers(1, 3)), int(rng.integers(1, 11)), int(rng.integers(1, 70))
        x = ints(rng, (n, ih, iw, ic), np.int8)
        w = ints(rng, (oc, kh, kw, ic), np.int8)
        wzp = int(rng.choice([0, 0, int(rng.integers(-128, 128))]))
        check_all_paths("CONV2D", [x], conv_attrs(rng, w, oc, wzp=wzp, pad=pad, stride=stride,
                                                   dilation=dil))


@pytest.mark.parametrize("izp,wzp", [(-128, 0), (127, 0), (-128, 127), (127, -128), (5, -3)])
def test_conv2d_extreme_zero_points_and_padding(rng, izp, wzp):
    # -128 x -128 products, padding read with a non-zero input zero point, OC not a multiple of 16
    x = np.full((1, 5, 6, 7), -128, dtype=np.int8)
    x[0, 2, 3, :] = 127
    w = np.full((17, 3, 3, 7), -128, dtype=np.int8)
    w[3] = 127
    check_all_paths("CONV2D", [x], conv_attrs(rng, w, 17, izp=izp, wzp=wzp, pad=(1, 2, 2, 1)))


def test_conv2d_hand_worked():
    # 1x1 input channel, 2x2 kernel, pad 1 on the top/left only: out[0,0] sees only x[0,0].
    x = np.array([[1, 2], [3, 4]], dtype=np.int8).reshape(1, 2, 2, 1)
    w = np.array([[1, 10], [100, -1]], dtype=np.int8).reshape(1, 2, 2, 1)
    attrs = dict(weight=w, bias=np.array([5], dtype=np.int32), pad=(1, 0, 1, 0), stride=(1, 1),
                 dilation=(1, 1), input_zp=1, weight_zp=0)
    # x - zp = [[0, 1], [2, 3]]; out[y][x] = sum w[ky][kx] * xz[y-1+ky][x-1+kx] + 5
    want = np.array([[5 + (-1) * 0, 5 + 100 * 0 + (-1) * 1],
                     [5 + 10 * 0 + (-1) * 2, 5 + 1 * 0 + 10 * 1 + 100 * 2 + (-1) * 3]])
    got = KERNELS["CONV2D"]([x], {**attrs, "out_t": "int32"})[0]
    assert got.reshape(2, 2).tolist() == want.tolist()


def test_conv2d_accumulator_near_int32_limit(rng):
    # K = 3*3*3650 = 32850 terms of 255*255 = 2136071250 < 2^31 - 1: the bound holds exactly.
    ic = 3650
    x = np.full((1, 3, 3, ic), 127, dtype=np.int8)
    w = np.full((2, 3, 3, ic), -128, dtype=np.int8)
    attrs = conv_attrs(rng, w, 2, izp=-128, wzp=127, bias_range=0)
    out = check_all_paths("CONV2D", [x], attrs)[0]
    assert int(out[0, 0, 0, 0]) == 32850 * 255 * -255


def test_conv2d_overflow_is_unpredictable(rng):
    # 9*3700 = 33300 terms of 255*255 = 2165332500 > 2^31 - 1: the kernel cannot prove the
    # bound and the spec-order check raises the REQUIRE failure
    ic = 3700
    x = np.full((1, 3, 3, ic), 127, dtype=np.int8)
    w = np.full((1, 3, 3, ic), 127, dtype=np.int8)
    attrs = conv_attrs(rng, w, 1, izp=-128, wzp=-128, bias_range=0)
    with pytest.raises(UnpredictableError, match="REQUIRE"):
        tosa_run("CONV2D", [x], attrs, backend="kernels")


def test_conv2d_bound_uses_data_range(rng):
    # the static bound (|x - zp| <= 255) fails, the data's range proves it safe: kernel result
    ic = 4000
    x = ints(rng, (1, 3, 3, ic), np.int8, -3, 3)
    w = ints(rng, (2, 3, 3, ic), np.int8)
    check_all_paths("CONV2D", [x], conv_attrs(rng, w, 2, izp=0))


def test_conv2d_int16(rng):
    for _ in range(4):
        (kh, kw), stride, dil, pad, (ih, iw) = random_conv2d_case(rng)
        ic, oc = int(rng.integers(1, 9)), int(rng.integers(1, 20))
        x = ints(rng, (1, ih, iw, ic), np.int16)
        x.flat[0] = -32768
        w = ints(rng, (oc, kh, kw, ic), np.int8)
        attrs = conv_attrs(rng, w, oc, izp=0, pad=pad, stride=stride, dilation=dil, out="int48",
                           bias_range=1 << 40)
        check_all_paths("CONV2D", [x], attrs)


def test_conv2d_int4_weights(rng):
    x = ints(rng, (1, 6, 6, 5), np.int8)
    w = ints(rng, (9, 3, 3, 5), np.int8, -7, 7)   # qsim.ir: int4 is [-7, 7]
    attrs = conv_attrs(rng, w, 9, pad=(1, 1, 1, 1))
    attrs["weight_t"] = "int4"
    check_all_paths("CONV2D", [x], attrs)


def test_conv3d(rng):
    for dtype, out in ((np.int8, "int32"), (np.int16, "int48")):
        x = ints(rng, (1, 4, 5, 6, 3), dtype)
        w = ints(rng, (5, 2, 3, 2, 3), np.int8)
        attrs = conv_attrs(rng, w, 5, izp=0 if dtype == np.int16 else None, out=out)
        attrs.update(pad=(1, 0, 1, 1, 0, 1), stride=(1, 2, 1), dilation=(2, 1, 2))
        check_all_paths("CONV3D", [x], attrs)


def test_transpose_conv2d(rng):
    cases = [((5, 4), (3, 3), (2, 2), (0, 0, 0, 0)),
             ((3, 6), (2, 3), (1, 3), (1, 0, 0, 2)),
             ((4, 4), (3, 3), (2, 1), (3, 2, 2, 0)),     # out_pad > KH-1 crops the input
             ((2, 3), (4, 2), (3, 2), (0, 1, 1, 0))]
    for (ih, iw), (kh, kw), (sy, sx), opad in cases:
        for dtype in (np.int8, np.int16):
            ic, oc = 3, 18
            x = ints(rng, (1, ih, iw, ic), dtype)
            w = ints(rng, (oc, kh, kw, ic), np.int8)
            oh = (ih - 1) * sy - opad[0] - opad[1] + kh
            ow = (iw - 1) * sx - opad[2] - opad[3] + kw
            out = "int48" if dtype == np.int16 else "int32"
            attrs = conv_attrs(rng, w, oc, izp=0 if dtype == np.int16 else None, out=out,
                               wzp=0 if dtype == np.int16 else 7)
            del attrs["pad"], attrs["dilation"]
            attrs.update(out_pad=opad, stride=(sy, sx), out_shape=(1, oh, ow, oc))
            check_all_paths("TRANSPOSE_CONV2D", [x], attrs)


@pytest.mark.parametrize("n,ic,oc", [(1, 512, 100), (3, 5, 1), (2, 67, 130), (1, 1, 64)])
def test_fully_connected(rng, n, ic, oc):
    x = ints(rng, (n, ic), np.int8)
    w = ints(rng, (oc, ic), np.int8)
    check_all_paths("FULLY_CONNECTED", [x], fc_attrs(rng, w, oc, wzp=int(rng.integers(-128, 128))))
    x16 = ints(rng, (n, ic), np.int16)
    check_all_paths("FULLY_CONNECTED", [x16], fc_attrs(rng, w, oc, izp=0, out="int48"))


@pytest.mark.parametrize("n,h,c,w", [(1, 7, 300, 70), (2, 13, 5, 3), (1, 1, 1, 1), (1, 6, 64, 64)])
def test_matmul(rng, n, h, c, w):
    a = ints(rng, (n, h, c), np.int8)
    b = ints(rng, (n, c, w), np.int8)
    for a_zp, b_zp in ((0, 0), (-128, 127), (int(rng.integers(-128, 128)), int(rng.integers(-128, 128)))):
        check_all_paths("MATMUL", [a, b], dict(A_zp=a_zp, B_zp=b_zp))
    a16, b16 = ints(rng, (n, h, c), np.int16), ints(rng, (n, c, w), np.int16)
    a16.flat[0] = b16.flat[0] = -32768
    check_all_paths("MATMUL", [a16, b16], dict(A_zp=0, B_zp=0))


def test_matmul_minus128_squared():
    a = np.full((1, 2, 8), -128, dtype=np.int8)
    b = np.full((1, 8, 3), -128, dtype=np.int8)
    out = check_all_paths("MATMUL", [a, b], dict(A_zp=0, B_zp=0))[0]
    assert (out == 8 * 16384).all()


def test_packed_weights_follow_the_array_object(rng):
    # two arrays with different contents must not share a packed form, even when the first
    # is freed and its id reused
    x = ints(rng, (1, 4), np.int8)
    for _ in range(5):
        w = ints(rng, (3, 4), np.int8)
        attrs = fc_attrs(rng, w, 3, izp=0)
        check_all_paths("FULLY_CONNECTED", [x], attrs)
        del w, attrs


def test_sixteen_by_eight_weight_zero_point_hand_worked():
    # int16 x int8 with weight_zp = 5 (legal: weight_t is int8_t). x = [100, -200], w = [10, 20]:
    # (100)(10 - 5) + (-200)(20 - 5) = 500 - 3000 = -2500; the kernels used to ignore weight_zp
    # and return 100*10 - 200*20 = -3000.
    x = np.array([[100, -200]], dtype=np.int16)
    w = np.array([[10, 20]], dtype=np.int8)
    fc = dict(weight=w, bias=np.array([7], dtype=np.int64), input_zp=0, weight_zp=5)
    assert check_all_paths("FULLY_CONNECTED", [x], fc)[0].tolist() == [[-2500 + 7]]
    # the same numbers as a 1x2 CONV2D, a CONV3D and a 1x1-input TRANSPOSE_CONV2D
    conv = dict(fc, weight=w.reshape(1, 1, 1, 2), pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1))
    assert check_all_paths("CONV2D", [x.reshape(1, 1, 1, 2)], conv)[0].ravel().tolist() == [-2493]
    conv3 = dict(fc, weight=w.reshape(1, 1, 1, 1, 2), pad=(0,) * 6, stride=(1,) * 3, dilation=(1,) * 3)
    assert check_all_paths("CONV3D", [x.reshape(1, 1, 1, 1, 2)], conv3)[0].ravel().tolist() == [-2493]
    tconv = dict(fc, weight=w.reshape(1, 1, 1, 2), out_pad=(0, 0, 0, 0), stride=(1, 1),
                 out_shape=(1, 1, 1, 1))
    assert check_all_paths("TRANSPOSE_CONV2D", [x.reshape(1, 1, 1, 2)], tconv)[0].ravel().tolist() == [-2493]


@pytest.mark.parametrize("wzp", [-128, 127])
def test_sixteen_by_eight_weight_zero_point_every_gemm_operator(rng, wzp):
    # padding and TRANSPOSE_CONV2D's holes hold 0 (input_zp is 0 for int16) and must stay 0
    # after the weight zero point: (0)(w - wzp) = 0
    x = ints(rng, (2, 5, 4, 3), np.int16)
    x.flat[0], x.flat[1] = -32768, 32767
    w = ints(rng, (6, 3, 2, 3), np.int8)
    w.flat[0] = -128 if wzp > 0 else 127           # |w - wzp| = 255
    attrs = conv_attrs(rng, w, 6, izp=0, wzp=wzp, pad=(2, 1, 0, 2), stride=(1, 2), dilation=(2, 1),
                       out="int48", bias_range=1 << 40)
    check_all_paths("CONV2D", [x], attrs)
    w3 = ints(rng, (4, 2, 2, 2, 3), np.int8)
    check_all_paths("CONV3D", [x.reshape(2, 5, 2, 2, 3)],
                    dict(attrs, weight=w3, bias=attrs["bias"][:4], pad=(1, 0, 1, 1, 0, 1),
                         stride=(1, 1, 1), dilation=(1, 1, 1)))
    check_all_paths("FULLY_CONNECTED", [x.reshape(2, 60)],
                    fc_attrs(rng, ints(rng, (5, 60), np.int8), 5, izp=0, wzp=wzp, out="int48"))
    del attrs["pad"], attrs["dilation"]
    check_all_paths("TRANSPOSE_CONV2D", [x],
                    dict(attrs, out_pad=(1, 0, 0, 2), stride=(2, 3), out_shape=(2, 10, 9, 6)))


def test_sixteen_bit_zero_points_are_never_computed_by_the_kernels():
    # int16 zero points are an ERROR_IF; a kernel called without validation (the registry
    # entry itself) must not compute them with a padding of 0: the reference rejects the call
    x = np.ones((1, 2), np.int16)
    fc = dict(weight=np.ones((1, 2), np.int8), bias=np.zeros(1, np.int64), input_zp=3, weight_zp=0,
              out_t="int48", weight_t="int8")
    with pytest.raises(InvalidGraphError, match="in_t != int8_t && input_zp != 0"):
        KERNELS["FULLY_CONNECTED"]([x], fc)
    with pytest.raises(InvalidGraphError, match=r"A_zp != 0 \|\| B_zp != 0"):
        KERNELS["MATMUL"]([x.reshape(1, 1, 2), x.reshape(1, 2, 1)], dict(A_zp=0, B_zp=1, out_t="int48"))
