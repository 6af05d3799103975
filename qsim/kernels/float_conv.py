"""The float executor's depthwise convolution on compiled loops (kernels/float_conv.h).

The depthwise loop gives the bits of the float conv's definition (the conv GEMM's too; numpy
reference qsim.runtime.float_ops.fma): per output element acc = fma(w0, x0, +0.0), then
acc = fma(wk, xk, acc) per tap in row-major kernel order, each rounded once, padding included
as +0.0, then + bias as numpy's out + bias. It runs plane by plane
on the NCHW data for any channel multiplier and stride: each plane's padded copy is split
into stride phases, so every tap is one contiguous run on a flat output index and even 7-pixel
rows and stride 2 fill the vector registers (no NHWC copies); on AVX-512, strides 1 and 2 take
a row loop of the same bits instead that reads the taps in place (kernels/float_dw_rows.h).
Narrow images (multiplier 1) take a third loop of the same bits that runs 16 channels side by
side in one vector instead (a [H][W][16] copy per block of channels). Output planes or channel
blocks are split over QSIM_THREADS threads of the compiled pool (kernels/task_pool.h); the GIL
is released.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..threads import thread_count
from .cpu_features import Isa, current_isa
from .extensions import extension

_float_ops = extension("_float_ops")   # raises KernelsUnavailableError when missing or broken

# Output rows at most this wide (multiplier 1) take the channel-block loop (16 channels per
# vector): the plane loop's flat blocks waste most lanes on narrow rows (EfficientNet-Lite0's
# 28x28 to 7x7 layers ran 1.4-6x faster this way; 56 and wider were faster plane by plane).
# Both loops give the same bits, so the choice only moves time.
CHANNEL_BLOCK_MAX_WIDTH = 28
# Where the AVX-512 row loop replaces the plane loop (float_dw_rows.h: strides 1 and 2, kernels up
# to 8 wide) it beats the channel blocks on 3-wide kernels down to 17-wide rows
# (28x28 and 56->28 stride 2: 15-30 % less CPU time); 14 and 7 stay faster in blocks, and so
# do 5x5 kernels on 28-wide rows (even at stride 1, slower at stride 2).
ROW_LOOP_BLOCK_MAX_WIDTH = 16
ROW_LOOP_NARROW_MAX_KW = 3


@dataclass(frozen=True)
class _DepthwiseCall:
    """What depthwise2d works out from the shapes, the bound and the thread count alone."""
    out_shape: tuple
    lo: float
    hi: float | None
    blocks: bool          # the channel-block loop
    units: int
    parts: int


@functools.lru_cache(maxsize=1024)
def _depthwise_call(x_shape: tuple, m: int, out_size: tuple, bound: tuple | None, threads: int,
                    block_width: int) -> _DepthwiseCall:
    """Cached: a model asks for the same few dozen on every inference (a tenth of the Python time
    of a small layer's call went to working them out)."""
    B, C = x_shape[:2]
    OH, OW = out_size
    lo, hi = (0.0, None) if bound is None else (float(bound[0]), None if bound[1] is None else float(bound[1]))
    blocks = m == 1 and OW <= block_width
    units = B * -(-C // 16) if blocks else B * C * m
    parts = max(1, min(threads, units // (1 if blocks else 4)))      # split_count(units, min_rows)
    return _DepthwiseCall((B, C * m, OH, OW), lo, hi, blocks, units, parts)


def depthwise2d(x: np.ndarray, w: np.ndarray, m: int, stride, dilation, before, out_size,
                bias: np.ndarray | None = None, bound: tuple | None = None, bound_only: bool = False):
    """out[b, c*m + i] = sum over taps of w[c*m + i, 0, tap] * window_tap(x)[b, c] (+ bias[c*m + i])
    for float32 x [B][C][H][W], w [C*m][1][KH][KW] and bias [C*m]; before = leading padding per
    axis (negative: crop). With bound = (lo, hi) returns (out, minimum(maximum(out, lo), hi))
    (hi None: maximum only; numpy's values), computed plane by plane in the same pass; with
    bound_only too, (None, bounded) with the bounded values made in place of out's."""
    KH, KW = w.shape[2], w.shape[3]
    isa = current_isa().code
    rows = isa >= Isa.AVX512VNNI.code and KW <= ROW_LOOP_NARROW_MAX_KW and stride[0] in (1, 2) and \
        stride[1] in (1, 2)
    call = _depthwise_call(x.shape, m, tuple(out_size), None if bound is None else tuple(bound), thread_count(),
                           ROW_LOOP_BLOCK_MAX_WIDTH if rows else CHANNEL_BLOCK_MAX_WIDTH)
    xc = np.ascontiguousarray(x, dtype=np.float32)
    wc = np.ascontiguousarray(w, dtype=np.float32).reshape(call.out_shape[1], KH, KW)
    bc = None if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
    out = np.empty(call.out_shape, dtype=np.float32)
    bound_only = bound_only and bound is not None
    y = None if bound is None or bound_only else np.empty_like(out)
    _float_ops.depthwise_nchw_f32(isa, xc, wc, bc, out, m, stride[0], stride[1], dilation[0],
                                  dilation[1], before[0], before[1], 0, call.units, y, call.lo, call.hi, bound_only,
                                  call.blocks, call.parts)
    if bound is None:
        return out
    return (None, out) if bound_only else (out, y)
