"""The float convolution's GEMM, out[b, g*m + i] = w[g, i] @ im2col(x)[b, g] (+ bias, + the
relu/clamp fused after it), on the compiled kernel of kernels/float_gemm.h.

Bits: every output element is one fma chain in k order (then + bias as a float32 add, then
numpy's maximum/minimum), so the result depends on none of the choices made here: the task
cut (blocking), the thread count, the batch a sample is in, packing or reading the columns in
place (direct_columns), or the ISA path (vfmadd and fmaf round alike). The tests hold all of
these bit for bit, and the sums within K * eps32 * sum |w x| of float64.

Why a kernel of our own rather than numpy's BLAS (OpenBLAS, used here before): its sgemm picks
kernels by the matrix sizes, so a column's bits depended on the tiles (fixed by shape to stay
reproducible, at the cost of speed); each tile needed its im2col built and a GIL hand-off; its
threads spin while waiting. The kernel is near the core's FMA peak on large tiles, packs the
im2col straight from the input (or reads it in place at stride 1), applies the epilogue in
registers, and runs a whole layer per thread in one call without the GIL.
"""
from __future__ import annotations

import collections
import functools
import math
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from ...kernels.cpu_features import current_isa
from ...kernels.extensions import extension
from ...numerics import ceil_div
from ...threads import split_count, thread_count
from .bounds import bounded

_float_ops = extension("_float_ops")   # raises KernelsUnavailableError when missing or broken

# the compiled GEMM's panels (kernels/float_gemm.h): 8 rows of weights, 48 pixels of columns
GEMM_ROWS, GEMM_COLS, GEMM_KC = 8, 48, 256
B_BLOCK_FLOATS = 1 << 18     # packed columns of one task at most (1 MB: stays in the L2 cache)


def conv_gemm(w: np.ndarray, cols: np.ndarray, bias: np.ndarray | None, dtype: np.dtype,
              bound: tuple | None = None, bound_only: bool = False) -> tuple[np.ndarray | None, np.ndarray | None]:
    """w [g][m][K], cols [batch][g][K][X] (the im2col), bias [g*m] or None: returns out
    [batch][g*m][X] in `dtype`, and with bound = (lo, hi) also minimum(maximum(out, lo), hi)
    (hi None: maximum only), else None. float32 runs the compiled GEMM (the columns as a 1x1
    convolution of a [g*K][1][X] image), with the bound applied to each tile in the cache.
    bound_only (with a bound): only the bounded result is wanted: (None, bounded), made in
    the product's own buffer (the same values, one array written); the numpy path for other
    dtypes still returns both."""
    g, m, K = w.shape
    batch, X = cols.shape[0], cols.shape[3]
    if X == 0 or m == 0 or K == 0 or dtype != np.float32 or (bias is not None and bias.dtype != dtype):
        out = np.empty((batch, g * m, X), dtype=dtype)
        _numpy_gemm(w, cols, bias, out)
        return _unbounded_and_bounded(out, None, bound, bound_only, tiles_bounded=False)
    image = np.ascontiguousarray(cols, dtype=np.float32).reshape(batch, g * K, 1, X)
    return conv_im2col_gemm(image, w, (1, 1), (1, 1), (1, 1), (0, 0), (1, X), bias, bound, bound_only)


def _unbounded_and_bounded(out, y, bound, bound_only, tiles_bounded: bool):
    """(out, y) as conv_gemm returns them. tiles_bounded: the kernel applied the bound (into y,
    or with bound_only into out itself); else out and numpy's bounded(out)."""
    if bound is None:
        return out, None
    if not tiles_bounded:
        return out, bounded(out, *bound)
    return (None, out) if bound_only else (out, y)


