"""CONV2D, CONV3D, TRANSPOSE_CONV2D, FULLY_CONNECTED and MATMUL on the implicit-GEMM kernels.

All five are one computation (kernels/qgemm.h): a prepared activation buffer, row origins
(one per output pixel), tap offsets (one per kernel position) and packed weights. This module
builds those from the TOSA operands and proves the REQUIRE bound before running:
every partial sum of the spec's accumulation is a sum of a subset of the products plus, possibly,
the bias, so |partial| <= K * max|x - zp| * max|w - zp| + |bias|. When that bound fits the
accumulator (int32, or int48 in the 16-bit modes) no apply_add can fail and the kernels'
modulo-2^32 arithmetic gives the exact result; otherwise the call goes to the reference, which
evaluates the spec's own order and raises UnpredictableError where it overflows.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..threads import split_count
from .cache import PerAttrs, packed_for
from .extensions import extension
from .cpu_features import Isa, current_isa
from .unary_ops import requant_args

_tosa_ops = extension("_tosa_ops")   # raises KernelsUnavailableError when missing or broken

INT32_MAX = (1 << 31) - 1
INT48_MAX = (1 << 47) - 1
_MASK32 = np.int64(0xFFFFFFFF)


def _round4(v: int) -> int:
    return (v + 3) // 4 * 4


@dataclass(frozen=True)
class Geometry:
    """A (up to 3-D) convolution as an implicit GEMM over a padded buffer [N][PD][PH][PW][CB].

    Input element (d, y, x) sits at buffer position (d*up_d + off_d, ...); output pixel
    (od, oy, ox) reads buffer position (od*stride_d + kd*dil_d, ...) for tap (kd, ky, kx).
    """
    batch: int
    out: tuple[int, int, int]           # OD, OH, OW
    kernel: tuple[int, int, int]        # KD, KH, KW
    stride: tuple[int, int, int]
    dilation: tuple[int, int, int]
    buffer: tuple[int, int, int]        # PD, PH, PW
    up: tuple[int, int, int]            # input upsampling (TRANSPOSE_CONV2D), else 1
    offset: tuple[int, int, int]        # leading padding
    channels: int                       # CB: channel stride of the buffer

    @property
    def taps(self) -> int:
        return self.kernel[0] * self.kernel[1] * self.kernel[2]


@lru_cache(maxsize=256)
def _index_tables(g: Geometry) -> tuple[np.ndarray, np.ndarray]:
    """(rows, taps): buffer offsets of each output pixel's window origin and of each tap."""
    PD, PH, PW = g.buffer
    n = np.arange(g.batch, dtype=np.int64)[:, None, None, None]
    od = np.arange(g.out[0], dtype=np.int64)[None, :, None, None] * g.stride[0]
    oy = np.arange(g.out[1], dtype=np.int64)[None, None, :, None] * g.stride[1]
    ox = np.arange(g.out[2], dtype=np.int64)[None, None, None, :] * g.stride[2]
    rows = (((n * PD + od) * PH + oy) * PW + ox) * g.channels
    kd = np.arange(g.kernel[0], dtype=np.int64)[:, None, None] * g.dilation[0]
    ky = np.arange(g.kernel[1], dtype=np.int64)[None, :, None] * g.dilation[1]
    kx = np.arange(g.kernel[2], dtype=np.int64)[None, None, :] * g.dilation[2]
    taps = ((kd * PH + ky) * PW + kx) * g.channels
    rows, taps = rows.reshape(-1), taps.reshape(-1)
    rows.flags.writeable = False
    taps.flags.writeable = False
    return rows, taps


@lru_cache(maxsize=256)
def _conv_geometry(x_shape, kernel, pad, stride, dilation, channels) -> Geometry:
    """Forward convolution; x_shape = (N, D, H, W), pad = ((front, back) per spatial axis)."""
    N, *spatial = x_shape
    out = tuple((i - 1 + p0 + p1 - (k - 1) * d) // s + 1
                for i, (p0, p1), k, s, d in zip(spatial, pad, kernel, stride, dilation))
    buffer = tuple(i + p0 + p1 for i, (p0, p1) in zip(spatial, pad))
    return Geometry(N, out, tuple(kernel), tuple(stride), tuple(dilation), buffer,
                    (1, 1, 1), tuple(p0 for p0, _ in pad), channels)


# ----------------------------------------------------------------------- weights ------------

