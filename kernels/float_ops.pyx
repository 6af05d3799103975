# cython: language_level=3
"""Float executor loops that numpy runs far from the machine's speed.

- depthwise_nchw_f32: the depthwise convolution (kernels/float_conv.h), plane by plane on
  NCHW data, any channel multiplier and stride, or (multiplier 1, narrow images) 16 channels
  side by side. Each output element is summed tap by tap in
  row-major kernel order, starting from +0.0, one float32 multiply and one float32 add per
  tap (padding reads 0.0 and is added too), then + bias (one float32 add): exactly the
  operations of float_ops.nn._depthwise's numpy loop and numpy's out + bias, so the same bits.
- conv_gemm_f32, gemm_pack_a_f32: the convolution's GEMM (kernels/float_gemm.h), its im2col
  packed straight from the input, every output one fma chain in k order, then + bias and a
  following relu/clamp in the same pass (qsim/runtime/float_ops/conv_gemm.py).
- bounded_f32: relu / relu6 / clamp to constants in one pass (qsim/runtime/float_ops/bounds.py).
Plane, row or element ranges are independent, so callers split them over threads (the GIL is
released). Built with -ffp-contract=off: no fused multiply-add may change a rounding.
"""
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc


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
                       bint bound_only=False, bint channel_blocks=False):
    """Depthwise convolution of NCHW x with w[C*m][KH][KW] (channel multiplier m), plus bias[C*m]
    when bias is not None, into out[B][C*m][OH][OW], output planes b*C*m + oc in [p0, p1)
    (kernels/float_conv.h); given y (like out), also y = minimum(maximum(out, lo), hi) as numpy
    computes it (hi None: maximum only); with bound_only (y None) out gets those bounded values
    instead of the convolution's. channel_blocks (m == 1): the loop that runs 16 channels side by
    side (same bits); [p0, p1) are then work units b * ceil(C / 16) + channel block."""
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
    cdef int64_t floats = (qsim_dwc_scratch_floats if channel_blocks else qsim_dw_scratch_floats)(
        OH, OW, KH, KW, sy, sx, dy, dx)
    cdef float *scratch = <float *>malloc(floats * sizeof(float))
    cdef int64_t *off = <int64_t *>malloc(KH * KW * sizeof(int64_t) + 8)
    if scratch == NULL or off == NULL:
        free(scratch)
        free(off)
        raise MemoryError()
    with nogil:
        if channel_blocks:
            qsim_depthwise_cblock_f32(isa, &x[0, 0, 0, 0], x.shape[1], x.shape[2], x.shape[3], &w[0, 0, 0], bp, KH,
                                      KW, sy, sx, dy, dx, pt, pl, &out[0, 0, 0, 0], OH, OW, yp, lo_f, hi_f, has_hi,
                                      bound_only, scratch, p0, p1)
        else:
            qsim_depthwise_nchw_f32(isa, &x[0, 0, 0, 0], x.shape[1], x.shape[2], x.shape[3], &w[0, 0, 0], bp, m,
                                    KH, KW, sy, sx, dy, dx, pt, pl, &out[0, 0, 0, 0], OH, OW, yp, lo_f, hi_f,
                                    has_hi, bound_only, scratch, off, p0, p1)
    free(scratch)
    free(off)


cdef inline void _bounded_f32(const float *x, float *out, int64_t n, float lo, float hi, bint has_hi) noexcept nogil:
    cdef int64_t i
    cdef float v
    for i in range(n):
        v = x[i]
        v = v if (v > lo or v != v) else lo          # numpy's maximum(v, lo): NaN stays, (-0, +0) -> lo
        if has_hi:
            v = v if (v < hi or v != v) else hi      # numpy's minimum(v, hi)
        out[i] = v


def bounded_f32(const float[::1] x, float[::1] out, float lo, float hi, bint has_hi, int64_t i0, int64_t i1):
    """out[i] = minimum(maximum(x[i], lo), hi) for i in [i0, i1), numpy's results (a NaN input
    stays NaN; where two zeros compare equal the bound is taken, as numpy does), one pass."""
    if not (0 <= i0 <= i1 <= x.shape[0] and x.shape[0] == out.shape[0]):
        raise ValueError(f"bounded_f32: range [{i0}:{i1}] outside {x.shape[0]} (out {out.shape[0]})")
    if i1 == i0:
        return
    with nogil:
        _bounded_f32(&x[i0], &out[i0], i1 - i0, lo, hi, has_hi)


cdef extern from "float_gemm.h" nogil:
    ctypedef struct qsim_gemm_geo:
        const float *x
        int64_t C, H, W, KH, KW, sy, sx, dy, dx, pt, pl, OW
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


