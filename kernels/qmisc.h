/* The non-GEMM TOSA kernels: DEPTHWISE_CONV2D, MAX/AVG_POOL2D, RESCALE, TABLE, CLAMP, and the
 * int16-mode (int48 accumulator) implicit GEMM.
 *
 * Loops are written so the compiler vectorizes them; each hot loop is compiled three times
 * (AVX-512, AVX2, baseline x86-64) from one always_inline body, and qsim_isa picks the copy.
 * All paths compute the same integers: only the instruction selection differs.
 */
#ifndef QSIM_QMISC_H
#define QSIM_QMISC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "qgemm.h"
#include "tosa_arith.h"

#if QSIM_X86
#define QSIM_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define QSIM_DISPATCH(isa, fn, ...)                                             \
    do {                                                                        \
        if ((isa) == QSIM_ISA_AVX512VNNI) fn##_avx512(__VA_ARGS__);             \
        else if ((isa) == QSIM_ISA_AVX2) fn##_avx2(__VA_ARGS__);                \
        else fn##_base(__VA_ARGS__);                                            \
    } while (0)
#define QSIM_VERSIONS(fn, params, args)                                         \
    static QSIM_TARGET_AVX512 void fn##_avx512 params { fn##_body args; }       \
    static QSIM_TARGET_AVX2 void fn##_avx2 params { fn##_body args; }           \
    static void fn##_base params { fn##_body args; }
#else
#define QSIM_DISPATCH(isa, fn, ...) fn##_base(__VA_ARGS__)
#define QSIM_VERSIONS(fn, params, args) static void fn##_base params { fn##_body args; }
#endif
#define QSIM_INLINE static inline __attribute__((always_inline))

/* ------------------------------------------------------------ DEPTHWISE_CONV2D -----------
 * P: int16 [N][PH][PW][CM] holding (x - input_zp) with zeros in the padding, channel c of the
 * input repeated M times (so channel c*M+m of P meets weight channel c*M+m).
 * Wt: int16 [KH*KW][CM] holding (w - weight_zp). acc: int32 scratch of CM.
 * The caller proved KH*KW*max|x-zp|*max|w-zp| + |bias| < 2^31: int32 accumulation is exact.
 */
/* Register blocking: QSIM_DW_OX output pixels x 16 channels of int32 accumulators stay in
 * registers over all taps (fixed-size inner loops the compiler turns into vector code on each
 * ISA copy); the scratch `acc` is unused and kept for the call signature. */
#define QSIM_DW_OX 4
QSIM_INLINE void qsim_depthwise_block(const int16_t *restrict P, int64_t PW, int64_t CM,
                                      const int16_t *restrict Wt, int64_t KH, int64_t KW,
                                      int64_t sx, int64_t dy, int64_t dx, int64_t c0,
                                      int64_t nox, const int64_t *restrict bias,
                                      int32_t *restrict out32, int64_t *restrict out64,
                                      int64_t o) {
    int32_t a[QSIM_DW_OX][16];
    for (int i = 0; i < QSIM_DW_OX; i++)
        for (int j = 0; j < 16; j++) a[i][j] = 0;
    for (int64_t ky = 0; ky < KH; ky++)
        for (int64_t kx = 0; kx < KW; kx++) {
            const int16_t *w = Wt + (ky * KW + kx) * CM + c0;
            const int16_t *p = P + (ky * dy * PW + kx * dx) * CM + c0;
            for (int i = 0; i < QSIM_DW_OX; i++)
                for (int j = 0; j < 16; j++)
                    a[i][j] += (int32_t)p[i * sx * CM + j] * (int32_t)w[j];
        }
    for (int64_t i = 0; i < nox; i++) {
        if (out32)
            for (int j = 0; j < 16; j++) out32[o + i * CM + j] = a[i][j] + (int32_t)bias[c0 + j];
        else
            for (int j = 0; j < 16; j++) out64[o + i * CM + j] = (int64_t)a[i][j] + bias[c0 + j];
    }
}

/* Channels [cfrom, CM) of every pixel, accumulating in the scratch acc[CM] (leftovers of the
 * blocked loops). */
QSIM_INLINE void qsim_depthwise_rest(const int16_t *P, int64_t PW, int64_t CM, const int16_t *Wt,
                                     int64_t KH, int64_t KW, int64_t sx, int64_t dy, int64_t dx,
                                     const int64_t *bias, int32_t *acc, int32_t *out32,
                                     int64_t *out64, int64_t row, int64_t px, int64_t cfrom,
                                     int64_t o) {
    for (int64_t c = cfrom; c < CM; c++) acc[c] = 0;
    for (int64_t ky = 0; ky < KH; ky++)
        for (int64_t kx = 0; kx < KW; kx++) {
            const int16_t *p = P + ((row + ky * dy) * PW + px * sx + kx * dx) * CM;
            const int16_t *w = Wt + (ky * KW + kx) * CM;
            for (int64_t c = cfrom; c < CM; c++) acc[c] += (int32_t)p[c] * (int32_t)w[c];
        }
    if (out32)
        for (int64_t c = cfrom; c < CM; c++) out32[o + c] = acc[c] + (int32_t)bias[c];
    else
        for (int64_t c = cfrom; c < CM; c++) out64[o + c] = (int64_t)acc[c] + bias[c];
}

