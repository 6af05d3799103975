# cython: language_level=3
"""Thin Cython entry points over the C kernels in qgemm.h, qwindow.h, qunary.h and qelem.h.

Arguments arrive already validated, C-contiguous and of the right dtype (qsim/kernels/
registry.py prepares them); these functions only release the GIL and call C (the GEMMs, RESCALE
and the depthwise convolution on `threads` threads of qsim's compiled pool, kernels/task_pool.h).
`isa` is one of ISA_PORTABLE, ISA_AVX2, ISA_AVX512VNNI and must be supported by the CPU (checked
in Python); pack_weights, pack_matrices_kn and gemm also take ISA_AVX512AMX (the int8 GEMM on AMX
tiles, kernels/qgemm_amx.h).
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int8_t, uint8_t, int16_t, int32_t, uint32_t, int64_t
from libc.stdlib cimport calloc, free, malloc

cnp.import_array()

# every output element of these kernels is one exact integer computation: the same results on
# any thread count
include "task_pool_client.pxi"


cdef extern from "qgemm.h" nogil:
    int QSIM_ISA_PORTABLE, QSIM_ISA_AVX2, QSIM_ISA_AVX512VNNI, QSIM_ISA_AVX512AMX, QSIM_GEMM_MC, QSIM_AMX_MC
    size_t qsim_pack_bytes(int isa, int64_t N, int64_t T, int64_t C)
    void qsim_pack_weights(int isa, const int8_t *src, int64_t N, int64_t T, int64_t C,
                           int64_t s_n, int64_t s_t, int64_t s_c, void *dst, int32_t *colsum)
    void qsim_prepare_input_u8(int isa, const int8_t *x, int64_t N, int64_t D, int64_t H, int64_t W,
                               int64_t C, int64_t PD, int64_t PH, int64_t PW, int64_t C4,
                               int64_t ud, int64_t uy, int64_t ux, int64_t od, int64_t oy,
                               int64_t ox, uint8_t fill, uint8_t *A)
    void qsim_row_sums(int isa, const uint8_t *A, const int64_t *rows, int64_t M, const int64_t *taps,
                       int64_t T, int64_t K4, uint32_t *rowsum)
    void qsim_gemm(int isa, const uint8_t *A, const int64_t *rows, int64_t M, const int64_t *taps,
                   int64_t T, int64_t K4, const void *B, int64_t N, const int32_t *colcorr,
                   const int32_t *rowcorr, int32_t *out, int64_t ldo)
    int qsim_gemm_amx_s8(const int8_t *A, const int64_t *rows, int64_t M, const int64_t *taps,
                         int64_t T, int64_t K4, const int8_t *B, int64_t N, const int32_t *colcorr,
                         const int32_t *rowcorr, int32_t *out, int64_t ldo)
    int qsim_amx_permitted()
    void qsim_gemm_i16_avx512(const int16_t *A, const int64_t *rows, int64_t M,
                              const int64_t *taps, int64_t T, int64_t K, const int16_t *Wt,
                              int64_t N, const int64_t *bias, int64_t *out)
    void qsim_gemm_i16_avx2(const int16_t *A, const int64_t *rows, int64_t M,
                            const int64_t *taps, int64_t T, int64_t K, const int16_t *Wt,
                            int64_t N, const int64_t *bias, int64_t *out)
    void qsim_gemm_i16_base(const int16_t *A, const int64_t *rows, int64_t M,
                            const int64_t *taps, int64_t T, int64_t K, const int16_t *Wt,
                            int64_t N, const int64_t *bias, int64_t *out)

cdef extern from "qgemm_i16.h" nogil:
    size_t qsim_pack_i16_bytes(int64_t N, int64_t KT)
    void qsim_pack_i16(const int16_t *Wt, int64_t N, int64_t KT, int16_t *dst)
    void qsim_gemm_i16_vnni(const int16_t *A, const int64_t *rows, int64_t M, const int64_t *taps,
                            int64_t T, int64_t C2, const int16_t *plo, const int16_t *phi, int64_t N,
                            const int64_t *bias, int64_t *out)

cdef extern from "qwindow.h" nogil:
    void qsim_pad_i16(int isa, const int8_t *x8, const int16_t *x16, int64_t N, int64_t H,
                      int64_t W, int64_t C, int64_t pt, int64_t pb, int64_t pl, int64_t pr,
                      int64_t M, int16_t fill, int16_t subtract, int16_t *out)
    void qsim_depthwise_avx512(const int16_t *P, int64_t N, int64_t PH, int64_t PW, int64_t CM,
                               const int16_t *Wt, int64_t KH, int64_t KW, int64_t OH, int64_t OW,
                               int64_t sy, int64_t sx, int64_t dy, int64_t dx,
                               const int64_t *bias, int32_t *acc, int32_t *out32, int64_t *out64)
    void qsim_depthwise_vnni(const int16_t *P, int64_t N, int64_t PH, int64_t PW, int64_t CM,
                             const int16_t *Wt, int64_t KH, int64_t KW, int64_t OH, int64_t OW,
                             int64_t sy, int64_t sx, int64_t dy, int64_t dx,
                             const int64_t *bias, int32_t *acc, int32_t *out32, int64_t *out64)
    void qsim_depthwise_avx2(const int16_t *P, int64_t N, int64_t PH, int64_t PW, int64_t CM,
                             const int16_t *Wt, int64_t KH, int64_t KW, int64_t OH, int64_t OW,
                             int64_t sy, int64_t sx, int64_t dy, int64_t dx,
                             const int64_t *bias, int32_t *acc, int32_t *out32, int64_t *out64)
    void qsim_depthwise_base(const int16_t *P, int64_t N, int64_t PH, int64_t PW, int64_t CM,
                             const int16_t *Wt, int64_t KH, int64_t KW, int64_t OH, int64_t OW,
                             int64_t sy, int64_t sx, int64_t dy, int64_t dx,
                             const int64_t *bias, int32_t *acc, int32_t *out32, int64_t *out64)
    void qsim_maxpool_avx512(const int16_t *P, int64_t N, int64_t PH, int64_t PW, int64_t C,
                             int64_t KH, int64_t KW, int64_t OH, int64_t OW, int64_t sy,
                             int64_t sx, int16_t *acc, int16_t *out16, int8_t *out8)
    void qsim_maxpool_avx2(const int16_t *P, int64_t N, int64_t PH, int64_t PW, int64_t C,
                           int64_t KH, int64_t KW, int64_t OH, int64_t OW, int64_t sy,
                           int64_t sx, int16_t *acc, int16_t *out16, int8_t *out8)
    void qsim_maxpool_base(const int16_t *P, int64_t N, int64_t PH, int64_t PW, int64_t C,
                           int64_t KH, int64_t KW, int64_t OH, int64_t OW, int64_t sy,
                           int64_t sx, int16_t *acc, int16_t *out16, int8_t *out8)
    void qsim_avgpool_avx512(const int16_t *P, int64_t N, int64_t PH, int64_t PW, int64_t C,
                             int64_t IH, int64_t IW, int64_t KH, int64_t KW, int64_t OH,
                             int64_t OW, int64_t sy, int64_t sx, int64_t pad_top,
                             int64_t pad_left, const int64_t *mult, const int64_t *shift,
                             int64_t output_zp, int64_t lo, int64_t hi, int32_t *acc,
                             int16_t *out16, int8_t *out8, int *bad)
    void qsim_avgpool_avx2(const int16_t *P, int64_t N, int64_t PH, int64_t PW, int64_t C,
                           int64_t IH, int64_t IW, int64_t KH, int64_t KW, int64_t OH,
                           int64_t OW, int64_t sy, int64_t sx, int64_t pad_top,
                           int64_t pad_left, const int64_t *mult, const int64_t *shift,
                           int64_t output_zp, int64_t lo, int64_t hi, int32_t *acc,
                           int16_t *out16, int8_t *out8, int *bad)
    void qsim_avgpool_base(const int16_t *P, int64_t N, int64_t PH, int64_t PW, int64_t C,
                           int64_t IH, int64_t IW, int64_t KH, int64_t KW, int64_t OH,
                           int64_t OW, int64_t sy, int64_t sx, int64_t pad_top,
                           int64_t pad_left, const int64_t *mult, const int64_t *shift,
                           int64_t output_zp, int64_t lo, int64_t hi, int32_t *acc,
                           int16_t *out16, int8_t *out8, int *bad)

cdef extern from "qunary.h" nogil:
    void qsim_rescale(int isa, int icode, int ocode, const void *x, int64_t n, int64_t C,
                      int64_t input_zp, const int64_t *mult, const int64_t *shift,
                      const int64_t *rnd, const int64_t *dround, int scale32,
                      int64_t output_zp, int64_t lo, int64_t hi, void *y, int *bad)
    void qsim_table_i8(const int8_t *x, int64_t n, const int8_t *table, int8_t *y)
    void qsim_table_i16(const int16_t *x, int64_t n, const int16_t *table, int32_t *y, int *bad)
    void qsim_clamp_i8_avx512(const int8_t *x, int64_t n, int8_t lo, int8_t hi, int8_t *y)
    void qsim_clamp_i8_avx2(const int8_t *x, int64_t n, int8_t lo, int8_t hi, int8_t *y)
    void qsim_clamp_i8_base(const int8_t *x, int64_t n, int8_t lo, int8_t hi, int8_t *y)
    void qsim_clamp_i16_avx512(const int16_t *x, int64_t n, int16_t lo, int16_t hi, int16_t *y)
    void qsim_clamp_i16_avx2(const int16_t *x, int64_t n, int16_t lo, int16_t hi, int16_t *y)
    void qsim_clamp_i16_base(const int16_t *x, int64_t n, int16_t lo, int16_t hi, int16_t *y)

cdef extern from "qelem.h" nogil:
    int QSIM_EW_RANK
    void qsim_elementwise(int isa, int op, int dcode, const void *a, const void *b, int32_t *out,
                          int rank, const int64_t *shape, const int64_t *sa, const int64_t *sb,
                          int shift, int *bad)
    void qsim_reduce(int isa, int kind, int dcode, const void *x, int64_t outer, int64_t n,
                     int64_t inner, int64_t *acc, void *out, int *bad)

ISA_PORTABLE = QSIM_ISA_PORTABLE
ISA_AVX2 = QSIM_ISA_AVX2
ISA_AVX512VNNI = QSIM_ISA_AVX512VNNI
ISA_AVX512AMX = QSIM_ISA_AVX512AMX

# numpy dtype -> RESCALE type code of qunary.h (int48 travels in int64 storage)
RESCALE_CODES = {np.dtype(np.int8): 0, np.dtype(np.uint8): 1, np.dtype(np.int16): 2,
                 np.dtype(np.uint16): 3, np.dtype(np.int32): 4, np.dtype(np.int64): 5}


def pack_weights(int isa, const int8_t[:, :, ::1] w):
    """Packs w[N][T][C] (output column, tap, channel) for qsim_gemm on `isa`.

    Returns (packed bytes as a uint8 array, column sums int32[N])."""
    cdef int64_t N = w.shape[0], T = w.shape[1], C = w.shape[2]
    packed = np.empty(qsim_pack_bytes(isa, N, T, C), dtype=np.uint8)
    colsum = np.empty(N, dtype=np.int32)
    cdef uint8_t[::1] pv = packed
    cdef int32_t[::1] cv = colsum
    with nogil:
        qsim_pack_weights(isa, &w[0, 0, 0], N, T, C, T * C, C, 1, &pv[0], &cv[0])
    return packed, colsum


def pack_matrices_kn(int isa, const int8_t[:, :, ::1] b):
    """Packs each b[i] (MATMUL's B of batch i: K rows, N columns; one tap of K channels) for
    qsim_gemm, in one call. Returns (packed uint8 [batches, bytes of one packing], column sums int32 [batches, N])."""
    cdef int64_t B = b.shape[0], K = b.shape[1], N = b.shape[2]
    cdef size_t nbytes = qsim_pack_bytes(isa, N, 1, K)
    packed = np.empty((B, nbytes), dtype=np.uint8)
    colsum = np.empty((B, N), dtype=np.int32)
    cdef uint8_t[:, ::1] pv = packed
    cdef int32_t[:, ::1] cv = colsum
    if B == 0:
        return packed, colsum
    with nogil:
        _pack_batches(isa, &b[0, 0, 0], B, K, N, nbytes, &pv[0, 0], &cv[0, 0])
    return packed, colsum


cdef void _pack_batches(int gemm_isa, const int8_t *b, int64_t N, int64_t C, int64_t W, size_t nbytes,
                        uint8_t *packed, int32_t *colsum) noexcept nogil:
    """b[N][C][W] -> N packings of nbytes, column sums [N][W]"""
    cdef int64_t i
    for i in range(N):
        qsim_pack_weights(gemm_isa, b + i * C * W, W, 1, C, 1, 0, W, packed + i * nbytes, colsum + i * W)


def prepare_input_u8(int isa, const int8_t[:, :, :, :, ::1] x, int64_t PD, int64_t PH, int64_t PW,
                     int64_t C4, up, offset, int fill):
    """Activation buffer uint8[N][PD][PH][PW][C4] (see qgemm.h)."""
    cdef int64_t N = x.shape[0]
    A = np.empty((N, PD, PH, PW, C4), dtype=np.uint8)
    cdef uint8_t[:, :, :, :, ::1] av = A
    cdef int64_t ud = up[0], uy = up[1], ux = up[2], od = offset[0], oy = offset[1], ox = offset[2]
    with nogil:
        qsim_prepare_input_u8(isa, &x[0, 0, 0, 0, 0], N, x.shape[1], x.shape[2], x.shape[3], x.shape[4],
                              PD, PH, PW, C4, ud, uy, ux, od, oy, ox, <uint8_t>fill, &av[0, 0, 0, 0, 0])
    return A


def row_sums(int isa, const uint8_t[::1] A, const int64_t[::1] rows, const int64_t[::1] taps, int64_t K4):
    rowsum = np.empty(rows.shape[0], dtype=np.uint32)
    cdef uint32_t[::1] rv = rowsum
    with nogil:
        qsim_row_sums(isa, &A[0], &rows[0], rows.shape[0], &taps[0], taps.shape[0], K4, &rv[0])
    return rowsum


# ---------------------------------------------------------------- fused RESCALE ----------
# A RESCALE (with a CLAMP's bounds folded into lo/hi) that a GEMM or the depthwise convolution
# applies to each block of its int32 accumulators right after making it, while the block is in
# the cache (runtime/int_fusion.py): the block goes to a per-thread scratch of `block` rows of
# C channels and qsim_rescale (the RESCALE kernel's own code) writes its rows of y. Every
# accumulator is the same exact integer and every output the same RESCALE of it: the same bits
# as the two ops apart, on any thread count and block size.
cdef struct _Requant:
    int isa, ocode, scale32
    char *y
    int64_t ysize, C, block, input_zp, output_zp, lo, hi
    const int64_t *mult           # C entries each (per-tensor parameters repeated)
    const int64_t *shift
    const int64_t *rnd
    const int64_t *dround
    int32_t *scratch              # block * C int32 per thread slot
    int *bad                      # one REQUIRE flag per thread slot

# bytes of int32 accumulators a thread keeps between the kernel and the RESCALE (within L2);
# read at each call (tests make it small to cross many block boundaries)
REQUANT_SCRATCH_BYTES = 1 << 19


cdef const int64_t *_int64_data(a, int64_t n, str what) except NULL:
    if not isinstance(a, np.ndarray) or a.dtype != np.int64 or not a.flags.c_contiguous or a.size != n:
        raise ValueError(f"requant: {what} is not a C-contiguous int64 array of {n} entries")
    return <const int64_t *>cnp.PyArray_DATA(a)


cdef int _requant_open(_Requant *r, int isa, tuple requant, cnp.ndarray y, int64_t C, int64_t block,
                       int threads) except -1:
    """Fills r from requant = (mult, shift, rnd, dround, scale32, input_zp, output_zp, lo, hi)
    (unary_ops.requant_args) for y, a C-contiguous array of rows of C channels."""
    mult, shift, rnd, dround, scale32, input_zp, output_zp, lo, hi = requant
    if not y.flags.c_contiguous or C <= 0 or y.size % C:
        raise ValueError("requant: y is not a C-contiguous array of whole rows of C channels")
    r.isa, r.ocode, r.scale32 = isa, RESCALE_CODES[y.dtype], scale32
    r.y, r.ysize, r.C, r.block = <char *>cnp.PyArray_DATA(y), y.itemsize, C, block
    r.input_zp, r.output_zp, r.lo, r.hi = input_zp, output_zp, lo, hi
    r.mult, r.shift = _int64_data(mult, C, "mult"), _int64_data(shift, C, "shift")
    r.rnd, r.dround = _int64_data(rnd, C, "rnd"), _int64_data(dround, C, "dround")
    r.scratch = <int32_t *>malloc(threads * block * C * sizeof(int32_t))
    r.bad = <int *>calloc(threads, sizeof(int))
    if r.scratch == NULL or r.bad == NULL:
        free(r.scratch)
        free(r.bad)
        raise MemoryError()
    return 0


cdef bint _requant_close(_Requant *r, int threads):
    """Frees r's buffers; True when a RESCALE REQUIRE failed on some thread."""
    cdef int i, bad = 0
    for i in range(threads):
        bad |= r.bad[i]
    free(r.scratch)
    free(r.bad)
    return bad != 0


cdef inline int32_t *_requant_scratch(_Requant *r, int slot) noexcept nogil:
    return r.scratch + slot * r.block * r.C


cdef void _requant_rows(_Requant *r, int slot, int64_t row0, int64_t nrows) noexcept nogil:
    """RESCALEs the slot's scratch (nrows rows of C int32) into rows [row0, row0 + nrows) of y."""
    cdef int bad = 0
    qsim_rescale(r.isa, 4, r.ocode, _requant_scratch(r, slot), nrows * r.C, r.C, r.input_zp, r.mult,
                 r.shift, r.rnd, r.dround, r.scale32, r.output_zp, r.lo, r.hi,
                 r.y + row0 * r.C * r.ysize, &bad)
    if bad:
        r.bad[slot] = 1


cdef struct _GemmCtx:
    int isa
    const uint8_t *A
    const int64_t *rows
    const int64_t *taps
    const uint8_t *packed
    const int32_t *colcorr
    const int32_t *rowcorr
    int32_t *out
    int64_t T, K4, N, ldo
    int64_t batch_rows            # rows per batch: batch b uses B packing b and colcorr row b
    int64_t packed_stride         # bytes between two batches' B packings
    _Requant *requant
    bint signed_a                 # A holds x itself: qsim_gemm_amx_s8 (MATMUL on AMX)
    int failed                    # set when qsim_gemm_amx_s8 could not run (no scratch)


cdef inline int64_t _batch_end(_GemmCtx *c, int64_t p) noexcept nogil:
    return (p // c.batch_rows + 1) * c.batch_rows


cdef inline void _gemm_rows(_GemmCtx *c, int64_t p, int64_t m, int32_t *out, int64_t ldo) noexcept nogil:
    """rows [p, p + m), all in one batch, into out (ldo int32 per row)"""
    cdef int64_t b = p // c.batch_rows
    if c.signed_a:
        if qsim_gemm_amx_s8(<const int8_t *>c.A, c.rows + p, m, c.taps, c.T, c.K4,
                            <const int8_t *>(c.packed + b * c.packed_stride), c.N, c.colcorr + b * c.N,
                            NULL if c.rowcorr == NULL else c.rowcorr + p, out, ldo):
            c.failed = 1
        return
    qsim_gemm(c.isa, c.A, c.rows + p, m, c.taps, c.T, c.K4, c.packed + b * c.packed_stride, c.N,
              c.colcorr + b * c.N, NULL if c.rowcorr == NULL else c.rowcorr + p, out, ldo)


cdef void _gemm_part(void *ctx, int slot, int64_t lo, int64_t hi) noexcept nogil:
    cdef _GemmCtx *c = <_GemmCtx *>ctx
    cdef int64_t p = lo, m
    while p < hi:
        m = min(hi, _batch_end(c, p)) - p
        _gemm_rows(c, p, m, c.out + p * c.ldo, c.ldo)
        p += m


cdef void _gemm_requant_part(void *ctx, int slot, int64_t lo, int64_t hi) noexcept nogil:
    """rows [lo, hi) in blocks of r.block rows (inside one batch): the block's GEMM into the
    slot's scratch, then its RESCALE into y"""
    cdef _GemmCtx *c = <_GemmCtx *>ctx
    cdef _Requant *r = c.requant
    cdef int64_t p = lo, m
    while p < hi:
        m = min(r.block, min(hi, _batch_end(c, p)) - p)
        _gemm_rows(c, p, m, _requant_scratch(r, slot), c.N)
        _requant_rows(r, slot, p, m)
        p += m


def gemm(int isa, const uint8_t[::1] A, const int64_t[::1] rows, const int64_t[::1] taps,
         int64_t K4, const uint8_t[::1] packed, int64_t N, const int32_t[::1] colcorr,
         rowcorr, cnp.ndarray out, int threads=1, tuple requant=None, int64_t batch_rows=0):
    """out[p][n] = sum a'(p,k) w(k,n) + colcorr[n] - rowcorr[p], modulo 2^32 (qgemm.h), the rows
    p on `threads` threads of the pool; out is a C-contiguous int32 [M, N] array.
    With `batch_rows` > 0 the rows are M / batch_rows batches (a batched MATMUL in one call):
    `packed` holds one packing per batch (equal sizes, one after the other) and `colcorr` one
    row of N per batch.
    With `requant` (unary_ops.requant_args): out is the RESCALE's output [M, N] (its dtype) and
    the int32 values exist only block by block (see _Requant); returns True when a RESCALE
    REQUIRE failed (out is then incomplete)."""
    cdef _GemmCtx c
    cdef const int32_t[::1] rc
    c.rowcorr = NULL
    if rowcorr is not None:
        rc = rowcorr
        c.rowcorr = &rc[0]
    if out.ndim != 2 or out.shape[0] != rows.shape[0] or out.shape[1] != N or not out.flags.c_contiguous \
            or (requant is None and out.dtype != np.int32):
        raise ValueError("gemm: out is not a C-contiguous [M, N] array (int32 without requant)")
    if rows.shape[0] == 0:
        return False
    cdef int64_t M = rows.shape[0], batches
    batch_rows = M if batch_rows <= 0 else batch_rows
    batches = M // batch_rows
    if batches * batch_rows != M or colcorr.shape[0] != batches * N or packed.shape[0] % batches:
        raise ValueError("gemm: rows, colcorr and packed do not hold the same number of batches")
    c.isa, c.A, c.rows, c.taps, c.T, c.K4 = isa, &A[0], &rows[0], &taps[0], taps.shape[0], K4
    c.packed, c.N, c.colcorr, c.ldo = &packed[0], N, &colcorr[0], N
    c.batch_rows, c.packed_stride = batch_rows, packed.shape[0] // batches
    c.signed_a, c.failed = False, 0
    return _gemm_run(&c, M, out, max(threads, 1), requant)


cdef bint _gemm_run(_GemmCtx *c, int64_t M, cnp.ndarray out, int threads, tuple requant) except -1:
    """Runs the M rows of c (everything but out and requant filled in) on the pool; True when a
    fused RESCALE REQUIRE failed."""
    cdef _Requant r
    c.out, c.requant = <int32_t *>cnp.PyArray_DATA(out), NULL
    if requant is None:
        with nogil:
            _pool_run(_gemm_part, c, M, qsim_parts_for(M, threads), threads)
        return False
    # blocks of whole micro-kernel row tiles (6 rows; AMX: 32-row slabs), at most the GEMM's own
    # row block (QSIM_GEMM_MC; AMX: QSIM_AMX_MC) and REQUANT_SCRATCH_BYTES of accumulators
    # the RESCALE has no AMX code: an AMX CPU runs its AVX-512 path
    cdef int64_t tile = 32 if c.isa == QSIM_ISA_AVX512AMX else 6
    cdef int64_t most = QSIM_AMX_MC if c.isa == QSIM_ISA_AVX512AMX else QSIM_GEMM_MC
    _requant_open(&r, QSIM_ISA_AVX512VNNI if c.isa == QSIM_ISA_AVX512AMX else c.isa, requant, out, c.N,
                  max(tile, min(most, REQUANT_SCRATCH_BYTES // (4 * c.N)) // tile * tile), threads)
    c.requant = &r
    with nogil:
        _pool_run(_gemm_requant_part, c, M, qsim_parts_for(M, threads), threads)
    return _requant_close(&r, threads)


def matmul_i8(int isa, int gemm_isa, cnp.ndarray a, cnp.ndarray b, int a_zp, int b_zp,
              const int64_t[::1] rows, cnp.ndarray out, int threads=1, tuple requant=None,
              tuple packed=None):
    """TOSA MATMUL int8 x int8 -> int32 of a[N][H][C] and b[N][C][W] (C-contiguous int8) in one
    call: B packed per batch with its column sums (or `packed` = pack_matrices_kn(gemm_isa, b),
    made before for a constant B), the corrections, then every batch's rows on the pool (out,
    requant and the result as in gemm; `rows` = p * round4(C), the plan's table). `isa` runs
    the preparation, `gemm_isa` the GEMM and its packing (cpu_features.Isa.code / gemm_code).
    On AMX with C a multiple of 64 the tiles read a itself (qsim_gemm_amx_s8: no activation
    buffer); otherwise the buffer a' = a + 128 with C rounded up to 4 (padding a_zp + 128)."""
    if a.ndim != 3 or b.ndim != 3 or a.dtype != np.int8 or b.dtype != np.int8 \
            or not a.flags.c_contiguous or not b.flags.c_contiguous:
        raise ValueError("matmul_i8: a and b are not C-contiguous int8 [N, H, C] and [N, C, W] arrays")
    cdef int64_t N = a.shape[0], H = a.shape[1], C = a.shape[2], W = b.shape[2]
    cdef int64_t C4 = (C + 3) // 4 * 4, M = N * H
    cdef size_t nbytes = qsim_pack_bytes(gemm_isa, W, 1, C)
    cdef const uint8_t[:, ::1] pv
    cdef const int32_t[:, ::1] cv
    if b.shape[0] != N or b.shape[1] != C or rows.shape[0] != M or out.ndim != 2 \
            or out.shape[0] != M or out.shape[1] != W or not out.flags.c_contiguous \
            or (requant is None and out.dtype != np.int32):
        raise ValueError("matmul_i8: a, b, rows and out do not have the shapes of one MATMUL")
    if M == 0 or W == 0:
        return False
    if packed is not None:
        pv, cv = packed
        if pv.shape[0] != N or <size_t>pv.shape[1] != nbytes or cv.shape[0] != N or cv.shape[1] != W:
            raise ValueError("matmul_i8: the packed B is not b's packing")
    cdef _MatmulBuffers m
    m.packed, m.colsum, m.colcorr, m.rowcorr, m.A = NULL, NULL, NULL, NULL, NULL
    try:
        _matmul_buffers(&m, N, W, M, nbytes, packed is None, b_zp != 0)
        if packed is None:
            with nogil:
                _pack_batches(gemm_isa, <const int8_t *>cnp.PyArray_DATA(b), N, C, W, nbytes, m.packed, m.colsum)
        else:
            m.packed, m.colsum = <uint8_t *>&pv[0, 0], <int32_t *>&cv[0, 0]
        if gemm_isa == QSIM_ISA_AVX512AMX and C % 64 == 0 and qsim_amx_permitted():
            result = _matmul_run(&m, True, gemm_isa, <const uint8_t *>cnp.PyArray_DATA(a), rows, C, N, W, M,
                                 nbytes, a_zp, b_zp, out, threads, requant)
            if result is not None:
                return result
        m.A = <uint8_t *>malloc(M * C4 + 64)
        if m.A == NULL:
            raise MemoryError()
        with nogil:
            qsim_prepare_input_u8(isa, <const int8_t *>cnp.PyArray_DATA(a), N, 1, H, 1, C, 1, H, 1, C4, 1, 1, 1,
                                  0, 0, 0, <uint8_t>((a_zp + 128) & 0xFF), m.A)
        return _matmul_run(&m, False, gemm_isa, m.A, rows, C4, N, W, M, nbytes, a_zp, b_zp, out, threads, requant)
    finally:
        free(m.A)
        free(m.colcorr)
        free(m.rowcorr)
        if packed is None:
            free(m.packed)
            free(m.colsum)


cdef struct _MatmulBuffers:
    uint8_t *packed       # B per batch (nbytes each)
    int32_t *colsum       # [N][W]
    int32_t *colcorr      # [N][W]
    int32_t *rowcorr      # [M], when B_zp != 0
    uint8_t *A            # the u8 activation buffer, when made


cdef int _matmul_buffers(_MatmulBuffers *m, int64_t N, int64_t W, int64_t M, size_t nbytes, bint pack,
                         bint rows) except -1:
    if pack:
        m.packed = <uint8_t *>malloc(N * nbytes + 64)
        m.colsum = <int32_t *>malloc(N * W * sizeof(int32_t))
    m.colcorr = <int32_t *>malloc(N * W * sizeof(int32_t))
    if rows:
        m.rowcorr = <int32_t *>malloc(M * sizeof(int32_t))
    if m.colcorr == NULL or (pack and (m.packed == NULL or m.colsum == NULL)) or (rows and m.rowcorr == NULL):
        raise MemoryError()
    return 0


cdef object _matmul_run(_MatmulBuffers *m, bint signed_a, int gemm_isa, const uint8_t *A,
                        const int64_t[::1] rows, int64_t K, int64_t N, int64_t W, int64_t M,
                        size_t nbytes, int a_zp, int b_zp, cnp.ndarray out, int threads, tuple requant):
    """The GEMM on A (x itself when signed_a, else the u8 buffer; K bytes a row) with its
    corrections, modulo 2^32 (qgemm.h; with x itself the shift is 0 instead of 128):
        colcorr[n] = -(shift + A_zp) * colsum[n]
        rowcorr[p] = B_zp * (sum_k A[p][k] - K * (shift + A_zp))
    (sum_k A[p][k] is a sum of K bytes: |sum| < K * 256 < 2^31 for the K the bound proof lets
    through.) Returns gemm's result, or None when the signed AMX kernel could not run (the
    caller runs the u8 path)."""
    cdef int64_t i, k, total
    cdef int64_t zero_tap = 0
    cdef uint32_t f = <uint32_t>(-((0 if signed_a else 128) + a_zp))
    cdef uint32_t kz = <uint32_t>(K * ((0 if signed_a else 128) + a_zp))
    cdef const int8_t *x = <const int8_t *>A
    cdef _GemmCtx c
    with nogil:
        for i in range(N * W):
            m.colcorr[i] = <int32_t>(f * <uint32_t>m.colsum[i])
        if m.rowcorr != NULL:
            if signed_a:
                for i in range(M):
                    total = 0
                    for k in range(K):
                        total += x[i * K + k]
                    m.rowcorr[i] = <int32_t>(<uint32_t>b_zp * (<uint32_t>total - kz))
            else:
                qsim_row_sums(QSIM_ISA_AVX512VNNI if gemm_isa == QSIM_ISA_AVX512AMX else gemm_isa, A, &rows[0],
                              M, &zero_tap, 1, K // 4, <uint32_t *>m.rowcorr)
                for i in range(M):
                    m.rowcorr[i] = <int32_t>(<uint32_t>b_zp * (<uint32_t>m.rowcorr[i] - kz))
    c.isa, c.A, c.rows, c.taps, c.T, c.K4 = gemm_isa, A, &rows[0], &zero_tap, 1, K // 4
    c.packed, c.colcorr, c.rowcorr, c.N, c.ldo = m.packed, m.colcorr, m.rowcorr, W, W
    c.batch_rows, c.packed_stride, c.signed_a, c.failed = M // N, nbytes, signed_a, 0
    result = _gemm_run(&c, M, out, max(threads, 1), requant)
    return None if c.failed else result


cdef struct _GemmI16Ctx:
    int isa
    const int16_t *A
    const int64_t *rows
    const int64_t *taps
    const int16_t *wt
    const int16_t *plo           # qsim_pack_i16 of wt (VNNI path), or NULL
    const int16_t *phi           # the hi part of a split 16x16 B (wt then holds lo), or NULL
    const int64_t *bias
    int64_t *out
    int64_t T, K, N


cdef void _gemm_i16_part(void *ctx, int slot, int64_t lo, int64_t hi) noexcept nogil:
    cdef _GemmI16Ctx *c = <_GemmI16Ctx *>ctx
    if c.plo != NULL:
        qsim_gemm_i16_vnni(c.A, c.rows + lo, hi - lo, c.taps, c.T, c.K, c.plo, c.phi, c.N, c.bias, c.out + lo * c.N)
    elif c.isa == QSIM_ISA_AVX512VNNI:
        qsim_gemm_i16_avx512(c.A, c.rows + lo, hi - lo, c.taps, c.T, c.K, c.wt, c.N, c.bias, c.out + lo * c.N)
    elif c.isa == QSIM_ISA_AVX2:
        qsim_gemm_i16_avx2(c.A, c.rows + lo, hi - lo, c.taps, c.T, c.K, c.wt, c.N, c.bias, c.out + lo * c.N)
    else:
        qsim_gemm_i16_base(c.A, c.rows + lo, hi - lo, c.taps, c.T, c.K, c.wt, c.N, c.bias, c.out + lo * c.N)


def pack_i16(const int16_t[:, ::1] wt):
    """wt[N][KT] (KT even, every |w| <= 255) packed for the VNNI int16 GEMM (kernels/qgemm_i16.h)."""
    if wt.shape[1] % 2:
        raise ValueError("pack_i16: an odd number of K values")
    packed = np.empty(qsim_pack_i16_bytes(wt.shape[0], wt.shape[1]) // 2, dtype=np.int16)
    cdef int16_t[::1] pv = packed
    if packed.size:
        with nogil:
            qsim_pack_i16(&wt[0, 0], wt.shape[0], wt.shape[1], &pv[0])
    return packed


def gemm_i16(int isa, const int16_t[::1] A, const int64_t[::1] rows, const int64_t[::1] taps,
             int64_t K, const int16_t[:, ::1] wt, bias, int64_t[:, ::1] out, int threads=1,
             tuple packed=None):
    """int16-mode GEMM with int64 (int48) accumulation; wt[N][T*K]; the rows on `threads`
    threads of the pool. `packed` = (pack_i16(wt), None) or, for a 16x16 B split as
    256 * hi + lo (wt holding lo), (pack_i16(lo), pack_i16(hi)): the VNNI kernel (isa
    ISA_AVX512VNNI, K even); the other paths take wt itself (never split)."""
    cdef _GemmI16Ctx c
    cdef const int64_t[::1] bv
    cdef const int16_t[::1] lo_v, hi_v
    c.bias, c.plo, c.phi = NULL, NULL, NULL
    if bias is not None:
        bv = bias
        c.bias = &bv[0]
    cdef int64_t M = rows.shape[0]
    if M == 0:
        return
    if packed is not None:
        if isa != QSIM_ISA_AVX512VNNI or K % 2:
            raise ValueError("gemm_i16: packed weights need the VNNI path and an even K")
        lo_v = packed[0]
        c.plo = &lo_v[0]
        if packed[1] is not None:
            hi_v = packed[1]
            c.phi = &hi_v[0]
    c.isa, c.A, c.rows, c.taps, c.T, c.K = isa, &A[0], &rows[0], &taps[0], taps.shape[0], K
    c.wt, c.N, c.out = &wt[0, 0], wt.shape[0], &out[0, 0]
    with nogil:
        _pool_run(_gemm_i16_part, &c, M, qsim_parts_for(M, threads), threads)


def pad_i16(int isa, x, pad, int fill, int subtract, int64_t repeat):
    """int16 [N][H+pt+pb][W+pl+pr][C*repeat] holding x - subtract (int16 wraparound, as numpy's
    int16 subtraction), channel c repeated `repeat` times, `fill` in the padding; x is an int8
    or int16 [N][H][W][C] array (copied first when not C-contiguous)."""
    x = np.ascontiguousarray(x)
    cdef int64_t N = x.shape[0], H = x.shape[1], W = x.shape[2], C = x.shape[3]
    cdef int64_t pt = pad[0], pb = pad[1], pl = pad[2], pr = pad[3]
    if x.dtype != np.int8 and x.dtype != np.int16:
        raise ValueError(f"pad_i16: x is {x.dtype}, not int8 or int16")
    if min(pt, pb, pl, pr) < 0 or repeat < 1:
        raise ValueError("pad_i16: negative padding or repeat < 1")
    out = np.empty((N, H + pt + pb, W + pl + pr, C * repeat), dtype=np.int16)
    if out.size == 0:
        return out
    cdef int16_t[:, :, :, ::1] ov = out
    cdef const int8_t[:, :, :, ::1] x8v
    cdef const int16_t[:, :, :, ::1] x16v
    cdef const int8_t *p8 = NULL
    cdef const int16_t *p16 = NULL
    if x.size:
        if x.dtype == np.int8:
            x8v = x
            p8 = &x8v[0, 0, 0, 0]
        else:
            x16v = x
            p16 = &x16v[0, 0, 0, 0]
    cdef int16_t f = <int16_t>fill, s = <int16_t>subtract
    with nogil:
        qsim_pad_i16(isa, p8, p16, N, H, W, C, pt, pb, pl, pr, repeat, f, s, &ov[0, 0, 0, 0])
    return out


cdef struct _DepthwiseCtx:
    int isa, by_rows
    const int16_t *P
    const int16_t *wt
    const int64_t *bias
    int32_t *acc                  # CM accumulators per thread slot
    int32_t *p32
    int64_t *p64
    int64_t N, PH, PW, CM, KH, KW, OH, OW, sy, sx, dy, dx
    int64_t block_rows            # with requant: output rows per block
    _Requant *requant


cdef void _depthwise_run(_DepthwiseCtx *c, int slot, int64_t p_off, int64_t n, int64_t ph, int64_t oh,
                         int32_t *o32, int64_t *o64) noexcept nogil:
    """n images of ph buffer rows from buffer offset p_off -> oh output rows each"""
    cdef int32_t *acc = c.acc + slot * c.CM
    if c.isa == QSIM_ISA_AVX512VNNI:
        qsim_depthwise_vnni(c.P + p_off, n, ph, c.PW, c.CM, c.wt, c.KH, c.KW, oh, c.OW, c.sy, c.sx, c.dy, c.dx,
                            c.bias, acc, o32, o64)
    elif c.isa == QSIM_ISA_AVX2:
        qsim_depthwise_avx2(c.P + p_off, n, ph, c.PW, c.CM, c.wt, c.KH, c.KW, oh, c.OW, c.sy, c.sx, c.dy, c.dx,
                            c.bias, acc, o32, o64)
    else:
        qsim_depthwise_base(c.P + p_off, n, ph, c.PW, c.CM, c.wt, c.KH, c.KW, oh, c.OW, c.sy, c.sx, c.dy, c.dx,
                            c.bias, acc, o32, o64)


cdef void _depthwise_part(void *ctx, int slot, int64_t lo, int64_t hi) noexcept nogil:
    """images [lo, hi), or (one image, by_rows) output rows [lo, hi) reading their buffer rows"""
    cdef _DepthwiseCtx *c = <_DepthwiseCtx *>ctx
    cdef int64_t n = hi - lo if not c.by_rows else 1, oh = c.OH if not c.by_rows else hi - lo
    cdef int64_t ph = c.PH if not c.by_rows else (hi - lo - 1) * c.sy + (c.KH - 1) * c.dy + 1
    cdef int64_t p_off = lo * c.PH * c.PW * c.CM if not c.by_rows else lo * c.sy * c.PW * c.CM
    cdef int64_t o_off = lo * c.OH * c.OW * c.CM if not c.by_rows else lo * c.OW * c.CM
    _depthwise_run(c, slot, p_off, n, ph, oh, NULL if c.p32 == NULL else c.p32 + o_off,
                   NULL if c.p64 == NULL else c.p64 + o_off)


cdef void _depthwise_requant_part(void *ctx, int slot, int64_t lo, int64_t hi) noexcept nogil:
    """output rows [lo, hi) of all images (row u: image u // OH, row u % OH), in blocks of at
    most block_rows rows of one image: the block's int32 sums into the slot's scratch, then
    their RESCALE into y"""
    cdef _DepthwiseCtx *c = <_DepthwiseCtx *>ctx
    cdef int64_t u = lo, image, r0, m
    while u < hi:
        image, r0 = u // c.OH, u % c.OH
        m = min(c.block_rows, c.OH - r0, hi - u)
        _depthwise_run(c, slot, (image * c.PH + r0 * c.sy) * c.PW * c.CM, 1, (m - 1) * c.sy + (c.KH - 1) * c.dy + 1,
                       m, _requant_scratch(c.requant, slot), NULL)
        _requant_rows(c.requant, slot, u * c.OW, m * c.OW)
        u += m


def depthwise(int isa, const int16_t[:, :, :, ::1] P, const int16_t[:, ::1] wt, int64_t KH,
              int64_t KW, int64_t OH, int64_t OW, stride, dilation, const int64_t[::1] bias,
              bint wide, out=None, int threads=1, tuple requant=None):
    """DEPTHWISE_CONV2D over the prepared int16 buffer; int32 output, or int64 if `wide`. `out`,
    when given, is the C-contiguous [N, OH, OW, CM] array written. On `threads` threads of the
    pool: whole images per part when there are several, else output rows (each part reading
    its rows of the buffer); every output is one exact integer sum either way.
    With `requant` (unary_ops.requant_args; not `wide`): `out` is the RESCALE's output
    [N, OH, OW, CM] (its dtype), made block by block of output rows (see _Requant); returns True
    when a RESCALE REQUIRE failed (out is then incomplete), else out."""
    cdef _DepthwiseCtx c
    cdef _Requant r
    cdef int64_t N = P.shape[0], PH = P.shape[1], PW = P.shape[2], CM = P.shape[3]
    cdef int64_t sy = stride[0], sx = stride[1], dy = dilation[0], dx = dilation[1]
    if requant is not None and (wide or out is None):
        raise ValueError("depthwise: requant takes an int32 accumulator and the output array")
    if out is None:
        out = np.empty((N, OH, OW, CM), dtype=np.int64 if wide else np.int32)
    elif (out.shape != (N, OH, OW, CM) or not out.flags.c_contiguous
          or (requant is None and out.dtype != (np.int64 if wide else np.int32))):
        raise ValueError("depthwise: out is not a C-contiguous [N, OH, OW, CM] array of the accumulator type")
    cdef int32_t[:, :, :, ::1] o32
    cdef int64_t[:, :, :, ::1] o64
    c.p32, c.p64, c.requant = NULL, NULL, NULL
    if out.size == 0:
        return False if requant is not None else out
    if requant is None:
        if wide:
            o64 = out
            c.p64 = &o64[0, 0, 0, 0]
        else:
            o32 = out
            c.p32 = &o32[0, 0, 0, 0]
    threads = max(threads, 1)
    c.isa, c.P, c.wt, c.bias = isa, &P[0, 0, 0, 0], &wt[0, 0], &bias[0]
    c.N, c.PH, c.PW, c.CM, c.KH, c.KW, c.OH, c.OW = N, PH, PW, CM, KH, KW, OH, OW
    c.sy, c.sx, c.dy, c.dx = sy, sx, dy, dx
    c.by_rows = N == 1
    c.acc = <int32_t *>malloc(threads * CM * sizeof(int32_t) + 64)
    if c.acc == NULL:
        raise MemoryError()
    cdef int64_t units = OH if c.by_rows else N
    cdef bint bad = False
    if requant is None:
        with nogil:
            _pool_run(_depthwise_part, &c, units, qsim_parts_for(units, threads), threads)
        free(c.acc)
        return out
    # blocks of whole output rows, at most REQUANT_SCRATCH_BYTES of accumulators
    c.block_rows = max(1, REQUANT_SCRATCH_BYTES // (4 * OW * CM))
    try:
        _requant_open(&r, isa, requant, out, CM, c.block_rows * OW, threads)
    except BaseException:
        free(c.acc)
        raise
    c.requant = &r
    units = N * OH
    with nogil:
        _pool_run(_depthwise_requant_part, &c, units, qsim_parts_for(units, threads), threads)
    free(c.acc)
    return _requant_close(&r, threads)


def max_pool(int isa, const int16_t[:, :, :, ::1] P, int64_t KH, int64_t KW, int64_t OH,
             int64_t OW, stride, out):
    """MAX_POOL2D over the prepared buffer into `out` (int8 or int16, [N,OH,OW,C])."""
    cdef int64_t N = P.shape[0], PH = P.shape[1], PW = P.shape[2], C = P.shape[3]
    cdef int64_t sy = stride[0], sx = stride[1]
    acc = np.empty(C, dtype=np.int16)
    cdef int16_t[::1] accv = acc
    cdef int16_t[:, :, :, ::1] o16
    cdef int8_t[:, :, :, ::1] o8
    cdef int16_t *p16 = NULL
    cdef int8_t *p8 = NULL
    if out.dtype == np.int16:
        o16 = out
        p16 = &o16[0, 0, 0, 0]
    else:
        o8 = out
        p8 = &o8[0, 0, 0, 0]
    with nogil:
        if isa == QSIM_ISA_AVX512VNNI:
            qsim_maxpool_avx512(&P[0, 0, 0, 0], N, PH, PW, C, KH, KW, OH, OW, sy, sx, &accv[0], p16, p8)
        elif isa == QSIM_ISA_AVX2:
            qsim_maxpool_avx2(&P[0, 0, 0, 0], N, PH, PW, C, KH, KW, OH, OW, sy, sx, &accv[0], p16, p8)
        else:
            qsim_maxpool_base(&P[0, 0, 0, 0], N, PH, PW, C, KH, KW, OH, OW, sy, sx, &accv[0], p16, p8)


def avg_pool(int isa, const int16_t[:, :, :, ::1] P, int64_t IH, int64_t IW, int64_t KH,
             int64_t KW, int64_t OH, int64_t OW, stride, int64_t pad_top, int64_t pad_left,
             const int64_t[::1] mult, const int64_t[::1] shift, int64_t output_zp, int64_t lo,
             int64_t hi, out):
    """AVG_POOL2D; returns True when a REQUIRE of apply_scale_32 failed."""
    cdef int64_t N = P.shape[0], PH = P.shape[1], PW = P.shape[2], C = P.shape[3]
    cdef int64_t sy = stride[0], sx = stride[1]
    acc = np.empty(C, dtype=np.int32)
    cdef int32_t[::1] accv = acc
    cdef int16_t[:, :, :, ::1] o16
    cdef int8_t[:, :, :, ::1] o8
    cdef int16_t *p16 = NULL
    cdef int8_t *p8 = NULL
    cdef int bad = 0
    if out.dtype == np.int16:
        o16 = out
        p16 = &o16[0, 0, 0, 0]
    else:
        o8 = out
        p8 = &o8[0, 0, 0, 0]
    with nogil:
        if isa == QSIM_ISA_AVX512VNNI:
            qsim_avgpool_avx512(&P[0, 0, 0, 0], N, PH, PW, C, IH, IW, KH, KW, OH, OW, sy, sx,
                                pad_top, pad_left, &mult[0], &shift[0], output_zp, lo, hi,
                                &accv[0], p16, p8, &bad)
        elif isa == QSIM_ISA_AVX2:
            qsim_avgpool_avx2(&P[0, 0, 0, 0], N, PH, PW, C, IH, IW, KH, KW, OH, OW, sy, sx,
                              pad_top, pad_left, &mult[0], &shift[0], output_zp, lo, hi,
                              &accv[0], p16, p8, &bad)
        else:
            qsim_avgpool_base(&P[0, 0, 0, 0], N, PH, PW, C, IH, IW, KH, KW, OH, OW, sy, sx,
                              pad_top, pad_left, &mult[0], &shift[0], output_zp, lo, hi,
                              &accv[0], p16, p8, &bad)
    return bool(bad)


cdef struct _RescaleCtx:
    int isa, icode, ocode, scale32
    const char *x
    char *y
    int64_t xsize, ysize, C, input_zp, output_zp, lo, hi
    const int64_t *mult
    const int64_t *shift
    const int64_t *rnd
    const int64_t *dround
    int *bad                      # one flag per thread slot


cdef void _rescale_part(void *ctx, int slot, int64_t lo, int64_t hi) noexcept nogil:
    cdef _RescaleCtx *c = <_RescaleCtx *>ctx
    cdef int bad = 0
    qsim_rescale(c.isa, c.icode, c.ocode, c.x + lo * c.C * c.xsize, (hi - lo) * c.C, c.C, c.input_zp, c.mult,
                 c.shift, c.rnd, c.dround, c.scale32, c.output_zp, c.lo, c.hi, c.y + lo * c.C * c.ysize, &bad)
    if bad:
        c.bad[slot] = 1


def rescale(int isa, cnp.ndarray x, int64_t C, int64_t input_zp, const int64_t[::1] mult,
            const int64_t[::1] shift, const int64_t[::1] rnd, const int64_t[::1] dround,
            bint scale32, int64_t output_zp, int64_t lo, int64_t hi, cnp.ndarray y, int threads=1):
    """RESCALE x (C-contiguous, whole rows of C channels) into y (same shape), the rows on
    `threads` threads of the pool; returns True when a REQUIRE failed."""
    cdef _RescaleCtx c
    cdef int64_t rows = x.size // C if C > 0 else 0, i
    cdef int any_bad = 0
    if C <= 0 or x.size % C:
        raise ValueError(f"rescale: {x.size} values are not whole rows of {C} channels")
    if rows == 0:
        return False
    c.isa, c.icode, c.ocode, c.scale32 = isa, RESCALE_CODES[x.dtype], RESCALE_CODES[y.dtype], scale32
    c.x, c.y = <const char *>cnp.PyArray_DATA(x), <char *>cnp.PyArray_DATA(y)
    c.xsize, c.ysize, c.C, c.input_zp, c.output_zp, c.lo, c.hi = x.itemsize, y.itemsize, C, input_zp, output_zp, lo, hi
    c.mult, c.shift, c.rnd, c.dround = &mult[0], &shift[0], &rnd[0], &dround[0]
    c.bad = <int *>malloc(max(threads, 1) * sizeof(int))
    if c.bad == NULL:
        raise MemoryError()
    for i in range(max(threads, 1)):
        c.bad[i] = 0
    with nogil:
        _pool_run(_rescale_part, &c, rows, qsim_parts_for(rows, threads), threads)
    for i in range(max(threads, 1)):
        any_bad |= c.bad[i]
    free(c.bad)
    return bool(any_bad)


def table_i8(const int8_t[::1] x, const int8_t[::1] table, int8_t[::1] y):
    with nogil:
        qsim_table_i8(&x[0], x.shape[0], &table[0], &y[0])


def table_i16(const int16_t[::1] x, const int16_t[::1] table, int32_t[::1] y):
    """Returns True when a slope REQUIRE of apply_lookup failed."""
    cdef int bad = 0
    with nogil:
        qsim_table_i16(&x[0], x.shape[0], &table[0], &y[0], &bad)
    return bool(bad)


def clamp(int isa, cnp.ndarray x, int64_t lo, int64_t hi, cnp.ndarray y):
    cdef int64_t n = x.size
    cdef const int8_t *x8 = <const int8_t *>cnp.PyArray_DATA(x)
    cdef int8_t *y8 = <int8_t *>cnp.PyArray_DATA(y)
    cdef const int16_t *x16 = <const int16_t *>cnp.PyArray_DATA(x)
    cdef int16_t *y16 = <int16_t *>cnp.PyArray_DATA(y)
    if x.dtype == np.int8:
        with nogil:
            if isa == QSIM_ISA_AVX512VNNI:
                qsim_clamp_i8_avx512(x8, n, <int8_t>lo, <int8_t>hi, y8)
            elif isa == QSIM_ISA_AVX2:
                qsim_clamp_i8_avx2(x8, n, <int8_t>lo, <int8_t>hi, y8)
            else:
                qsim_clamp_i8_base(x8, n, <int8_t>lo, <int8_t>hi, y8)
    else:
        with nogil:
            if isa == QSIM_ISA_AVX512VNNI:
                qsim_clamp_i16_avx512(x16, n, <int16_t>lo, <int16_t>hi, y16)
            elif isa == QSIM_ISA_AVX2:
                qsim_clamp_i16_avx2(x16, n, <int16_t>lo, <int16_t>hi, y16)
            else:
                qsim_clamp_i16_base(x16, n, <int16_t>lo, <int16_t>hi, y16)


EW_RANK = QSIM_EW_RANK


def elementwise(int isa, int op, cnp.ndarray a, cnp.ndarray b, cnp.ndarray out,
                const int64_t[::1] shape, const int64_t[::1] sa, const int64_t[::1] sb, int shift):
    """out (int32, C-contiguous, `shape`) = op(a, b) with element strides sa/sb (0 = broadcast);
    returns True when a result left int32 where the spec REQUIREs it not to."""
    cdef int bad = 0
    cdef int dcode = RESCALE_CODES[a.dtype]
    cdef const void *ap = cnp.PyArray_DATA(a)
    cdef const void *bp = cnp.PyArray_DATA(b)
    cdef int32_t *op_ = <int32_t *>cnp.PyArray_DATA(out)
    cdef int rank = shape.shape[0]
    with nogil:
        qsim_elementwise(isa, op, dcode, ap, bp, op_, rank, &shape[0], &sa[0], &sb[0], shift, &bad)
    return bool(bad)


def reduce(int isa, int kind, cnp.ndarray x, int64_t outer, int64_t n, int64_t inner,
           cnp.ndarray out):
    """REDUCE_SUM (kind 0) / MAX (1) / MIN (2) of C-contiguous x viewed as [outer][n][inner];
    returns True when a partial sum left int32 (SUM's REQUIRE)."""
    cdef int bad = 0
    cdef int dcode = RESCALE_CODES[x.dtype]
    acc = np.empty(max(inner, 1), dtype=np.int64)
    cdef int64_t[::1] accv = acc
    cdef const void *xp = cnp.PyArray_DATA(x)
    cdef void *yp = cnp.PyArray_DATA(out)
    with nogil:
        qsim_reduce(isa, kind, dcode, xp, outer, n, inner, &accv[0], yp, &bad)
    return bool(bad)
