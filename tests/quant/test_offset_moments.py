"""The input moments of a convolution summed by tap offset (qsim.quant.rounding.offset_moments): the
moments of the gathered patches, without the gather."""
import numpy as np
import pytest

from qsim.quant.rounding.conv_geometry import ConvGeometry, conv_patch_shape, conv_patches_numpy
from qsim.quant.rounding.offset_moments import offset_moments, offsets_direct


@pytest.mark.parametrize("n,c,h,w,kernel,begins,ends,crop", [
    (2, 3, 5, 6, (3, 3), (1, 1), (1, 1), (0, 0)),      # 'same' 3x3
    (1, 2, 7, 4, (3, 2), (0, 1), (2, 0), (0, 0)),      # asymmetric padding
    (3, 4, 6, 6, (5, 5), (2, 2), (2, 2), (0, 0)),      # 'same' 5x5
    (1, 3, 4, 5, (3, 3), (0, 0), (0, 0), (0, 0)),      # 'valid'
    (2, 2, 3, 3, (3, 3), (2, 0), (0, 2), (0, 0)),      # boxes without a common row / column
    (1, 5, 2, 9, (3, 1), (1, 0), (1, 0), (0, 0)),      # taps along one axis, 2-row input
    (2, 3, 7, 8, (3, 3), (1, 1), (0, 0), (1, 2)),      # cropped input
])
def test_offset_moments_equal_the_gathered_patches_moments(n, c, h, w, kernel, begins, ends, crop):
    """offset_moments (per tap offset, the input with itself shifted; border cells added
    apart) sums what the gathered patches sum: within float32 GEMM rounding of the float64
    sums of the patches (relative to sqrt(H_aa H_bb), each a sum of non-negative parts, so no
    cancellation), exactly symmetric, and the column sums of x exactly (float64 sums of
    float32 values in any order: exact here)."""
    rng = np.random.default_rng(sum(kernel) * 7 + h)
    g = ConvGeometry(1, kernel, (1, 1), (1, 1), begins, ends, crop)
    x = rng.normal(size=(n, c, h, w)).astype(np.float32)
    assert offsets_direct(x.shape, g)
    rows, _, k = conv_patch_shape(x.shape, g)
    p = conv_patches_numpy(x.astype(np.float64), g, np.empty((1, rows, k)))[0]
    want, want_sums = p.T @ p, p.sum(axis=0)
    got, sums = offset_moments(x[:, :, :h - crop[0], :w - crop[1]], g)
    scale = np.sqrt(np.outer(np.diag(want), np.diag(want))) + 1e-30
    assert np.max(np.abs(got - want) / scale) < 1e-6 * max(1.0, np.sqrt(rows) / 8)
    assert np.array_equal(got, got.T)
    np.testing.assert_allclose(sums, want_sums, rtol=1e-12, atol=1e-12)
