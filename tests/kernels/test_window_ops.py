"""DEPTHWISE_CONV2D, MAX_POOL2D and AVG_POOL2D kernels (qsim/kernels/window_ops.py) vs the TOSA reference."""
import numpy as np
import pytest

from kernel_harness import check_all_paths, ints
from qsim.kernels.registry import KERNELS


def test_depthwise_random(rng):
    cases = [((7, 9), 5, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
             ((8, 8), 3, 4, (2, 3), (2, 1), (1, 2), (0, 1, 2, 1)),
             ((6, 11), 33, 2, (3, 1), (1, 3), (2, 1), (2, 2, 0, 1)),
             ((5, 5), 1, 1, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0))]
    for (ih, iw), c, m, (kh, kw), (sy, sx), (dy, dx), pad in cases:
        num_y = ih - 1 + pad[0] + pad[1] - (kh - 1) * dy
        num_x = iw - 1 + pad[2] + pad[3] - (kw - 1) * dx
        if num_y % sy or num_x % sx:
            continue
        for dtype, out in ((np.int8, "int32"), (np.int16, "int48")):
            x = ints(rng, (2, ih, iw, c), dtype)
            w = ints(rng, (kh, kw, c, m), np.int8)
            int8 = dtype == np.int8
            attrs = dict(weight=w, bias=ints(rng, (c * m,), np.int32 if int8 else np.int64, -999, 999),
                         pad=pad, stride=(sy, sx), dilation=(dy, dx),
                         input_zp=int(rng.integers(-128, 128)) if int8 else 0,
                         weight_zp=int(rng.integers(-128, 128)) if int8 else 0)
            check_all_paths("DEPTHWISE_CONV2D", [x], attrs)


@pytest.mark.parametrize("izp,wzp", [(-128, 127), (127, -128), (-128, 0)])
def test_depthwise_extremes(izp, wzp):
    x = np.full((1, 4, 4, 20), -128, dtype=np.int8)
    x[0, 1, 1] = 127
    w = np.full((3, 3, 20, 1), -128, dtype=np.int8)
    w[1, 1] = 127
    attrs = dict(weight=w, bias=np.arange(20, dtype=np.int32), pad=(1, 1, 1, 1), stride=(1, 1),
                 dilation=(1, 1), input_zp=izp, weight_zp=wzp)
    check_all_paths("DEPTHWISE_CONV2D", [x], attrs)


def pool_cases():
    # (IH, IW), (KH, KW), stride, pad: valid under the ERROR_IF output-size rule
    return [((6, 6), (2, 2), (2, 2), (0, 0, 0, 0)), ((7, 5), (3, 3), (2, 1), (1, 1, 1, 1)),
            ((5, 8), (3, 2), (1, 2), (2, 1, 1, 1)), ((4, 4), (4, 4), (1, 1), (0, 0, 0, 0))]


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_max_pool(rng, dtype):
    for (ih, iw), (kh, kw), (sy, sx), pad in pool_cases():
        x = ints(rng, (2, ih, iw, 19), dtype)
        x[0, 0, 0, :] = np.iinfo(dtype).min
        check_all_paths("MAX_POOL2D", [x], dict(kernel=(kh, kw), stride=(sy, sx), pad=pad))


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_avg_pool(rng, dtype):
    for (ih, iw), (kh, kw), (sy, sx), pad in pool_cases():
        x = ints(rng, (2, ih, iw, 19), dtype)
        zps = [(0, 0)] if dtype == np.int16 else [(0, 0), (-128, 127), (127, -128), (3, -7)]
        for izp, ozp in zps:
            check_all_paths("AVG_POOL2D", [x], dict(kernel=(kh, kw), stride=(sy, sx), pad=pad,
                                                    input_zp=izp, output_zp=ozp))


def test_avg_pool_hand_worked():
    # mean of 1, 2, 4 with the padding excluded: 7/3 -> reciprocal_scale(3) = (1431655766, 32)
    # (2^30+1)*4/3 = 1431655766; 7 * 1431655766 + 2^31 >> 32 = 2 (2.33.. rounds to 2)
    x = np.array([[1, 2], [4, 100]], dtype=np.int8).reshape(1, 2, 2, 1)
    out = KERNELS["AVG_POOL2D"]([x], dict(kernel=(2, 2), stride=(1, 1), pad=(1, 0, 1, 0),
                                          input_zp=0, output_zp=0))[0]
    assert out.reshape(2, 2).tolist() == [[1, 2], [3, 27]]   # 1/1, (1+2)/2=1.5->2, 5/2->3, 107/4->27
