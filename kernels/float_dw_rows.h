/* The float depthwise convolution's AVX-512 loop for planes read in place (kernels/float_conv.h
 * chooses it): strides 1 and 2, kernels up to QSIM_DWR_MAX_KW wide, any multiplier and dilation.
 *
 * Bits: the same operations per output element as the plane loop and the reference: acc = +0.0,
 * then acc = fma(w, x, acc) for each tap in row-major kernel order, one vfmadd rounded once (a
 * tap in the padding takes fma(w, +0.0, acc), as the reference's padded copy does), then
 * + bias when there is one, then numpy's maximum/minimum for the relu/clamp after it. Only where
 * the numbers come from differs: instead of a zero-padded, phase-split copy of each plane and an
 * accumulator plane written and read again, the taps are loaded straight from the input row with
 * lane masks (masked-off lanes read +0.0 and touch no memory) and the epilogue runs on the
 * registers, storing each output once (a plane's copy and its accumulator pass were about half of
 * the plane loop's time).
 *
 * Work: output plane p (sample p / OC, channel p % OC, input channel (p % OC) / m), in strips of
 * 64 output columns (four vectors of 16) one row at a time, or for narrow images 32 columns of
 * two rows or 16 of four: four independent fma chains either way. The strip's load masks are
 * worked out once per strip and reused for every row. Stride 2 takes the even elements of 32
 * consecutive ones (two masked loads and one two-source permute).
 */
#ifndef QSIM_FLOAT_DW_ROWS_H
#define QSIM_FLOAT_DW_ROWS_H

#include <stdint.h>
#include "isa_paths.h"

#define QSIM_DWR_MAX_KW 8       /* widest kernel row of this loop (the masks live on the stack) */

/* the loop applies: strides 1 or 2, kernel rows up to QSIM_DWR_MAX_KW taps */
static inline int qsim_dw_rows_fits(int64_t KW, int64_t sy, int64_t sx) {
    return (sy == 1 || sy == 2) && (sx == 1 || sx == 2) && KW >= 1 && KW <= QSIM_DWR_MAX_KW;
}

#if QSIM_X86
/* lanes e of 16 consecutive elements from index `at` with 0 <= at + e < n */
static inline __mmask16 qsim_dwr_span(int64_t at, int64_t n) {
    const int64_t lo = at < 0 ? -at : 0;
    int64_t hi = n - at;
    if (hi > 16) hi = 16;
    if (hi <= lo) return 0;
    return (__mmask16)((((uint32_t)1 << hi) - 1) & ~(((uint32_t)1 << lo) - 1));
}

/* numpy's minimum(maximum(v, lo), hi): "not <=" and "not >=" are true for a NaN, which stays */
QSIM_INLINE QSIM_TARGET_AVX512 __m512 qsim_dwr_bound(__m512 v, float lo, float hi, int has_hi) {
    v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_set1_ps(lo), _CMP_NLE_UQ), _mm512_set1_ps(lo), v);
    if (has_hi)
        v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_set1_ps(hi), _CMP_NGE_UQ), _mm512_set1_ps(hi), v);
    return v;
}

