# cython: language_level=3
"""CVM conv2d and dense on INT8 operands with INT32 accumulation (qsim.kernels._cvm_conv).

Contract (checked by qsim.cvm before calling): data and weights have precision <= 8,
so every value is in [-127, 127] and fits int8; the output precision
px + pw + bit_length(K) (+1 with a bias) is <= 32, so the result lies in int32.
The GEMM is the TOSA one (qgemm.h), run with zero points 0: it computes modulo 2^32, and a
result known to lie in int32 that is right modulo 2^32 is right. Results equal
qsim.cvm.nn.conv2d_reference / dense_reference bit for bit on every ISA path. `isa` is a
QSIM_ISA_* code the CPU supports (qsim.kernels.cpu_features.current_isa().code).
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int8_t, uint8_t, int32_t, int64_t

cnp.import_array()


cdef extern from "qgemm.h" nogil:
    size_t qsim_pack_bytes(int isa, int64_t N, int64_t T, int64_t C)
    void qsim_pack_weights(int isa, const int8_t *src, int64_t N, int64_t T, int64_t C,
                           int64_t s_n, int64_t s_t, int64_t s_c, void *dst, int32_t *colsum)
    void qsim_gemm(int isa, const uint8_t *A, const int64_t *rows, int64_t M, const int64_t *taps,
                   int64_t T, int64_t K4, const void *B, int64_t N, const int32_t *colcorr,
                   const int32_t *rowcorr, int32_t *out, int64_t ldo)

# a' = x + 128 in the GEMM's activation buffer; 128 (x == 0) wherever there is no input
# (spatial padding, K padded up to a multiple of 4): it contributes 0 * w.
cdef enum:
    ZERO_U8 = 128


def _round4(int64_t k):
    return (k + 3) // 4 * 4


def _weights(int isa, w, bias):
    """(packed w for qsim_gemm, colcorr = bias - 128 * colsum modulo 2^32) of w_nk (N, K)."""
    cdef const int8_t[:, ::1] wv = np.ascontiguousarray(w, dtype=np.int8)
    cdef int64_t N = wv.shape[0], K = wv.shape[1]
    packed = np.empty(max(1, qsim_pack_bytes(isa, N, 1, K)), dtype=np.uint8)
    colsum = np.zeros(N, dtype=np.int32)
    cdef uint8_t[::1] pv = packed
    cdef int32_t[::1] cv = colsum
    if N and K:
        with nogil:
            qsim_pack_weights(isa, &wv[0, 0], N, 1, K, K, 0, 1, &pv[0], &cv[0])
    colcorr = -ZERO_U8 * colsum.astype(np.int64)
    if bias is not None:
        colcorr += np.asarray(bias, dtype=np.int64)
    return packed, (colcorr & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


cdef void _gemm(int isa, const uint8_t[:, ::1] a, const uint8_t[::1] packed,
                const int32_t[::1] colcorr, const int64_t[::1] rows, const int64_t[::1] taps,
                int32_t[:, ::1] out) noexcept nogil:
    """out[m, n] = sum_k (a[m, k] - 128) * w[n, k] + bias[n]: a holds x + 128, K4 quads a row."""
    qsim_gemm(isa, &a[0, 0], &rows[0], a.shape[0], &taps[0], 1, a.shape[1] // 4, &packed[0],
              out.shape[1], &colcorr[0], NULL, &out[0, 0], out.shape[1])


def _run_gemm(int isa, a_u8, weights, int N):
    """int32 (M, N) = (a_u8 - 128) @ w_nk.T + bias for a_u8 uint8 (M, round4(K)) and
    weights = _weights(isa, w_nk, bias)."""
    M = a_u8.shape[0]
    out = np.empty((M, N), dtype=np.int32)
    if M == 0 or N == 0:
        return out
    packed, colcorr = weights
    if a_u8.shape[1] == 0:      # K == 0: the sum is empty, the bias is the result
        out[...] = colcorr[None, :]
        return out
    rows = np.arange(M, dtype=np.int64) * a_u8.shape[1]
    taps = np.zeros(1, dtype=np.int64)
    cdef int32_t[:, ::1] ov = out
    cdef const uint8_t[:, ::1] av = a_u8
    cdef const uint8_t[::1] pv = packed
    cdef const int32_t[::1] cv = colcorr
    cdef const int64_t[::1] rv = rows, tv = taps
    with nogil:
        _gemm(isa, av, pv, cv, rv, tv, ov)
    return out


def dense(int isa, x, w, bias=None):
    """Y = X W^T (+ bias): x int8 (M, K), w int8 (N, K), bias int32 (N,) or None -> int32 (M, N)."""
    xa = np.asarray(x, dtype=np.int8)
    M, K = xa.shape
    a = np.full((M, _round4(K)), ZERO_U8, dtype=np.uint8)
    np.bitwise_xor(xa.view(np.uint8), ZERO_U8, out=a[:, :K])
    wa = np.asarray(w, dtype=np.int8)
    return _run_gemm(isa, a, _weights(isa, wa, bias), wa.shape[0])


cdef void _im2col(const int8_t[:, :, ::1] x, uint8_t[:, ::1] col, int kh, int kw, int ph, int pw,
                  int sh, int sw, int dh, int dw, int oh, int ow) noexcept nogil:
    """col[p*OW + q, (c*KH + i)*KW + j] = x[c, p*SH - PH + i*DH, q*SW - PW + j*DW] + 128,
    128 outside the input (the K padding past C*KH*KW already holds 128)."""
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
                            col[row, colx] = <uint8_t>(x[c, r, s] ^ 0x80)
                        else:
                            col[row, colx] = ZERO_U8
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


def conv2d(int isa, x, w, bias, int ph, int pw, int sh, int sw, int dh, int dw, int groups):
    """NCHW x OIHW -> NCHW int32; groups 1 (im2col + the GEMM) or C (depthwise, IC = 1)."""
    xa = np.ascontiguousarray(x, dtype=np.int8)
    wa = np.ascontiguousarray(w, dtype=np.int8)
    cdef int N = xa.shape[0], C = xa.shape[1], H = xa.shape[2], W = xa.shape[3]
    cdef int OC = wa.shape[0], IC = wa.shape[1], KH = wa.shape[2], KW = wa.shape[3]
    cdef int OH = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    cdef int OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    out = np.empty((N, OC, OH, OW), dtype=np.int32)
    cdef int n
    cdef const int8_t[:, :, ::1] xv
    cdef uint8_t[:, ::1] colv
    cdef int32_t[:, :, ::1] yv
    cdef const int8_t[:, :, ::1] wdv
    if groups != 1:
        wdv = wa.reshape(OC, KH, KW)
        for n in range(N):
            xv = xa[n]
            yv = out[n]
            with nogil:
                _depthwise(xv, wdv, yv, ph, pw, sh, sw, dh, dw)
        if bias is not None:
            out += np.asarray(bias, dtype=np.int32)[None, :, None, None]
        return out
    K = C * KH * KW
    weights = _weights(isa, wa.reshape(OC, K), bias)
    col = np.full((OH * OW, _round4(K)), ZERO_U8, dtype=np.uint8)
    colv = col
    for n in range(N):
        xv = xa[n]
        with nogil:
            _im2col(xv, colv, KH, KW, ph, pw, sh, sw, dh, dw, OH, OW)
        out[n] = _run_gemm(isa, col, weights, OC).T.reshape(OC, OH, OW)
    return out