@functools.lru_cache(maxsize=1024)
def blocking(batch: int, g: int, m: int, K: int, N: int, threads: int) -> tuple[int, int, int]:
    """(nblk, ppb, msplit): the layer's tasks, batch * g * nblk * msplit of them, each ppb pixel
    panels of one sample and group and 1/msplit of its weight panels. Chosen for the cache and
    to share the work evenly between the threads; the results do not depend on it (every
    output is one fma chain in k order, kernels/float_gemm.h)."""
    panels = ceil_div(N, GEMM_COLS)
    most = max(1, B_BLOCK_FLOATS // (min(K, GEMM_KC) * GEMM_COLS))
    nblk = ceil_div(panels, most)
    msplit = 1
    units = batch * g * nblk
    if threads > 1 and units % threads and units < 4 * threads:
        if panels >= 4 * threads:      # enough pixels: split them (each thread packs its own)
            nblk = ceil_div(nblk, threads) * threads
        else:                          # few pixels (7x7, 14x14): split the output channels
            msplit = max(1, min(ceil_div(m, GEMM_ROWS), threads // math.gcd(threads, units)))
    return nblk, ceil_div(panels, nblk), msplit


def pack_weights(w: np.ndarray) -> np.ndarray:
    """w [g][m][K] float32 in the GEMM's panels of 8 rows (kernels/float_gemm.h), both threads."""
    g, m, K = w.shape
    wc = np.ascontiguousarray(w, dtype=np.float32)
    panels = g * ceil_div(m, GEMM_ROWS)
    packed = np.empty(panels * K * GEMM_ROWS, dtype=np.float32)
    _float_ops.gemm_pack_a_f32(wc, packed, 0, panels, split_count(panels, min_rows=8))
    return packed


# Packed weights of the arrays that own them: a model runs the same weights on every inference
# and packing ResNet-18's 11.7 M took ~10 ms of a 60 ms inference. An entry lives as long as the
# array that owns the data (weakref) and is looked up by the view's address, shape and strides;
# FINGERPRINT values spread over the weights are compared on each use, so weights rewritten in
# place (qsim never does; a user might) are packed again rather than read stale. At most
# PACKED_CACHE_BYTES are kept, the least recently used dropped first: a pipeline that holds
# several float graphs keeps the packs of the one it is running, not a copy of every model's
# weights. The bound fits ResNet-18's conv weights (44.7 MB packed) and is what the cache costs
# in peak memory (the ResNet-18 quantize job: 528 MB without it, 607 MB with it).
PACKED_CACHE_BYTES = 48 << 20
FINGERPRINT = 64
_packed: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
_packed_bytes = 0


def _owner(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


@functools.lru_cache(maxsize=256)
def _sample_at(size: int) -> np.ndarray:
    return np.linspace(0, size - 1, min(FINGERPRINT, size)).astype(np.intp)


def _fingerprint(w: np.ndarray) -> bytes:
    flat = w.reshape(-1)
    return flat[_sample_at(flat.size)].tobytes()


def _forget(key: tuple) -> None:
    global _packed_bytes
    entry = _packed.pop(key, None)
    if entry is not None:
        _packed_bytes -= entry[2].nbytes


def packed_weights(w: np.ndarray) -> np.ndarray:
    """pack_weights(w), from the cache when these float32 weights were packed before."""
    global _packed_bytes
    if w.dtype != np.float32:
        return pack_weights(w)
    owner = _owner(w)
    key = (id(owner), w.__array_interface__["data"][0], w.shape, w.strides)
    hit = _packed.get(key)
    if hit is not None and hit[0]() is owner and hit[1] == _fingerprint(w):
        _packed.move_to_end(key)
        return hit[2]
    _forget(key)
    packed = pack_weights(w)
    if packed.nbytes > PACKED_CACHE_BYTES:
        return packed
    try:
        ref = weakref.ref(owner, lambda _, k=key: _forget(k))
    except TypeError:                    # an array that takes no weak reference: not cached
        return packed
    _packed[key] = (ref, _fingerprint(w), packed)
    _packed_bytes += packed.nbytes
    while _packed_bytes > PACKED_CACHE_BYTES:
        _forget(next(iter(_packed)))
    return packed


class PackedFor:
    """The packed weights of one op's weight array, found again without packed_weights' lookup
    (its key and LRU update took ~8 us a conv): weak references to the array and to its packs
    in the cache, and the fingerprint taken when they were packed (a rewrite in place is still
    noticed). When the cache has dropped the packs, packed_weights packs them again."""

    def __init__(self):
        self._entry = None

    def get(self, w: np.ndarray, w3: np.ndarray) -> np.ndarray:
        """The packs of w3 (a [g][m][K] view of the op's weight array w)."""
        entry = self._entry
        if entry is not None and entry[0]() is w:
            packed = entry[2]()
            if packed is not None and entry[1] == _fingerprint(w3):
                return packed
        packed = packed_weights(w3)
        try:
            self._entry = (weakref.ref(w), _fingerprint(w3), weakref.ref(packed))
        except TypeError:
            self._entry = None
        return packed


_local = threading.local()


def _scratch(floats: int, threads: int) -> np.ndarray:
    """This Python thread's packing buffer for a kernel call on `threads` pool threads that each
    need `floats` (kept: ~1 MB per thread; another Python thread running floats keeps its own)."""
    need = threads * _float_ops.scratch_per_thread(floats)
    buf = getattr(_local, "scratch", None)
    if buf is None or buf.size < need:
        buf = _local.scratch = np.empty(need, dtype=np.float32)
    return buf


def conv_im2col_gemm(x: np.ndarray, w: np.ndarray, kernel, stride, dilation, before, out_size,
                     bias: np.ndarray | None, bound: tuple | None = None, bound_only: bool = False,
                     packed: np.ndarray | None = None):
    """The 2-D float32 convolution on the compiled GEMM, its im2col packed straight from x
    (never the whole [C*KH*KW][OH*OW] matrix) or, at stride 1, read in place (direct_columns):
    x [batch][g*fc][H][W] (contiguous), w [g][m][fc*KH*KW]. Returns (out [batch][g*m][OH*OW],
    the bounded out or None) as conv_gemm does (bound_only too). The threads take whole tasks
    (blocking()) in one call each. packed: pack_weights(w) when the caller has it."""
    layer = gemm_layer(x.shape, w.shape, tuple(kernel), tuple(stride), tuple(dilation), tuple(before),
                       tuple(out_size), None if bound is None else tuple(bound), bool(bound_only), thread_count())
    return layer.run(x, w, bias, packed)


@functools.lru_cache(maxsize=1024)
def gemm_layer(x_shape: tuple, w_shape: tuple, kernel: tuple, stride: tuple, dilation: tuple, before: tuple,
               out_size: tuple, bound: tuple | None, bound_only: bool, threads: int) -> "GemmLayer":
    """The GemmLayer of these shapes, bound and thread count (cached: a model asks for the same
    few dozen on every inference)."""
    return GemmLayer(x_shape, w_shape, kernel, stride, dilation, before, out_size, bound, bound_only, threads)


class GemmLayer:
    """What conv_im2col_gemm works out from the shapes, the bound and the thread count alone,
    made once, so that a call only allocates, finds its columns and runs the kernel (the
    working out was most of the Python of a small layer's call)."""

    def __init__(self, x_shape, w_shape, kernel, stride, dilation, before, out_size, bound, bound_only, threads):
        self.g, self.m, self.K = w_shape
        self.batch = x_shape[0]
        self.kernel, self.stride, self.dilation, self.before, self.out_size = kernel, stride, dilation, before, out_size
        (KH, KW), (OH, OW) = kernel, out_size
        self.OH, self.OW, self.N = OH, OW, OH * OW
        self.empty = self.batch * self.g * self.m * self.N == 0 or self.K == 0
        self.bound, self.bound_only = bound, bound_only
        self.mode = 0 if bound is None else (2 if bound_only else 1)
        self.lo, self.hi = (None, None) if bound is None else (float(bound[0]),
                                                               None if bound[1] is None else float(bound[1]))
        self.geometry = (KH, KW, stride[0], stride[1], dilation[0], dilation[1], before[0], before[1])
        self.threads = threads
        self.gather = None
        if OW <= GATHER_MAX_WIDTH and grid_width(kernel, stride, dilation, out_size) is None and not self.empty:
            self.gather = gather_table(x_shape[2:], kernel, stride, dilation, before, out_size)

    def run(self, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, packed: np.ndarray | None = None):
        g, m, K, batch, N, bound, bound_only = self.g, self.m, self.K, self.batch, self.N, self.bound, self.bound_only
        if self.empty:
            out = np.empty((batch, g * m, N), dtype=np.float32)
            out[...] = 0 if bias is None else bias.reshape(1, g * m, 1)
            y = None if bound is None or bound_only else np.empty_like(out)
            if bound is not None:
                (y if y is not None else out)[...] = bounded(out, *bound)
            return _unbounded_and_bounded(out, y, bound, bound_only, tiles_bounded=True)
        KH, KW = self.kernel
        OH, OW = self.OH, self.OW
        direct = direct_columns(x, K // (KH * KW), self.kernel, self.stride, self.dilation, self.before,
                                self.out_size)
        width = OW if direct is None else direct[3]           # the pixel grid's row: OW or wider
        call = _gemm_call(batch, g, m, K, OH, width, direct is None, self.threads)
        out = np.empty((batch, g * m, call.Nd), dtype=np.float32)
        y = None if bound is None or bound_only else np.empty_like(out)
        if packed is None:
            packed = packed_weights(w)
        bc = None if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
        isa = current_isa().code
        shared = None
        if call.prepack_threads:
            shared = np.empty(K * call.ppb * GEMM_COLS, dtype=np.float32)
            _float_ops.gemm_prepack_f32(isa, x, *self.geometry, OW, N, shared, 0, call.kblocks,
                                        _scratch(call.floats, call.prepack_threads), call.prepack_threads,
                                        self.gather)
        cols, plane, offsets = (None, 0, None) if direct is None else direct[:3]
        _float_ops.conv_gemm_f32(isa, x, g, m, *self.geometry, packed, bc, out, y, width, self.mode, self.lo, self.hi,
                                 call.nblk, call.ppb, call.msplit, 0, call.tasks, _scratch(call.floats, call.threads),
                                 shared, cols, offsets, plane, call.threads, self.gather if direct is None else None)
        if width != OW:            # drop the grid's extra columns (they read the padding's next row)
            out = _planes_copy(out.reshape(batch * g * m, OH, width)[..., :OW]).reshape(batch, g * m, N)
            if y is not None:
                y = _planes_copy(y.reshape(batch * g * m, OH, width)[..., :OW]).reshape(batch, g * m, N)
        return _unbounded_and_bounded(out, y, bound, bound_only, tiles_bounded=True)


@dataclass(frozen=True)
class _GemmCall:
    """How conv_im2col_gemm cuts one layer's work, worked out from the shapes and the thread
    count alone (see _gemm_call)."""
    Nd: int                # pixels of the grid computed (OH * width)
    nblk: int
    ppb: int
    msplit: int            # blocking()
    floats: int            # scratch floats one thread needs
    kblocks: int           # k blocks of the shared columns
    prepack_threads: int   # > 0: the columns are packed once, shared by the threads splitting the rows
    tasks: int
    threads: int           # pool threads of the GEMM call


@functools.lru_cache(maxsize=1024)
def _gemm_call(batch: int, g: int, m: int, K: int, OH: int, width: int, packing: bool, threads: int) -> _GemmCall:
    """The call's cut, cached: a model asks for the same few dozen on every inference, and
    working them out per call was a tenth of EfficientNet-Lite0's Python time per conv."""
    Nd = OH * width
    nblk, ppb, msplit = blocking(batch, g, m, K, Nd, threads)
    kblocks = ceil_div(K, GEMM_KC)
    # the threads split the rows of one block of pixels (7x7, 14x14): its columns are packed
    # once, each thread a share of the k blocks, instead of once per thread
    shared = packing and msplit > 1 and batch * g * nblk == 1
    prepack_threads = max(1, min(threads, kblocks)) if shared else 0
    tasks = batch * g * nblk * msplit
    return _GemmCall(Nd, nblk, ppb, msplit, _float_ops.gemm_scratch_floats(K, ppb), kblocks, prepack_threads,
                     tasks, max(1, min(threads, tasks)))


def _planes_copy(src: np.ndarray, dst: np.ndarray | None = None) -> np.ndarray:
    """dst[p] = src[p] for the planes p of [P][rows][cols] float32 views with contiguous rows (a
    new contiguous dst when None), the planes split over the compiled pool's threads (a copy is
    exact)."""
    if dst is None:
        dst = np.empty(src.shape, dtype=src.dtype)
    if src.strides[2] != 4 or dst.strides[2] != 4:     # rows of one column may have any stride
        np.copyto(dst, src)
        return dst
    _float_ops.copy_planes_f32(src, dst, split_count(src.shape[0], max(1, COPY_SPLIT_ELEMENTS // max(1, src[0].size))))
    return dst


COPY_SPLIT_ELEMENTS = 1 << 14      # at least this many floats per part (a part starts in ~2 us)


GATHER_MAX_WIDTH = 16      # output rows this short pack their columns by the gather table
GATHER_MAX_ENTRIES = 1 << 20


def gather_table(plane_shape, kernel, stride, dilation, before, out_size) -> np.ndarray | None:
    """The packing's gather table of a layer (kernels/float_gemm.h qsim_gemm_geo): row t = ky*KW
    + kx holds, for each output pixel n = oy*OW + ox, the element iy*W + ix of an input plane
    that tap reads (iy = oy*sy + ky*dy - pt, ix likewise), -1 where that is padding; rows padded
    with -1 to a multiple of 16. Read-only (the layer keeps it). None when it would be large
    (wide images pack fast by their pixel runs anyway)."""
    (H, W), (KH, KW), (OH, OW) = plane_shape, kernel, out_size
    N = OH * OW
    stride_n = (N + 15) // 16 * 16
    if KH * KW * stride_n > GATHER_MAX_ENTRIES or H * W >= 1 << 31:
        return None
    iy = np.arange(OH)[None, :] * stride[0] + np.arange(KH)[:, None] * dilation[0] - before[0]   # [KH][OH]
    ix = np.arange(OW)[None, :] * stride[1] + np.arange(KW)[:, None] * dilation[1] - before[1]   # [KW][OW]
    inside = ((iy >= 0) & (iy < H))[:, None, :, None] & ((ix >= 0) & (ix < W))[None, :, None, :]
    at = np.where(inside, iy[:, None, :, None] * W + ix[None, :, None, :], -1)            # [KH][KW][OH][OW]
    table = np.full((KH * KW, stride_n), -1, dtype=np.int32)
    table[:, :N] = at.reshape(KH * KW, N)
    table.flags.writeable = False
    return table.reshape(-1)


def grid_width(kernel, stride, dilation, out_size) -> int | None:
    """The width of direct_columns' pixel grid (OW + (KW-1)*dx), or None where the layer packs
    its columns instead: strides, and grids wider than OW by more than an eighth (3x3 on 14x14
    and 7x7 images: the extra columns would cost more than the packing)."""
    (KH, KW), (OH, OW) = kernel, out_size
    if tuple(stride) != (1, 1):
        return None
    width = OW + (KW - 1) * dilation[1]
    return None if (width - OW) * 8 > OW else width


def direct_columns(x: np.ndarray, fc: int, kernel, stride, dilation, before, out_size):
    """At stride 1 the im2col need not be built: with the input zero-padded into planes whose rows
    are as wide as the pixel grid (width = OW + (KW-1)*dx), tap (ky, kx) of grid pixel n = oy*width
    + ox is plane element n + ky*dy*width + kx*dx, so row k = (c, ky, kx) of the columns is the
    plane of c read from offset ky*dy*width + kx*dx on: the GEMM reads it in place
    (kernels/float_gemm.h, direct). The grid's extra width - OW columns per row are computed and
    dropped. A pointwise conv without padding is its own grid (x itself). fc: input channels per
    group. Returns (flat array, plane size, int64 offsets of a group's fc*KH*KW rows, width), or
    None where packing is the better deal (grid_width)."""
    (KH, KW), (OH, OW) = kernel, out_size
    B, C, H, W = x.shape
    width = grid_width(kernel, stride, dilation, out_size)
    if width is None:
        return None
    dy, dx = dilation
    rows = OH + (KH - 1) * dy
    pt, pl = before
    if KH == KW == 1 and pt == pl == 0 and (H, W) == (OH, OW):
        plane, flat = H * W, x.reshape(-1)
    else:
        plane = rows * width
        # + the last plane's overrun: the grid's last extra columns read up to (KW-1)*dx past it
        flat = np.zeros(B * C * plane + (KW - 1) * dx, dtype=np.float32)
        padded = flat[:B * C * plane].reshape(B, C, rows, width)
        r0, r1 = max(pt, 0), min(rows, pt + H)
        c0, c1 = max(pl, 0), min(width, pl + W)
        if r1 > r0 and c1 > c0:
            _planes_copy(x.reshape(B * C, H, W)[:, r0 - pt:r1 - pt, c0 - pl:c1 - pl],
                         padded.reshape(B * C, rows, width)[:, r0:r1, c0:c1])
    return flat, plane, _row_offsets(fc, KH, KW, dy, dx, plane, width), width


@functools.lru_cache(maxsize=512)
def _row_offsets(fc: int, KH: int, KW: int, dy: int, dx: int, plane: int, width: int) -> np.ndarray:
    """k = (c*KH + ky)*KW + kx -> c*plane + ky*dy*width + kx*dx: where row k of one group's
    columns starts (the GEMM starts each group at its first channel's plane itself). Cached:
    a model asks for the same few dozen on every inference (read-only)."""
    taps = np.add.outer(np.arange(KH) * dy * width, np.arange(KW) * dx).reshape(-1)
    offsets = (np.arange(fc)[:, None] * plane + taps[None, :]).reshape(-1).astype(np.int64)
    offsets.flags.writeable = False
    return offsets


def _numpy_gemm(w: np.ndarray, cols: np.ndarray, bias: np.ndarray | None, out: np.ndarray) -> None:
    """The same products for other dtypes and empty shapes, one sample and group at a time."""
    g, m, _ = w.shape
    for b in range(cols.shape[0]):
        for gi in range(g):
            o = out[b, gi * m:(gi + 1) * m]
            if w.shape[2] == 0:
                o[...] = 0
            else:
                np.matmul(w[gi], cols[b, gi], out=o)
            if bias is not None:
                o += bias[gi * m:(gi + 1) * m].reshape(m, 1)
