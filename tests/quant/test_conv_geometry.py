"""The patch geometry of a convolution (qsim.quant.rounding.conv_geometry): the patches line up with the
weight layout of a direct convolution, and the compiled gather copies numpy's floats."""
import numpy as np
import pytest

from qsim.quant.rounding.conv_geometry import (ConvGeometry, conv_patch_shape, conv_patches,
                                      conv_patches_numpy)


def _direct_conv(x, w, g: ConvGeometry):
    """Plain loops over NCHW / OIHW, padding with zeros: an oracle for the patch layout."""
    n, c, hgt, wid = x.shape
    x = x[:, :, :hgt - g.crop[0], :wid - g.crop[1]]
    x = np.pad(x, ((0, 0), (0, 0), (g.begins[0], g.ends[0]), (g.begins[1], g.ends[1])))
    oc, icg, kh, kw = w.shape
    oh = (x.shape[2] - (kh - 1) * g.dilation[0] - 1) // g.stride[0] + 1
    ow = (x.shape[3] - (kw - 1) * g.dilation[1] - 1) // g.stride[1] + 1
    out = np.zeros((n, oc, oh, ow))
    per_group = oc // g.groups
    for o in range(oc):
        first = (o // per_group) * icg
        for i in range(oh):
            for j in range(ow):
                for ci in range(icg):
                    for a in range(kh):
                        for b in range(kw):
                            out[:, o, i, j] += w[o, ci, a, b] * x[:, first + ci,
                                                                  i * g.stride[0] + a * g.dilation[0],
                                                                  j * g.stride[1] + b * g.dilation[1]]
    return out


@pytest.mark.parametrize("groups,icg,oc", [(1, 3, 4), (6, 1, 6), (6, 1, 12), (2, 3, 4)])
def test_patches_line_up_with_the_weight_layout(groups, icg, oc):
    rng = np.random.default_rng(groups * 10 + oc)
    g = ConvGeometry(groups, (3, 2), (2, 1), (1, 2), (1, 0), (2, 1), (1, 0))
    x = rng.normal(size=(2, groups * icg, 9, 8))
    w = rng.normal(size=(oc, icg, 3, 2))
    patches = conv_patches(x, g)                                   # [groups, P, K]
    expected = _direct_conv(x, w, g)                               # [N, OC, OH, OW]
    per_group = oc // groups
    flat = w.reshape(oc, -1)
    assert patches.flags.c_contiguous
    got = np.stack([patches[o // per_group] @ flat[o] for o in range(oc)], axis=1)
    np.testing.assert_allclose(got, expected.transpose(0, 2, 3, 1).reshape(-1, oc), atol=1e-10)


@pytest.mark.parametrize("groups,icg,oc,stride,pads,crop", [
    (1, 5, 3, (1, 1), ((0, 0), (0, 0)), (0, 0)), (1, 4, 2, (2, 3), ((0, 0), (0, 0)), (1, 0)),
    (3, 2, 6, (2, 2), ((1, 0), (2, 1)), (0, 1)), (4, 1, 4, (1, 2), ((0, 1), (0, 0)), (1, 1))])
def test_one_by_one_patches_line_up_with_the_weight_layout(groups, icg, oc, stride, pads, crop):
    """A 1x1 kernel's windows are taken as the strided positions themselves (no sliding
    window view): the direct convolution's patches for strides, padding, crops and groups."""
    rng = np.random.default_rng(oc * 7 + stride[1])
    g = ConvGeometry(groups, (1, 1), stride, (1, 1), pads[0], pads[1], crop)
    x = rng.normal(size=(2, groups * icg, 7, 6))
    w = rng.normal(size=(oc, icg, 1, 1))
    rows, _, k = conv_patch_shape(x.shape, g)
    patches = conv_patches_numpy(x, g, np.empty((groups, rows, k)))
    per_group = oc // groups
    flat = w.reshape(oc, -1)
    got = np.stack([patches[o // per_group] @ flat[o] for o in range(oc)], axis=1)
    np.testing.assert_allclose(got, _direct_conv(x, w, g).transpose(0, 2, 3, 1).reshape(-1, oc), atol=1e-12)
    # the same floats as the sliding-window formulation of every other kernel size
    xp = np.pad(x[:, :, :7 - crop[0], :6 - crop[1]], ((0, 0), (0, 0), (pads[0][0], pads[1][0]), (pads[0][1], pads[1][1])))
    win = np.lib.stride_tricks.sliding_window_view(xp, (1, 1), axis=(2, 3))[:, :, ::stride[0], ::stride[1]]
    want = win.reshape(2, groups, icg, *win.shape[2:4], 1, 1).transpose(1, 0, 3, 4, 2, 5, 6).reshape(groups, rows, k)
    assert np.array_equal(patches, want)


def test_patches_written_in_place_equal_the_new_array():
    rng = np.random.default_rng(4)
    g = ConvGeometry(2, (3, 2), (2, 1), (1, 2), (1, 0), (2, 1), (1, 0))
    x = rng.normal(size=(2, 6, 9, 8)).astype(np.float32)
    want = conv_patches(x, g)
    buf = np.full((2, want.shape[1] + 5, want.shape[2]), np.nan, np.float32)
    conv_patches(x, g, buf[:, 2:2 + want.shape[1]])
    np.testing.assert_array_equal(buf[:, 2:2 + want.shape[1]], want)
    assert np.isnan(buf[:, :2]).all() and np.isnan(buf[:, 2 + want.shape[1]:]).all()
    with pytest.raises(ValueError, match="out has shape"):
        conv_patches(x, g, buf)


def _numpy_patches(x, g):
    rows, groups, k = conv_patch_shape(x.shape, g)
    return conv_patches_numpy(x, g, np.empty((groups, rows, k), x.dtype))


@pytest.mark.parametrize("groups,kernel,stride,dilation,begins,ends,crop", [
    (1, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (0, 0)),
    (4, (3, 3), (2, 2), (1, 1), (0, 0), (1, 1), (0, 0)),       # depthwise-like, asymmetric pad
    (2, (3, 2), (2, 1), (1, 2), (1, 0), (2, 1), (1, 0)),       # dilation, crop
    (1, (1, 1), (1, 1), (1, 1), (0, 0), (0, 0), (0, 0)),
    (4, (5, 5), (1, 2), (2, 1), (2, 3), (0, 2), (0, 1)),
    (1, (7, 7), (2, 2), (1, 1), (3, 3), (3, 3), (0, 0)),       # window wider than some outputs
])
def test_compiled_patches_equal_numpys(groups, kernel, stride, dilation, begins, ends, crop):
    """The compiled gather (kernels/quant_ops.pyx conv_patches_f32) copies the floats the
    numpy formulation copies, bit for bit: NaN payloads, -0.0 and padding's +0.0 included."""
    rng = np.random.default_rng(sum(kernel) + groups)
    g = ConvGeometry(groups, kernel, stride, dilation, begins, ends, crop)
    x = rng.normal(size=(2, 4, 11, 9)).astype(np.float32)
    x[0, 0, 0, :3] = [-0.0, np.nan, np.inf]
    want = _numpy_patches(x, g)
    got = conv_patches(x, g)
    assert got.shape == want.shape and got.tobytes() == want.tobytes()
    # into a strided place (a pending buffer's tail) and from a strided input (a cropped view)
    buf = np.full((groups, want.shape[1] + 3, want.shape[2]), 7.0, np.float32)
    conv_patches(x, g, buf[:, 1:1 + want.shape[1]])
    assert buf[:, 1:1 + want.shape[1]].tobytes() == want.tobytes()
    assert (buf[:, 0] == 7).all() and (buf[:, 1 + want.shape[1]:] == 7).all()
    wide = np.zeros((2, 4, 11, 12), np.float32)
    wide[..., :9] = x
    assert conv_patches(wide[..., :9], g).tobytes() == want.tobytes()
