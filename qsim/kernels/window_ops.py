"""DEPTHWISE_CONV2D, MAX_POOL2D and AVG_POOL2D on the sliding-window C kernels (qwindow.h).

Inputs are validated by qsim.tosa before they get here. The int32 accumulator bounds are
proven before the call (see gemm_ops.py); AVG_POOL2D's apply_scale REQUIRE comes back as a
flag and is raised here with the spec's condition text.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..tosa.arith import reciprocal_scale
from .cache import PerAttrs, packed_for
from .cpu_features import current_isa
from .extensions import extension
from .gemm_ops import INT32_MAX, NeedsReference, _max_abs_offset, _requant
from .unary_ops import MIN_PART_ELEMENTS, TYPE_RANGE, unpredictable
from ..threads import split_count

_tosa_ops = extension("_tosa_ops")   # raises KernelsUnavailableError when missing or broken


def _padded_int16(x: np.ndarray, pad, fill: int, subtract: int = 0, repeat: int = 1) -> np.ndarray:
    """int16 [N][H+pt+pb][W+pl+pr][C*repeat] holding x - subtract, `fill` in the padding, made
    in one C pass (qwindow.h qsim_pad_i16: each element written once, the channel repeat and the
    zero-point subtraction in the same pass)."""
    return _tosa_ops.pad_i16(current_isa().code, x, tuple(int(p) for p in pad), int(fill),
                             int(subtract), int(repeat))


# per DEPTHWISE_CONV2D attribute mapping and input (shape, dtype): what the call works out from
# its attributes alone (docs/runtime.md, per-call costs); an op's attrs are never edited in place
_depthwise_plans = PerAttrs(1024)


def _depthwise_plan(attrs, shape: tuple, dtype: np.dtype):
    """(fits, wt, bias, izp, pad, stride, dilation, KH, KW, M, OH, OW) of a call on an input of
    `shape` and `dtype`: `fits` False when an int32 accumulation could overflow."""
    w = attrs["weight"]
    bias = np.ascontiguousarray(np.asarray(attrs["bias"], dtype=np.int64))
    izp, wzp = int(attrs["input_zp"]), int(attrs["weight_zp"])
    N, H, W, C = shape
    KH, KW, _, M = w.shape
    pt, pb, pl, pr = (int(p) for p in attrs["pad"])
    sy, sx = attrs["stride"]
    dy, dx = attrs["dilation"]
    OH = (H - 1 + pt + pb - (KH - 1) * dy) // sy + 1
    OW = (W - 1 + pl + pr - (KW - 1) * dx) // sx + 1
    wt = packed_for(w, ("dw", wzp), lambda: (w.astype(np.int16) - wzp).reshape(KH * KW, C * M))
    a_bound = _max_abs_offset(-128, 127, izp) if dtype == np.int8 else 1 << 15
    w_bound = np.abs(wt.astype(np.int64)).max(axis=0) if wt.size else 0
    # int32 accumulation inside the kernel: exact when no partial sum can reach 2^31
    # (int8: the spec's own REQUIRE bound; int16: int48 would allow more, the kernel does not).
    fits = bool(np.all(KH * KW * np.asarray(a_bound, dtype=np.int64) * w_bound + np.abs(bias) <= INT32_MAX))
    return fits, wt, bias, izp, (pt, pb, pl, pr), (sy, sx), (dy, dx), KH, KW, M, OH, OW


def depthwise_conv2d(inputs, attrs, then_rescale=None):
    """then_rescale: as gemm_ops.conv2d's (int8 input only)."""
    x, = inputs
    if then_rescale is not None and x.dtype != np.int8:
        raise NeedsReference
    fits, wt, bias, izp, pad, (sy, sx), (dy, dx), KH, KW, M, OH, OW = _depthwise_plans.get(
        attrs, (x.shape, x.dtype), lambda: _depthwise_plan(attrs, x.shape, x.dtype))
    if not fits:
        raise NeedsReference
    N, H, W, C = x.shape
    requant = _requant(then_rescale, C * M)
    isa = current_isa().code
    P = _tosa_ops.pad_i16(isa, x, pad, 0, izp, M)     # _padded_int16's call, its ints made once
    wide = x.dtype == np.int16
    out = np.empty((N, OH, OW, C * M), dtype=(np.int64 if wide else np.int32) if requant is None else requant[0])
    if out.size == 0:
        return [out]
    if requant is not None:
        # blocks of output rows of any image (tosa_ops.depthwise): the rows on the threads
        if _tosa_ops.depthwise(isa, P, wt, KH, KW, OH, OW, (sy, sx), (dy, dx), bias, False, out,
                               split_count(N * OH, max(1, MIN_PART_ELEMENTS // (OW * C * M))), requant[1]):
            raise NeedsReference
        return [out]

    # every output element is one exact integer sum, whichever thread computes it: whole images
    # per part, or one image's output rows (the pool's threads, tosa_ops.depthwise)
    units, per_unit = (N, OH * OW * C * M) if N > 1 else (OH, OW * C * M)
    _tosa_ops.depthwise(isa, P, wt, KH, KW, OH, OW, (sy, sx), (dy, dx), bias, wide, out,
                        split_count(units, max(1, MIN_PART_ELEMENTS // max(1, per_unit))))
    return [out]



def max_pool2d(inputs, attrs):
    x, = inputs
    KH, KW = attrs["kernel"]
    pt, pb, pl, pr = attrs["pad"]
    sy, sx = attrs["stride"]
    N, H, W, C = x.shape
    OH = (H + pt + pb - KH) // sy + 1
    OW = (W + pl + pr - KW) // sx + 1
    # padding holds the type minimum: max() started at minimum<in_out_t> ignores it
    P = _padded_int16(x, (pt, pb, pl, pr), TYPE_RANGE[x.dtype][0])
    out = np.empty((N, OH, OW, C), dtype=x.dtype)
    if out.size:
        _tosa_ops.max_pool(current_isa().code, P, KH, KW, OH, OW, (sy, sx), out)
    return [out]


@lru_cache(maxsize=64)
def _reciprocal_tables(max_count: int) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, shift) of reciprocal_scale(count) for count = 0..max_count (0 unused)."""
    counts = np.arange(max_count + 1, dtype=np.int64)
    counts[0] = 1
    mult, shift = reciprocal_scale(counts, context="AVG_POOL2D")
    mult = np.ascontiguousarray(mult, dtype=np.int64)
    shift = np.ascontiguousarray(np.broadcast_to(shift, mult.shape), dtype=np.int64)
    mult.flags.writeable = shift.flags.writeable = False
    return mult, shift


def avg_pool2d(inputs, attrs):
    x, = inputs
    KH, KW = attrs["kernel"]
    pt, pb, pl, pr = attrs["pad"]
    sy, sx = attrs["stride"]
    izp, ozp = int(attrs["input_zp"]), int(attrs["output_zp"])
    N, H, W, C = x.shape
    OH = (H + pt + pb - KH) // sy + 1
    OW = (W + pl + pr - KW) // sx + 1
    a_bound = int(_max_abs_offset(-128, 127, izp)) if x.dtype == np.int8 else 1 << 15
    if KH * KW * a_bound > INT32_MAX:      # apply_add<int32_t> could overflow
        raise NeedsReference
    P = _padded_int16(x, (pt, pb, pl, pr), 0, izp)
    mult, shift = _reciprocal_tables(KH * KW)
    lo, hi = TYPE_RANGE[x.dtype]
    out = np.empty((N, OH, OW, C), dtype=x.dtype)
    if out.size and _tosa_ops.avg_pool(current_isa().code, P, H, W, KH, KW, OH, OW, (sy, sx),
                                       pt, pl, mult, shift, ozp, lo, hi, out):
        raise unpredictable("AVG_POOL2D", "value >= (-1<<(shift-2)) && value < (1<<(shift-2))",
                             "input")
    return [out]