QSIM_INLINE void qsim_depthwise_body(const int16_t *P, int64_t N, int64_t PH, int64_t PW,
                                     int64_t CM, const int16_t *Wt, int64_t KH, int64_t KW,
                                     int64_t OH, int64_t OW, int64_t sy, int64_t sx, int64_t dy,
                                     int64_t dx, const int64_t *bias, int32_t *acc,
                                     int32_t *out32, int64_t *out64) {
    const int64_t CM16 = CM / 16 * 16;
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++) {
            const int64_t row = n * PH + oy * sy;
            /* full blocks of QSIM_DW_OX pixels x 16 channels */
            int64_t ox = 0;
            for (; ox + QSIM_DW_OX <= OW; ox += QSIM_DW_OX)
                for (int64_t c0 = 0; c0 < CM16; c0 += 16)
                    qsim_depthwise_block(P + (row * PW + ox * sx) * CM, PW, CM, Wt, KH, KW, sx,
                                         dy, dx, c0, QSIM_DW_OX, bias, out32, out64,
                                         ((n * OH + oy) * OW + ox) * CM + c0);
            /* leftover pixels (all channels) and leftover channels (all pixels) */
            for (int64_t px = 0; px < OW; px++) {
                const int64_t cfrom = px < ox ? CM16 : 0;
                if (cfrom < CM)
                    qsim_depthwise_rest(P, PW, CM, Wt, KH, KW, sx, dy, dx, bias, acc, out32,
                                        out64, row, px, cfrom, ((n * OH + oy) * OW + px) * CM);
            }
        }
}
QSIM_VERSIONS(qsim_depthwise,
    (const int16_t *P, int64_t N, int64_t PH, int64_t PW, int64_t CM, const int16_t *Wt,
     int64_t KH, int64_t KW, int64_t OH, int64_t OW, int64_t sy, int64_t sx, int64_t dy,
     int64_t dx, const int64_t *bias, int32_t *acc, int32_t *out32, int64_t *out64),
    (P, N, PH, PW, CM, Wt, KH, KW, OH, OW, sy, sx, dy, dx, bias, acc, out32, out64))

#if QSIM_X86
/* AVX-512 VNNI depthwise: 32 channels of one pixel are one zmm of int16 (no widening); vpdpwssd
 * against (w_even, 0) and (0, w_odd) weight pairs gives the products of the even and the odd
 * channels in two int32 accumulators (each pair sum has one zero term, so it is the exact
 * product; the caller proved the int32 sums exact). 8 pixels x 2 accumulators + 2 weights =
 * 18 zmm. Channels past the last multiple of 32 go through qsim_depthwise_rest. */
#define QSIM_DWV_OX 8
static QSIM_TARGET_VNNI void
qsim_depthwise_vnni(const int16_t *P, int64_t N, int64_t PH, int64_t PW, int64_t CM,
                    const int16_t *Wt, int64_t KH, int64_t KW, int64_t OH, int64_t OW,
                    int64_t sy, int64_t sx, int64_t dy, int64_t dx, const int64_t *bias,
                    int32_t *acc, int32_t *out32, int64_t *out64) {
    const int64_t CM32 = CM / 32 * 32, T = KH * KW;
    if (CM32 == 0) {
        qsim_depthwise_avx512(P, N, PH, PW, CM, Wt, KH, KW, OH, OW, sy, sx, dy, dx, bias, acc,
                              out32, out64);
        return;
    }
    /* weight pairs: per tap and 32-channel block, 32 int16 with odd lanes 0, then 32 with even
     * lanes 0 */
    int16_t *wp = (int16_t *)aligned_alloc(64, (size_t)(T * CM32 * 2 * 2 + 64));
    if (!wp) {
        qsim_depthwise_avx512(P, N, PH, PW, CM, Wt, KH, KW, OH, OW, sy, sx, dy, dx, bias, acc,
                              out32, out64);
        return;
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t c0 = 0; c0 < CM32; c0 += 32)
            for (int64_t j = 0; j < 32; j++) {
                int16_t *q = wp + (t * CM32 + c0) * 2;
                q[j] = (j & 1) ? 0 : Wt[t * CM + c0 + j];
                q[32 + j] = (j & 1) ? Wt[t * CM + c0 + j] : 0;
            }
    const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi_idx = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    int32_t bias32[32];
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++) {
            const int64_t row = n * PH + oy * sy;
            for (int64_t c0 = 0; c0 < CM32; c0 += 32) {
                for (int j = 0; j < 32; j++) bias32[j] = out32 ? (int32_t)bias[c0 + j] : 0;
                for (int64_t ox = 0; ox < OW; ox += QSIM_DWV_OX) {
                    const int64_t nox = OW - ox < QSIM_DWV_OX ? OW - ox : QSIM_DWV_OX;
                    __m512i ae[QSIM_DWV_OX], ao[QSIM_DWV_OX];
                    for (int i = 0; i < QSIM_DWV_OX; i++) ae[i] = ao[i] = _mm512_setzero_si512();
                    for (int64_t ky = 0; ky < KH; ky++)
                        for (int64_t kx = 0; kx < KW; kx++) {
                            const int16_t *q = wp + ((ky * KW + kx) * CM32 + c0) * 2;
                            const __m512i we = _mm512_load_si512((const void *)q);
                            const __m512i wo = _mm512_load_si512((const void *)(q + 32));
                            const int16_t *p = P + ((row + ky * dy) * PW + ox * sx + kx * dx) * CM + c0;
                            if (nox == QSIM_DWV_OX) {
                                for (int i = 0; i < QSIM_DWV_OX; i++) {
                                    __m512i v = _mm512_loadu_si512((const void *)(p + i * sx * CM));
                                    ae[i] = _mm512_dpwssd_epi32(ae[i], v, we);
                                    ao[i] = _mm512_dpwssd_epi32(ao[i], v, wo);
                                }
                            } else {
                                for (int i = 0; i < nox; i++) {
                                    __m512i v = _mm512_loadu_si512((const void *)(p + i * sx * CM));
                                    ae[i] = _mm512_dpwssd_epi32(ae[i], v, we);
                                    ao[i] = _mm512_dpwssd_epi32(ao[i], v, wo);
                                }
                            }
                        }
                    const __m512i b0 = _mm512_loadu_si512((const void *)bias32);
                    const __m512i b1 = _mm512_loadu_si512((const void *)(bias32 + 16));
                    for (int i = 0; i < nox; i++) {
                        const int64_t o = ((n * OH + oy) * OW + ox + i) * CM + c0;
                        __m512i r0 = _mm512_permutex2var_epi32(ae[i], lo_idx, ao[i]);
                        __m512i r1 = _mm512_permutex2var_epi32(ae[i], hi_idx, ao[i]);
                        if (out32) {
                            _mm512_storeu_si512((void *)(out32 + o), _mm512_add_epi32(r0, b0));
                            _mm512_storeu_si512((void *)(out32 + o + 16), _mm512_add_epi32(r1, b1));
                        } else {
                            const __m512i *bq = (const __m512i *)(bias + c0);
                            _mm512_storeu_si512((void *)(out64 + o), _mm512_add_epi64(
                                _mm512_cvtepi32_epi64(_mm512_castsi512_si256(r0)), _mm512_loadu_si512(bq)));
                            _mm512_storeu_si512((void *)(out64 + o + 8), _mm512_add_epi64(
                                _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(r0, 1)), _mm512_loadu_si512(bq + 1)));
                            _mm512_storeu_si512((void *)(out64 + o + 16), _mm512_add_epi64(
                                _mm512_cvtepi32_epi64(_mm512_castsi512_si256(r1)), _mm512_loadu_si512(bq + 2)));
                            _mm512_storeu_si512((void *)(out64 + o + 24), _mm512_add_epi64(
                                _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(r1, 1)), _mm512_loadu_si512(bq + 3)));
                        }
                    }
                }
            }
            if (CM32 < CM)
                for (int64_t px = 0; px < OW; px++)
                    qsim_depthwise_rest(P, PW, CM, Wt, KH, KW, sx, dy, dx, bias, acc, out32,
                                        out64, row, px, CM32, ((n * OH + oy) * OW + px) * CM);
        }
    free(wp);
}
#endif

