/* The 16-bit GEMM modes on AVX-512 VNNI (and the AMX CPUs, which run this code for them):
 * CONV2D / CONV3D / TRANSPOSE_CONV2D / FULLY_CONNECTED int16 x int8 and MATMUL int16 x int16,
 * int48 accumulation (held in int64), over the same implicit-GEMM int16 buffer as
 * qsim_gemm_i16_body (qgemm.h): row p at K index (t, k) reads A[rows[p] + taps[t] + k],
 * k < C2 (the channels rounded up to even, the padding channel 0: the 16-bit modes have zero
 * points 0, so it adds nothing).
 *
 * Operand B: int16 weights, each |w| <= 255: the 16x8 mode's w - weight_zp (int8 minus an int8
 * zero point), or, for 16x16, each int16 weight split as w = 256 * hi + lo with lo in [0, 255]
 * and hi in [-128, 127] (two packings, the `hi` one optional). Packed in panels of 16 columns:
 * for each K pair q, 16 columns x (w[2q], w[2q+1]), the vpdpwssd operand order.
 *
 * Exactness: vpdpwssd adds, to each int32 lane, two products int16 x int16. Every product here
 * is |a * w| <= 32768 * 255 = 8,355,840, so a block of QSIM_I16_PAIRS = 128 pairs (256 products)
 * sums to at most 2,139,095,040 <= 2^31 - 1 in magnitude, and so does every partial sum of it:
 * the int32 lanes never wrap (nothing is taken modulo 2^32 here). After each block the lanes are
 * widened into int64 accumulators (the hi block shifted left by 8 first: 256 * hi_sum), exact,
 * and the caller proved that no partial sum of the spec's accumulation leaves int48
 * (gemm_ops.py), so the int64 total is the spec's int48 value. The bias is added at the end.
 */
#ifndef QSIM_QGEMM_I16_H
#define QSIM_QGEMM_I16_H

#include <stdint.h>
#include <string.h>
#include "isa_paths.h"

#define QSIM_I16_PAIRS 128   /* K pairs per exact int32 block (see above) */
#define QSIM_I16_MR 6        /* rows per register block (x 64 columns, or 32 when split) */

/* bytes of one packing of Wt[N][KT] (KT even) */
static inline size_t qsim_pack_i16_bytes(int64_t N, int64_t KT) {
    return (size_t)((N + 15) / 16 * 16 * KT * 2);
}

/* Wt[N][KT] int16 (row n: its K values, KT even) -> panels of 16 columns x KT/2 pairs */
static void qsim_pack_i16(const int16_t *Wt, int64_t N, int64_t KT, int16_t *dst) {
    const int64_t NP = (N + 15) / 16 * 16, pairs = KT / 2;
    for (int64_t p0 = 0; p0 < NP; p0 += 16)
        for (int64_t q = 0; q < pairs; q++) {
            int16_t *o = dst + (p0 * pairs + q * 16) * 2;
            for (int64_t j = 0; j < 16; j++) {
                const int64_t n = p0 + j;
                o[2 * j] = n < N ? Wt[n * KT + 2 * q] : 0;
                o[2 * j + 1] = n < N ? Wt[n * KT + 2 * q + 1] : 0;
            }
        }
}

#if QSIM_X86
/* acc[0..16) (int64, in memory: the widening is once per block) += the block's int32 lanes << shift */
static inline __attribute__((always_inline)) QSIM_TARGET_VNNI void
qsim_i16_flush(int64_t *acc, __m512i blk, int shift) {
    const __m512i lo = _mm512_slli_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(blk)), shift);
    const __m512i hi = _mm512_slli_epi64(_mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(blk, 1)), shift);
    _mm512_storeu_si512((void *)acc, _mm512_add_epi64(_mm512_loadu_si512((const void *)acc), lo));
    _mm512_storeu_si512((void *)(acc + 8), _mm512_add_epi64(_mm512_loadu_si512((const void *)(acc + 8)), hi));
}

/* MR rows x NV * 16 columns: int32 block sums in registers (MR * NV, twice when split), the
 * int64 totals in acc[MR][64] */
