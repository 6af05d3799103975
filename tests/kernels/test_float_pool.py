"""The float executor's compiled max pool and plane copies (kernels/float_pool.h) against numpy:
max pool with numpy.maximum's bits (NaN propagates, of equal values -0.0/+0.0 the later tap's
is kept), for any window, stride, dilation, padding or crop, on any thread count and on every
instruction-set path this CPU offers (AVX-512 has a loop of its own: 16 columns per register at
strides 1 and 2, rows wide enough to use it); plane copies with any strides, exactly."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from qsim.kernels.cpu_features import supported_isas
from qsim.kernels.extensions import extension

_float_ops = extension("_float_ops")


def numpy_max_pool(x, k, s, d, before, out_size):
    """The reference's steps: -inf padding, then acc = maximum(acc, tap) in row-major tap order."""
    P, H, W = x.shape
    (KH, KW), (sy, sx), (dy, dx), (pt, pl), (OH, OW) = k, s, d, before, out_size
    pad = 64
    xp = np.full((P, H + 2 * pad, W + 2 * pad), -np.inf, np.float32)
    xp[:, pad:pad + H, pad:pad + W] = x
    acc = np.full((P, OH, OW), -np.inf, np.float32)
    for ky in range(KH):
        for kx in range(KW):
            y0, x0 = pad - pt + ky * dy, pad - pl + kx * dx
            acc = np.maximum(acc, xp[:, y0:y0 + sy * (OH - 1) + 1:sy, x0:x0 + sx * (OW - 1) + 1:sx])
    return acc


def special_values(rng, shape):
    """normal values with zeros of both signs, ties, NaN and infinities sprinkled in"""
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    pick = rng.integers(0, flat.size, size=(6, max(1, flat.size // 12)))
    flat[pick[0]] = 0.0
    flat[pick[1]] = -0.0
    flat[pick[2]] = np.float32(1.5)
    flat[pick[3]] = np.nan
    flat[pick[4]] = np.inf
    flat[pick[5]] = -np.inf
    return x


ISAS = [isa.code for isa in supported_isas()]


@settings(max_examples=120, deadline=None)
@given(st.integers(1, 9), st.integers(1, 12), st.integers(1, 80), st.integers(1, 4), st.integers(1, 4),
       st.integers(1, 3), st.integers(1, 3), st.integers(1, 2), st.integers(1, 2), st.integers(-2, 3),
       st.integers(-2, 3), st.integers(1, 4), st.integers(0, 2 ** 31))
def test_max_pool_gives_numpys_bits(P, H, W, KH, KW, sy, sx, dy, dx, pt, pl, threads, seed):
    rng = np.random.default_rng(seed)
    x = special_values(rng, (P, H, W))
    OH = max(1, (H + 2 * max(pt, 0) - dy * (KH - 1) - 1) // sy + 1)
    OW = max(1, (W + 2 * max(pl, 0) - dx * (KW - 1) - 1) // sx + 1)
    want = numpy_max_pool(x, (KH, KW), (sy, sx), (dy, dx), (pt, pl), (OH, OW))
    for isa in ISAS:
        out = np.full((P, OH, OW), 7.0, np.float32)
        _float_ops.max_pool_f32(x, out, KH, KW, sy, sx, dy, dx, pt, pl, threads, isa)
        np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32), err_msg=f"isa {isa}")


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("W,k,s,pad", [(112, 3, 2, 1), (113, 3, 2, 1), (47, 3, 2, 0), (33, 2, 2, 0), (16, 1, 1, 0),
                                       (40, 3, 1, 1), (35, 5, 2, 2), (18, 3, 1, 1), (31, 2, 1, 0)])
def test_max_pool_rows_with_vector_blocks_on_every_path(rng, isa, W, k, s, pad):
    """ResNet's 3x3 stride-2 pool and odd widths: the vector blocks, the row's last block that
    starts early, the border columns (these widths give 1 to 7 blocks a row)."""
    print(f"isa path {isa} of {ISAS}")
    x = special_values(rng, (3, W // 2 + 3, W))
    OH, OW = (x.shape[1] + 2 * pad - k) // s + 1, (W + 2 * pad - k) // s + 1
    out = np.full((3, OH, OW), 7.0, np.float32)
    _float_ops.max_pool_f32(x, out, k, k, s, s, 1, 1, pad, pad, 1, isa)
    want = numpy_max_pool(x, (k, k), (s, s), (1, 1), (pad, pad), (OH, OW))
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))


def test_max_pool_keeps_the_later_of_equal_zeros_and_propagates_nan():
    x = np.array([[[-0.0, 0.0, -0.0], [np.nan, 1.0, 2.0]]], np.float32)
    out = np.empty((1, 2, 2), np.float32)
    _float_ops.max_pool_f32(x, out, 1, 2, 1, 1, 1, 1, 0, 0, 1)
    assert not np.signbit(out[0, 0, 0]) and np.signbit(out[0, 0, 1])     # maximum(-0, +0) = +0; (+0, -0) = -0
    assert np.isnan(out[0, 1, 0]) and out[0, 1, 1] == 2.0
    # a window wholly in the padding is -inf (the reference's padding value)
    out = np.empty((1, 2, 4), np.float32)
    _float_ops.max_pool_f32(x, out, 1, 1, 1, 1, 1, 1, 0, 1, 1)
    assert out[0, 0, 0] == -np.inf and out[0, 1, 2] == 1.0


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_copy_planes_copies_any_strided_view_exactly(rng, threads):
    src = special_values(rng, (7, 9, 13))
    dst_full = np.zeros((7, 12, 20), np.float32)
    _float_ops.copy_planes_f32(src[:, 1:8, 2:11], dst_full[:, 3:10, 5:14], threads)
    want = np.zeros_like(dst_full)
    want[:, 3:10, 5:14] = src[:, 1:8, 2:11]
    np.testing.assert_array_equal(dst_full.view(np.uint32), want.view(np.uint32))
    with pytest.raises(ValueError, match="differ in shape"):
        _float_ops.copy_planes_f32(src, dst_full, threads)
    with pytest.raises(ValueError, match="rows must be contiguous"):
        _float_ops.copy_planes_f32(src[:, :, ::2], np.zeros((7, 9, 7), np.float32), threads)
