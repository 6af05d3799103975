"""The float executor's depthwise convolution and 2-D im2col on compiled loops (kernels/float_conv.h).

Two loops, both giving the bits of the numpy reference (qsim.runtime.float_ops.nn._depthwise:
per output element, +0.0 then one float32 multiply and one add per tap in row-major kernel
order, padding included as +0.0):
- any multiplier: plane by plane on the NCHW data, vectorized along output rows;
- channel multiplier 1 and images narrower than NHWC_BELOW_WIDTH (the late MobileNet and
  EfficientNet layers: 7 to 28 pixels wide, up to 1152 channels): on a padded NHWC copy,
  vectorized across channels.
Output rows (or planes) are split over QSIM_THREADS threads; the GIL is released.
"""
from __future__ import annotations

import numpy as np

from ..threads import split_rows
from .cpu_features import current_isa
from .extensions import extension

_float_ops = extension("_float_ops")   # raises KernelsUnavailableError when missing or broken


# NCHW rows at least this wide fill the vector registers; narrower ones go through NHWC (the
# two layout copies cost less there than the short rows would)
NHWC_BELOW_WIDTH = 32


def _padded_nhwc(x: np.ndarray, before, extent) -> np.ndarray:
    """float32 [B][PH][PW][C] with buf[:, i, j] = x[:, :, i - before[0], j - before[1]] where
    that is inside x, +0.0 elsewhere; (PH, PW) = extent."""
    B, C, H, W = x.shape
    buf = np.zeros((B, extent[0], extent[1], C), dtype=np.float32)
    rows, cols = [], []
    for size, b, e, out in ((H, before[0], extent[0], rows), (W, before[1], extent[1], cols)):
        lo, hi = max(0, -b), min(size, e - b)
        out.append((lo, max(lo, hi), b))
    (ylo, yhi, by), (xlo, xhi, bx) = rows[0], cols[0]
    if yhi > ylo and xhi > xlo:
        buf[:, ylo + by:yhi + by, xlo + bx:xhi + bx, :] = x[:, :, ylo:yhi, xlo:xhi].transpose(0, 2, 3, 1)
    return buf


def depthwise2d(x: np.ndarray, w: np.ndarray, m: int, stride, dilation, before, out_size) -> np.ndarray:
    """out[b, c*m + i] = sum over taps of w[c*m + i, 0, tap] * window_tap(x)[b, c] for float32
    x [B][C][H][W] and w [C*m][1][KH][KW]; before = leading padding per axis (negative: crop)."""
    B, C, H, W = x.shape
    KH, KW = w.shape[2], w.shape[3]
    OH, OW = out_size
    sy, sx = stride
    dy, dx = dilation
    if m == 1 and OW < NHWC_BELOW_WIDTH:
        extent = (sy * (OH - 1) + dy * (KH - 1) + 1, sx * (OW - 1) + dx * (KW - 1) + 1)
        xp = _padded_nhwc(x, before, extent)
        wt = np.ascontiguousarray(w.reshape(C, KH * KW).T, dtype=np.float32)
        out = np.empty((B, OH, OW, C), dtype=np.float32)
        isa = current_isa().code
        split_rows(B * OH, lambda lo, hi: _float_ops.depthwise_nhwc_f32(isa, xp, wt, out, KH, KW, sy, sx,
                                                                        dy, dx, lo, hi), min_rows=2)
        return np.ascontiguousarray(out.transpose(0, 3, 1, 2))
    xc = np.ascontiguousarray(x, dtype=np.float32)
    wc = np.ascontiguousarray(w.reshape(C * m, KH, KW), dtype=np.float32)
    out = np.empty((B, C * m, OH, OW), dtype=np.float32)
    isa = current_isa().code
    split_rows(B * C * m, lambda lo, hi: _float_ops.depthwise_nchw_f32(isa, xc, wc, out, m, sy, sx, dy, dx,
                                                                      before[0], before[1], lo, hi),
               min_rows=4)
    return out


def im2col2d(x: np.ndarray, kernel, stride, dilation, before, out_size,
             batch_inner: bool = False) -> np.ndarray:
    """float32 cols [B][C][KH*KW][OH][OW]: cols[b, c, ky*KW + kx, oy, ox] =
    x[b, c, oy*sy + ky*dy - before[0], ox*sx + kx*dx - before[1]], +0.0 outside x (the im2col
    of the float executor's conv GEMM, a copy: the same buffer as numpy's window copies).
    batch_inner: laid out [C][KH*KW][B][OH][OW] instead, which is the GEMM operand
    [C*KH*KW][B*OH*OW] of a batch as it is (no transposing copy)."""
    B, C = x.shape[:2]
    KH, KW = kernel
    xc = np.ascontiguousarray(x, dtype=np.float32)
    shape = (C, KH * KW, B) if batch_inner else (B, C, KH * KW)
    cols = np.empty(shape + tuple(out_size), dtype=np.float32)
    split_rows(B * C, lambda lo, hi: _float_ops.im2col_f32(xc, cols, KH, KW, stride[0], stride[1], dilation[0],
                                                          dilation[1], before[0], before[1], lo, hi,
                                                          batch_inner),
               min_rows=8)
    return cols