def gemm_pack_a_f32(const float[:, :, ::1] w, float[::1] packed, int64_t q0, int64_t q1):
    """packed[gi][p][k][8] = w[gi][p*8 + i][k] (0.0 past the last row), panels q = gi*ceil(m/8) + p
    in [q0, q1) (kernels/float_gemm.h)."""
    cdef int64_t g = w.shape[0], m = w.shape[1], K = w.shape[2], mp = (w.shape[1] + 7) // 8
    if packed.shape[0] != g * mp * K * 8 or not (0 <= q0 <= q1 <= g * mp):
        raise ValueError(f"gemm_pack_a_f32: packed has {packed.shape[0]} floats for {g} x {m} x {K}"
                         f" or panels [{q0}:{q1}] out of range")
    if q1 == q0 or K == 0:
        return
    with nogil:
        qsim_gemm_pack_a(&w[0, 0, 0], g, m, K, &packed[0], q0, q1)


def conv_gemm_f32(int isa, const float[:, :, :, ::1] x, int64_t g, int64_t m, int64_t KH, int64_t KW,
                  int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t pt, int64_t pl,
                  const float[::1] packed, bias, float[:, :, ::1] out, y, int64_t OW, int bounded, lo, hi,
                  int64_t nblk, int64_t ppb, int64_t msplit, int64_t t0, int64_t t1, float[::1] scratch,
                  prepacked=None, direct=None, doff=None, int64_t dplane=0):
    """Tasks [t0, t1) of the conv GEMM out[b][gi*m + r][p] = sum_k w * im2col(x) (+ bias, then
    with bounded 1 y = relu/clamp(out), 2 out = relu/clamp(out)), kernels/float_gemm.h: fma
    chains in k order, so the bits depend on none of the blocking or task parameters.
    scratch: at least gemm_scratch_floats(K, ppb) floats, this call's alone (the caller keeps one
    per thread: a fresh megabyte per call cost its page faults every time). prepacked: the B
    panels from gemm_prepack_f32 (batch * g * nblk == 1 only), shared by all tasks. direct (a
    flat float32 array), doff (int64 [K]), dplane (stride 1 convolutions): no packing; row k of
    pixel n of sample b, group gi is direct[(b*C + gi*fc)*dplane + doff[k] + n] (x itself is
    then ignored but for its shape)."""
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
    if scratch.shape[0] < qsim_gemm_scratch_floats(K, ppb):
        raise ValueError(f"conv_gemm_f32: scratch has {scratch.shape[0]} floats, "
                         f"{qsim_gemm_scratch_floats(K, ppb)} needed")
    with nogil:
        qsim_conv_gemm_f32(isa, &geo, g, m, fc, &packed[0], bp, &out[0, 0, 0], yp, N, bounded, lo_f, hi_f, has_hi,
                           nblk, ppb, msplit, t0, t1, pp, dp, dplane, op, &scratch[0])


def gemm_prepack_f32(int isa, const float[:, :, :, ::1] x, int64_t KH, int64_t KW, int64_t sy, int64_t sx,
                     int64_t dy, int64_t dx, int64_t pt, int64_t pl, int64_t OW, int64_t npix, float[::1] dst,
                     int64_t kb0, int64_t kb1, float[::1] scratch):
    """The B panels of k blocks [kb0, kb1) of sample 0's whole im2col (all C*KH*KW rows, pixels
    [0, npix)) into dst (K * ceil(npix / 48) * 48 floats), for conv_gemm_f32's prepacked."""
    cdef int64_t K = x.shape[1] * KH * KW, npan = (npix + 47) // 48
    cdef qsim_gemm_geo geo
    if x.shape[0] < 1 or dst.shape[0] < K * npan * 48 or not (0 <= kb0 <= kb1 <= (K + 255) // 256) \
            or KH <= 0 or KW <= 0 or sy < 1 or sx < 1 or dy < 1 or dx < 1 or OW <= 0 or npix < 1 \
            or scratch.shape[0] < qsim_gemm_scratch_floats(K, npan):
        raise ValueError("gemm_prepack_f32: shapes, geometry or k blocks do not agree")
    geo.x = &x[0, 0, 0, 0]
    geo.C, geo.H, geo.W, geo.KH, geo.KW = x.shape[1], x.shape[2], x.shape[3], KH, KW
    geo.sy, geo.sx, geo.dy, geo.dx, geo.pt, geo.pl, geo.OW = sy, sx, dy, dx, pt, pl, OW
    if kb1 <= kb0:
        return
    with nogil:
        qsim_gemm_prepack(isa, &geo, K, npix, kb0, kb1, &dst[0], <int64_t *>&scratch[0])


def gemm_scratch_floats(int64_t K, int64_t ppb):
    """The floats of scratch conv_gemm_f32 needs for K and ppb pixel panels per task."""
    return qsim_gemm_scratch_floats(K, ppb)