@dataclass(frozen=True)
class PackedWeights:
    data: np.ndarray        # qgemm.h layout for one ISA
    colsum: np.ndarray      # int32[OC]: sum of the real weights of each output column
    wmin: np.ndarray        # int64[OC]: per-column min / max, for the overflow bound
    wmax: np.ndarray


def _pack(isa: Isa, w_ntc: np.ndarray) -> PackedWeights:
    data, colsum = _tosa_ops.pack_weights(isa.gemm_code, np.ascontiguousarray(w_ntc, dtype=np.int8))
    flat = w_ntc.reshape(w_ntc.shape[0], -1)
    if flat.shape[1] == 0:
        zeros = np.zeros(w_ntc.shape[0], dtype=np.int64)
        return PackedWeights(data, colsum, zeros, zeros)
    return PackedWeights(data, colsum, flat.min(axis=1).astype(np.int64),
                         flat.max(axis=1).astype(np.int64))


def _max_abs_offset(lo, hi, zp: int):
    """max |v - zp| for v in [lo, hi] (elementwise)."""
    return np.maximum(np.asarray(hi, dtype=np.int64) - zp, zp - np.asarray(lo, dtype=np.int64))


def _fits(k: int, a_bound, w_bound, bias, limit: int) -> bool:
    bias_abs = np.abs(np.asarray(bias, dtype=np.int64)) if bias is not None else 0
    return bool(np.all(k * np.asarray(a_bound, dtype=np.int64) * w_bound + bias_abs <= limit))


# ----------------------------------------------------------------------- int8 core ----------

def _column_correction(colsum: np.ndarray, bias, input_zp: int) -> np.ndarray:
    """colcorr[n] = bias[n] - (128 + input_zp) * colsum[n], modulo 2^32 (qgemm.h epilogue)."""
    colcorr = -(128 + input_zp) * colsum.astype(np.int64)
    if bias is not None:
        colcorr += bias
    return (colcorr & _MASK32).astype(np.uint32).view(np.int32)


def _gemm_i8(x5: np.ndarray, g: Geometry, ic: int, packed: PackedWeights, oc: int,
             bias, input_zp: int, weight_zp: int, colcorr=None, out=None, requant=None,
             tables=None, batch_rows: int = 0) -> np.ndarray:
    """int32 [M, OC] = the convolution of x5 (int8 [N][D][H][W][IC]) described by g.
    `colcorr`, when given, is _column_correction(packed.colsum, bias, input_zp) (cached);
    `out`, when given, is a C-contiguous int32 [M, OC] array to write into (no copy).
    With `requant` = (dtype, args) of unary_ops.requant_args: [M, OC] of that dtype, the
    RESCALE (+ CLAMP) of the int32 result applied block by block (tosa_ops.gemm); a failed
    RESCALE REQUIRE raises NeedsReference (the caller runs the ops apart, which raise it).
    `tables`, when given, is _index_tables(g) (a per-op plan holds it: no Geometry hashing).
    `batch_rows` > 0: every batch_rows rows have their own B (a batched MATMUL): packed.data
    holds one packing per batch and colcorr one row of OC per batch (tosa_ops.gemm)."""
    isa = current_isa()
    fill = (input_zp + 128) & 0xFF
    a = _tosa_ops.prepare_input_u8(isa.code, np.ascontiguousarray(x5), *g.buffer, g.channels, g.up,
                                   g.offset, fill).reshape(-1)
    rows, taps = _index_tables(g) if tables is None else tables
    k4 = g.channels // 4
    if colcorr is None:
        colcorr = _column_correction(packed.colsum, bias, input_zp)
    rowcorr = None
    if weight_zp != 0:
        k_total = taps.size * g.channels
        rowsum = _tosa_ops.row_sums(isa.code, a, rows, taps, k4).astype(np.int64)
        rowcorr = ((weight_zp * (rowsum - k_total * (128 + input_zp))) & _MASK32)
        rowcorr = rowcorr.astype(np.uint32).view(np.int32)
    if out is None:
        out = np.empty((rows.size, oc), dtype=np.int32 if requant is None else requant[0])
    if rows.size and oc and _tosa_ops.gemm(isa.gemm_code, a, rows, taps, k4, packed.data, oc, colcorr, rowcorr, out,
                                           split_count(rows.size), None if requant is None else requant[1],
                                           batch_rows):
        raise NeedsReference
    return out


