# cython: language_level=3
"""Float executor loops that numpy runs far from the machine's speed.

- depthwise_nchw_f32: the depthwise convolution (kernels/float_conv.h), plane by plane on
  NCHW data, any channel multiplier and stride, or (multiplier 1, narrow images) 16 channels
  side by side. Each output element is the conv GEMM's fma chain over the taps in row-major
  kernel order, acc = fma(w0, x0, +0.0), acc = fma(wk, xk, acc), each rounded once (padding
  reads +0.0 and takes its fma too), then + bias (one float32 add): the bits of the numpy
  emulation qsim/runtime/float_ops/fma.py that float_ops.nn._depthwise's loop runs.
- conv_gemm_f32, gemm_pack_a_f32: the convolution's GEMM (kernels/float_gemm.h), its im2col
  packed straight from the input, every output one fma chain in k order, then + bias and a
  following relu/clamp in the same pass (qsim/runtime/float_ops/conv_gemm.py).
- bounded_f32: relu / relu6 / clamp to constants in one pass (qsim/runtime/float_ops/bounds.py).
- channel_affine_f32: batch normalisation's subtract, divide, multiply, add per channel in one
  pass (qsim/runtime/float_ops/nn.py batch_norm).
- max_pool_f32, copy_planes_f32: 2-D max pooling with numpy.maximum's bits, and plane copies
  with any strides (a conv's pixel grid cropped to its output width, an input into its zero
  padding) (kernels/float_pool.h).
Plane, row or element ranges are independent: each entry point runs its range on `threads`
threads of qsim's compiled pool (kernels/task_pool.h) without the GIL, cut into up to 4 parts a
thread that the threads claim one by one; the same bits for any `threads`. Built with
-ffp-contract=off: the only fused multiply-adds are the convs' explicit ones.
"""
cimport cython
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

include "task_pool_client.pxi"


cdef inline int64_t _per_thread(int64_t floats) noexcept nogil:
    """A thread's slice of a shared scratch: whole cache lines, so threads never share one."""
    return (floats + 15) // 16 * 16


def scratch_per_thread(int64_t floats):
    """The floats one thread's scratch slice takes when a kernel needs `floats` (a caller sizes
    scratch as threads * this)."""
    return _per_thread(floats)


cdef inline int _check_threads(int threads, str what) except -1:
    if threads < 1:
        raise ValueError(f"{what}: threads must be at least 1, not {threads}")
    return 0


cdef extern from "float_conv.h" nogil:
    int64_t qsim_dwc_scratch_floats(int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t sy,
                                    int64_t sx, int64_t dy, int64_t dx)
    void qsim_depthwise_cblock_f32(int isa, const float *x, int64_t C, int64_t H, int64_t W, const float *w,
                                   const float *bias, int64_t KH, int64_t KW, int64_t sy, int64_t sx,
                                   int64_t dy, int64_t dx, int64_t pt, int64_t pl, float *out, int64_t OH,
                                   int64_t OW, float *y, float lo, float hi, int has_hi, int bound_only,
                                   float *scratch, int64_t q0, int64_t q1)
    int64_t qsim_dw_scratch_floats(int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t sy,
                                   int64_t sx, int64_t dy, int64_t dx)
    void qsim_depthwise_nchw_f32(int isa, const float *x, int64_t C, int64_t H, int64_t W,
                                 const float *w, const float *bias, int64_t m, int64_t KH, int64_t KW,
                                 int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t pt, int64_t pl,
                                 float *out, int64_t OH, int64_t OW, float *y, float lo, float hi,
                                 int has_hi, int bound_only, float *scratch, int64_t *off, int64_t p0,
                                 int64_t p1)


