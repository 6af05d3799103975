"""The patch geometry of a 2-D NCHW convolution, as adaptive rounding's input moments read it:
the output size, the shape and layout of the input patches, their gather (numpy reference and
one compiled pass), which layers the depthwise moments kernel takes, and the sampled
sub-lattice of output positions a large layer's moments are summed over.

Invariants:
- conv_patches lays a layer's patches out as [groups, N*OH*OW, K], K = icg*KH*KW with patch
  entry (c*KH + ky)*KW + kx: the order of an OIHW weight flattened per output channel, so a
  patch row dotted with a channel's flat weights is that channel's output at that position.
- Padding reads real zero (the integer graph represents it exactly by the zero point); `crop`
  input rows / columns at the end, which the convolution never reads, are dropped first.
- The compiled gather copies the floats conv_patches_numpy copies, bit for bit.
- sample_stride is a deterministic function of the input shape, the geometry and the
  calibration's sample count: the same patches in every sample.

It exists apart from adaptive.py because two computations share it: PatchMoments (adaptive.py)
and the sums by tap offset (offset_moments.py) read one definition of the output size and the
patch layout. It imports neither of them.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ...kernels.extensions import extension

ROWS_PER_WEIGHT = 8            # a convolution's moments read at most max(this x K, MIN_ROWS)
MIN_ROWS = 16384               # patch rows over the calibration (sample_stride)

_quant_ops = extension("_quant_ops")   # raises KernelsUnavailableError when missing or broken


@dataclass(frozen=True)
class ConvGeometry:
    """A 2-D convolution's geometry: (rows, columns) pairs of the kernel size, stride,
    dilation, padding before (`begins`) and after (`ends`), and the trailing input rows /
    columns it never reads (`crop`, float_patterns.spatial_padding)."""
    groups: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    begins: tuple[int, int]
    ends: tuple[int, int]
    crop: tuple[int, int]


def conv_patches(x: np.ndarray, g: ConvGeometry, out: np.ndarray | None = None) -> np.ndarray:
    """[groups, N*OH*OW, icg*KH*KW] input patches of an NCHW convolution (the layout
    PatchMoments sums), written into `out` when given (e.g. PatchMoments.reserve's place),
    else into a new C-contiguous array; padding reads real zero, which the integer graph
    represents exactly by the zero point. float32 input is gathered by one compiled pass
    (kernels/quant_ops.pyx conv_patches_f32: the same floats as conv_patches_numpy)."""
    shape = conv_patch_shape(x.shape, g)
    shape = (shape[1], shape[0], shape[2])
    if out is None:
        out = np.empty(shape, dtype=x.dtype)
    elif out.shape != shape:
        raise ValueError(f"conv_patches: out has shape {out.shape}, the patches {shape}")
    if (x.dtype != np.float32 or out.dtype != np.float32 or (shape[2] > 1 and out.strides[2] != 4)
            or g.kernel == (1, 1)):
        # a 1x1 kernel's patches are a plain transpose, which numpy's copy does faster
        return conv_patches_numpy(x, g, out)
    n, c, h, w = x.shape
    oh, ow = conv_output_size(x.shape, g)
    _quant_ops.conv_patches_f32(x[:, :, :h - g.crop[0], :w - g.crop[1]], out, g.groups,
                                g.kernel[0], g.kernel[1], g.stride[0], g.stride[1],
                                g.dilation[0], g.dilation[1], g.begins[0], g.begins[1], oh, ow)
    return out


def conv_patches_numpy(x: np.ndarray, g: ConvGeometry, out: np.ndarray) -> np.ndarray:
    """conv_patches in numpy (any dtype or layout; the reference the compiled gather is
    tested against)."""
    n, c, h, w = x.shape
    x = x[:, :, :h - g.crop[0], :w - g.crop[1]]
    if any(g.begins) or any(g.ends):
        x = np.pad(x, ((0, 0), (0, 0), (g.begins[0], g.ends[0]), (g.begins[1], g.ends[1])))
    (kh, kw), (sh, sw), (dh, dw) = g.kernel, g.stride, g.dilation
    if (kh, kw) == (1, 1):
        # the 1x1 windows are the strided positions themselves: the same view as below without
        # sliding_window_view's Python cost (~0.1 ms a call; EfficientNet-Lite0's calibration
        # gathers its 1x1 layers' patches 32 times a sample)
        win = x[:, :, ::sh, ::sw, None, None]
    else:
        win = np.lib.stride_tricks.sliding_window_view(x, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))
        win = win[:, :, ::sh, ::sw, ::dh, ::dw]                   # [N, C, OH, OW, KH, KW]
    oh, ow = win.shape[2], win.shape[3]
    icg = c // g.groups
    win = win.reshape(n, g.groups, icg, oh, ow, kh, kw).transpose(1, 0, 3, 4, 2, 5, 6)
    dst = out.view()
    dst.shape = win.shape               # splits axes only: a view (raises rather than copy)
    np.copyto(dst, win)
    return out


def conv_output_size(x_shape, g: ConvGeometry) -> tuple[int, int]:
    """(OH, OW) of the convolution on an NCHW input of shape x_shape (floor division: the
    output positions whose window fits inside the cropped, padded input)."""
    size = [x_shape[2 + a] - g.crop[a] + g.begins[a] + g.ends[a] for a in range(2)]
    return tuple((size[a] - (g.kernel[a] - 1) * g.dilation[a] - 1) // g.stride[a] + 1 for a in range(2))


def depthwise_direct(x_shape, g: ConvGeometry) -> bool:
    """Whether PatchMoments.add_depthwise takes this layer: one input channel per group, no
    dilation, at least one output position (other grouped layers gather their patches)."""
    oh, ow = conv_output_size(x_shape, g)
    return (len(x_shape) == 4 and g.groups == x_shape[1] and g.dilation == (1, 1)
            and oh > 0 and ow > 0)


def sample_stride(x_shape, g: ConvGeometry, samples: int | None) -> ConvGeometry:
    """The geometry of the patches a convolution's moments are summed over. H needs many more
    patch rows than its K x K entries have degrees of freedom only up to a point: past
    max(ROWS_PER_WEIGHT x K, MIN_ROWS) rows over the whole calibration (`samples`
    executions of input shape x_shape), the moments read a regular sub-lattice of the output
    positions, every a-th row and b-th column, by multiplying the stride: excess =
    ceil(rows / budget), a = floor(sqrt(excess)), b = ceil(excess / a) (each at most the
    output's extent). A deterministic choice of whole patches, the same in every sample;
    measured on ResNet-18 and EfficientNet-Lite0 in docs/quantize.md. An unknown sample count
    keeps every position. (A depthwise layer, sampled or not, is summed without gathering:
    the sampled lattice is its geometry with the multiplied stride; InputMoments.update.)"""
    if samples is None:
        return g
    rows, _, k = conv_patch_shape(x_shape, g)
    oh, ow = conv_output_size(x_shape, g)
    budget = max(ROWS_PER_WEIGHT * k, MIN_ROWS)
    excess = -(-samples * rows // budget)
    if excess <= 1:
        return g
    a = min(oh, math.isqrt(excess))
    b = min(ow, -(-excess // a))
    return dataclasses.replace(g, stride=(g.stride[0] * a, g.stride[1] * b))


def conv_patch_shape(x_shape, g: ConvGeometry) -> tuple[int, int, int]:
    """(rows, groups, K) of conv_patches for an input of shape x_shape."""
    n, c = x_shape[0], x_shape[1]
    oh, ow = conv_output_size(x_shape, g)
    return n * oh * ow, g.groups, (c // g.groups) * g.kernel[0] * g.kernel[1]
