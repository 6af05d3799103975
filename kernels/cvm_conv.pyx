# cython: language_level=3
"""CVM conv2d and dense on INT8 operands with INT32 accumulation (qsim.kernels._cvm_conv).

Contract (checked by qsim.cvm before calling): data and weights have precision <= 8,
so every value is in [-127, 127] and fits int8; the output precision
px + pw + bit_length(K) (+1 with a bias) is <= 32, which bounds every partial sum by
2^31 - 1, so int32 accumulators cannot overflow. Results equal
qsim.cvm.nn.conv2d_reference / dense_reference bit for bit.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t

cnp.import_array()


cdef extern from "cvm_gemm.h":
    void qsim_cvm_gemm(const int8_t* a, const int8_t* bt, int32_t* out,
                       Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, int use_simd) nogil
    int qsim_cvm_gemm_simd_available()

# module switch for tests: False forces the portable C path (same bits by construction)
_use_simd = True


def simd_available():
    """True when the AVX2 clone of the GEMM runs on this CPU."""
    return bool(qsim_cvm_gemm_simd_available())


def set_simd(enabled):
    """Selects the AVX2 clone (True, default) or the portable path (False)."""
    global _use_simd
    _use_simd = bool(enabled)


cdef void _gemm(const int8_t[:, ::1] a, const int8_t[:, ::1] bt, int32_t[:, ::1] out, int simd) noexcept nogil:
    """out[m, n] = sum_k a[m, k] * bt[k, n] (bt: the weights transposed, K x N)."""
    qsim_cvm_gemm(&a[0, 0], &bt[0, 0], &out[0, 0], a.shape[0], bt.shape[1], a.shape[1], simd)


def dense(x, w, bias=None):
    """Y = X W^T (+ bias): x int8 (M, K), w int8 (N, K), bias int32 (N,) or None -> int32 (M, N)."""
    cdef const int8_t[:, ::1] xv = np.ascontiguousarray(x, dtype=np.int8)
    cdef const int8_t[:, ::1] wv = np.ascontiguousarray(np.asarray(w, dtype=np.int8).T)
    out = np.empty((xv.shape[0], wv.shape[1]), dtype=np.int32)
    cdef int32_t[:, ::1] ov = out
    cdef int simd = _use_simd
    if xv.shape[1] > 0:
        with nogil:
            _gemm(xv, wv, ov, simd)
    else:
        out[...] = 0
    if bias is not None:
        out += np.asarray(bias, dtype=np.int32)[None, :]
    return out


cdef void _im2col(const int8_t[:, :, ::1] x, int8_t[:, ::1] col, int kh, int kw, int ph, int pw,
                  int sh, int sw, int dh, int dw, int oh, int ow) noexcept nogil:
    """col[p*OW + q, (c*KH + i)*KW + j] = x[c, p*SH - PH + i*DH, q*SW - PW + j*DW], 0 outside."""
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t c, i, j, p, q, r, s, row, colx
    for p in range(oh):
        for q in range(ow):
            row = p * ow + q
            colx = 0
            for c in range(C):
                for i in range(kh):
                    r = p * sh - ph + i * dh
                    for j in range(kw):
                        s = q * sw - pw + j * dw
                        if 0 <= r < H and 0 <= s < W:
                            col[row, colx] = x[c, r, s]
                        else:
                            col[row, colx] = 0
                        colx += 1


cdef void _depthwise(const int8_t[:, :, ::1] x, const int8_t[:, :, ::1] w, int32_t[:, :, ::1] y,
                     int ph, int pw, int sh, int sw, int dh, int dw) noexcept nogil:
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t KH = w.shape[1], KW = w.shape[2], OH = y.shape[1], OW = y.shape[2]
    cdef Py_ssize_t c, i, j, p, q, r, s
    cdef int32_t acc
    for c in range(C):
        for p in range(OH):
            for q in range(OW):
                acc = 0
                for i in range(KH):
                    r = p * sh - ph + i * dh
                    if r < 0 or r >= H:
                        continue
                    for j in range(KW):
                        s = q * sw - pw + j * dw
                        if 0 <= s < W:
                            acc += <int32_t>x[c, r, s] * <int32_t>w[c, i, j]
                y[c, p, q] = acc


def conv2d(x, w, bias, int ph, int pw, int sh, int sw, int dh, int dw, int groups):
    """NCHW x OIHW -> NCHW int32; groups 1 (im2col + GEMM) or C (depthwise, IC = 1)."""
    xa = np.ascontiguousarray(x, dtype=np.int8)
    wa = np.ascontiguousarray(w, dtype=np.int8)
    cdef int N = xa.shape[0], C = xa.shape[1], H = xa.shape[2], W = xa.shape[3]
    cdef int OC = wa.shape[0], IC = wa.shape[1], KH = wa.shape[2], KW = wa.shape[3]
    cdef int OH = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    cdef int OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    out = np.empty((N, OC, OH, OW), dtype=np.int32)
    cdef int n
    cdef const int8_t[:, :, ::1] xv
    cdef int8_t[:, ::1] colv
    cdef int32_t[:, ::1] gv
    cdef int32_t[:, :, ::1] yv
    cdef const int8_t[:, :, ::1] wdv
    cdef const int8_t[:, ::1] wmv
    cdef int simd = _use_simd
    if groups != 1:
        wdv = wa.reshape(OC, KH, KW)
        for n in range(N):
            xv = xa[n]
            yv = out[n]
            with nogil:
                _depthwise(xv, wdv, yv, ph, pw, sh, sw, dh, dw)
    else:
        wmv = np.ascontiguousarray(wa.reshape(OC, IC * KH * KW).T)
        col = np.empty((OH * OW, C * KH * KW), dtype=np.int8)
        gemm = np.empty((OH * OW, OC), dtype=np.int32)
        colv = col
        gv = gemm
        for n in range(N):
            xv = xa[n]
            with nogil:
                _im2col(xv, colv, KH, KW, ph, pw, sh, sw, dh, dw, OH, OW)
                _gemm(colv, wmv, gv, simd)
            out[n] = gemm.T.reshape(OC, OH, OW)
    if bias is not None:
        out += np.asarray(bias, dtype=np.int32)[None, :, None, None]
    return out
