"""DEPTHWISE_CONV2D, MAX_POOL2D, AVG_POOL2D, RESCALE, TABLE and CLAMP on the C kernels (qmisc.h).

Inputs are validated by qsim.tosa before they get here. REQUIRE conditions the kernels can meet
(apply_scale range, table slope) come back as a flag and are raised here with the spec's
condition text; accumulator bounds are proven before the call (see gemm_ops.py).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..errors import UnpredictableError
from ..tosa.arith import reciprocal_scale
from .cache import packed_for
from .extensions import extension
from .gemm_ops import INT32_MAX, NeedsReference, _max_abs_offset
from .isa import current_isa

_tosa_ops = extension("_tosa_ops")   # raises KernelsUnavailableError when missing or broken

_TYPE_RANGE = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max))
               for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32)}


def _unpredictable(op: str, condition: str, tensor: str) -> UnpredictableError:
    return UnpredictableError(f"{op}: REQUIRE({condition}) fails for tensor '{tensor}'",
                              hint="the result is unpredictable (TOSA 3.1); rescale the "
                                   "operands or change the attributes so it holds")


def _padded_int16(x: np.ndarray, pad, fill: int, subtract: int = 0, repeat: int = 1) -> np.ndarray:
    """int16 [N][H+pt+pb][W+pl+pr][C*repeat] holding x - subtract, `fill` in the padding."""
    pt, pb, pl, pr = pad
    N, H, W, C = x.shape
    out = np.full((N, H + pt + pb, W + pl + pr, C * repeat), fill, dtype=np.int16)
    inner = out[:, pt:pt + H, pl:pl + W, :]
    src = x if repeat == 1 else np.repeat(x, repeat, axis=3)
    if subtract:
        np.subtract(src, subtract, out=inner, dtype=np.int16, casting="unsafe")
    else:
        inner[...] = src
    return out


def depthwise_conv2d(inputs, attrs):
    x, = inputs
    w = attrs["weight"]
    bias = np.asarray(attrs["bias"], dtype=np.int64)
    izp, wzp = int(attrs["input_zp"]), int(attrs["weight_zp"])
    N, H, W, C = x.shape
    KH, KW, _, M = w.shape
    pt, pb, pl, pr = attrs["pad"]
    sy, sx = attrs["stride"]
    dy, dx = attrs["dilation"]
    OH = (H - 1 + pt + pb - (KH - 1) * dy) // sy + 1
    OW = (W - 1 + pl + pr - (KW - 1) * dx) // sx + 1
    wt = packed_for(w, ("dw", wzp), lambda: (w.astype(np.int16) - wzp).reshape(KH * KW, C * M))
    a_bound = _max_abs_offset(-128, 127, izp) if x.dtype == np.int8 else 1 << 15
    w_bound = np.abs(wt.astype(np.int64)).max(axis=0) if wt.size else 0
    # int32 accumulation inside the kernel: exact when no partial sum can reach 2^31
    # (int8: the spec's own REQUIRE bound; int16: int48 would allow more, the kernel does not).
    if not np.all(KH * KW * np.asarray(a_bound, dtype=np.int64) * w_bound + np.abs(bias) <= INT32_MAX):
        raise NeedsReference
    P = _padded_int16(x, (pt, pb, pl, pr), 0, izp, M)
    out = _tosa_ops.depthwise(current_isa().code, P, wt, KH, KW, OH, OW, (sy, sx), (dy, dx),
                              np.ascontiguousarray(bias), x.dtype == np.int16)
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
    P = _padded_int16(x, (pt, pb, pl, pr), _TYPE_RANGE[x.dtype][0])
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
    lo, hi = _TYPE_RANGE[x.dtype]
    out = np.empty((N, OH, OW, C), dtype=x.dtype)
    if out.size and _tosa_ops.avg_pool(current_isa().code, P, H, W, KH, KW, OH, OW, (sy, sx),
                                       pt, pl, mult, shift, ozp, lo, hi, out):
        raise _unpredictable("AVG_POOL2D", "value >= (-1<<(shift-2)) && value < (1<<(shift-2))",
                             "input")
    return [out]


def _out_dtype(out_t) -> np.dtype:
    return np.dtype(np.int64) if out_t in ("int48", "i48") else np.dtype(out_t)


@lru_cache(maxsize=256)
def _rescale_params(mult_bytes: bytes, shift_bytes: bytes, double_round: bool, block: int):
    """Per-channel kernel parameters (mult, shift, round, dround as int64 arrays) from the
    attributes' bytes (int64), each repeated `block` times (per-tensor: block > 1); or the
    violated REQUIRE as a string. Keyed by value, so in-place edits of the attributes are seen."""
    mult = np.frombuffer(mult_bytes, dtype=np.int64)
    shift = np.frombuffer(shift_bytes, dtype=np.int64)
    if np.any(mult < 0):
        return "multiplier >= 0", "multiplier"
    if np.any((shift < 2) | (shift > 62)):
        return "2 <= shift && shift <= 62", "shift"
    if block > 1:
        mult, shift = np.repeat(mult[:1], block), np.repeat(shift[:1], block)
    rnd = np.left_shift(np.int64(1), shift - 1)
    dround = np.where(double_round & (shift > 31), np.int64(1) << 30, np.int64(0))
    arrays = tuple(np.ascontiguousarray(a, dtype=np.int64) for a in (mult, shift, rnd, dround))
    for a in arrays:
        a.flags.writeable = False
    return arrays


def rescale(inputs, attrs):
    x, = inputs
    out_dtype = _out_dtype(attrs["out_t"])
    scale32 = bool(attrs["scale32"])
    x = np.ascontiguousarray(x)
    block = 1
    if not bool(attrs["per_channel"]):
        # per-tensor: repeat the one scale over a block of trailing elements so the kernel's
        # inner loop is long enough to vectorize; the block divides x.size.
        for d in reversed(x.shape):
            if block >= 64:
                break
            block *= d
        block = max(block, 1)
    params = _rescale_params(np.asarray(attrs["multiplier"], dtype=np.int64).reshape(-1).tobytes(),
                             np.asarray(attrs["shift"], dtype=np.int64).reshape(-1).tobytes(),
                             bool(attrs["double_round"]), block)
    if len(params) == 2:
        raise _unpredictable("RESCALE", *params)
    mult, shift, rnd, dround = params
    lo, hi = _TYPE_RANGE[out_dtype] if out_dtype != np.int64 else (-(1 << 31), (1 << 31) - 1)
    y = np.empty(x.shape, dtype=out_dtype)
    if x.size and _tosa_ops.rescale(current_isa().code, x, mult.size, int(attrs["input_zp"]),
                                    mult, shift, rnd, dround, scale32, int(attrs["output_zp"]),
                                    lo, hi, y):
        condition = ("value >= (-1<<(shift-2)) && value < (1<<(shift-2))" if scale32 else
                     "result >= minimum<int32_t> && result <= maximum<int32_t>")
        raise _unpredictable("RESCALE", condition, "input")
    return [y]


def table(inputs, attrs):
    x, = inputs
    tab = np.ascontiguousarray(attrs["table"])
    size = 256 if x.dtype == np.int8 else 513
    if tab.shape != (size,):        # the kernels index the table unchecked
        raise _unpredictable("TABLE", f"length(table) == TABLE_SIZE ({size})", "table")
    flat = np.ascontiguousarray(x).reshape(-1)
    if x.dtype == np.int8:
        y = np.empty(flat.shape, dtype=np.int8)
        if flat.size:
            _tosa_ops.table_i8(flat, tab.astype(np.int8, copy=False), y)
        return [y.reshape(x.shape)]
    y = np.empty(flat.shape, dtype=np.int32)
    if flat.size and _tosa_ops.table_i16(flat, tab.astype(np.int16, copy=False), y):
        raise _unpredictable("TABLE", "slope >= minimum<int16_t> && slope <= maximum<int16_t>",
                             "table")
    return [y.reshape(x.shape)]


def clamp(inputs, attrs):
    x, = inputs
    x = np.ascontiguousarray(x)
    y = np.empty_like(x)
    if x.size:
        _tosa_ops.clamp(current_isa().code, x, int(attrs["min_val"]), int(attrs["max_val"]), y)
    return [y]
