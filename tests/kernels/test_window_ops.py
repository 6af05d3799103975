"""DEPTHWISE_CONV2D, MAX_POOL2D and AVG_POOL2D kernels (qsim/kernels/window_ops.py) vs the TOSA reference."""
import numpy as np
import pytest

from kernel_harness import ISAS, check_all_paths, ints
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


def _numpy_padded(x, pad, fill, subtract, repeat):
    """The padded int16 buffer in numpy: x - subtract in int16 arithmetic (wrapping as numpy
    does), channel c repeated `repeat` times, `fill` in the border."""
    pt, pb, pl, pr = pad
    src = np.repeat(x, repeat, axis=3).astype(np.int16) - np.int16(subtract)
    return np.pad(src, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=fill)


def test_padded_buffer_matches_numpy_on_every_path(rng):
    """The C padding copy (qwindow.h qsim_pad_i16) that DEPTHWISE_CONV2D, MAX_POOL2D and
    AVG_POOL2D read: numpy's bits on seeded cases and at the corners (int8 -128 and both rails,
    extreme zero points, int16 wraparound, empty extents, a non-contiguous input)."""
    from qsim.kernels.cpu_features import forced_isa, current_isa
    from qsim.kernels.extensions import extension
    ops = extension("_tosa_ops")
    cases = []
    for _ in range(12):
        dtype = (np.int8, np.int16)[int(rng.integers(0, 2))]
        shape = tuple(int(v) for v in rng.integers(1, 9, 4))
        cases.append((ints(rng, shape, dtype), tuple(int(v) for v in rng.integers(0, 4, 4)),
                      int(rng.integers(-128, 128)), int(rng.integers(-128, 128)) if dtype == np.int8 else 0,
                      int(rng.integers(1, 4))))
    rails = np.array([-128, 127, 0, -1, 1], dtype=np.int8).reshape(1, 1, 5, 1).repeat(3, axis=3)
    for izp in (-128, 127, 0):
        cases.append((rails, (1, 2, 2, 1), 0, izp, 1))
        cases.append((rails, (0, 1, 1, 0), 0, izp, 3))
    wide = np.array([-32768, 32767, 0, -1], dtype=np.int16).reshape(1, 2, 2, 1)
    cases += [(wide, (1, 1, 1, 1), -32768, 0, 1), (wide, (0, 0, 1, 0), 5, -32768, 2),
              (np.full((2, 3, 4, 5), -128, np.int8), (2, 0, 0, 3), -128, 127, 2),
              (np.zeros((1, 0, 3, 2), np.int8), (1, 1, 1, 1), 7, 3, 1),
              (ints(rng, (2, 5, 6, 8), np.int8)[:, ::2, 1:, ::3], (1, 2, 0, 1), 0, -77, 2)]
    for isa in ISAS:
        with forced_isa(isa):
            for x, pad, fill, subtract, repeat in cases:
                got = ops.pad_i16(current_isa().code, x, pad, fill, subtract, repeat)
                want = _numpy_padded(x, pad, fill, subtract, repeat)
                assert got.dtype == np.int16
                np.testing.assert_array_equal(got, want, err_msg=f"{isa} {x.shape} {pad} {subtract} {repeat}")


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