/* ------------------------------------------------------------ pools ----------------------
 * P: int16 [N][PH][PW][C] padded input. MAX: padding holds the type minimum, the identity of
 * max() started at minimum<in_out_t>, so max over the full window equals the spec's max over
 * valid taps. AVG: P holds (x - input_zp) with zeros in the padding; count comes from the
 * window's overlap with the unpadded input, (mult, shift) from reciprocal_scale(count) computed
 * by the caller (qsim/tosa/arith.py) for every possible count 1..KH*KW.
 * Bounds: |acc| <= KH*KW*65535 < 2^31 is checked by the caller; apply_scale_32's REQUIRE holds
 * since |acc| <= count * 2^16 <= 2^(k+16) < 2^(shift-2) with shift = 30 + k.
 */
QSIM_INLINE void qsim_maxpool_body(const int16_t *P, int64_t N, int64_t PH, int64_t PW,
                                   int64_t C, int64_t KH, int64_t KW, int64_t OH, int64_t OW,
                                   int64_t sy, int64_t sx, int16_t *acc, int16_t *out16,
                                   int8_t *out8) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                for (int64_t c = 0; c < C; c++) acc[c] = INT16_MIN;
                for (int64_t ky = 0; ky < KH; ky++)
                    for (int64_t kx = 0; kx < KW; kx++) {
                        const int16_t *p = P + ((n * PH + oy * sy + ky) * PW + ox * sx + kx) * C;
                        for (int64_t c = 0; c < C; c++) acc[c] = p[c] > acc[c] ? p[c] : acc[c];
                    }
                int64_t o = ((n * OH + oy) * OW + ox) * C;
                if (out16) for (int64_t c = 0; c < C; c++) out16[o + c] = acc[c];
                else for (int64_t c = 0; c < C; c++) out8[o + c] = (int8_t)acc[c];
            }
}
QSIM_VERSIONS(qsim_maxpool,
    (const int16_t *P, int64_t N, int64_t PH, int64_t PW, int64_t C, int64_t KH, int64_t KW,
     int64_t OH, int64_t OW, int64_t sy, int64_t sx, int16_t *acc, int16_t *out16, int8_t *out8),
    (P, N, PH, PW, C, KH, KW, OH, OW, sy, sx, acc, out16, out8))

QSIM_INLINE void qsim_avgpool_body(const int16_t *P, int64_t N, int64_t PH, int64_t PW,
                                   int64_t C, int64_t IH, int64_t IW, int64_t KH, int64_t KW,
                                   int64_t OH, int64_t OW, int64_t sy, int64_t sx,
                                   int64_t pad_top, int64_t pad_left, const int64_t *mult,
                                   const int64_t *shift, int64_t output_zp, int64_t lo,
                                   int64_t hi, int32_t *acc, int16_t *out16, int8_t *out8,
                                   int *bad) {
    int b = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++) {
            int64_t y0 = oy * sy - pad_top, cy = 0;
            for (int64_t ky = 0; ky < KH; ky++) cy += (y0 + ky >= 0 && y0 + ky < IH);
            for (int64_t ox = 0; ox < OW; ox++) {
                int64_t x0 = ox * sx - pad_left, cx = 0;
                for (int64_t kx = 0; kx < KW; kx++) cx += (x0 + kx >= 0 && x0 + kx < IW);
                for (int64_t c = 0; c < C; c++) acc[c] = 0;
                for (int64_t ky = 0; ky < KH; ky++)
                    for (int64_t kx = 0; kx < KW; kx++) {
                        const int16_t *p = P + ((n * PH + oy * sy + ky) * PW + ox * sx + kx) * C;
                        for (int64_t c = 0; c < C; c++) acc[c] += p[c];
                    }
                int64_t count = cy * cx, m = mult[count], s = shift[count];
                int64_t r32 = (int64_t)1 << (s - 1);
                int64_t o = ((n * OH + oy) * OW + ox) * C;
                for (int64_t c = 0; c < C; c++) {
                    int64_t v = qsim_apply_scale_32(acc[c], m, s, r32, 0, &b) + output_zp;
                    v = v < lo ? lo : (v > hi ? hi : v);
                    if (out16) out16[o + c] = (int16_t)v; else out8[o + c] = (int8_t)v;
                }
            }
        }
    *bad |= b;
}
QSIM_VERSIONS(qsim_avgpool,
    (const int16_t *P, int64_t N, int64_t PH, int64_t PW, int64_t C, int64_t IH, int64_t IW,
     int64_t KH, int64_t KW, int64_t OH, int64_t OW, int64_t sy, int64_t sx, int64_t pad_top,
     int64_t pad_left, const int64_t *mult, const int64_t *shift, int64_t output_zp, int64_t lo,
     int64_t hi, int32_t *acc, int16_t *out16, int8_t *out8, int *bad),
    (P, N, PH, PW, C, IH, IW, KH, KW, OH, OW, sy, sx, pad_top, pad_left, mult, shift, output_zp,
     lo, hi, acc, out16, out8, bad))