def _int8_static_bound_ok(k: int, packed: PackedWeights, bias, izp: int, wzp: int) -> bool:
    """True when no partial sum can leave int32 for any int8 input."""
    w_bound = _max_abs_offset(packed.wmin, packed.wmax, wzp)
    return _fits(k, _max_abs_offset(-128, 127, izp), w_bound, bias, INT32_MAX)


def _int8_bound_ok(x: np.ndarray, k: int, packed: PackedWeights, bias, izp: int, wzp: int) -> bool:
    """True when no partial sum can leave int32 (static bound first, then the data's range)."""
    w_bound = _max_abs_offset(packed.wmin, packed.wmax, wzp)
    if _int8_static_bound_ok(k, packed, bias, izp, wzp):
        return True
    if x.size == 0:
        return True
    return _fits(k, _max_abs_offset(x.min(), x.max(), izp), w_bound, bias, INT32_MAX)


# ----------------------------------------------------------------------- int16 core ---------

def _gemm_i16(x5: np.ndarray, g: Geometry, w_nk: np.ndarray, bias, packed=None) -> np.ndarray:
    """int64 (int48) [M, OC] for the 16-bit modes: sum_k x * w_nk[n, k] + bias[n].

    input_zp is 0 there (ERROR_IF in_t != int8_t && input_zp != 0), so the padding holds 0
    and contributes nothing, like the spec's skipped taps. `w_nk` is `weight - weight_zp`
    (int16: int8 weights may carry a zero point in the 16x8 mode, |w - weight_zp| <= 255), with
    g.channels values per tap (the channels rounded up to even, zero weights for the padding
    channel: _even_taps). `packed`: tosa_ops.gemm_i16's, for the VNNI kernel."""
    N, D, H, W, C = x5.shape
    buf = np.zeros((N, *g.buffer, g.channels), dtype=np.int16)
    keep, where = [], []
    for n, u, o, p in zip((D, H, W), g.up, g.offset, g.buffer):
        pos = np.arange(n) * u + o           # negative offsets (cropping) drop positions
        ok = (pos >= 0) & (pos < p)
        keep.append(np.flatnonzero(ok))
        where.append(pos[ok])
    buf[:, where[0][:, None, None], where[1][None, :, None], where[2][None, None, :], :C] = \
        x5[:, keep[0][:, None, None], keep[1][None, :, None], keep[2][None, None, :]]
    rows, taps = _index_tables(g)
    wt = np.ascontiguousarray(w_nk, dtype=np.int16)
    b = None if bias is None else np.ascontiguousarray(bias, dtype=np.int64)
    out = np.empty((rows.size, wt.shape[0]), dtype=np.int64)
    if out.size:
        isa, flat = current_isa().code, buf.reshape(-1)
        _tosa_ops.gemm_i16(isa, flat, rows, taps, g.channels, wt, b, out, split_count(rows.size), packed)
    return out


def _even_taps(w_nk: np.ndarray, taps: int, channels: int) -> np.ndarray:
    """int16 [OC, taps * C2]: w_nk [OC, taps * channels] with a zero weight after each tap's
    channels when channels is odd (C2 = channels rounded up to even: the VNNI kernel reads
    pairs)."""
    if channels % 2 == 0:
        return np.ascontiguousarray(w_nk, dtype=np.int16)
    w = w_nk.reshape(w_nk.shape[0], taps, channels)
    return np.ascontiguousarray(np.pad(w, ((0, 0), (0, 0), (0, 1))).reshape(w_nk.shape[0], -1), dtype=np.int16)


def _i16_packed(isa: Isa, wt: np.ndarray, split: bool = False):
    """gemm_i16's `packed` for wt [OC, K] (K even) on `isa`: None off the VNNI kernel's paths;
    with `split` (16x16: any int16 weights), w = 256 * hi + lo, lo in [0, 255], hi in
    [-128, 127], each packed (the kernel's exact blocks need |w| <= 255, qgemm_i16.h)."""
    if isa.code != _tosa_ops.ISA_AVX512VNNI:
        return None
    if not split:
        if wt.size and np.abs(wt.astype(np.int32)).max() > 255:    # not the 16x8 mode's weights
            return None
        return _tosa_ops.pack_i16(wt), None
    lo = np.bitwise_and(wt, 0xFF).astype(np.int16)
    hi = np.right_shift(wt, 8).astype(np.int16)
    return _tosa_ops.pack_i16(lo), _tosa_ops.pack_i16(hi)