static inline __attribute__((always_inline)) QSIM_TARGET_VNNI void
qsim_i16_tile(const int MR, const int NV, const int split, const int16_t *A, const int64_t *rows,
              const int64_t *taps, int64_t T, int64_t C2, const int16_t *lo, const int16_t *hi,
              int64_t pstride, int64_t ncols, const int64_t *bias, int64_t *out, int64_t ldo) {
    __m512i blo[QSIM_I16_MR][4], bhi[QSIM_I16_MR][2];
    int64_t acc[QSIM_I16_MR][64] __attribute__((aligned(64)));
    memset(acc, 0, sizeof acc);
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++) {
            blo[r][v] = _mm512_setzero_si512();
            if (split) bhi[r][v] = _mm512_setzero_si512();
        }
    int64_t in_block = 0, q = 0;
    for (int64_t t = 0; t < T; t++) {
        const int16_t *a[QSIM_I16_MR];
        for (int r = 0; r < MR; r++) a[r] = A + rows[r] + taps[t];
        for (int64_t k = 0; k < C2; k += 2, q++) {
            __m512i wl[4], wh[2];
            for (int v = 0; v < NV; v++) {
                wl[v] = _mm512_loadu_si512((const void *)(lo + v * pstride + q * 32));
                if (split) wh[v] = _mm512_loadu_si512((const void *)(hi + v * pstride + q * 32));
            }
            for (int r = 0; r < MR; r++) {
                int32_t pair;
                memcpy(&pair, a[r] + k, 4);
                const __m512i av = _mm512_set1_epi32(pair);
                for (int v = 0; v < NV; v++) {
                    blo[r][v] = _mm512_dpwssd_epi32(blo[r][v], av, wl[v]);
                    if (split) bhi[r][v] = _mm512_dpwssd_epi32(bhi[r][v], av, wh[v]);
                }
            }
            if (++in_block == QSIM_I16_PAIRS || (t == T - 1 && k + 2 >= C2)) {
                for (int r = 0; r < MR; r++)
                    for (int v = 0; v < NV; v++) {
                        qsim_i16_flush(acc[r] + 16 * v, blo[r][v], 0);
                        blo[r][v] = _mm512_setzero_si512();
                        if (split) {
                            qsim_i16_flush(acc[r] + 16 * v, bhi[r][v], 8);
                            bhi[r][v] = _mm512_setzero_si512();
                        }
                    }
                in_block = 0;
            }
        }
    }
    for (int r = 0; r < MR; r++)
        for (int64_t j = 0; j < ncols; j++) out[r * ldo + j] = acc[r][j] + (bias ? bias[j] : 0);
}

#define QSIM_I16_CASE(mr, nv, sp)                                                               \
    qsim_i16_tile(mr, nv, sp, A, rows + p, taps, T, C2, lo, hi, pairs * 32, ncols,             \
                  bias ? bias + p0 : 0, out + p * N + p0, N)
#define QSIM_I16_ROWS(nv, sp)                                                                   \
    switch (mr) { case 6: QSIM_I16_CASE(6, nv, sp); break; case 5: QSIM_I16_CASE(5, nv, sp); break; \
                  case 4: QSIM_I16_CASE(4, nv, sp); break; case 3: QSIM_I16_CASE(3, nv, sp); break; \
                  case 2: QSIM_I16_CASE(2, nv, sp); break; default: QSIM_I16_CASE(1, nv, sp); }

/* out[p][n] = sum over (t, k) of A[rows[p] + taps[t] + k] * w(n, t, k) (+ bias[n]), int64;
 * plo (and phi for 16x16) packed by qsim_pack_i16 from Wt[N][T * C2]. Column groups of 64
 * (32 when split), each 16-column panel's pairs pstride = pairs * 32 values apart. */
static QSIM_TARGET_VNNI void
qsim_gemm_i16_vnni(const int16_t *A, const int64_t *rows, int64_t M, const int64_t *taps, int64_t T,
                   int64_t C2, const int16_t *plo, const int16_t *phi, int64_t N, const int64_t *bias,
                   int64_t *out) {
    const int64_t pairs = T * C2 / 2, NP = (N + 15) / 16 * 16, group = phi ? 32 : 64;
    if (pairs == 0) {                     /* no K: the bias */
        for (int64_t p = 0; p < M; p++)
            for (int64_t j = 0; j < N; j++) out[p * N + j] = bias ? bias[j] : 0;
        return;
    }
    for (int64_t p0 = 0; p0 < NP; p0 += group) {
        const int16_t *lo = plo + p0 * pairs * 2, *hi = phi ? phi + p0 * pairs * 2 : 0;
        const int64_t ncols = N - p0 < group ? N - p0 : group;
        const int nv = (int)((ncols + 15) / 16);
        for (int64_t p = 0; p < M; p += QSIM_I16_MR) {
            const int mr = (int)(M - p < QSIM_I16_MR ? M - p : QSIM_I16_MR);
            if (hi) {
                if (nv == 2) { QSIM_I16_ROWS(2, 1) } else { QSIM_I16_ROWS(1, 1) }
            } else {
                switch (nv) {
                    case 4: QSIM_I16_ROWS(4, 0) break;
                    case 3: QSIM_I16_ROWS(3, 0) break;
                    case 2: QSIM_I16_ROWS(2, 0) break;
                    default: QSIM_I16_ROWS(1, 0)
                }
            }
        }
    }
}
#else  /* off x86 the Python side never packs (gemm_ops._i16_packed: not the VNNI path) */
static void qsim_gemm_i16_vnni(const int16_t *A, const int64_t *rows, int64_t M, const int64_t *taps, int64_t T,
                               int64_t C2, const int16_t *plo, const int16_t *phi, int64_t N,
                               const int64_t *bias, int64_t *out) {
    (void)A; (void)rows; (void)M; (void)taps; (void)T; (void)C2; (void)plo; (void)phi; (void)N;
    (void)bias; (void)out;
}
#endif /* QSIM_X86 */

#endif