/* ------------------------------------------------------------ RESCALE --------------------
 * x: n elements of the input type, C = channels of the per-channel parameter arrays (1 for
 * per-tensor). mult/shift/round/dround as in tosa_arith.h, one entry per channel.
 * Output: clip(result + output_zp, lo, hi) stored as the output type. *bad gets the REQUIREs.
 */
#define QSIM_RESCALE_DEF(iname, in_t, oname, out_t)                                          \
QSIM_INLINE void qsim_rescale_##iname##_##oname##_body(                                     \
        const in_t *x, int64_t n, int64_t C, int64_t input_zp, const int64_t *mult,          \
        const int64_t *shift, const int64_t *rnd, const int64_t *dround, int scale32,        \
        int64_t output_zp, int64_t lo, int64_t hi, out_t *y, int *bad) {                     \
    int b = 0;                                                                               \
    if (scale32) {                                                                           \
        for (int64_t i0 = 0; i0 < n; i0 += C)                                                \
            for (int64_t c = 0; c < C; c++) {                                                \
                int64_t v = (int64_t)x[i0 + c] - input_zp;                                   \
                int64_t r = qsim_apply_scale_32(v, mult[c], shift[c], rnd[c], dround[c], &b) \
                            + output_zp;                                                     \
                y[i0 + c] = (out_t)(r < lo ? lo : (r > hi ? hi : r));                        \
            }                                                                                \
    } else {                                                                                 \
        for (int64_t i0 = 0; i0 < n; i0 += C)                                                \
            for (int64_t c = 0; c < C; c++) {                                                \
                int64_t v = (int64_t)x[i0 + c] - input_zp;                                   \
                int64_t r = qsim_apply_scale_16(v, mult[c], shift[c], rnd[c], &b)            \
                            + output_zp;                                                     \
                y[i0 + c] = (out_t)(r < lo ? lo : (r > hi ? hi : r));                        \
            }                                                                                \
    }                                                                                        \
    *bad |= b;                                                                               \
}                                                                                            \
QSIM_VERSIONS(qsim_rescale_##iname##_##oname,                                               \
    (const in_t *x, int64_t n, int64_t C, int64_t input_zp, const int64_t *mult,             \
     const int64_t *shift, const int64_t *rnd, const int64_t *dround, int scale32,           \
     int64_t output_zp, int64_t lo, int64_t hi, out_t *y, int *bad),                         \
    (x, n, C, input_zp, mult, shift, rnd, dround, scale32, output_zp, lo, hi, y, bad))

#define QSIM_RESCALE_OUTS(iname, in_t)                   \
    QSIM_RESCALE_DEF(iname, in_t, i8, int8_t)            \
    QSIM_RESCALE_DEF(iname, in_t, u8, uint8_t)           \
    QSIM_RESCALE_DEF(iname, in_t, i16, int16_t)          \
    QSIM_RESCALE_DEF(iname, in_t, u16, uint16_t)         \
    QSIM_RESCALE_DEF(iname, in_t, i32, int32_t)
QSIM_RESCALE_OUTS(i8, int8_t)
QSIM_RESCALE_OUTS(u8, uint8_t)
QSIM_RESCALE_OUTS(i16, int16_t)
QSIM_RESCALE_OUTS(u16, uint16_t)
QSIM_RESCALE_OUTS(i32, int32_t)
QSIM_RESCALE_OUTS(i64, int64_t)

#if QSIM_X86
/* Explicit AVX-512 RESCALE for scale32 (the compiler does not vectorize the generic loop).
 * With scale32 the input is never int48 (ERROR_IF) and every zero point keeps
 * value = x - input_zp within 32 bits, so vpmuldq's signed 32x32->64 product is exact;
 * vpsravq is the arithmetic >> of apply_scale_32; the clamp happens in 64 bits before the
 * narrowing store, so vpmovq* truncation never changes a value. */
static inline __attribute__((always_inline)) QSIM_TARGET_AVX512 __m512i
qsim_load8_as_i64(int icode, const void *x, int64_t i, __mmask8 m) {
    switch (icode) {
        case 0: return _mm512_cvtepi8_epi64(_mm_maskz_loadu_epi8((__mmask16)m, (const int8_t *)x + i));
        case 1: return _mm512_cvtepu8_epi64(_mm_maskz_loadu_epi8((__mmask16)m, (const uint8_t *)x + i));
        case 2: return _mm512_cvtepi16_epi64(_mm_maskz_loadu_epi16(m, (const int16_t *)x + i));
        case 3: return _mm512_cvtepu16_epi64(_mm_maskz_loadu_epi16(m, (const uint16_t *)x + i));
        default: return _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(m, (const int32_t *)x + i));
    }
}