QSIM_INLINE QSIM_TARGET_AVX512 void qsim_dw_rows_body(const float *x, int64_t C, int64_t H, int64_t W, const float *w,
                                                      const float *bias, int64_t m, int64_t KH, const int64_t KW,
                                                      int64_t sy, const int64_t sx, int64_t dy, int64_t dx, int64_t pt,
                                                      int64_t pl, float *out, int64_t OH, int64_t OW, float *y,
                                                      float lo, float hi, int has_hi, int bound_only, int64_t p0,
                                                      int64_t p1, const int NV) {
    const int R = 4 / NV;                  /* rows side by side: R * NV = 4 fma chains */
    const int64_t OC = C * m;
    const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    /* per strip: for tap column kx and vector v, the masks of the (one or two) loads and where
     * they start in the row; and the output lanes of each vector */
    __mmask16 mlo[QSIM_DWR_MAX_KW][4], mhi[QSIM_DWR_MAX_KW][4], mout[4];
    int64_t at[QSIM_DWR_MAX_KW][4];
    for (int64_t p = p0; p < p1; p++) {
        const int64_t oc = p % OC;
        const float *plane = x + ((p / OC) * C + oc / m) * H * W;
        const float *wp = w + oc * KH * KW;
        const __m512 bv = _mm512_set1_ps(bias != NULL ? bias[oc] : 0.0f);
        float *o = out + p * OH * OW, *yo = y != NULL ? y + p * OH * OW : NULL;
        for (int64_t ox0 = 0; ox0 < OW; ox0 += 16 * NV) {
            for (int v = 0; v < NV; v++) {
                const int64_t ox = ox0 + 16 * v;
                mout[v] = qsim_dwr_span(ox, OW);
                for (int64_t kx = 0; kx < KW; kx++) {
                    at[kx][v] = ox * sx + kx * dx - pl;
                    mlo[kx][v] = mout[v] ? qsim_dwr_span(at[kx][v], W) : 0;
                    mhi[kx][v] = mout[v] && sx == 2 ? qsim_dwr_span(at[kx][v] + 16, W) : 0;
                }
            }
            for (int64_t oy0 = 0; oy0 < OH; oy0 += R) {
                __m512 acc[4];
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) acc[i] = _mm512_setzero_ps();
                for (int64_t ky = 0; ky < KH; ky++) {
                    const float *row[4];
                    int inside[4];
                    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
                        const int64_t iy = (oy0 + r) * sy + ky * dy - pt;
                        inside[r] = oy0 + r < OH && iy >= 0 && iy < H;
                        row[r] = plane + (inside[r] ? iy : 0) * W;
                    }
                    _Pragma("GCC unroll 8") for (int64_t kx = 0; kx < KW; kx++) {
                        const __m512 wv = _mm512_set1_ps(wp[ky * KW + kx]);
                        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
                            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {
                                __m512 t;
                                const float *src = row[r] + at[kx][v];
                                if (!inside[r]) {
                                    t = _mm512_setzero_ps();      /* a padding row: w * +0.0 */
                                } else if (sx == 1) {
                                    t = _mm512_maskz_loadu_ps(mlo[kx][v], src);
                                } else {
                                    t = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(mlo[kx][v], src), evens,
                                                               _mm512_maskz_loadu_ps(mhi[kx][v], src + 16));
                                }
                                acc[r * NV + v] = _mm512_fmadd_ps(wv, t, acc[r * NV + v]);
                            }
                    }
                }
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
                    if (oy0 + r >= OH) break;
                    _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {
                        if (!mout[v]) continue;
                        const int64_t off = (oy0 + r) * OW + ox0 + 16 * v;
                        __m512 res = bias != NULL ? _mm512_add_ps(acc[r * NV + v], bv) : acc[r * NV + v];
                        if (bound_only) res = qsim_dwr_bound(res, lo, hi, has_hi);
                        _mm512_mask_storeu_ps(o + off, mout[v], res);
                        if (yo != NULL) _mm512_mask_storeu_ps(yo + off, mout[v], qsim_dwr_bound(res, lo, hi, has_hi));
                    }
                }
            }
        }
    }
}

/* the body with the kernel width and the column stride known to the compiler for the common
 * 3- and 5-wide kernels (the tap and vector loops unrolled, the masks at fixed places) */
#define QSIM_DWR_ARGS(KW_, SX_) (x, C, H, W, w, bias, m, KH, KW_, sy, SX_, dy, dx, pt, pl, out, OH, OW, y, lo, hi, \
                                 has_hi, bound_only, p0, p1, NV_)
/* NV_: vectors per row of a strip (a row's 16-column vectors, up to 4), the rest of the four add
 * chains going to further rows (14- and 28-wide images: 4 rows of 1 vector, 2 rows of 2) */
#define QSIM_DWR_WIDTHS(KW_, SX_)                                               \
    do {                                                                        \
        if (OW <= 16) { const int NV_ = 1; qsim_dw_rows_body QSIM_DWR_ARGS(KW_, SX_); } \
        else if (OW <= 32) { const int NV_ = 2; qsim_dw_rows_body QSIM_DWR_ARGS(KW_, SX_); } \
        else { const int NV_ = 4; qsim_dw_rows_body QSIM_DWR_ARGS(KW_, SX_); } \
    } while (0)
static QSIM_TARGET_AVX512 void qsim_dw_rows_avx512(const float *x, int64_t C, int64_t H, int64_t W, const float *w,
                                                    const float *bias, int64_t m, int64_t KH, int64_t KW, int64_t sy,
                                                    int64_t sx, int64_t dy, int64_t dx, int64_t pt, int64_t pl,
                                                    float *out, int64_t OH, int64_t OW, float *y, float lo,
                                                    float hi, int has_hi, int bound_only, int64_t p0, int64_t p1) {
    if (KW == 3 && sx == 1) QSIM_DWR_WIDTHS(3, 1);
    else if (KW == 3) QSIM_DWR_WIDTHS(3, 2);
    else if (KW == 5 && sx == 1) QSIM_DWR_WIDTHS(5, 1);
    else if (KW == 5) QSIM_DWR_WIDTHS(5, 2);
    else QSIM_DWR_WIDTHS(KW, sx);
}
#endif

#endif