def _int16_bound_ok(k: int, x_bound: int, w_bound: int, bias) -> bool:
    """`w_bound`: max |weight - weight_zp| (_offset_weights_i16's)."""
    return _fits(k, x_bound, w_bound, bias, INT48_MAX)


def _offset_weights_i16(w_key, flip: bool, w_nk: np.ndarray, wzp: int, taps: int, isa: Isa):
    """(int16 [OC, taps * C2] = w_nk - weight_zp with each tap's channels rounded up to even
    (_even_taps), its VNNI packing or None, max |w - weight_zp|), once per (weight array, zero
    point, ISA)."""
    def build():
        w = _even_taps(np.subtract(w_nk, wzp, dtype=np.int16), taps, w_nk.shape[1] // max(taps, 1))
        w.flags.writeable = False
        return w, _i16_packed(isa, w), int(np.abs(w.astype(np.int32)).max()) if w.size else 0
    return packed_for(w_key, ("i16", flip, wzp, isa), build)


# ----------------------------------------------------------------------- operators ----------

class NeedsReference(Exception):
    """The overflow bound could not be proven: the caller evaluates the spec's order instead.
    (A fused RESCALE the kernel does not compute, or whose REQUIRE fails: the caller runs the
    ops apart.)"""


def _requant(then_rescale, channels: int):
    """unary_ops.requant_args of then_rescale = (RESCALE attributes, CLAMP bounds or None), or
    None without one; NeedsReference when the kernels do not fuse it."""
    if then_rescale is None:
        return None
    requant = requant_args(*then_rescale, channels)
    if requant is None:
        raise NeedsReference
    return requant


def _int8_prepared(w_nt_c, w_key, k: int, bias, izp: int, wzp: int, flip: bool, isa):
    """(packed weights, static overflow bound holds, column correction) of an int8 call: per
    weight array (packed_for), and per (zero points, bias) for the last two."""
    packed = packed_for(w_key, ("conv", isa, flip), lambda: _pack(isa, w_nt_c))
    bias_key = None if bias is None else np.asarray(bias).tobytes()
    static_ok, colcorr = packed_for(w_key, ("epilogue", isa, flip, izp, wzp, bias_key), lambda: (
        _int8_static_bound_ok(k, packed, bias, izp, wzp),
        _column_correction(packed.colsum, bias, izp)))
    return packed, static_ok, colcorr


def _conv_nd(x5, w_nt_c, w_key, kernel, pad, stride, dilation, bias, izp, wzp, flip=False,
             geometry=None, then_rescale=None, prepared=None):
    """Shared body of CONV2D/CONV3D/TRANSPOSE_CONV2D. Returns [N, OD, OH, OW, OC].
    `then_rescale` = (RESCALE attributes, CLAMP bounds or None): returns the RESCALE (+ CLAMP)
    of the result instead, made block by block (int8 input only: NeedsReference otherwise).
    `prepared`, for an int8 x5: _int8_prepared's result, the Geometry and its _index_tables,
    worked out before for the same arguments and shape (conv2d's per-op plan)."""
    N, D, H, W, IC = x5.shape
    OC = w_nt_c.shape[0]
    k = w_nt_c.shape[1] * IC
    if then_rescale is not None and x5.dtype != np.int8:
        raise NeedsReference
    if x5.dtype == np.int8:
        requant = _requant(then_rescale, OC)
        if prepared is None:
            g = geometry(_round4(IC)) if geometry else _conv_geometry(
                (N, D, H, W), kernel, pad, stride, dilation, _round4(IC))
            prepared = (*_int8_prepared(w_nt_c, w_key, k, bias, izp, wzp, flip, current_isa()), g, _index_tables(g))
        packed, static_ok, colcorr, g, tables = prepared
        if not static_ok and not _int8_bound_ok(x5, k, packed, bias, izp, wzp):
            raise NeedsReference
        out = _gemm_i8(x5, g, IC, packed, OC, bias, izp, wzp, colcorr, requant=requant, tables=tables)
    else:
        if izp != 0:        # an ERROR_IF case: never computed here (the padding would be wrong)
            raise NeedsReference
        w_nk, packed, w_bound = _offset_weights_i16(w_key, flip, w_nt_c.reshape(OC, -1), wzp, w_nt_c.shape[1],
                                                    current_isa())
        if not _int16_bound_ok(k, 1 << 15, w_bound, bias):
            raise NeedsReference
        c2 = IC + IC % 2
        g = geometry(c2) if geometry else _conv_geometry(
            (N, D, H, W), kernel, pad, stride, dilation, c2)
        out = _gemm_i16(x5, g, w_nk, bias, packed)
    return out.reshape(N, *g.out, OC)


# then_rescale (CONV2D, TRANSPOSE_CONV2D, FULLY_CONNECTED, MATMUL): (RESCALE attributes,
# CLAMP bounds or None) of the RESCALE (+ CLAMP) after the op; the op then returns their output
# instead of its int32 accumulators, which exist only block by block (runtime/int_fusion.py)

# per CONV2D attribute mapping and input (shape, dtype, ISA): _conv_nd's arguments and, for int8,
# what it prepares (packed weights, bounds, column correction, geometry), worked out once per op
# instead of on every call (docs/runtime.md, per-call costs); an op's attrs are never edited in place
_conv2d_plans = PerAttrs(1024)


def _conv2d_plan(attrs, shape: tuple, dtype: np.dtype, isa):
    w = attrs["weight"]
    pt, pb, pl, pr = attrs["pad"]
    args = (w.reshape(w.shape[0], -1, w.shape[3]), w, (1, w.shape[1], w.shape[2]),
            ((0, 0), (pt, pb), (pl, pr)), (1, *attrs["stride"]), (1, *attrs["dilation"]),
            attrs["bias"], int(attrs["input_zp"]), int(attrs["weight_zp"]))
    return args, _int8_plan(args, shape, dtype, isa)


def _int8_plan(args, shape: tuple, dtype: np.dtype, isa):
    """What _conv_nd prepares for an int8 input of NHWC `shape` and its arguments `args`
    (None for other inputs): a per-op plan's part."""
    if dtype != np.int8:
        return None
    w_nt_c, w, kernel, pad, stride, dilation, bias, izp, wzp = args
    N, H, W, IC = shape
    g = _conv_geometry((N, 1, H, W), kernel, pad, stride, dilation, _round4(IC))
    return (*_int8_prepared(w_nt_c, w, w_nt_c.shape[1] * IC, bias, izp, wzp, False, isa), g, _index_tables(g))


def conv2d(inputs, attrs, then_rescale=None):
    x, = inputs
    isa = current_isa()
    args, prepared = _conv2d_plans.get(attrs, (x.shape, x.dtype, isa),
                                       lambda: _conv2d_plan(attrs, x.shape, x.dtype, isa))
    out = _conv_nd(x[:, None], *args, then_rescale=then_rescale, prepared=prepared)
    return [out[:, 0]]


def conv3d(inputs, attrs):
    x, = inputs
    w = attrs["weight"]
    p = attrs["pad"]
    out = _conv_nd(x, w.reshape(w.shape[0], -1, w.shape[4]), w, tuple(w.shape[1:4]),
                   ((p[0], p[1]), (p[2], p[3]), (p[4], p[5])), tuple(attrs["stride"]),
                   tuple(attrs["dilation"]), attrs["bias"], int(attrs["input_zp"]),
                   int(attrs["weight_zp"]))
    return [out]


def transpose_conv2d(inputs, attrs, then_rescale=None):
    """Scatter form of the spec == correlation of the zero-point-upsampled input with the
    spatially flipped kernel: input (iy, ix) sits at buffer position
    (iy*stride_y + KH-1-out_pad_top, ix*stride_x + KW-1-out_pad_left); every other buffer
    position holds input_zp, which contributes 0 like the spec's absent terms."""
    x, = inputs
    w = attrs["weight"]
    N, IH, IW, IC = x.shape
    OC, KH, KW, _ = w.shape
    opt, opb, opl, opr = attrs["out_pad"]
    sy, sx = attrs["stride"]
    OH = (IH - 1) * sy - opt - opb + KH
    OW = (IW - 1) * sx - opl - opr + KW

    def geometry(channels: int) -> Geometry:
        return Geometry(N, (1, OH, OW), (1, KH, KW), (1, 1, 1), (1, 1, 1),
                        (1, OH + KH - 1, OW + KW - 1), (1, sy, sx),
                        (0, KH - 1 - opt, KW - 1 - opl), channels)

    flipped = np.ascontiguousarray(w[:, ::-1, ::-1, :]).reshape(OC, KH * KW, IC)
    out = _conv_nd(x[:, None], flipped, w, None, None, None, None, attrs["bias"],
                   int(attrs["input_zp"]), int(attrs["weight_zp"]), flip=True, geometry=geometry,
                   then_rescale=then_rescale)
    return [out[:, 0]]


def fully_connected(inputs, attrs, then_rescale=None):
    x, = inputs
    N, IC = x.shape
    isa = current_isa()
    args, prepared = _fc_plans.get(attrs, (x.shape, x.dtype, isa), lambda: _fc_plan(attrs, x.shape, x.dtype, isa))
    out = _conv_nd(x.reshape(N, 1, 1, 1, IC), *args, then_rescale=then_rescale, prepared=prepared)
    return [out.reshape(N, args[0].shape[0])]


# per FULLY_CONNECTED attribute mapping and input (shape, dtype, ISA), as _conv2d_plans: a
# 512 -> 1000 layer's kernel takes a few microseconds, its per-call Python as much again
_fc_plans = PerAttrs(1024)


def _fc_plan(attrs, shape: tuple, dtype: np.dtype, isa):
    w = attrs["weight"]
    args = (w.reshape(w.shape[0], 1, w.shape[1]), w, (1, 1, 1), ((0, 0),) * 3, (1, 1, 1), (1, 1, 1),
            attrs["bias"], int(attrs["input_zp"]), int(attrs["weight_zp"]))
    return args, _int8_plan(args, (shape[0], 1, 1, shape[1]), dtype, isa)


def matmul(inputs, attrs, then_rescale=None):
    a, b = inputs
    a_zp, b_zp = int(attrs["A_zp"]), int(attrs["B_zp"])
    N, H, C = a.shape
    W = b.shape[2]
    if then_rescale is not None and a.dtype != np.int8:
        raise NeedsReference
    if a.dtype == np.int16:
        if a_zp or b_zp:    # an ERROR_IF case (zero points only for int8_t): never computed here
            raise NeedsReference
        if not _fits(C, 1 << 15, 1 << 15, None, INT48_MAX):
            raise NeedsReference
        g = _conv_geometry((1, 1, H, 1), (1, 1, 1), ((0, 0),) * 3, (1, 1, 1), (1, 1, 1), C + C % 2)
        out = np.empty((N, H, W), dtype=np.int64)
        isa = current_isa()
        for n in range(N):
            wt = _even_taps(b[n].T, 1, C)
            out[n] = _gemm_i16(a[n].reshape(1, 1, H, 1, C), g, wt, None, _i16_packed(isa, wt, split=True)).reshape(H, W)
        return [out]
    isa = current_isa()
    bound_ok, rows = _matmul_plans.get(attrs, (a.shape, b.shape), lambda: _matmul_plan(N, H, C, a_zp, b_zp))
    if not bound_ok:
        raise NeedsReference
    requant = _requant(then_rescale, W)
    out = np.empty((N * H, W), dtype=np.int32 if requant is None else requant[0])
    # every batch in one kernel call, the operands prepared in C (qsim/kernels/tosa_ops.pyx
    # matmul_i8): per-call Python and numpy dominated attention-sized products
    # ([8,128,64] x [8,64,128])
    a, b = np.ascontiguousarray(a, dtype=np.int8), np.ascontiguousarray(b, dtype=np.int8)
    packed = None if b.flags.writeable else packed_for(b, ("matmul", isa), lambda: _tosa_ops.pack_matrices_kn(
        isa.gemm_code, b))
    if _tosa_ops.matmul_i8(isa.code, isa.gemm_code, a, b, a_zp, b_zp, rows, out, split_count(N * H),
                           None if requant is None else requant[1], packed):
        raise NeedsReference
    return [out.reshape(N, H, W)]


# per MATMUL attribute mapping and operand shapes: the static overflow bound (it depends only on
# K and the zero points) and the rows of the activation buffer, worked out once (the bound's
# numpy was a tenth of an attention-sized call)
_matmul_plans = PerAttrs(1024)


def _matmul_plan(N: int, H: int, C: int, a_zp: int, b_zp: int):
    bound_ok = _fits(C, _max_abs_offset(-128, 127, a_zp), _max_abs_offset(-128, 127, b_zp), None, INT32_MAX)
    rows = np.arange(N * H, dtype=np.int64) * _round4(C)
    rows.flags.writeable = False
    return bound_ok, rows