/* Narrowing happens in registers and a plain store follows: the memory-destination forms of
 * vpmovq{b,w,d} are microcoded on some cores (Zen 4: ~10x slower than the register form). */
static inline __attribute__((always_inline)) QSIM_TARGET_AVX512 void
qsim_store8_from_i64(int ocode, void *y, int64_t i, __mmask8 m, __m512i v) {
    const int full = m == (__mmask8)0xFF;
    switch (ocode) {
        case 0: case 1: {
            __m128i b = _mm512_cvtepi64_epi8(v);
            if (full) _mm_storel_epi64((__m128i *)((int8_t *)y + i), b);
            else _mm_mask_storeu_epi8((int8_t *)y + i, (__mmask16)m, b);
            break;
        }
        case 2: case 3: {
            __m128i h = _mm512_cvtepi64_epi16(v);
            if (full) _mm_storeu_si128((__m128i *)((int16_t *)y + i), h);
            else _mm_mask_storeu_epi16((int16_t *)y + i, m, h);
            break;
        }
        default: {
            __m256i d = _mm512_cvtepi64_epi32(v);
            if (full) _mm256_storeu_si256((__m256i *)((int32_t *)y + i), d);
            else _mm256_mask_storeu_epi32((int32_t *)y + i, m, d);
        }
    }
}

static inline __attribute__((always_inline)) QSIM_TARGET_AVX512 void
qsim_rescale32_avx512_body(const int icode, const int ocode, const void *x, int64_t n, int64_t C,
                           int64_t input_zp, const int64_t *mult, const int64_t *shift,
                           const int64_t *rnd, const int64_t *dround, int64_t output_zp,
                           int64_t lo, int64_t hi, void *y, int *bad) {
    const __m512i zp = _mm512_set1_epi64(input_zp), ozp = _mm512_set1_epi64(output_zp);
    const __m512i vlo = _mm512_set1_epi64(lo), vhi = _mm512_set1_epi64(hi);
    const __m512i two = _mm512_set1_epi64(2), one = _mm512_set1_epi64(1);
    __mmask8 badm = 0;
    for (int64_t i0 = 0; i0 < n; i0 += C)
        for (int64_t c = 0; c < C; c += 8) {
            __mmask8 m = C - c >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (C - c)) - 1u);
            __m512i v = _mm512_sub_epi64(qsim_load8_as_i64(icode, x, i0 + c, m), zp);
            __m512i mu = _mm512_maskz_loadu_epi64(m, mult + c);
            __m512i sh = _mm512_mask_loadu_epi64(two, m, shift + c);
            __m512i rd = _mm512_maskz_loadu_epi64(m, rnd + c);
            __m512i dr = _mm512_maskz_loadu_epi64(m, dround + c);
            __m512i lim = _mm512_sllv_epi64(one, _mm512_sub_epi64(sh, two));
            badm |= m & (_mm512_cmplt_epi64_mask(v, _mm512_sub_epi64(_mm512_setzero_si512(), lim))
                         | _mm512_cmpge_epi64_mask(v, lim));
            __mmask8 neg = _mm512_cmplt_epi64_mask(v, _mm512_setzero_si512());
            rd = _mm512_mask_sub_epi64(_mm512_add_epi64(rd, dr), neg, rd, dr);
            __m512i r = _mm512_srav_epi64(_mm512_add_epi64(_mm512_mul_epi32(v, mu), rd), sh);
            r = _mm512_min_epi64(_mm512_max_epi64(_mm512_add_epi64(r, ozp), vlo), vhi);
            qsim_store8_from_i64(ocode, y, i0 + c, m, r);
        }
    *bad |= (badm != 0);
}

#define QSIM_R32_CASE(ic, oc) case ic * 8 + oc: \
    qsim_rescale32_avx512_body(ic, oc, x, n, C, input_zp, mult, shift, rnd, dround, output_zp, lo, hi, y, bad); break;
#define QSIM_R32_ROW(ic) QSIM_R32_CASE(ic, 0) QSIM_R32_CASE(ic, 1) QSIM_R32_CASE(ic, 2) \
    QSIM_R32_CASE(ic, 3) QSIM_R32_CASE(ic, 4)
static QSIM_TARGET_AVX512 int
qsim_rescale32_avx512(int icode, int ocode, const void *x, int64_t n, int64_t C, int64_t input_zp,
                      const int64_t *mult, const int64_t *shift, const int64_t *rnd,
                      const int64_t *dround, int64_t output_zp, int64_t lo, int64_t hi, void *y,
                      int *bad) {
    switch (icode * 8 + ocode) {
        QSIM_R32_ROW(0) QSIM_R32_ROW(1) QSIM_R32_ROW(2) QSIM_R32_ROW(3) QSIM_R32_ROW(4)
        default: return 0;   /* int48 input: not a scale32 case */
    }
    return 1;
}
/* int32 input, scale32, 16 values per step (the CONV2D -> RESCALE requantization).
 * Preconditions (checked by qsim_rescale): input_zp == 0 (ERROR_IF for int32 input), every
 * shift >= 33 so apply_scale_32's REQUIRE |value| < 2^(shift-2) holds for every int32,
 * C % 16 == 0.
 * With shift = 32 + t (t >= 1), round = 2^(shift-1) is a multiple of 2^32, so for
 * X = value * multiplier (+/- 2^30 with double_round, by the sign of value):
 *     (X + 2^(shift-1)) >> shift == ((X >> 32) + 2^(t-1)) >> t        (floor shifts)
 * and only the high 32 bits of the 64-bit X are needed: |X >> 32| < 2^30, + 2^(t-1) <= 2^29,
 * so the rest is 16-lane int32 arithmetic. Even elements use vpmuldq on the low halves of the
 * 64-bit lanes, odd ones after a 32-bit right shift. The double_round sign comes from the
 * product, equal to the value's sign except when the product is 0, where both choices give 0
 * (0 <= 2^(shift-1) - 2^30 and 2^(shift-1) + 2^30 < 2^shift). The clamp to
 * [lo - output_zp, hi - output_zp] precedes the add of output_zp, so nothing wraps. */
