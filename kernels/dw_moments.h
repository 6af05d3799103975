/* Input patch moments of a depthwise convolution (dilation 1) for adaptive weight rounding
 * (qsim/quant/rounding.py PatchMoments.add_depthwise), straight from one input channel:
 *
 *   so[a*K + b] += sum over oy, ox of v(a) v(b)   (a <= b),   s1[a] += sum of v(a),
 *   v(a) = xp[oy*sy + ay][ox*sx + ax],  a = ay*KW + ax,
 *
 * xp [Hp][Wp] the window of the channel the outputs read, as doubles, padding as 0.
 * Products of two float32 are exact in double; every sum has a fixed order, per channel (no
 * dependence on the thread split or on the channel block a channel is summed in). Built with
 * -ffp-contract=off: no fused multiply-add changes a rounding.
 *
 * For a tap offset (dy, dx) = b - a, the row sums T_ay[j] = sum over oy of
 * xp[oy*sy + ay][j] * xp[oy*sy + ay + dy][j + dx] are elementwise over j (vector code); the
 * one for ay + sy is the one for ay minus its first row's products plus the next row's.
 * Each pair (a, a + d) then adds OW terms of T_ay, strided by sx, all ax of one ay side by
 * side (independent sums). About 2 Hp Wp operations per offset instead of OH OW per pair.
 *
 * Register blocking: the row sums of QSIM_DWM_JB neighbouring j, and the strided sums of up
 * to that many ax, stay in registers through their whole reduction (over oy, over ox) and are
 * stored once, instead of a load, an add and a store per step (the strided sums waited on
 * their own stores: a store-to-load forwarding round trip per ox; measured on EfficientNet-
 * Lite0's depthwise layers at the 128-sample lattice: 14.0 -> 9.8 ms per sample). Each sum
 * still starts at 0.0 and adds its terms one by one in increasing oy / ox, and a pair's
 * strided sum is then added to its total: the same operations in the same order, so the same
 * bits as the one-step-at-a-time loops. The blocked helpers are written once
 * (dw_moments_path.h) and compiled per ISA path with that path's native vector type (GCC
 * lowers a wider generic vector through memory: the AVX2 copy of a 64-byte-vector form ran
 * at half the speed of the plain loops).
 */
#ifndef QSIM_DW_MOMENTS_H
#define QSIM_DW_MOMENTS_H

#include <stdint.h>
#include "isa_paths.h"

/* Channel blocks: QSIM_DWM_CB channels side by side, innermost (one AVX-512 vector of
 * doubles, two AVX2 ones). Every array below holds QSIM_DWM_CB lanes per element:
 * xp[(r*Wp + j)*CB + l] is channel l's xp[r][j]. Each lane goes through exactly the
 * operations, in the order, of the one-channel formulation above (elementwise over the lanes,
 * no reduction across them), so a channel's totals are the same bits whatever block, lane or
 * ISA path it is computed in; lanes past the last channel hold zeros and are never stored. */
#define QSIM_DWM_CB 8

/* t[j] = (prev[j] - old0[j] * old1[j]) + new0[j] * new1[j]  (old1/new1 NULL: no products) */
QSIM_INLINE void qsim_dwm_slide(const double *restrict prev, const double *restrict old0,
                                  const double *restrict old1, const double *restrict new0,
                                  const double *restrict new1, double *restrict t,
                                  int64_t j0, int64_t j1)
{
    const int64_t L = QSIM_DWM_CB;
    if (old1) {
        for (int64_t j = j0 * L; j < j1 * L; j++)
            t[j] = (prev[j] - old0[j] * old1[j]) + new0[j] * new1[j];
    } else {
        for (int64_t j = j0 * L; j < j1 * L; j++)
            t[j] = (prev[j] - old0[j]) + new0[j];
    }
}

/* The blocked helpers and the sample body, once per ISA path (dw_moments_path.h): the vector
 * type and the block size (JB elements' sums in registers: 6 x 8 doubles is 6 AVX-512 or 12
 * AVX2 registers, 3 x 8 is 12 SSE2 ones, with room for the operands). */
#if QSIM_X86
typedef double qsim_dwm_v8 __attribute__((vector_size(64)));
typedef double qsim_dwm_v4 __attribute__((vector_size(32)));
#define QSIM_DWM_SFX avx512
#define QSIM_DWM_TARGET QSIM_TARGET_AVX512
#define QSIM_DWM_VT qsim_dwm_v8
#define QSIM_DWM_JB 6
#include "dw_moments_path.h"
#define QSIM_DWM_SFX avx2
#define QSIM_DWM_TARGET QSIM_TARGET_AVX2
#define QSIM_DWM_VT qsim_dwm_v4
#define QSIM_DWM_JB 6
#include "dw_moments_path.h"
#endif
typedef double qsim_dwm_v2 __attribute__((vector_size(16)));
#define QSIM_DWM_SFX base
#define QSIM_DWM_TARGET
#define QSIM_DWM_VT qsim_dwm_v2
#define QSIM_DWM_JB 3
#include "dw_moments_path.h"

