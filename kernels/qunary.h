/* The one-input TOSA kernels, one output element per input element: RESCALE (2.12.1), TABLE
 * (2.6.2) and CLAMP (2.6.1).
 *
 * Each hot loop is compiled once per ISA path from one always_inline body (isa_paths.h), with
 * hand-written AVX-512 and AVX2 copies of the int32 -> 16-lane RESCALE. All paths compute the
 * same integers.
 */
#ifndef QSIM_QUNARY_H
#define QSIM_QUNARY_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "isa_paths.h"
#include "tosa_arith.h"

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

#endif