static inline __attribute__((always_inline)) QSIM_TARGET_AVX512 void
qsim_rescale_i32x16_avx512_body(const int ocode, const int dbl, const int32_t *x, int64_t n,
                                int64_t C, const int64_t *prm, int64_t output_zp, int64_t lo,
                                int64_t hi, void *y) {
    const __m512i vlo = _mm512_set1_epi32((int32_t)(lo - output_zp));
    const __m512i vhi = _mm512_set1_epi32((int32_t)(hi - output_zp));
    const __m512i ozp = _mm512_set1_epi32((int32_t)output_zp), d30 = _mm512_set1_epi64(1 << 30);
    for (int64_t i0 = 0; i0 < n; i0 += C)
        for (int64_t c = 0; c < C; c += 16) {
            /* prm per 16-channel block (8 int64 each): even multipliers, odd multipliers, then
             * 16 int32 roundings 2^(t-1) and 16 int32 shifts t */
            const int64_t *q = prm + (c / 16) * 32;
            __m512i v = _mm512_loadu_si512((const void *)(x + i0 + c));
            __m512i pe = _mm512_mul_epi32(v, _mm512_loadu_si512((const void *)q));
            __m512i po = _mm512_mul_epi32(_mm512_srli_epi64(v, 32), _mm512_loadu_si512((const void *)(q + 8)));
            if (dbl) {
                pe = _mm512_mask_sub_epi64(_mm512_add_epi64(pe, d30), _mm512_movepi64_mask(pe), pe, d30);
                po = _mm512_mask_sub_epi64(_mm512_add_epi64(po, d30), _mm512_movepi64_mask(po), po, d30);
            }
            __m512i h = _mm512_mask_blend_epi32((__mmask16)0xAAAA, _mm512_srli_epi64(pe, 32), po);
            h = _mm512_srav_epi32(_mm512_add_epi32(h, _mm512_loadu_si512((const void *)(q + 16))),
                                  _mm512_loadu_si512((const void *)(q + 24)));
            __m512i r = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(h, vlo), vhi), ozp);
            switch (ocode) {
                case 0: case 1: _mm_storeu_si128((__m128i *)((int8_t *)y + i0 + c), _mm512_cvtepi32_epi8(r)); break;
                case 2: case 3: _mm256_storeu_si256((__m256i *)((int16_t *)y + i0 + c), _mm512_cvtepi32_epi16(r)); break;
                default: _mm512_storeu_si512((void *)((int32_t *)y + i0 + c), r);
            }
        }
}

/* The same computation on AVX2, two ymm of 8 lanes per 16 values (same parameter layout):
 * vpmuldq/vpsravd exist there; the sign mask of the 64-bit products comes from vpcmpgtq and the
 * narrowing from saturating packs, exact because the values are already clamped. */
static inline __attribute__((always_inline)) QSIM_TARGET_AVX2 __m256i
qsim_rescale_i32x8_avx2(const int dbl, __m256i v, __m256i me, __m256i mo, __m256i rnd,
                        __m256i t, __m256i vlo, __m256i vhi) {
    /* me/mo: the int64 multipliers of the even/odd elements, the vpmuldq operand form */
    const __m256i d30 = _mm256_set1_epi64x(1 << 30), zero = _mm256_setzero_si256();
    __m256i pe = _mm256_mul_epi32(v, me);
    __m256i po = _mm256_mul_epi32(_mm256_srli_epi64(v, 32), mo);
    if (dbl) {    /* + 2^30 or, for a negative product, - 2^30 = (2^30 ^ -1) - (-1) */
        __m256i ne = _mm256_cmpgt_epi64(zero, pe), no = _mm256_cmpgt_epi64(zero, po);
        pe = _mm256_add_epi64(pe, _mm256_sub_epi64(_mm256_xor_si256(d30, ne), ne));
        po = _mm256_add_epi64(po, _mm256_sub_epi64(_mm256_xor_si256(d30, no), no));
    }
    __m256i h = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
    h = _mm256_srav_epi32(_mm256_add_epi32(h, rnd), t);
    return _mm256_min_epi32(_mm256_max_epi32(h, vlo), vhi);
}