def depthwise_nchw_f32(int isa, const float[:, :, :, ::1] x, const float[:, :, ::1] w, bias,
                       float[:, :, :, ::1] out, int64_t m, int64_t sy, int64_t sx, int64_t dy,
                       int64_t dx, int64_t pt, int64_t pl, int64_t p0, int64_t p1, y=None, lo=0.0, hi=None,
                       bint bound_only=False, bint channel_blocks=False, int threads=1):
    """Depthwise convolution of NCHW x with w[C*m][KH][KW] (channel multiplier m), plus bias[C*m]
    when bias is not None, into out[B][C*m][OH][OW], output planes b*C*m + oc in [p0, p1)
    (kernels/float_conv.h); given y (like out), also y = minimum(maximum(out, lo), hi) as numpy
    computes it (hi None: maximum only); with bound_only (y None) out gets those bounded values
    instead of the convolution's. channel_blocks (m == 1): the loop that runs 16 channels side by
    side (same bits); [p0, p1) are then work units b * ceil(C / 16) + channel block. The range
    runs on `threads` threads of the pool (each with its own scratch)."""
    cdef int64_t OH = out.shape[2], OW = out.shape[3], KH = w.shape[1], KW = w.shape[2]
    cdef int64_t units = out.shape[0] * ((out.shape[1] + 15) // 16 if channel_blocks else out.shape[1])
    cdef const float[::1] b
    cdef const float *bp = NULL
    cdef float[:, :, :, ::1] yv
    cdef float *yp = NULL
    cdef float lo_f = lo
    cdef float hi_f = 0.0 if hi is None else hi
    cdef int has_hi = hi is not None
    if bound_only and y is not None:
        raise ValueError("depthwise_nchw_f32: bound_only writes the bounded values to out; y must be None")
    if sy < 1 or sx < 1 or dy < 1 or dx < 1:
        raise ValueError(f"depthwise_nchw_f32: stride ({sy}, {sx}) and dilation ({dy}, {dx}) must be positive")
    if not (0 <= p0 <= p1 <= units) or out.shape[1] != x.shape[1] * m or w.shape[0] != out.shape[1] \
            or out.shape[0] != x.shape[0] or (channel_blocks and m != 1):
        raise ValueError("depthwise_nchw_f32: shapes or plane range do not agree")
    if bias is not None:
        b = bias
        if b.shape[0] != out.shape[1]:
            raise ValueError(f"depthwise_nchw_f32: bias has {b.shape[0]} values for {out.shape[1]} channels")
        bp = &b[0]
    if p1 <= p0 or OH == 0 or OW == 0:
        return
    if y is not None:
        yv = y
        if yv.shape[0] != out.shape[0] or yv.shape[1] != out.shape[1] or yv.shape[2] != OH or yv.shape[3] != OW:
            raise ValueError("depthwise_nchw_f32: y must have out's shape")
        yp = &yv[0, 0, 0, 0]
    _check_threads(threads, "depthwise_nchw_f32")
    cdef _DepthwiseCtx c
    c.isa, c.x, c.C, c.H, c.W, c.w, c.bias, c.m = isa, &x[0, 0, 0, 0], x.shape[1], x.shape[2], x.shape[3], &w[0, 0, 0], bp, m
    c.KH, c.KW, c.sy, c.sx, c.dy, c.dx, c.pt, c.pl = KH, KW, sy, sx, dy, dx, pt, pl
    c.out, c.OH, c.OW, c.y, c.lo, c.hi, c.has_hi, c.bound_only = &out[0, 0, 0, 0], OH, OW, yp, lo_f, hi_f, has_hi, bound_only
    c.channel_blocks, c.p0 = channel_blocks, p0
    c.scratch_floats = _per_thread((qsim_dwc_scratch_floats if channel_blocks else qsim_dw_scratch_floats)(
        OH, OW, KH, KW, sy, sx, dy, dx))
    c.offsets = KH * KW + 1
    c.scratch = <float *>malloc(threads * c.scratch_floats * sizeof(float))
    c.off = <int64_t *>malloc(threads * c.offsets * sizeof(int64_t))
    if c.scratch == NULL or c.off == NULL:
        free(c.scratch)
        free(c.off)
        raise MemoryError()
    with nogil:
        _pool_run(_depthwise_part, &c, p1 - p0, qsim_parts_for(p1 - p0, threads), threads)
    free(c.scratch)
    free(c.off)


cdef struct _DepthwiseCtx:
    int isa, has_hi, bound_only, channel_blocks
    const float *x
    const float *w
    const float *bias
    float *out
    float *y
    float *scratch
    int64_t *off
    int64_t C, H, W, m, KH, KW, sy, sx, dy, dx, pt, pl, OH, OW, p0, scratch_floats, offsets
    float lo, hi


cdef void _depthwise_part(void *ctx, int slot, int64_t lo, int64_t hi) noexcept nogil:
    cdef _DepthwiseCtx *c = <_DepthwiseCtx *>ctx
    cdef float *scratch = c.scratch + slot * c.scratch_floats
    if c.channel_blocks:
        qsim_depthwise_cblock_f32(c.isa, c.x, c.C, c.H, c.W, c.w, c.bias, c.KH, c.KW, c.sy, c.sx, c.dy, c.dx,
                                  c.pt, c.pl, c.out, c.OH, c.OW, c.y, c.lo, c.hi, c.has_hi, c.bound_only,
                                  scratch, c.p0 + lo, c.p0 + hi)
    else:
        qsim_depthwise_nchw_f32(c.isa, c.x, c.C, c.H, c.W, c.w, c.bias, c.m, c.KH, c.KW, c.sy, c.sx, c.dy, c.dx,
                                c.pt, c.pl, c.out, c.OH, c.OW, c.y, c.lo, c.hi, c.has_hi, c.bound_only,
                                scratch, c.off + slot * c.offsets, c.p0 + lo, c.p0 + hi)


cdef inline void _bounded_f32(const float *x, float *out, int64_t n, float lo, float hi, bint has_hi) noexcept nogil:
    cdef int64_t i
    cdef float v
    for i in range(n):
        v = x[i]
        v = v if (v > lo or v != v) else lo          # numpy's maximum(v, lo): NaN stays, (-0, +0) -> lo
        if has_hi:
            v = v if (v < hi or v != v) else hi      # numpy's minimum(v, hi)
        out[i] = v


def bounded_f32(const float[::1] x, float[::1] out, float lo, float hi, bint has_hi, int64_t i0, int64_t i1,
                int threads=1):
    """out[i] = minimum(maximum(x[i], lo), hi) for i in [i0, i1), numpy's results (a NaN input
    stays NaN; where two zeros compare equal the bound is taken, as numpy does), one pass, on
    `threads` threads of the pool."""
    if not (0 <= i0 <= i1 <= x.shape[0] and x.shape[0] == out.shape[0]):
        raise ValueError(f"bounded_f32: range [{i0}:{i1}] outside {x.shape[0]} (out {out.shape[0]})")
    _check_threads(threads, "bounded_f32")
    if i1 == i0:
        return
    cdef _BoundedCtx c
    c.x, c.out, c.lo, c.hi, c.has_hi = &x[i0], &out[i0], lo, hi, has_hi
    with nogil:
        _pool_run(_bounded_part, &c, i1 - i0, qsim_parts_for(i1 - i0, threads), threads)


cdef struct _BoundedCtx:
    const float *x
    float *out
    float lo, hi
    bint has_hi


cdef void _bounded_part(void *ctx, int slot, int64_t lo, int64_t hi) noexcept nogil:
    cdef _BoundedCtx *c = <_BoundedCtx *>ctx
    _bounded_f32(c.x + lo, c.out + lo, hi - lo, c.lo, c.hi, c.has_hi)


@cython.cdivision(True)    # IEEE division (x / 0 is inf or nan, as numpy's), no Python zero check
cdef inline void _affine_plane(const float *x, float *out, int64_t n, float m, float s, float g, float b,
                               bint has_g, bint has_b) noexcept nogil:
    """One channel's plane: the four loops keep the loop body free of tests, so each vectorises."""
    cdef int64_t i
    if has_g and has_b:
        for i in range(n):
            out[i] = (x[i] - m) / s * g + b
    elif has_g:
        for i in range(n):
            out[i] = (x[i] - m) / s * g
    elif has_b:
        for i in range(n):
            out[i] = (x[i] - m) / s + b
    else:
        for i in range(n):
            out[i] = (x[i] - m) / s


def channel_affine_f32(const float[:, :, ::1] x, float[:, :, ::1] out, const float[::1] mean,
                       const float[::1] denom, scale, bias, int threads=1):
    """out[o][c][i] = (x[o][c][i] - mean[c]) / denom[c] * scale[c] + bias[c] (scale, bias None:
    that step left out), each operation one float32 rounding in this order (built with
    -ffp-contract=off): numpy's subtract, divide, multiply and add passes of nn.batch_norm, bit
    for bit, in one pass. Planes (o, c) on `threads` threads of the pool."""
    cdef int64_t C = x.shape[1]
    cdef const float[::1] g
    cdef const float[::1] b
    cdef _AffineCtx c
    _check_threads(threads, "channel_affine_f32")
    if out.shape[0] != x.shape[0] or out.shape[1] != C or out.shape[2] != x.shape[2] or \
            mean.shape[0] != C or denom.shape[0] != C:
        raise ValueError("channel_affine_f32: shapes of x, out and the channel vectors do not agree")
    c.g = c.b = NULL
    if scale is not None:
        g = scale
        if g.shape[0] != C:
            raise ValueError("channel_affine_f32: scale has the wrong length")
        c.g = &g[0] if C else NULL
    if bias is not None:
        b = bias
        if b.shape[0] != C:
            raise ValueError("channel_affine_f32: bias has the wrong length")
        c.b = &b[0] if C else NULL
    if x.shape[0] * C * x.shape[2] == 0:
        return
    c.x, c.out, c.m, c.s, c.C, c.n = &x[0, 0, 0], &out[0, 0, 0], &mean[0], &denom[0], C, x.shape[2]
    with nogil:
        _pool_run(_affine_part, &c, x.shape[0] * C, qsim_parts_for(x.shape[0] * C, threads), threads)


cdef struct _AffineCtx:
    const float *x
    float *out
    const float *m
    const float *s
    const float *g
    const float *b
    int64_t C, n


cdef void _affine_part(void *ctx, int slot, int64_t lo, int64_t hi) noexcept nogil:
    cdef _AffineCtx *c = <_AffineCtx *>ctx
    cdef int64_t p, ch
    for p in range(lo, hi):
        ch = p % c.C
        _affine_plane(c.x + p * c.n, c.out + p * c.n, c.n, c.m[ch], c.s[ch],
                      c.g[ch] if c.g != NULL else 1.0, c.b[ch] if c.b != NULL else 0.0,
                      c.g != NULL, c.b != NULL)


cdef extern from "float_gemm.h" nogil:
    ctypedef struct qsim_gemm_geo:
        const float *x
        int64_t C, H, W, KH, KW, sy, sx, dy, dx, pt, pl, OW
        const int32_t *gather
        int64_t gstride
    void qsim_gemm_pack_a(const float *w, int64_t g, int64_t m, int64_t K, float *packed, int64_t q0, int64_t q1)
    int64_t qsim_gemm_scratch_floats(int64_t K, int64_t ppb)
    void qsim_conv_gemm_f32(int isa, const qsim_gemm_geo *geo, int64_t g, int64_t m, int64_t fc,
                            const float *packed, const float *bias, float *out, float *y, int64_t N,
                            int bounded, float lo, float hi, int has_hi, int64_t nblk, int64_t ppb,
                            int64_t msplit, int64_t t0, int64_t t1, const float *prepacked,
                            const float *direct, int64_t dplane, const int64_t *doff, float *scratch)
    void qsim_gemm_prepack(int isa, const qsim_gemm_geo *geo, int64_t K, int64_t npix, int64_t kb0, int64_t kb1,
                           float *dst, int64_t *seg)

GEMM_ROWS = 8           # QSIM_GM: rows of an A panel
GEMM_COLS = 48          # QSIM_GN: pixels of a B panel


cdef int _set_gather(qsim_gemm_geo *geo, gather, int64_t N, const char *who) except -1:
    """geo's gather table (None: the pixel runs) after checking that every read it asks for
    stays inside a plane: [KH*KW][gstride] int32, gstride >= N rounded up to 16, entries -1 or
    plane elements. (The layer's table is made once and kept; checking it costs a pass over it,
    a few microseconds against the layer's packing.)"""
    cdef const int32_t[::1] gv
    cdef int64_t taps = geo.KH * geo.KW, i, HW = geo.H * geo.W, gstride
    geo.gather, geo.gstride = NULL, 0
    if gather is None:
        return 0
    gv = gather
    gstride = gv.shape[0] // taps if taps else 0
    if gstride * taps != gv.shape[0] or gstride < (N + 15) // 16 * 16:
        raise ValueError(f"{who.decode()}: the gather table has {gv.shape[0]} entries, not {taps} rows of "
                         f"at least {(N + 15) // 16 * 16}")
    for i in range(gv.shape[0]):
        if gv[i] < -1 or gv[i] >= HW:
            raise ValueError(f"{who.decode()}: gather table entry {gv[i]} outside the {HW}-element plane")
    geo.gather, geo.gstride = &gv[0], gstride
    return 0


def gemm_pack_a_f32(const float[:, :, ::1] w, float[::1] packed, int64_t q0, int64_t q1, int threads=1):
    """packed[gi][p][k][8] = w[gi][p*8 + i][k] (0.0 past the last row), panels q = gi*ceil(m/8) + p
    in [q0, q1) (kernels/float_gemm.h), on `threads` threads of the pool."""
    cdef int64_t g = w.shape[0], m = w.shape[1], K = w.shape[2], mp = (w.shape[1] + 7) // 8
    if packed.shape[0] != g * mp * K * 8 or not (0 <= q0 <= q1 <= g * mp):
        raise ValueError(f"gemm_pack_a_f32: packed has {packed.shape[0]} floats for {g} x {m} x {K}"
                         f" or panels [{q0}:{q1}] out of range")
    _check_threads(threads, "gemm_pack_a_f32")
    if q1 == q0 or K == 0:
        return
    cdef _PackCtx c
    c.w, c.g, c.m, c.K, c.packed, c.q0 = &w[0, 0, 0], g, m, K, &packed[0], q0
    with nogil:
        _pool_run(_pack_part, &c, q1 - q0, qsim_parts_for(q1 - q0, threads), threads)


cdef struct _PackCtx:
    const float *w
    float *packed
    int64_t g, m, K, q0


cdef void _pack_part(void *ctx, int slot, int64_t lo, int64_t hi) noexcept nogil:
    cdef _PackCtx *c = <_PackCtx *>ctx
    qsim_gemm_pack_a(c.w, c.g, c.m, c.K, c.packed, c.q0 + lo, c.q0 + hi)


def conv_gemm_f32(int isa, const float[:, :, :, ::1] x, int64_t g, int64_t m, int64_t KH, int64_t KW,
                  int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t pt, int64_t pl,
                  const float[::1] packed, bias, float[:, :, ::1] out, y, int64_t OW, int bounded, lo, hi,
                  int64_t nblk, int64_t ppb, int64_t msplit, int64_t t0, int64_t t1, float[::1] scratch,
                  prepacked=None, direct=None, doff=None, int64_t dplane=0, int threads=1, gather=None):
    """Tasks [t0, t1) of the conv GEMM out[b][gi*m + r][p] = sum_k w * im2col(x) (+ bias, then
    with bounded 1 y = relu/clamp(out), 2 out = relu/clamp(out)), kernels/float_gemm.h: fma
    chains in k order, so the bits depend on none of the blocking or task parameters.
    The tasks run on `threads` threads of the pool. scratch: at least threads *
    scratch_per_thread(gemm_scratch_floats(K, ppb)) floats, this call's alone, a slice per thread
    (the caller keeps it: a fresh megabyte per call cost its page faults every time). prepacked:
    the B panels from gemm_prepack_f32 (batch * g * nblk == 1 only), shared by all tasks. direct (a
    flat float32 array), doff (int64 [K]), dplane (stride 1 convolutions): no packing; row k of
    pixel n of sample b, group gi is direct[(b*C + gi*fc)*dplane + doff[k] + n] (x itself is
    then ignored but for its shape). gather: the layer's gather table (conv_gemm.py gather_table,
    the layout of qsim_gemm_geo), which packs the columns of short output rows faster."""
    cdef int64_t B = x.shape[0], C = x.shape[1], fc = x.shape[1] // g if g > 0 else 0
    cdef int64_t N = out.shape[2], K = fc * KH * KW, mp = (m + 7) // 8
    cdef qsim_gemm_geo geo
    cdef const float[::1] bv
    cdef const float *bp = NULL
    cdef float[:, :, ::1] yv
    cdef float *yp = NULL
    cdef float lo_f = 0.0 if lo is None else lo
    cdef float hi_f = 0.0 if hi is None else hi
    cdef int has_hi = hi is not None
    if g <= 0 or C != g * fc or out.shape[0] != B or out.shape[1] != g * m or packed.shape[0] != g * mp * K * 8 \
            or KH <= 0 or KW <= 0 or sy < 1 or sx < 1 or dy < 1 or dx < 1 or OW <= 0 or N % OW:
        raise ValueError("conv_gemm_f32: shapes, packed weights or geometry do not agree")
    if not (0 <= t0 <= t1 <= B * g * nblk * msplit) or nblk < 1 or ppb < 1 or msplit < 1 or msplit > max(mp, 1) \
            or nblk * ppb * 48 < N:
        raise ValueError(f"conv_gemm_f32: tasks [{t0}:{t1}] or blocking ({nblk}, {ppb}, {msplit}) do not fit")
    if bias is not None:
        bv = bias
        if bv.shape[0] != g * m:
            raise ValueError(f"conv_gemm_f32: bias has {bv.shape[0]} values for {g * m} channels")
        bp = &bv[0] if g * m else NULL
    if bounded == 1:
        yv = y
        if yv.shape[0] != B or yv.shape[1] != g * m or yv.shape[2] != N:
            raise ValueError("conv_gemm_f32: y must have out's shape")
        yp = &yv[0, 0, 0]
    elif bounded not in (0, 2):
        raise ValueError(f"conv_gemm_f32: bounded is 0, 1 or 2, not {bounded}")
    if t1 == t0 or N == 0 or m == 0 or K == 0:
        return
    geo.x = &x[0, 0, 0, 0]
    geo.C, geo.H, geo.W, geo.KH, geo.KW = C, x.shape[2], x.shape[3], KH, KW
    geo.sy, geo.sx, geo.dy, geo.dx, geo.pt, geo.pl, geo.OW = sy, sx, dy, dx, pt, pl, OW
    _set_gather(&geo, gather, N, b"conv_gemm_f32")
    cdef float[::1] pre
    cdef const float *pp = NULL
    if prepacked is not None:
        pre = prepacked
        if B * g * nblk != 1 or pre.shape[0] < K * ppb * 48:
            raise ValueError("conv_gemm_f32: prepacked columns are for one sample, group and block of all K")
        pp = &pre[0]
    cdef const float[::1] dv
    cdef const int64_t[::1] ov
    cdef const float *dp = NULL
    cdef const int64_t *op = NULL
    cdef int64_t most = 0, i
    if direct is not None:
        dv = direct
        ov = doff
        if ov.shape[0] != K or dplane < 0:
            raise ValueError("conv_gemm_f32: doff needs one offset per k")
        for i in range(K):
            if ov[i] < 0:
                raise ValueError("conv_gemm_f32: negative column offset")
            most = max(most, ov[i])
        # pixels [0, N) of each row are read, no more (the tail kernel reads the last columns alone)
        if (B * C - fc) * dplane + most + N > dv.shape[0]:
            raise ValueError("conv_gemm_f32: direct columns would be read past the array")
        dp = &dv[0]
        op = &ov[0]
    _check_threads(threads, "conv_gemm_f32")
    cdef _GemmCtx c
    c.scratch_floats = _per_thread(qsim_gemm_scratch_floats(K, ppb))
    if scratch.shape[0] < threads * c.scratch_floats:
        raise ValueError(f"conv_gemm_f32: scratch has {scratch.shape[0]} floats, "
                         f"{threads * c.scratch_floats} needed for {threads} threads")
    c.isa, c.geo, c.g, c.m, c.fc, c.packed, c.bias = isa, &geo, g, m, fc, &packed[0], bp
    c.out, c.y, c.N, c.bounded, c.lo, c.hi, c.has_hi = &out[0, 0, 0], yp, N, bounded, lo_f, hi_f, has_hi
    c.nblk, c.ppb, c.msplit, c.t0, c.prepacked = nblk, ppb, msplit, t0, pp
    c.direct, c.dplane, c.doff, c.scratch = dp, dplane, op, &scratch[0]
    with nogil:
        _pool_run(_gemm_part, &c, t1 - t0, qsim_parts_for(t1 - t0, threads), threads)


cdef struct _GemmCtx:
    int isa, bounded, has_hi
    const qsim_gemm_geo *geo
    const float *packed
    const float *bias
    const float *prepacked
    const float *direct
    const int64_t *doff
    float *out
    float *y
    float *scratch
    int64_t g, m, fc, N, nblk, ppb, msplit, t0, dplane, scratch_floats
    float lo, hi


cdef void _gemm_part(void *ctx, int slot, int64_t lo, int64_t hi) noexcept nogil:
    cdef _GemmCtx *c = <_GemmCtx *>ctx
    qsim_conv_gemm_f32(c.isa, c.geo, c.g, c.m, c.fc, c.packed, c.bias, c.out, c.y, c.N, c.bounded, c.lo, c.hi,
                       c.has_hi, c.nblk, c.ppb, c.msplit, c.t0 + lo, c.t0 + hi, c.prepacked, c.direct, c.dplane,
                       c.doff, c.scratch + slot * c.scratch_floats)


def gemm_prepack_f32(int isa, const float[:, :, :, ::1] x, int64_t KH, int64_t KW, int64_t sy, int64_t sx,
                     int64_t dy, int64_t dx, int64_t pt, int64_t pl, int64_t OW, int64_t npix, float[::1] dst,
                     int64_t kb0, int64_t kb1, float[::1] scratch, int threads=1, gather=None):
    """The B panels of k blocks [kb0, kb1) of sample 0's whole im2col (all C*KH*KW rows, pixels
    [0, npix)) into dst (K * ceil(npix / 48) * 48 floats), for conv_gemm_f32's prepacked; in
    `threads` threads of the pool, scratch holding threads * scratch_per_thread(gemm_scratch_floats(K,
    ceil(npix / 48))) floats; gather as conv_gemm_f32's."""
    cdef int64_t K = x.shape[1] * KH * KW, npan = (npix + 47) // 48
    cdef qsim_gemm_geo geo
    _check_threads(threads, "gemm_prepack_f32")
    if x.shape[0] < 1 or dst.shape[0] < K * npan * 48 or not (0 <= kb0 <= kb1 <= (K + 255) // 256) \
            or KH <= 0 or KW <= 0 or sy < 1 or sx < 1 or dy < 1 or dx < 1 or OW <= 0 or npix < 1 \
            or scratch.shape[0] < threads * _per_thread(qsim_gemm_scratch_floats(K, npan)):
        raise ValueError("gemm_prepack_f32: shapes, geometry, k blocks or scratch do not agree")
    geo.x = &x[0, 0, 0, 0]
    geo.C, geo.H, geo.W, geo.KH, geo.KW = x.shape[1], x.shape[2], x.shape[3], KH, KW
    geo.sy, geo.sx, geo.dy, geo.dx, geo.pt, geo.pl, geo.OW = sy, sx, dy, dx, pt, pl, OW
    _set_gather(&geo, gather, npix, b"gemm_prepack_f32")
    if kb1 <= kb0:
        return
    cdef _PrepackCtx c
    c.isa, c.geo, c.K, c.npix, c.kb0, c.dst = isa, &geo, K, npix, kb0, &dst[0]
    c.scratch, c.scratch_floats = &scratch[0], _per_thread(qsim_gemm_scratch_floats(K, npan))
    with nogil:
        _pool_run(_prepack_part, &c, kb1 - kb0, qsim_parts_for(kb1 - kb0, threads), threads)


cdef struct _PrepackCtx:
    int isa
    const qsim_gemm_geo *geo
    float *dst
    float *scratch
    int64_t K, npix, kb0, scratch_floats


cdef void _prepack_part(void *ctx, int slot, int64_t lo, int64_t hi) noexcept nogil:
    cdef _PrepackCtx *c = <_PrepackCtx *>ctx
    qsim_gemm_prepack(c.isa, c.geo, c.K, c.npix, c.kb0 + lo, c.kb0 + hi, c.dst,
                      <int64_t *>(c.scratch + slot * c.scratch_floats))


def gemm_scratch_floats(int64_t K, int64_t ppb):
    """The floats of scratch conv_gemm_f32 needs for K and ppb pixel panels per task."""
    return qsim_gemm_scratch_floats(K, ppb)


cdef extern from "float_pool.h" nogil:
    void qsim_max_pool_f32(int isa, const float *x, int64_t H, int64_t W, float *out, int64_t OH, int64_t OW,
                           int64_t KH, int64_t KW, int64_t sy, int64_t sx, int64_t dy, int64_t dx,
                           int64_t pt, int64_t pl, int64_t p0, int64_t p1)
    void qsim_copy_planes_f32(const float *src, int64_t src_plane, int64_t src_row, float *dst, int64_t dst_plane,
                              int64_t dst_row, int64_t rows, int64_t cols, int64_t p0, int64_t p1)


cdef struct _PoolCtx:
    const float *x
    float *out
    int64_t H, W, OH, OW, KH, KW, sy, sx, dy, dx, pt, pl
    int isa


cdef void _max_pool_part(void *ctx, int slot, int64_t lo, int64_t hi) noexcept nogil:
    cdef _PoolCtx *c = <_PoolCtx *>ctx
    qsim_max_pool_f32(c.isa, c.x, c.H, c.W, c.out, c.OH, c.OW, c.KH, c.KW, c.sy, c.sx, c.dy, c.dx, c.pt, c.pl, lo, hi)


def max_pool_f32(const float[:, :, ::1] x, float[:, :, ::1] out, int64_t KH, int64_t KW, int64_t sy, int64_t sx,
                 int64_t dy, int64_t dx, int64_t pt, int64_t pl, int threads=1, int isa=0):
    """out[p][oy][ox] = the max of x[p][sy*oy + dy*ky - pt][sx*ox + dx*kx - pl] over the taps
    (-inf outside x), as the numpy reference takes it tap by tap in row-major order with
    numpy.maximum (NaN propagates; of equal values the later tap's is kept), planes on `threads`
    threads of the pool (kernels/float_pool.h); isa: the instruction-set path (every path gives
    the same bits; 0, the portable one, unless the caller names the CPU's)."""
    cdef _PoolCtx c
    _check_threads(threads, "max_pool_f32")
    if out.shape[0] != x.shape[0] or KH < 1 or KW < 1 or sy < 1 or sx < 1 or dy < 1 or dx < 1:
        raise ValueError("max_pool_f32: planes, window, stride or dilation do not agree")
    if out.shape[0] * out.shape[1] * out.shape[2] == 0:
        return
    c.x, c.out, c.H, c.W, c.OH, c.OW = &x[0, 0, 0] if x.shape[1] * x.shape[2] else NULL, &out[0, 0, 0], \
        x.shape[1], x.shape[2], out.shape[1], out.shape[2]
    c.KH, c.KW, c.sy, c.sx, c.dy, c.dx, c.pt, c.pl = KH, KW, sy, sx, dy, dx, pt, pl
    c.isa = isa
    with nogil:
        _pool_run(_max_pool_part, &c, out.shape[0], qsim_parts_for(out.shape[0], threads), threads)


cdef struct _CopyCtx:
    const float *src
    float *dst
    int64_t src_plane, src_row, dst_plane, dst_row, rows, cols


cdef void _copy_part(void *ctx, int slot, int64_t lo, int64_t hi) noexcept nogil:
    cdef _CopyCtx *c = <_CopyCtx *>ctx
    qsim_copy_planes_f32(c.src, c.src_plane, c.src_row, c.dst, c.dst_plane, c.dst_row, c.rows, c.cols, lo, hi)


def copy_planes_f32(const float[:, :, :] src, float[:, :, :] dst, int threads=1):
    """dst[p][r][:] = src[p][r][:] for [P][rows][cols] views whose rows are contiguous (any plane
    and row strides: a crop, or the inside of a padded array), planes on `threads` threads of
    the pool. A copy: exact. The two must not overlap."""
    cdef _CopyCtx c
    _check_threads(threads, "copy_planes_f32")
    if dst.shape[0] != src.shape[0] or dst.shape[1] != src.shape[1] or dst.shape[2] != src.shape[2]:
        raise ValueError(f"copy_planes_f32: src ({src.shape[0]}, {src.shape[1]}, {src.shape[2]}) and dst "
                         f"({dst.shape[0]}, {dst.shape[1]}, {dst.shape[2]}) differ in shape")
    if src.shape[0] * src.shape[1] * src.shape[2] == 0:
        return
    if src.strides[2] != sizeof(float) or dst.strides[2] != sizeof(float):
        raise ValueError("copy_planes_f32: rows must be contiguous")
    c.src, c.dst, c.rows, c.cols = &src[0, 0, 0], &dst[0, 0, 0], src.shape[1], src.shape[2]
    c.src_plane, c.src_row = src.strides[0] // sizeof(float), src.strides[1] // sizeof(float)
    c.dst_plane, c.dst_row = dst.strides[0] // sizeof(float), dst.strides[1] // sizeof(float)
    with nogil:
        _pool_run(_copy_part, &c, src.shape[0], qsim_parts_for(src.shape[0], threads), threads)
