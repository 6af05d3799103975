/* The sliding-window TOSA kernels: DEPTHWISE_CONV2D, MAX_POOL2D and AVG_POOL2D (TOSA 0.30 2.3).
 *
 * Each hot loop is compiled once per ISA path from one always_inline body (isa_paths.h); the
 * depthwise convolution also has hand-written AVX-512 VNNI (vpdpwssd) and AVX-512 copies. All
 * paths compute the same integers.
 */
#ifndef QSIM_QWINDOW_H
#define QSIM_QWINDOW_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "isa_paths.h"
#include "tosa_arith.h"

/* ------------------------------------------------------------ padded input ---------------
 * The int16 buffer the window kernels read: out[N][H+pt+pb][W+pl+pr][C*M] holding
 * (int16)(x - subtract) inside (channel c repeated M times: out channel c*M+m is x channel c)
 * and `fill` in the border. x is int8 (x8) or int16 (x16), C-contiguous [N][H][W][C]. The
 * difference wraps to int16 as numpy's int16 subtraction does (for int8 x it is exact:
 * |x - zp| <= 255); every element of out is written once. */
QSIM_INLINE void qsim_pad_i16_body(const int8_t *x8, const int16_t *x16, int64_t N, int64_t H,
                                   int64_t W, int64_t C, int64_t pt, int64_t pb, int64_t pl,
                                   int64_t pr, int64_t M, int16_t fill, int16_t subtract,
                                   int16_t *out) {
    const int64_t PH = H + pt + pb, PW = W + pl + pr, CM = C * M, row = PW * CM;
    for (int64_t n = 0; n < N; n++)
        for (int64_t py = 0; py < PH; py++) {
            int16_t *o = out + (n * PH + py) * row;
            int64_t y = py - pt;
            if (y < 0 || y >= H) {
                for (int64_t i = 0; i < row; i++) o[i] = fill;
                continue;
            }
            for (int64_t i = 0; i < pl * CM; i++) o[i] = fill;
            int16_t *inner = o + pl * CM;
            int64_t src = (n * H + y) * W * C;
            if (M == 1) {           /* one contiguous run: the compiler's widening vector loop */
                if (x8) for (int64_t i = 0; i < W * C; i++) inner[i] = (int16_t)(x8[src + i] - subtract);
                else for (int64_t i = 0; i < W * C; i++) inner[i] = (int16_t)(x16[src + i] - subtract);
            } else {
                for (int64_t i = 0; i < W * C; i++) {
                    int16_t v = (int16_t)((x8 ? x8[src + i] : x16[src + i]) - subtract);
                    for (int64_t m = 0; m < M; m++) inner[i * M + m] = v;
                }
            }
            for (int64_t i = (pl + W) * CM; i < row; i++) o[i] = fill;
        }
}
QSIM_VERSIONS(qsim_pad_i16,
    (const int8_t *x8, const int16_t *x16, int64_t N, int64_t H, int64_t W, int64_t C, int64_t pt,
     int64_t pb, int64_t pl, int64_t pr, int64_t M, int16_t fill, int16_t subtract, int16_t *out),
    (x8, x16, N, H, W, C, pt, pb, pl, pr, M, fill, subtract, out))

static void qsim_pad_i16(int isa, const int8_t *x8, const int16_t *x16, int64_t N, int64_t H,
                         int64_t W, int64_t C, int64_t pt, int64_t pb, int64_t pl, int64_t pr,
                         int64_t M, int16_t fill, int16_t subtract, int16_t *out) {
    QSIM_DISPATCH(isa, qsim_pad_i16, x8, x16, N, H, W, C, pt, pb, pl, pr, M, fill, subtract, out);
}

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

#endif