static inline __attribute__((always_inline)) QSIM_TARGET_AVX2 void
qsim_rescale_i32x16_avx2_body(const int ocode, const int dbl, const int32_t *x, int64_t n,
                              int64_t C, const int64_t *prm, int64_t output_zp, int64_t lo,
                              int64_t hi, void *y) {
    const __m256i vlo = _mm256_set1_epi32((int32_t)(lo - output_zp));
    const __m256i vhi = _mm256_set1_epi32((int32_t)(hi - output_zp));
    const __m256i ozp = _mm256_set1_epi32((int32_t)output_zp);
    for (int64_t i0 = 0; i0 < n; i0 += C)
        for (int64_t c = 0; c < C; c += 16) {
            const int64_t *q = prm + (c / 16) * 32;
            const int32_t *q32 = (const int32_t *)(q + 16);
            /* q[0..7]: even multipliers of the block, q[8..15]: odd ones (4 per ymm) */
            __m256i r0 = qsim_rescale_i32x8_avx2(dbl, _mm256_loadu_si256((const __m256i *)(x + i0 + c)),
                _mm256_loadu_si256((const __m256i *)q), _mm256_loadu_si256((const __m256i *)(q + 8)),
                _mm256_loadu_si256((const __m256i *)q32), _mm256_loadu_si256((const __m256i *)(q32 + 16)), vlo, vhi);
            __m256i r1 = qsim_rescale_i32x8_avx2(dbl, _mm256_loadu_si256((const __m256i *)(x + i0 + c + 8)),
                _mm256_loadu_si256((const __m256i *)(q + 4)), _mm256_loadu_si256((const __m256i *)(q + 12)),
                _mm256_loadu_si256((const __m256i *)(q32 + 8)), _mm256_loadu_si256((const __m256i *)(q32 + 24)), vlo, vhi);
            r0 = _mm256_add_epi32(r0, ozp);
            r1 = _mm256_add_epi32(r1, ozp);
            if (ocode == 4) {
                _mm256_storeu_si256((__m256i *)((int32_t *)y + i0 + c), r0);
                _mm256_storeu_si256((__m256i *)((int32_t *)y + i0 + c + 8), r1);
                continue;
            }
            __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(r0, r1), 0xD8);   /* 16 x int16 */
            if (ocode == 2) {
                _mm256_storeu_si256((__m256i *)((int16_t *)y + i0 + c), w);
                continue;
            }
            __m256i b8 = _mm256_permute4x64_epi64(_mm256_packs_epi16(w, w), 0xD8);
            _mm_storeu_si128((__m128i *)((int8_t *)y + i0 + c), _mm256_castsi256_si128(b8));
        }
}
#endif

/* int32 input, scale32, every shift >= 33, C % 16 == 0 (see the AVX-512 body above): builds
 * the per-16-channel parameters and runs the AVX-512 or the AVX2 body. Returns 0 when the call
 * is not one of these cases (the caller then takes the general path). */
#define QSIM_R16_CASE(fn, oc, dbl) \
    case oc * 2 + dbl: fn(oc, dbl, (const int32_t *)x, n, C, prm, output_zp, lo, hi, y); break;
#define QSIM_R16_CASES(fn) QSIM_R16_CASE(fn, 0, 0) QSIM_R16_CASE(fn, 0, 1) QSIM_R16_CASE(fn, 2, 0) \
    QSIM_R16_CASE(fn, 2, 1) QSIM_R16_CASE(fn, 4, 0) QSIM_R16_CASE(fn, 4, 1)
#if QSIM_X86
#define QSIM_R16_RUN(name, target, body)                                                        \
static target void name(int ocode, int dbl, const void *x, int64_t n, int64_t C, const int64_t *prm, \
                        int64_t output_zp, int64_t lo, int64_t hi, void *y) {                  \
    switch (ocode * 2 + dbl) { QSIM_R16_CASES(body) }                                           \
}
QSIM_R16_RUN(qsim_rescale_i32x16_avx512_run, QSIM_TARGET_AVX512, qsim_rescale_i32x16_avx512_body)
QSIM_R16_RUN(qsim_rescale_i32x16_avx2_run, QSIM_TARGET_AVX2, qsim_rescale_i32x16_avx2_body)
#endif

static int qsim_rescale_i32x16(int isa, int ocode, const void *x, int64_t n, int64_t C,
                               const int64_t *mult, const int64_t *shift, const int64_t *dround,
                               int64_t output_zp, int64_t lo, int64_t hi, void *y) {
#if QSIM_X86
    if ((isa != QSIM_ISA_AVX512VNNI && isa != QSIM_ISA_AVX2) || (ocode != 0 && ocode != 2 && ocode != 4))
        return 0;     /* int32 input has no unsigned output mode (ERROR_IF) */
    int64_t prm_stack[16 * 32];
    int64_t *prm = C <= 256 ? prm_stack : (int64_t *)malloc((size_t)(C * 2) * sizeof(int64_t));
    if (!prm) return 0;
    int dbl = 0;
    for (int64_t c = 0; c < C; c++) {
        int64_t *q = prm + (c / 16) * 32;
        int32_t *q32 = (int32_t *)(q + 16);
        q[(c & 1) * 8 + (c % 16) / 2] = mult[c];
        q32[c % 16] = (int32_t)1 << (shift[c] - 33);      /* 2^(t-1), t = shift - 32 */
        q32[16 + c % 16] = (int32_t)(shift[c] - 32);
        dbl |= dround[c] != 0;     /* shift > 31 on every channel: all or none are set */
    }
    if (isa == QSIM_ISA_AVX512VNNI)
        qsim_rescale_i32x16_avx512_run(ocode, dbl, x, n, C, prm, output_zp, lo, hi, y);
    else
        qsim_rescale_i32x16_avx2_run(ocode, dbl, x, n, C, prm, output_zp, lo, hi, y);
    if (prm != prm_stack) free(prm);
    return 1;
#else
    (void)isa; (void)ocode; (void)x; (void)n; (void)C; (void)mult; (void)shift; (void)dround;
    (void)output_zp; (void)lo; (void)hi; (void)y;
    return 0;
#endif
}


