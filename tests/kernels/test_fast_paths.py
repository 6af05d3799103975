"""The kernels' specialised paths, each driven into the case it was written for and compared with
the TOSA reference on every ISA path: the blocked VNNI GEMM (row blocks of 240, K blocks of
1024 bytes, a 16-column tail panel), the VNNI depthwise (32-channel blocks of 8 pixels plus
leftovers), the int32 -> 8/16/32-bit RESCALE (16 lanes via the high product half), and the
caches (packed weights, epilogue, RESCALE parameters) keyed so that new values are seen."""
import numpy as np
import pytest

from kernel_harness import check_all_paths, ints, tosa_run
from qsim.errors import UnpredictableError
from qsim.kernels.registry import KERNELS


def test_matmul_row_and_k_blocks(rng):
    # H = 250 > one 240-row block; C = 2101 > 2 * 1024 bytes: K blocking with a partial quad;
    # W = 70: one full 64-column panel and a 16-column tail with 6 live columns
    a = ints(rng, (1, 250, 2101), np.int8)
    b = ints(rng, (1, 2101, 70), np.int8)
    a[0, 0, :] = -128
    b[0, :, 0] = -128                      # a row of -128 x -128 products
    for a_zp, b_zp in ((0, 0), (-128, 127)):
        out = check_all_paths("MATMUL", [a, b], dict(A_zp=a_zp, B_zp=b_zp))[0]
    assert out[0, 0, 0] == 2101 * (-128 + 128) * (-128 - 127)     # a - A_zp = 0 on row 0


def test_conv2d_more_rows_than_one_block(rng):
    # 26 x 26 = 676 output pixels (3 row blocks), OC 70 (panel + tail), both zero points extreme
    x = ints(rng, (1, 26, 26, 40), np.int8)
    w = ints(rng, (70, 3, 3, 40), np.int8)
    attrs = dict(weight=w, bias=ints(rng, (70,), np.int32, -9999, 9999), pad=(1, 1, 1, 1),
                 stride=(1, 1), dilation=(1, 1), input_zp=-128, weight_zp=127)
    check_all_paths("CONV2D", [x], attrs)
    check_all_paths("CONV2D", [x], dict(attrs, input_zp=127, weight_zp=-128, dilation=(2, 3),
                                        pad=(2, 2, 3, 3)))


@pytest.mark.parametrize("c,m,ow,stride,dilation", [
    (32, 1, 19, (1, 1), (1, 1)),     # one 32-channel block, 2 full 8-pixel blocks + 3 pixels
    (16, 4, 8, (2, 1), (2, 2)),      # C*M = 64: two blocks, channel multiplier 4, dilation
    (35, 1, 11, (1, 3), (1, 2)),     # 32-channel block + 3 leftover channels, stride 3
])
def test_depthwise_vnni_blocks(rng, c, m, ow, stride, dilation):
    kh, kw = 3, 3
    sy, sx = stride
    dy, dx = dilation
    pad = (1, 1, 1, 1)
    iw = (ow - 1) * sx + (kw - 1) * dx + 1 - pad[2] - pad[3]
    ih = 2 * sy + (kh - 1) * dy + 1 - pad[0] - pad[1]
    w = ints(rng, (kh, kw, c, m), np.int8)
    w[0, 0] = -128
    for dtype in (np.int8, np.int16):
        x = ints(rng, (1, ih, iw, c), dtype)
        x[0, 0, 0] = np.iinfo(dtype).min
        int8 = dtype == np.int8
        for izp, wzp in (((-128, 127), (127, -128)) if int8 else ((0, 0),)):
            attrs = dict(weight=w, bias=ints(rng, (c * m,), np.int32 if int8 else np.int64, -999, 999),
                         pad=pad, stride=stride, dilation=dilation, input_zp=izp, weight_zp=wzp)
            check_all_paths("DEPTHWISE_CONV2D", [x], attrs)


def _rescale_attrs(rng, c, out_t, double_round, per_channel=True, shift_lo=33):
    ozp = int(rng.integers(-128, 128)) if out_t == "int8" else 0
    mult = rng.integers(0, 1 << 31, c).astype(np.int32)
    mult[0] = 0                                  # product 0 for negative values (double_round sign)
    mult[-1] = (1 << 31) - 1
    shift = rng.integers(shift_lo, 63, c).astype(np.int32)
    shift[0], shift[-1] = 33, 62
    return dict(input_zp=0, output_zp=ozp, multiplier=mult, shift=shift, scale32=True,
                double_round=double_round, per_channel=per_channel, out_t=out_t)


