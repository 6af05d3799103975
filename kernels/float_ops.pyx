# cython: language_level=3
"""Float executor loops that numpy runs far from the machine's speed: the depthwise
convolution (kernels/float_conv.h), plane by plane on NCHW data (depthwise_nchw_f32, any
channel multiplier) or across channels on a padded NHWC buffer (depthwise_nhwc_f32,
multiplier 1). Each output element is summed tap by tap in row-major kernel order, starting
from +0.0, one float32 multiply and one float32 add per tap (padding reads 0.0 and is added
too), exactly the operations of fastops_nn._depthwise's numpy loop: the results are the same
bits. Row or plane ranges are independent, so callers split them over threads (the GIL is
released). Built with -ffp-contract=off: no fused multiply-add may change a rounding.
add_row_bias_f32 adds a conv GEMM tile's bias in place (qsim/runtime/float_ops/conv_gemm.py);
bounded_f32 is relu / relu6 / clamp to constants in one pass (qsim/runtime/float_ops/chunked.py).
"""
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc


cdef extern from "float_conv.h" nogil:
    void qsim_im2col_f32(const float *x, int64_t C, int64_t H, int64_t W, int64_t KH, int64_t KW,
                         int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t pt, int64_t pl,
                         int64_t OH, int64_t OW, float *cols, int64_t p0, int64_t p1, int64_t B,
                         int batch_inner)
    void qsim_depthwise_nchw_f32(int isa, const float *x, int64_t C, int64_t H, int64_t W,
                                 const float *w, int64_t m, int64_t KH, int64_t KW, int64_t sy,
                                 int64_t sx, int64_t dy, int64_t dx, int64_t pt, int64_t pl,
                                 float *out, int64_t OH, int64_t OW, float *scratch, int64_t p0,
                                 int64_t p1)
    void qsim_depthwise_nhwc_f32(int isa, const float *xp, int64_t PH, int64_t PW, int64_t C,
                                 const float *wt, int64_t KH, int64_t KW, int64_t sy, int64_t sx,
                                 int64_t dy, int64_t dx, float *out, int64_t OH, int64_t OW,
                                 int64_t r0, int64_t r1)


def depthwise_nhwc_f32(int isa, const float[:, :, :, ::1] xp, const float[:, ::1] wt,
                       float[:, :, :, ::1] out, int64_t KH, int64_t KW, int64_t sy, int64_t sx,
                       int64_t dy, int64_t dx, int64_t r0, int64_t r1):
    """Depthwise convolution (multiplier 1) of the padded NHWC buffer xp with wt[KH*KW][C] into
    out[B][OH][OW][C], output rows b*OH + oy in [r0, r1) (kernels/float_conv.h)."""
    if r1 <= r0 or out.shape[3] == 0:
        return
    with nogil:
        qsim_depthwise_nhwc_f32(isa, &xp[0, 0, 0, 0], xp.shape[1], xp.shape[2], xp.shape[3], &wt[0, 0],
                                KH, KW, sy, sx, dy, dx, &out[0, 0, 0, 0], out.shape[1], out.shape[2],
                                r0, r1)


def depthwise_nchw_f32(int isa, const float[:, :, :, ::1] x, const float[:, :, ::1] w,
                       float[:, :, :, ::1] out, int64_t m, int64_t sy, int64_t sx, int64_t dy,
                       int64_t dx, int64_t pt, int64_t pl, int64_t p0, int64_t p1):
    """Depthwise convolution of NCHW x with w[C*m][KH][KW] (channel multiplier m) into
    out[B][C*m][OH][OW], output planes b*C*m + oc in [p0, p1) (kernels/float_conv.h)."""
    cdef int64_t OH = out.shape[2], OW = out.shape[3], KH = w.shape[1], KW = w.shape[2]
    cdef int64_t PH = sy * (OH - 1) + dy * (KH - 1) + 1, PW = sx * (OW - 1) + dx * (KW - 1) + 1
    if p1 <= p0 or OH == 0 or OW == 0:
        return
    cdef float *scratch = <float *>malloc(PH * PW * sizeof(float))
    if scratch == NULL:
        raise MemoryError()
    with nogil:
        qsim_depthwise_nchw_f32(isa, &x[0, 0, 0, 0], x.shape[1], x.shape[2], x.shape[3], &w[0, 0, 0], m,
                                KH, KW, sy, sx, dy, dx, pt, pl, &out[0, 0, 0, 0], OH, OW, scratch, p0, p1)
    free(scratch)


def im2col_f32(const float[:, :, :, ::1] x, float[:, :, :, :, ::1] cols, int64_t KH, int64_t KW,
               int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t pt, int64_t pl, int64_t p0,
               int64_t p1, bint batch_inner=False):
    """cols[B][C][KH*KW][OH][OW] of the NCHW input x (zero outside), planes b*C + c in [p0, p1)
    (kernels/float_conv.h); with batch_inner, cols is [C][KH*KW][B][OH][OW]."""
    cdef int64_t B = x.shape[0], C = x.shape[1], OH = cols.shape[3], OW = cols.shape[4]
    expected = (C, KH * KW, B) if batch_inner else (B, C, KH * KW)
    got = (cols.shape[0], cols.shape[1], cols.shape[2])
    if got != expected:
        raise ValueError(f"im2col_f32: cols must start with {expected} "
                         f"({'[C][KH*KW][B]' if batch_inner else '[B][C][KH*KW]'}); got {got}")
    if p1 <= p0 or KH * KW == 0 or OH == 0 or OW == 0:
        return
    with nogil:
        qsim_im2col_f32(&x[0, 0, 0, 0], C, x.shape[2], x.shape[3], KH, KW, sy, sx, dy, dx,
                        pt, pl, OH, OW, &cols[0, 0, 0, 0, 0], p0, p1, B, batch_inner)


def add_row_bias_f32(float[:, ::1] out, const float[::1] bias, int64_t r0, int64_t r1, int64_t c0, int64_t c1):
    """out[r, c] = out[r, c] + bias[r] for r in [r0, r1), c in [c0, c1): one float32 add per
    element, as numpy's out += bias[:, None] (the conv GEMM's bias on one tile of its rows)."""
    cdef int64_t r, c
    cdef float v
    if not (0 <= r0 <= r1 <= out.shape[0] and 0 <= c0 <= c1 <= out.shape[1] and r1 <= bias.shape[0]):
        raise ValueError(f"add_row_bias_f32: tile [{r0}:{r1}, {c0}:{c1}] outside {out.shape[0]} x "
                         f"{out.shape[1]} (bias {bias.shape[0]})")
    with nogil:
        for r in range(r0, r1):
            v = bias[r]
            for c in range(c0, c1):
                out[r, c] = out[r, c] + v


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