/* Type codes shared with the Cython side: 0 i8, 1 u8, 2 i16, 3 u16, 4 i32, 5 i64 (int48). */
#define QSIM_RESCALE_CALL_OUT(isa, iname, in_t, ocode, ...)                                    \
    switch (ocode) {                                                                           \
        case 0: QSIM_DISPATCH(isa, qsim_rescale_##iname##_i8, (const in_t *)x, __VA_ARGS__, (int8_t *)y, bad); break;   \
        case 1: QSIM_DISPATCH(isa, qsim_rescale_##iname##_u8, (const in_t *)x, __VA_ARGS__, (uint8_t *)y, bad); break;  \
        case 2: QSIM_DISPATCH(isa, qsim_rescale_##iname##_i16, (const in_t *)x, __VA_ARGS__, (int16_t *)y, bad); break; \
        case 3: QSIM_DISPATCH(isa, qsim_rescale_##iname##_u16, (const in_t *)x, __VA_ARGS__, (uint16_t *)y, bad); break;\
        default: QSIM_DISPATCH(isa, qsim_rescale_##iname##_i32, (const in_t *)x, __VA_ARGS__, (int32_t *)y, bad);       \
    }

static void qsim_rescale(int isa, int icode, int ocode, const void *x, int64_t n, int64_t C,
                         int64_t input_zp, const int64_t *mult, const int64_t *shift,
                         const int64_t *rnd, const int64_t *dround, int scale32,
                         int64_t output_zp, int64_t lo, int64_t hi, void *y, int *bad) {
#if QSIM_X86
    if (scale32 && icode == 4 && input_zp == 0 && C % 16 == 0) {
        int64_t min_shift = 63;
        for (int64_t c = 0; c < C; c++) min_shift = shift[c] < min_shift ? shift[c] : min_shift;
        if (min_shift >= 33 && qsim_rescale_i32x16(isa, ocode, x, n, C, mult, shift, dround,
                                                   output_zp, lo, hi, y))
            return;
    }
    if (isa == QSIM_ISA_AVX512VNNI && scale32 &&
        qsim_rescale32_avx512(icode, ocode, x, n, C, input_zp, mult, shift, rnd, dround,
                              output_zp, lo, hi, y, bad))
        return;
#endif
#define QSIM_ARGS n, C, input_zp, mult, shift, rnd, dround, scale32, output_zp, lo, hi
    switch (icode) {
        case 0: QSIM_RESCALE_CALL_OUT(isa, i8, int8_t, ocode, QSIM_ARGS) break;
        case 1: QSIM_RESCALE_CALL_OUT(isa, u8, uint8_t, ocode, QSIM_ARGS) break;
        case 2: QSIM_RESCALE_CALL_OUT(isa, i16, int16_t, ocode, QSIM_ARGS) break;
        case 3: QSIM_RESCALE_CALL_OUT(isa, u16, uint16_t, ocode, QSIM_ARGS) break;
        case 4: QSIM_RESCALE_CALL_OUT(isa, i32, int32_t, ocode, QSIM_ARGS) break;
        default: QSIM_RESCALE_CALL_OUT(isa, i64, int64_t, ocode, QSIM_ARGS) break;
    }
#undef QSIM_ARGS
}

/* ------------------------------------------------------------ TABLE, CLAMP ---------------- */
static void qsim_table_i8(const int8_t *x, int64_t n, const int8_t *table, int8_t *y) {
    for (int64_t i = 0; i < n; i++) y[i] = table[(int)x[i] + 128];
}

/* spec 1.9.5 apply_lookup: index = (x + 32768) >> 7 in [0, 511], fraction = x & 0x7f. */
static void qsim_table_i16(const int16_t *x, int64_t n, const int16_t *table, int32_t *y, int *bad) {
    int b = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t v = x[i], index = (v + 32768) >> 7, fraction = v & 0x7f;
        int32_t base = table[index], slope = (int32_t)table[index + 1] - base;
        b |= (slope < -32768) | (slope > 32767);
        y[i] = base * 128 + slope * fraction;
    }
    *bad |= b;
}

QSIM_INLINE void qsim_clamp_i8_body(const int8_t *x, int64_t n, int8_t lo, int8_t hi, int8_t *y) {
    for (int64_t i = 0; i < n; i++) { int8_t v = x[i] < lo ? lo : x[i]; y[i] = v > hi ? hi : v; }
}
QSIM_VERSIONS(qsim_clamp_i8, (const int8_t *x, int64_t n, int8_t lo, int8_t hi, int8_t *y),
              (x, n, lo, hi, y))
QSIM_INLINE void qsim_clamp_i16_body(const int16_t *x, int64_t n, int16_t lo, int16_t hi, int16_t *y) {
    for (int64_t i = 0; i < n; i++) { int16_t v = x[i] < lo ? lo : x[i]; y[i] = v > hi ? hi : v; }
}
QSIM_VERSIONS(qsim_clamp_i16, (const int16_t *x, int64_t n, int16_t lo, int16_t hi, int16_t *y),
              (x, n, lo, hi, y))

/* ------------------------------------------------------------ int16 modes ----------------
 * CONV/FC 16x8 and MATMUL 16x16: A int16 (zero points are 0 in these modes, so padding is 0),
 * Wt int16 [N][T*K] with K values per tap, acc int64 (the spec's int48_t accumulator; the
 * caller proved T*K*2^30 + |bias| < 2^47, so no partial sum leaves int48).
 */
QSIM_INLINE void qsim_gemm_i16_body(const int16_t *A, const int64_t *rows, int64_t M,
                                    const int64_t *taps, int64_t T, int64_t K,
                                    const int16_t *Wt, int64_t N, const int64_t *bias,
                                    int64_t *out) {
    for (int64_t p = 0; p < M; p++)
        for (int64_t j = 0; j < N; j++) {
            int64_t acc = 0;
            const int16_t *w = Wt + j * T * K;
            for (int64_t t = 0; t < T; t++) {
                const int16_t *a = A + rows[p] + taps[t];
                for (int64_t k = 0; k < K; k++) acc += (int64_t)((int32_t)a[k] * (int32_t)w[t * K + k]);
            }
            out[p * N + j] = acc + (bias ? bias[j] : 0);
        }
}
QSIM_VERSIONS(qsim_gemm_i16,
    (const int16_t *A, const int64_t *rows, int64_t M, const int64_t *taps, int64_t T, int64_t K,
     const int16_t *Wt, int64_t N, const int64_t *bias, int64_t *out),
    (A, rows, M, taps, T, K, Wt, N, bias, out))

#endif