@pytest.mark.parametrize("out_t", ["int8", "int16", "int32"])
@pytest.mark.parametrize("double_round", [False, True])
def test_rescale_int32_sixteen_lane_path(rng, out_t, double_round):
    # channels a multiple of 16 and every shift >= 33: the high-half path on AVX-512
    x = ints(rng, (3, 5, 48), np.int32)
    x[0, 0, :4] = [-2 ** 31, 2 ** 31 - 1, 0, -1]
    x[0, 1] = -x[0, 2]
    check_all_paths("RESCALE", [x], _rescale_attrs(rng, 48, out_t, double_round))
    # ties: value * 2^30 >> 33 is value / 8; multiples of 4 that are not of 8 are exact ties
    ties = np.array([[-20, -12, -4, 4, 12, 20, 28, -28, 0, 1, -1, 3, -3, 5, -5, 7]], np.int32)
    attrs = dict(input_zp=0, output_zp=0, multiplier=np.full(16, 1 << 30, np.int32),
                 shift=np.full(16, 33, np.int32), scale32=True, double_round=double_round,
                 per_channel=True, out_t=out_t)
    got = check_all_paths("RESCALE", [ties], attrs)[0]
    # single round: floor(v/8 + 1/2); double round adds +/- 2^30 / 2^33 = +/- 1/8 first
    want = [np.floor(v / 8 + 0.5 + ((0.125 if v >= 0 else -0.125) if double_round else 0))
            for v in ties[0].tolist()]
    assert got[0].tolist() == [int(v) for v in want]


def test_rescale_per_tensor_block_of_sixteen(rng):
    x = ints(rng, (2, 4, 64), np.int32)
    check_all_paths("RESCALE", [x], _rescale_attrs(rng, 1, "int8", True, per_channel=False))


def test_rescale_shift_below_33_keeps_the_require(rng):
    # shift 32 takes the general path, whose REQUIRE |value| < 2^30 fails for 2^30
    x = np.full((1, 16), 1 << 30, np.int32)
    attrs = dict(input_zp=0, output_zp=0, multiplier=np.full(16, 1 << 30, np.int32),
                 shift=np.full(16, 32, np.int32), scale32=True, double_round=False,
                 per_channel=True, out_t="int8")
    with pytest.raises(UnpredictableError, match="shift-2"):
        tosa_run("RESCALE", [x], attrs)
    x[0, 0] = (1 << 30) - 1
    check_all_paths("RESCALE", [x[:, :1].repeat(16, axis=1)], attrs)


def test_rescale_parameters_follow_in_place_edits(rng):
    x = ints(rng, (4, 16), np.int32)
    attrs = _rescale_attrs(rng, 16, "int8", False)
    first = KERNELS["RESCALE"]([x], dict(attrs))[0]
    attrs["multiplier"][:] = attrs["multiplier"][::-1]       # same array object, new values
    second = check_all_paths("RESCALE", [x], attrs)[0]
    assert not np.array_equal(first, second)


def test_epilogue_cache_sees_new_bias_and_zero_points(rng):
    # one weight array, several biases and zero points: the cached column corrections must not
    # be reused across them
    x = ints(rng, (1, 300), np.int8)
    w = ints(rng, (40, 300), np.int8)
    seen = set()
    for izp, wzp, bias_value in ((0, 0, 0), (0, 0, 1000), (-128, 0, 1000), (-128, 3, 1000)):
        attrs = dict(weight=w, bias=np.full(40, bias_value, np.int32), input_zp=izp, weight_zp=wzp)
        out = check_all_paths("FULLY_CONNECTED", [x], attrs)[0]
        seen.add(out.tobytes())
    assert len(seen) == 4


def test_fully_connected_and_matmul_near_int32_limits():
    # FC: 512 products of (-128 - 127) * (-128) = 32640 sum to 16711680; a bias brings the
    # total to exactly INT32_MAX, one more overflows the final apply_add (REQUIRE)
    x = np.full((1, 512), -128, np.int8)
    w = np.full((1, 512), -128, np.int8)
    total = 512 * (-128 - 127) * (-128)
    attrs = dict(weight=w, bias=np.array([2 ** 31 - 1 - total], np.int32), input_zp=127, weight_zp=0)
    assert check_all_paths("FULLY_CONNECTED", [x], attrs)[0].tolist() == [[2 ** 31 - 1]]
    attrs["bias"] = np.array([2 ** 31 - total], np.int32)
    for backend in ("reference", "kernels"):
        with pytest.raises(UnpredictableError):
            tosa_run("FULLY_CONNECTED", [x], attrs, backend=backend)
    # MATMUL: (-128 - 127)^2 = 65025 per product; 33025 products stay below 2^31, 33026 do not
    a = np.full((1, 1, 33025), -128, np.int8)
    b = np.full((1, 33025, 1), 127, np.int8)
    zps = dict(A_zp=127, B_zp=-128)
    assert check_all_paths("MATMUL", [a, b], zps)[0].tolist() == [[[33025 * -255 * 255]]]
    a2, b2 = np.full((1, 1, 33026), -128, np.int8), np.full((1, 33026, 1), 127, np.int8)
    for backend in ("reference", "kernels"):
        with pytest.raises(UnpredictableError):
            tosa_run("MATMUL", [a2, b2], zps, backend=backend)
