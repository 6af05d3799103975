/* CVM int8 GEMM: out[m][n] = sum_k a[m][k] * bt[k][n] with int32 sums (qsim.kernels._cvm_conv).
 *
 * The caller guarantees (CVM precision rule: output precision
 * <= 32) that no partial sum leaves int32; the sums are exact, so the AVX2 clone (the
 * same C code compiled for AVX2, picked at run time) gives the same bits as the
 * portable one. */
#ifndef QSIM_CVM_GEMM_H
#define QSIM_CVM_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_features.h"

/* bt is b transposed (K x N, N contiguous): the inner loop runs over a block of NB output
 * columns with a[m][k] broadcast, which compilers vectorize (int8 x int8 -> int32). The
 * block's accumulators (NB int32) stay in registers or L1 across the whole k loop. */
#define QSIM_CVM_NB 64
#define QSIM_CVM_GEMM_BODY                                                          \
    for (ptrdiff_t m = 0; m < M; ++m) {                                             \
        const int8_t* ar = a + m * K;                                               \
        int32_t* orow = out + m * N;                                                \
        for (ptrdiff_t n0 = 0; n0 < N; n0 += QSIM_CVM_NB) {                         \
            ptrdiff_t nb = N - n0 < QSIM_CVM_NB ? N - n0 : QSIM_CVM_NB;             \
            int32_t acc[QSIM_CVM_NB];                                               \
            for (ptrdiff_t j = 0; j < QSIM_CVM_NB; ++j) acc[j] = 0;                 \
            if (nb == QSIM_CVM_NB) {                                                \
                for (ptrdiff_t k = 0; k < K; ++k) {                                 \
                    const int8_t* br = bt + k * N + n0;                             \
                    int16_t av = ar[k];                                             \
                    for (ptrdiff_t j = 0; j < QSIM_CVM_NB; ++j)                     \
                        acc[j] += (int16_t)(av * br[j]); /* |a*b| <= 127*127 */     \
                }                                                                   \
            } else {                                                                \
                for (ptrdiff_t k = 0; k < K; ++k) {                                 \
                    const int8_t* br = bt + k * N + n0;                             \
                    int32_t av = ar[k];                                             \
                    for (ptrdiff_t j = 0; j < nb; ++j) acc[j] += av * br[j];        \
                }                                                                   \
            }                                                                       \
            for (ptrdiff_t j = 0; j < nb; ++j) orow[n0 + j] = acc[j];               \
        }                                                                           \
    }

static void qsim_cvm_gemm_portable(const int8_t* a, const int8_t* bt, int32_t* out,
                                   ptrdiff_t M, ptrdiff_t N, ptrdiff_t K) {
    QSIM_CVM_GEMM_BODY
}

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
__attribute__((target("avx2")))
static void qsim_cvm_gemm_avx2(const int8_t* a, const int8_t* bt, int32_t* out,
                               ptrdiff_t M, ptrdiff_t N, ptrdiff_t K) {
    QSIM_CVM_GEMM_BODY
}
#define QSIM_CVM_HAVE_AVX2_CLONE 1
#else
#define QSIM_CVM_HAVE_AVX2_CLONE 0
#endif

/* use_simd: 1 = the AVX2 clone when the CPU has it, 0 = always portable (tests). */
static inline void qsim_cvm_gemm(const int8_t* a, const int8_t* bt, int32_t* out,
                                 ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, int use_simd) {
#if QSIM_CVM_HAVE_AVX2_CLONE
    if (use_simd && qsim_cpu_has_avx2()) {
        qsim_cvm_gemm_avx2(a, bt, out, M, N, K);
        return;
    }
#endif
    qsim_cvm_gemm_portable(a, bt, out, M, N, K);
}

static inline int qsim_cvm_gemm_simd_available(void) {
    return QSIM_CVM_HAVE_AVX2_CLONE && qsim_cpu_has_avx2();
}

#endif