static void qsim_dw_moments_block(int isa, const double *xp, int64_t Hp, int64_t Wp,
                                  int64_t KH, int64_t KW, int64_t sy, int64_t sx, int64_t OH,
                                  int64_t OW, double *tsum, double *so, double *s1)
{
    QSIM_DISPATCH(isa, qsim_dw_moments, xp, Hp, Wp, KH, KW, sy, sx, OH, OW, tsum, so, s1);
}

/* The window of one channel block and sample, as the sums read it: xp[(r*Wp + j)*CB + l] =
 * channel l's x[src_row[r]][src_col[j]] widened to double (exact), 0.0 where either index is
 * -1 (padding) and for the lanes l >= `lanes` (past the last channel). x is read at element
 * strides xs1 (channel), xs2 (row), xs3 (column) from the block's first channel xc. A copy:
 * every path writes the same doubles. */
static void qsim_dwm_window_base(const float *xc, double *xp, int64_t Hp, int64_t Wp,
                                 const int64_t *src_row, const int64_t *src_col, int64_t xs1,
                                 int64_t xs2, int64_t xs3, int64_t lanes)
{
    const int64_t L = QSIM_DWM_CB;
    for (int64_t r = 0; r < Hp; r++) {
        const int64_t iy = src_row[r];
        for (int64_t j = 0; j < Wp; j++) {
            const int64_t ix = src_col[j];
            double *row = xp + (r * Wp + j) * L;
            int64_t l = 0;
            if (iy >= 0 && ix >= 0)
                for (; l < lanes; l++)
                    row[l] = (double)xc[l * xs1 + iy * xs2 + ix * xs3];
            for (; l < L; l++)
                row[l] = 0.0;
        }
    }
}

#if QSIM_X86
/* The AVX-512 copy: one masked gather of the block's 8 channels at a window element (lanes
 * past `lanes` masked off: 0.0f), one widening to 8 doubles and one store, instead of 8
 * scalar loads, conversions and stores (the scalar copy was ~15 % of the depthwise moments
 * on EfficientNet-Lite0's deep layers). The channel offsets l * xs1 must fit int32 (the
 * caller checks). */
static QSIM_TARGET_AVX512 void qsim_dwm_window_avx512(const float *xc, double *xp, int64_t Hp, int64_t Wp,
                                                     const int64_t *src_row, const int64_t *src_col,
                                                     int64_t xs1, int64_t xs2, int64_t xs3, int64_t lanes)
{
    const int64_t L = QSIM_DWM_CB;
    const __m256i offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                               _mm256_set1_epi32((int32_t)xs1));
    const __mmask8 valid = lanes >= 8 ? (__mmask8)0xff : (__mmask8)((1u << lanes) - 1u);
    const __m512d zero = _mm512_setzero_pd();
    for (int64_t r = 0; r < Hp; r++) {
        const int64_t iy = src_row[r];
        for (int64_t j = 0; j < Wp; j++) {
            const int64_t ix = src_col[j];
            double *row = xp + (r * Wp + j) * L;
            if (iy >= 0 && ix >= 0) {
                const __m256 v = _mm256_mmask_i32gather_ps(_mm256_setzero_ps(), valid, offsets,
                                                           xc + iy * xs2 + ix * xs3, 4);
                _mm512_storeu_pd(row, _mm512_cvtps_pd(v));
            } else {
                _mm512_storeu_pd(row, zero);
            }
        }
    }
}
#endif

static void qsim_dwm_window(int isa, const float *xc, double *xp, int64_t Hp, int64_t Wp,
                            const int64_t *src_row, const int64_t *src_col, int64_t xs1, int64_t xs2,
                            int64_t xs3, int64_t lanes)
{
#if QSIM_X86
    if (isa == QSIM_ISA_AVX512VNNI && QSIM_DWM_CB == 8 && xs1 >= -(INT32_MAX / 8) && xs1 <= INT32_MAX / 8) {
        qsim_dwm_window_avx512(xc, xp, Hp, Wp, src_row, src_col, xs1, xs2, xs3, lanes);
        return;
    }
#endif
    qsim_dwm_window_base(xc, xp, Hp, Wp, src_row, src_col, xs1, xs2, xs3, lanes);
}

/* Asks for the running totals of a channel block before its sums (a hint: no value changes).
 * They stay in memory from sample to sample, a 5x5 block's 325 entries of 64 bytes 40 KB apart
 * from the next block's, and were fetched entry by entry as the pairs were summed: each a miss
 * to the far cache, which the prefetcher does not foresee in that order (EfficientNet-Lite0's
 * depthwise layers hold 34 MB of totals). Issued for the next block while this one is summed. */
static void qsim_dwm_prefetch_totals(const double *so, const double *s1, int64_t K)
{
    const int64_t L = QSIM_DWM_CB;
    for (int64_t a = 0; a < K; a++) {
        for (int64_t b = a; b < K; b++)
            __builtin_prefetch(so + (a * K + b) * L, 1, 3);
        __builtin_prefetch(s1 + a * L, 1, 3);
    }
}

#endif
