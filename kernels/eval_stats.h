/* The vector parts of the evaluation's error statistics (kernels/quant_ops.pyx add_error_stats),
 * one block of at most QSIM_STATS_BLOCK elements at a time, compiled once per ISA path
 * (isa_paths.h) from one body each. quant_ops is built with -ffp-contract=off, so no path fuses
 * a multiply and an add: every path computes the same doubles, the same sums and the same bins.
 *
 * e[k] = (double)(q[k * stride] - zp) * scale - (double)f[k]   (q read in place)
 * sums: element k into partial sum k % 4 (a 4-wide vector of accumulators: lane l adds
 *       elements l, l + 4, ... in order), as the scalar definition does.
 * bins (m % 8 == 0): bin[k] = floor(t) clamped to [0, bins - 1], t = (e * r - first) * inv_step, or -1 when
 *       t is within tol of an interior edge and e != 0 (the caller then divides; see
 *       add_error_stats for why the rest are exact); NaN gives -2 (counted nowhere); an exact
 *       zero (either sign) -3 (the caller adds the zeros to the bin of 0 at the end: often a
 *       third of the elements, they need no increment each).
 * slots: the bins >= 0 packed, the near (-1) elements' k listed, the zeros counted; the count
 *       adds the packed bins into interleaved copies of the histogram.
 */
#ifndef QSIM_EVAL_STATS_H
#define QSIM_EVAL_STATS_H

#include <math.h>
#include <stdint.h>
#include "isa_paths.h"

#define QSIM_STATS_BLOCK 1024

typedef double qsim_v4d __attribute__((vector_size(32)));

/* e[k] = (double)(q[k * stride] - zp) * scale - (double)f[k]: the integer codes read in place
 * (a strided row of the transposed integer tensor), for every code width and float32/float64 */
#define QSIM_STATS_ERRORS_DEF(name, q_t, real_t)                                                \
QSIM_INLINE void name##_body(const q_t *q, int64_t stride, const real_t *f, int64_t m,          \
                             int64_t zp, double scale, double *e) {                             \
    for (int64_t k = 0; k < m; k++)                                                             \
        e[k] = (double)((int64_t)q[k * stride] - zp) * scale - (double)f[k];                    \
}                                                                                               \
QSIM_VERSIONS(name, (const q_t *q, int64_t stride, const real_t *f, int64_t m, int64_t zp,      \
                     double scale, double *e), (q, stride, f, m, zp, scale, e))
QSIM_STATS_ERRORS_DEF(qsim_stats_errors_i8_f32, int8_t, float)
QSIM_STATS_ERRORS_DEF(qsim_stats_errors_i16_f32, int16_t, float)
QSIM_STATS_ERRORS_DEF(qsim_stats_errors_i32_f32, int32_t, float)
QSIM_STATS_ERRORS_DEF(qsim_stats_errors_i64_f32, int64_t, float)
QSIM_STATS_ERRORS_DEF(qsim_stats_errors_i8_f64, int8_t, double)
QSIM_STATS_ERRORS_DEF(qsim_stats_errors_i16_f64, int16_t, double)
QSIM_STATS_ERRORS_DEF(qsim_stats_errors_i32_f64, int32_t, double)
QSIM_STATS_ERRORS_DEF(qsim_stats_errors_i64_f64, int64_t, double)

/* The same for contiguous 8- and 16-bit codes and |zp| < 2^31: q - zp in int32 (the same
 * integer, converted exactly to double), so the loop vectorizes on every path (AVX2 has no
 * int64 -> double conversion). */
#define QSIM_STATS_ERRORS_UNIT_DEF(name, q_t, real_t)                                           \
QSIM_INLINE void name##_body(const q_t *q, const real_t *f, int64_t m, int32_t zp, double scale,\
                             double *e) {                                                       \
    for (int64_t k = 0; k < m; k++)                                                             \
        e[k] = (double)((int32_t)q[k] - zp) * scale - (double)f[k];                             \
}                                                                                               \
QSIM_VERSIONS(name, (const q_t *q, const real_t *f, int64_t m, int32_t zp, double scale,        \
                     double *e), (q, f, m, zp, scale, e))
QSIM_STATS_ERRORS_UNIT_DEF(qsim_stats_errors_unit_i8_f32, int8_t, float)
QSIM_STATS_ERRORS_UNIT_DEF(qsim_stats_errors_unit_i16_f32, int16_t, float)
QSIM_STATS_ERRORS_UNIT_DEF(qsim_stats_errors_unit_i8_f64, int8_t, double)
QSIM_STATS_ERRORS_UNIT_DEF(qsim_stats_errors_unit_i16_f64, int16_t, double)

/* sums[0..3] += lane sums of x^2 (x = f as double), sums[4..7] += of e^2; m % 4 == 0 */
#define QSIM_STATS_SUMS_DEF(name, real_t)                                                       \
QSIM_INLINE void name##_body(const real_t *f, const double *e, int64_t m, double *sums) {       \
    qsim_v4d s = {sums[0], sums[1], sums[2], sums[3]}, t = {sums[4], sums[5], sums[6], sums[7]};\
    for (int64_t k = 0; k < m; k += 4) {                                                        \
        qsim_v4d x = {(double)f[k], (double)f[k + 1], (double)f[k + 2], (double)f[k + 3]};      \
        qsim_v4d d = {e[k], e[k + 1], e[k + 2], e[k + 3]};                                      \
        s += x * x;                                                                             \
        t += d * d;                                                                             \
    }                                                                                           \
    for (int l = 0; l < 4; l++) {                                                               \
        sums[l] = s[l];                                                                         \
        sums[4 + l] = t[l];                                                                     \
    }                                                                                           \
}                                                                                               \
QSIM_VERSIONS(name, (const real_t *f, const double *e, int64_t m, double *sums), (f, e, m, sums))
QSIM_STATS_SUMS_DEF(qsim_stats_sums_f32, float)
QSIM_STATS_SUMS_DEF(qsim_stats_sums_f64, double)


/* The portable path: the lane arithmetic of the vector paths (qsim_stats_bins_avx2,
 * qsim_stats_slots_avx512) one element at a time. */
static void qsim_stats_bins_base(const double *e, int64_t m, double r, double first, double inv_step,
                                 double tol_k, int32_t bins, int32_t *bin) {
    const double afirst = fabs(first), top = (double)bins + 0.5;
    for (int64_t k = 0; k < m; k++) {
        double ev = e[k], v = ev * r, t = (v - first) * inv_step;
        double tc = t > -0.5 ? t : -0.5;
        tc = tc < top ? tc : top;
        double j = (double)(int32_t)(tc + 1.5) - 1.0;
        double tol = (fabs(v) + afirst) * tol_k;
        int near = (fabs(tc - j) <= tol) & (ev != 0.0) & (j >= 1.0) & (j < (double)bins);
        double fl = tc < j ? j - 1.0 : j;
        fl = fl < 0.0 ? 0.0 : fl;
        fl = fl > (double)(bins - 1) ? (double)(bins - 1) : fl;
        fl = near ? -1.0 : fl;
        fl = ev == 0.0 ? -3.0 : fl;
        bin[k] = ev == ev ? (int32_t)fl : -2;
    }
}

#if QSIM_X86
/* The same lane arithmetic in intrinsics (GCC splits generic vector compares that feed masks
 * into scalar code): MAXPD(t, lo) is `t > lo ? t : lo` and MINPD(tc, top) `tc < top ? tc : top`
 * exactly (NaN included), the selects are mask moves. */
static QSIM_TARGET_AVX2 void qsim_stats_bins_avx2(const double *e, int64_t m, double r, double first,
                                                  double inv_step, double tol_k, int32_t bins,
                                                  int32_t *bin) {
    const __m256d zero = _mm256_setzero_pd(), lo = _mm256_set1_pd(-0.5), one = _mm256_set1_pd(1.0);
    const __m256d top = _mm256_set1_pd((double)bins + 0.5), half3 = _mm256_set1_pd(1.5);
    const __m256d last_bin = _mm256_set1_pd((double)(bins - 1)), nbins = _mm256_set1_pd((double)bins);
    const __m256d afirst = _mm256_set1_pd(fabs(first)), vr = _mm256_set1_pd(r);
    const __m256d vfirst = _mm256_set1_pd(first), vinv = _mm256_set1_pd(inv_step);
    const __m256d vtol = _mm256_set1_pd(tol_k), sign = _mm256_set1_pd(-0.0);
    const __m256d minus1 = _mm256_set1_pd(-1.0), minus2 = _mm256_set1_pd(-2.0), minus3 = _mm256_set1_pd(-3.0);
    int64_t k = 0;
    for (; k + 4 <= m; k += 4) {
        __m256d ev = _mm256_loadu_pd(e + k);
        __m256d v = _mm256_mul_pd(ev, vr);
        __m256d t = _mm256_mul_pd(_mm256_sub_pd(v, vfirst), vinv);
        __m256d tc = _mm256_min_pd(_mm256_max_pd(t, lo), top);
        __m256d j = _mm256_sub_pd(_mm256_cvtepi32_pd(_mm256_cvttpd_epi32(_mm256_add_pd(tc, half3))), one);
        __m256d tol = _mm256_mul_pd(_mm256_add_pd(_mm256_andnot_pd(sign, v), afirst), vtol);
        __m256d dist = _mm256_andnot_pd(sign, _mm256_sub_pd(tc, j));
        __m256d near = _mm256_and_pd(_mm256_and_pd(_mm256_cmp_pd(dist, tol, _CMP_LE_OQ),
                                                   _mm256_cmp_pd(ev, zero, _CMP_NEQ_UQ)),
                                     _mm256_and_pd(_mm256_cmp_pd(j, one, _CMP_GE_OQ),
                                                   _mm256_cmp_pd(j, nbins, _CMP_LT_OQ)));
        __m256d fl = _mm256_blendv_pd(j, _mm256_sub_pd(j, one), _mm256_cmp_pd(tc, j, _CMP_LT_OQ));
        fl = _mm256_blendv_pd(fl, zero, _mm256_cmp_pd(fl, zero, _CMP_LT_OQ));
        fl = _mm256_blendv_pd(fl, last_bin, _mm256_cmp_pd(fl, last_bin, _CMP_GT_OQ));
        fl = _mm256_blendv_pd(fl, minus1, near);
        fl = _mm256_blendv_pd(fl, minus3, _mm256_cmp_pd(ev, zero, _CMP_EQ_OQ));
        fl = _mm256_blendv_pd(fl, minus2, _mm256_cmp_pd(ev, ev, _CMP_UNORD_Q));
        _mm_storeu_si128((__m128i *)(bin + k), _mm256_cvttpd_epi32(fl));
    }
}
#endif

/* the entry points: the copy of the caller's path (cpu_features.py) */
/* q_bytes: the integer codes' width (1, 2, 4, 8); f_bytes: 4 (float32) or 8 (float64) */
static void qsim_stats_errors(int isa, int q_bytes, const void *q, int64_t stride, int f_bytes,
                              const void *f, int64_t m, int64_t zp, double scale, double *e) {
#define QSIM_STATS_ERRORS_CALL(qn, q_t, fn, real_t) \
    QSIM_DISPATCH(isa, qsim_stats_errors_##qn##_##fn, (const q_t *)q, stride, (const real_t *)f, m, zp, scale, e)
#define QSIM_STATS_ERRORS_UNIT_CALL(qn, q_t, fn, real_t) \
    QSIM_DISPATCH(isa, qsim_stats_errors_unit_##qn##_##fn, (const q_t *)q, (const real_t *)f, m, (int32_t)zp, scale, e)
    if (stride == 1 && q_bytes <= 2 && zp > -((int64_t)1 << 31) + (1 << 16) && zp < ((int64_t)1 << 31) - (1 << 16)) {
        if (f_bytes == 4) {
            if (q_bytes == 1) QSIM_STATS_ERRORS_UNIT_CALL(i8, int8_t, f32, float);
            else QSIM_STATS_ERRORS_UNIT_CALL(i16, int16_t, f32, float);
        } else {
            if (q_bytes == 1) QSIM_STATS_ERRORS_UNIT_CALL(i8, int8_t, f64, double);
            else QSIM_STATS_ERRORS_UNIT_CALL(i16, int16_t, f64, double);
        }
        return;
    }
    if (f_bytes == 4) {
        switch (q_bytes) {
        case 1: QSIM_STATS_ERRORS_CALL(i8, int8_t, f32, float); break;
        case 2: QSIM_STATS_ERRORS_CALL(i16, int16_t, f32, float); break;
        case 4: QSIM_STATS_ERRORS_CALL(i32, int32_t, f32, float); break;
        default: QSIM_STATS_ERRORS_CALL(i64, int64_t, f32, float); break;
        }
    } else {
        switch (q_bytes) {
        case 1: QSIM_STATS_ERRORS_CALL(i8, int8_t, f64, double); break;
        case 2: QSIM_STATS_ERRORS_CALL(i16, int16_t, f64, double); break;
        case 4: QSIM_STATS_ERRORS_CALL(i32, int32_t, f64, double); break;
        default: QSIM_STATS_ERRORS_CALL(i64, int64_t, f64, double); break;
        }
    }
#undef QSIM_STATS_ERRORS_CALL
#undef QSIM_STATS_ERRORS_UNIT_CALL
}
static void qsim_stats_sums_f32(int isa, const float *f, const double *e, int64_t m, double *sums) {
    QSIM_DISPATCH(isa, qsim_stats_sums_f32, f, e, m, sums);
}
static void qsim_stats_sums_f64(int isa, const double *f, const double *e, int64_t m, double *sums) {
    QSIM_DISPATCH(isa, qsim_stats_sums_f64, f, e, m, sums);
}

#if QSIM_X86
/* qsim_stats_bins_avx2's lane arithmetic on 8 lanes (the constants are its own, in 512-bit
 * registers), the bins packed in registers (see qsim_stats_slots) */
static QSIM_TARGET_AVX512 int64_t qsim_stats_slots_avx512(const double *e, int64_t m, double r, double first,
                                                          double inv_step, double tol_k, int32_t bins,
                                                          int32_t *slot, int32_t *near, int64_t *n_near,
                                                          int64_t *zeros) {
    const __m512d zero = _mm512_setzero_pd(), lo = _mm512_set1_pd(-0.5), one = _mm512_set1_pd(1.0);
    const __m512d top = _mm512_set1_pd((double)bins + 0.5), half3 = _mm512_set1_pd(1.5);
    const __m512d last_bin = _mm512_set1_pd((double)(bins - 1)), nbins = _mm512_set1_pd((double)bins);
    const __m512d afirst = _mm512_set1_pd(fabs(first)), vr = _mm512_set1_pd(r);
    const __m512d vfirst = _mm512_set1_pd(first), vinv = _mm512_set1_pd(inv_step);
    const __m512d vtol = _mm512_set1_pd(tol_k);
    int64_t n = 0, nn = *n_near, z = 0;
    for (int64_t k = 0; k < m; k += 8) {
        __m512d ev = _mm512_loadu_pd(e + k);
        __m512d v = _mm512_mul_pd(ev, vr);
        __m512d t = _mm512_mul_pd(_mm512_sub_pd(v, vfirst), vinv);
        __m512d tc = _mm512_min_pd(_mm512_max_pd(t, lo), top);
        __m512d j = _mm512_sub_pd(_mm512_cvtepi32_pd(_mm512_cvttpd_epi32(_mm512_add_pd(tc, half3))), one);
        __m512d tol = _mm512_mul_pd(_mm512_add_pd(_mm512_abs_pd(v), afirst), vtol);
        __m512d dist = _mm512_abs_pd(_mm512_sub_pd(tc, j));
        /* masks stay in mask registers: nonzero = ordered and != 0; near = nonzero, within tol
         * of the integer j and j an interior edge; kept = nonzero and not near */
        __mmask8 nonzero = _mm512_cmp_pd_mask(ev, zero, _CMP_NEQ_OQ);
        __mmask8 is_zero = _mm512_cmp_pd_mask(ev, zero, _CMP_EQ_OQ);
        __mmask8 near_mask = _mm512_mask_cmp_pd_mask(nonzero, dist, tol, _CMP_LE_OQ);
        near_mask = _mm512_mask_cmp_pd_mask(near_mask, j, one, _CMP_GE_OQ);
        near_mask = _mm512_mask_cmp_pd_mask(near_mask, j, nbins, _CMP_LT_OQ);
        __mmask8 keep = _kandn_mask8(near_mask, nonzero);
        __m512d fl = _mm512_mask_sub_pd(j, _mm512_cmp_pd_mask(tc, j, _CMP_LT_OQ), j, one);
        fl = _mm512_max_pd(_mm512_min_pd(fl, last_bin), zero);
        /* the kept lanes' bins side by side at slot + n (the 8-lane store may write past them:
         * the caller's buffer has room) */
        _mm256_storeu_si256((__m256i *)(slot + n), _mm256_maskz_compress_epi32(keep, _mm512_cvttpd_epi32(fl)));
        n += __builtin_popcount((unsigned)keep);
        z += __builtin_popcount((unsigned)is_zero);
        for (unsigned bits = near_mask; bits; bits &= bits - 1)
            near[nn++] = (int32_t)(k + __builtin_ctz(bits));
    }
    *n_near = nn;
    *zeros += z;
    return n;
}
#endif

/* The bins of e[0..m) (see the top; m % 8 == 0, the caller pads with NaN): the bins >= 0
 * packed into slot[0..returned) (slot has room for m + 8), the k of each near element
 * appended to near[*n_near..], the exact zeros added to *zeros, NaN dropped. Every path gives
 * the same multiset of bins and the same lists. */
static int64_t qsim_stats_slots(int isa, const double *e, int64_t m, double r, double first, double inv_step,
                                double tol_k, int32_t bins, int32_t *slot, int32_t *near, int64_t *n_near,
                                int64_t *zeros) {
#if QSIM_X86
    if (isa == QSIM_ISA_AVX512VNNI)
        return qsim_stats_slots_avx512(e, m, r, first, inv_step, tol_k, bins, slot, near, n_near, zeros);
    if (isa == QSIM_ISA_AVX2)
        qsim_stats_bins_avx2(e, m, r, first, inv_step, tol_k, bins, slot);
    else
#endif
        qsim_stats_bins_base(e, m, r, first, inv_step, tol_k, bins, slot);
    int64_t n = 0, nn = *n_near, z = 0;
    for (int64_t k = 0; k < m; k++) {          /* packed in place: n <= k */
        const int32_t j = slot[k];
        if (j >= 0)
            slot[n++] = j;
        else if (j == -1)
            near[nn++] = (int32_t)k;
        else
            z += j == -3;
    }
    *n_near = nn;
    *zeros += z;
    return n;
}

#if QSIM_X86
/* qsim_stats_block_i8_f32 on the AVX-512 path: the three passes in one, 8 elements at a time in
 * registers (the codes and values read once, e stored only for the near-edge fallback). The
 * same doubles: e as qsim_stats_errors_unit (q - zp is a small integer, exact in double either
 * as an int32 difference converted or as the difference of the converted int64 code and zp),
 * the sums lane for lane as qsim_stats_sums (the low 4 lanes added before the high 4; the lanes
 * past m add +0.0, which leaves a partial sum of squares as it is). The bins take a shorter form
 * of the slots' lane arithmetic with the same result: t clamped to [1/4, bins - 1/4] has
 * floor(t) in [0, bins - 1] already, and only an interior edge (1..bins-1) can lie within tol
 * of it, so no interior test is needed; tol is the slots' bound at the largest |v| an interior
 * t can have (|v| <= max(|first|, |last|) + step), so every element the slots path lists as
 * near is listed here too and the rest have floor(t) as their bin (the caller checks
 * tol < 1/4).
 *
 * t = e * (r * inv_step) - first * inv_step is the slots' (e * r - first) * inv_step to the
 * bit: inv_step is a power of two (the multiply path's grid), and scaling by a power of two
 * commutes with rounding, except where a product falls below the normal range or overflows,
 * where t is beyond [1/4, bins - 1/4] either way and clamps to the same end. The distance of
 * tc from the nearest integer is VREDUCEPD's tc - roundeven(tc), the exact difference the
 * rounding and a subtraction give. Exact zeros are not counted lane by lane: every valid lane
 * is kept, near, zero or NaN, so the zeros are m - kept - near - NaN, and a NaN e (rare: a NaN
 * float value) shows as a NaN partial sum of e^2 (a sum of squares only turns NaN on a NaN
 * term), after which the block's NaN are counted from e. */
typedef struct {
    __m512d vzp, vscale, vrs, vfs, vtol, lo, hi;
    __m256d s, t;                  /* the partial sums of f^2 and e^2 */
    int64_t n, nn;                 /* kept bins, near elements so far */
} qsim_stats_state_avx512;

/* elements k .. k+7 (the lanes of `valid`: all 8 but in the block's last group) */
static QSIM_TARGET_AVX512 inline __attribute__((always_inline)) void qsim_stats_group_avx512(
        qsim_stats_state_avx512 *st, const int8_t *q, const float *f, int64_t k, __mmask8 valid,
        double *e, int32_t *slot, int32_t *near) {
    const __m512d zero = _mm512_setzero_pd();
    /* the lanes past m: codes and values 0, e 0 (so +0.0 into the sums), then NaN (no bin) */
    __m512d qd = _mm512_cvtepi64_pd(_mm512_cvtepi8_epi64(_mm_maskz_loadu_epi8(valid, q + k)));
    __m512d x = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(valid, f + k));
    __m512d ev = _mm512_maskz_sub_pd(valid, _mm512_mul_pd(_mm512_sub_pd(qd, st->vzp), st->vscale), x);
    __m512d xx = _mm512_mul_pd(x, x), ee = _mm512_mul_pd(ev, ev);
    st->s = _mm256_add_pd(st->s, _mm512_castpd512_pd256(xx));
    st->s = _mm256_add_pd(st->s, _mm512_extractf64x4_pd(xx, 1));
    st->t = _mm256_add_pd(st->t, _mm512_castpd512_pd256(ee));
    st->t = _mm256_add_pd(st->t, _mm512_extractf64x4_pd(ee, 1));
    if (valid != 0xff)
        ev = _mm512_mask_mov_pd(_mm512_set1_pd(NAN), valid, ev);
    _mm512_storeu_pd(e + k, ev);
    __m512d tc = _mm512_min_pd(_mm512_max_pd(_mm512_sub_pd(_mm512_mul_pd(ev, st->vrs), st->vfs), st->lo), st->hi);
    __m512d dist = _mm512_abs_pd(_mm512_reduce_pd(tc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    /* nonzero: ordered and != 0; near: nonzero and within tol of an integer; kept: the rest of
     * the nonzero (dist is never NaN: tc is clamped, and a NaN e is not nonzero) */
    __mmask8 nonzero = _mm512_cmp_pd_mask(ev, zero, _CMP_NEQ_OQ);
    __mmask8 near_mask = _mm512_mask_cmp_pd_mask(nonzero, dist, st->vtol, _CMP_LE_OQ);
    __mmask8 keep = _mm512_mask_cmp_pd_mask(nonzero, dist, st->vtol, _CMP_NLE_UQ);
    __m256i fl = _mm512_cvt_roundpd_epi32(tc, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    /* the kept lanes' bins side by side at slot + n (the 8-lane store may write past them: the
     * caller's buffer has room) */
    _mm256_storeu_si256((__m256i *)(slot + st->n), _mm256_maskz_compress_epi32(keep, fl));
    st->n += __builtin_popcount((unsigned)keep);
    for (unsigned bits = near_mask; bits; bits &= bits - 1)
        near[st->nn++] = (int32_t)(k + __builtin_ctz(bits));
}

static QSIM_TARGET_AVX512 int64_t qsim_stats_block_i8_f32_avx512(
        const int8_t *q, const float *f, int64_t m, int32_t zp, double scale, double r, double first,
        double inv_step, double tol, int32_t bins, double *e, double *sums, int32_t *slot, int32_t *near,
        int64_t *n_near, int64_t *zeros) {
    qsim_stats_state_avx512 st = {
        _mm512_set1_pd((double)zp), _mm512_set1_pd(scale), _mm512_set1_pd(r * inv_step),
        _mm512_set1_pd(first * inv_step), _mm512_set1_pd(tol), _mm512_set1_pd(0.25),
        _mm512_set1_pd((double)bins - 0.25), _mm256_loadu_pd(sums), _mm256_loadu_pd(sums + 4), 0, *n_near};
    const int64_t nn0 = *n_near, m8 = m - m % 8;
    for (int64_t k = 0; k < m8; k += 8)
        qsim_stats_group_avx512(&st, q, f, k, (__mmask8)0xff, e, slot, near);
    if (m8 < m)
        qsim_stats_group_avx512(&st, q, f, m8, (__mmask8)((1u << (m - m8)) - 1u), e, slot, near);
    _mm256_storeu_pd(sums, st.s);
    _mm256_storeu_pd(sums + 4, st.t);
    /* every valid lane is kept, near, an exact zero or NaN */
    int64_t z = m - st.n - (st.nn - nn0);
    if (sums[4] != sums[4] || sums[5] != sums[5] || sums[6] != sums[6] || sums[7] != sums[7])
        for (int64_t k = 0; k < m; k++)
            z -= e[k] != e[k];
    *n_near = st.nn;
    *zeros += z;
    return st.n;
}
#endif

/* One block (m <= QSIM_STATS_BLOCK) of contiguous 8-bit codes (one scale, zero point with
 * |zp| < 2^31 - 2^16) and float32 values on the multiply path: e[0..m) as qsim_stats_errors,
 * sums[0..8) += the lane sums as qsim_stats_sums plus the tail m % 4 one by one (sums starts
 * at the caller's zeros), and the bins as qsim_stats_slots with e padded by NaN to a multiple
 * of 8 (e has room). `tol_k` is the slots' factor, `tol_max` the bound the AVX-512 path uses
 * (the caller passes it only below 1/4). Every path gives the same e, sums, slots and lists. */
static int64_t qsim_stats_block_i8_f32(int isa, const int8_t *q, const float *f, int64_t m, int32_t zp,
                                       double scale, double r, double first, double inv_step, double tol_k,
                                       double tol_max, int32_t bins, double *e, double *sums, int32_t *slot,
                                       int32_t *near, int64_t *n_near, int64_t *zeros) {
#if QSIM_X86
    if (isa == QSIM_ISA_AVX512VNNI)
        return qsim_stats_block_i8_f32_avx512(q, f, m, zp, scale, r, first, inv_step, tol_max, bins, e,
                                              sums, slot, near, n_near, zeros);
#endif
    QSIM_DISPATCH(isa, qsim_stats_errors_unit_i8_f32, q, f, m, zp, scale, e);
    const int64_t m4 = m - m % 4;
    QSIM_DISPATCH(isa, qsim_stats_sums_f32, f, e, m4, sums);
    for (int64_t k = m4; k < m; k++) {
        const double x = (double)f[k];
        sums[k & 3] += x * x;
        sums[4 + (k & 3)] += e[k] * e[k];
    }
    const int64_t m8 = (m + 7) & ~(int64_t)7;
    for (int64_t k = m; k < m8; k++)
        e[k] = NAN;
    return qsim_stats_slots(isa, e, m8, r, first, inv_step, tol_k, bins, slot, near, n_near, zeros);
}

/* lanes[(k % QSIM_STATS_LANES) * QSIM_STATS_LANE_STRIDE + slot[k]] += 1 for k < n: interleaved
 * copies of the counts (neighbouring elements often share a bin, and one counter incremented
 * back to back waits on its own store), 256 + 8 counters apart so that no two copies sit a
 * multiple of 4 KiB apart (a load would wait on the other's store) */
#define QSIM_STATS_LANES 8
#define QSIM_STATS_LANE_STRIDE 264
static void qsim_stats_count(const int32_t *slot, int64_t n, int64_t *lanes) {
    int64_t *c0 = lanes, *c1 = lanes + QSIM_STATS_LANE_STRIDE, *c2 = lanes + 2 * QSIM_STATS_LANE_STRIDE;
    int64_t *c3 = lanes + 3 * QSIM_STATS_LANE_STRIDE, *c4 = lanes + 4 * QSIM_STATS_LANE_STRIDE;
    int64_t *c5 = lanes + 5 * QSIM_STATS_LANE_STRIDE, *c6 = lanes + 6 * QSIM_STATS_LANE_STRIDE;
    int64_t *c7 = lanes + 7 * QSIM_STATS_LANE_STRIDE;
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        c0[slot[k]] += 1;
        c1[slot[k + 1]] += 1;
        c2[slot[k + 2]] += 1;
        c3[slot[k + 3]] += 1;
        c4[slot[k + 4]] += 1;
        c5[slot[k + 5]] += 1;
        c6[slot[k + 6]] += 1;
        c7[slot[k + 7]] += 1;
    }
    for (; k < n; k++)
        lanes[(k & (QSIM_STATS_LANES - 1)) * QSIM_STATS_LANE_STRIDE + slot[k]] += 1;
}

/* out[g * D + d] = src[d * s2 + g] for g < rows, d < D: rows of 8-bit codes whose neighbours
 * sit next to each other in memory (an NHWC tensor's channels) gathered into the float
 * layout's order (a copy: the same bytes), 8 rows x 8 columns at a time transposed in SSE2
 * registers, the edges one byte at a time. */
static void qsim_stats_rows_i8(const int8_t *src, int64_t s2, int64_t rows, int64_t D, int8_t *out) {
    int64_t g0 = 0;
#if QSIM_X86
    for (; g0 + 8 <= rows; g0 += 8) {
        int64_t d0 = 0;
        for (; d0 + 8 <= D; d0 += 8) {
            const int8_t *p = src + d0 * s2 + g0;
            /* r_i: the 8 codes of column d0 + i (rows g0..g0+7) */
            __m128i r0 = _mm_loadl_epi64((const __m128i *)p), r1 = _mm_loadl_epi64((const __m128i *)(p + s2));
            __m128i r2 = _mm_loadl_epi64((const __m128i *)(p + 2 * s2)), r3 = _mm_loadl_epi64((const __m128i *)(p + 3 * s2));
            __m128i r4 = _mm_loadl_epi64((const __m128i *)(p + 4 * s2)), r5 = _mm_loadl_epi64((const __m128i *)(p + 5 * s2));
            __m128i r6 = _mm_loadl_epi64((const __m128i *)(p + 6 * s2)), r7 = _mm_loadl_epi64((const __m128i *)(p + 7 * s2));
            __m128i t0 = _mm_unpacklo_epi8(r0, r1), t1 = _mm_unpacklo_epi8(r2, r3);   /* row g: cols 0,1 | 2,3 */
            __m128i t2 = _mm_unpacklo_epi8(r4, r5), t3 = _mm_unpacklo_epi8(r6, r7);   /* cols 4,5 | 6,7 */
            __m128i u0 = _mm_unpacklo_epi16(t0, t1), u1 = _mm_unpackhi_epi16(t0, t1); /* rows 0-3 | 4-7, cols 0-3 */
            __m128i u2 = _mm_unpacklo_epi16(t2, t3), u3 = _mm_unpackhi_epi16(t2, t3); /* rows 0-3 | 4-7, cols 4-7 */
            __m128i v0 = _mm_unpacklo_epi32(u0, u2), v1 = _mm_unpackhi_epi32(u0, u2); /* rows 0,1 | 2,3 */
            __m128i v2 = _mm_unpacklo_epi32(u1, u3), v3 = _mm_unpackhi_epi32(u1, u3); /* rows 4,5 | 6,7 */
            int8_t *o = out + g0 * D + d0;
            _mm_storel_epi64((__m128i *)o, v0);
            _mm_storel_epi64((__m128i *)(o + D), _mm_unpackhi_epi64(v0, v0));
            _mm_storel_epi64((__m128i *)(o + 2 * D), v1);
            _mm_storel_epi64((__m128i *)(o + 3 * D), _mm_unpackhi_epi64(v1, v1));
            _mm_storel_epi64((__m128i *)(o + 4 * D), v2);
            _mm_storel_epi64((__m128i *)(o + 5 * D), _mm_unpackhi_epi64(v2, v2));
            _mm_storel_epi64((__m128i *)(o + 6 * D), v3);
            _mm_storel_epi64((__m128i *)(o + 7 * D), _mm_unpackhi_epi64(v3, v3));
        }
        for (; d0 < D; d0++)
            for (int64_t g = g0; g < g0 + 8; g++)
                out[g * D + d0] = src[d0 * s2 + g];
    }
#endif
    for (int64_t d = 0; d < D; d++)
        for (int64_t g = g0; g < rows; g++)
            out[g * D + d] = src[d * s2 + g];
}

/* Quantization of a per-tensor input (kernels/quant_ops.pyx quantize_per_tensor; the
 * definition is qsim/quant/params.py quantize): a = (double)x / scale, r = floor(a) + 1 where
 * a - floor(a) >= 0.5 else floor(a), out = clip(zp + r, qmin, qmax). floor(a) is taken from the
 * truncation t = (int64)a, less one where (double)t > a: t is exact below 2^62 (a double of
 * magnitude >= 2^52 is an integer already, so (double)t == a there, and below 2^53 every integer
 * is a double), so the comparison and the sum are numpy's. Returns how many a were not finite
 * or beyond 2^62 in magnitude (their out is unspecified; the caller takes numpy's path, whose
 * float -> int64 cast defines them). Branch-free, so each ISA copy vectorizes. */
#define QSIM_QUANTIZE_DEF(name, real_t, q_t)                                                    \
QSIM_INLINE void name##_body(const real_t *x, int64_t n, double scale, int64_t zp, int64_t qmin,\
                             int64_t qmax, q_t *out, int64_t *bad) {                            \
    int64_t nbad = 0;                                                                           \
    for (int64_t k = 0; k < n; k++) {                                                           \
        double a = (double)x[k] / scale;                                                        \
        const int ok = a > -4611686018427387904.0 && a < 4611686018427387904.0;                 \
        nbad += !ok;                                                                            \
        a = ok ? a : 0.0;                                                                       \
        int64_t t = (int64_t)a;                                                                 \
        t -= (double)t > a;                                                                     \
        t += a - (double)t >= 0.5;                                                              \
        int64_t v = zp + t;                                                                     \
        v = v < qmin ? qmin : v;                                                                \
        v = v > qmax ? qmax : v;                                                                \
        out[k] = (q_t)v;                                                                        \
    }                                                                                           \
    *bad = nbad;                                                                                \
}                                                                                               \
QSIM_VERSIONS(name, (const real_t *x, int64_t n, double scale, int64_t zp, int64_t qmin,        \
                     int64_t qmax, q_t *out, int64_t *bad), (x, n, scale, zp, qmin, qmax, out, bad))
QSIM_QUANTIZE_DEF(qsim_quantize_f32_i8, float, int8_t)
QSIM_QUANTIZE_DEF(qsim_quantize_f32_i16, float, int16_t)
QSIM_QUANTIZE_DEF(qsim_quantize_f32_i32, float, int32_t)
QSIM_QUANTIZE_DEF(qsim_quantize_f64_i8, double, int8_t)
QSIM_QUANTIZE_DEF(qsim_quantize_f64_i16, double, int16_t)
QSIM_QUANTIZE_DEF(qsim_quantize_f64_i32, double, int32_t)

#if QSIM_X86
/* The AVX-512 copy in intrinsics, 8 values a time (GCC left the loop above scalar on every
 * path: 4 ns a value, EfficientNet-Lite0's 5-crop input batch 3 ms): the same operations lane
 * by lane. The division and the comparisons are IEEE's; VCVTTPD2QQ is the C truncation to
 * int64 (exact here: |a| < 2^62), VCVTQQ2PD the C int64 -> double conversion (round to
 * nearest even, the default mode); the int64 clip and a narrowing store of the clipped value. */
static QSIM_TARGET_AVX512 int64_t qsim_quantize_avx512(int x_bytes, const void *x, int64_t n, double scale,
                                                       int64_t zp, int64_t qmin, int64_t qmax, int q_bytes,
                                                       void *out) {
    const __m512d vscale = _mm512_set1_pd(scale), lo62 = _mm512_set1_pd(-4611686018427387904.0);
    const __m512d hi62 = _mm512_set1_pd(4611686018427387904.0), half = _mm512_set1_pd(0.5);
    const __m512i vzp = _mm512_set1_epi64(zp), vmin = _mm512_set1_epi64(qmin), vmax = _mm512_set1_epi64(qmax);
    const __m512i one = _mm512_set1_epi64(1);
    int64_t bad = 0;
    for (int64_t k = 0; k < n; k += 8) {
        const __mmask8 valid = n - k >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - k)) - 1u);
        __m512d a = x_bytes == 4 ? _mm512_cvtps_pd(_mm256_maskz_loadu_ps(valid, (const float *)x + k))
                                 : _mm512_maskz_loadu_pd(valid, (const double *)x + k);
        a = _mm512_div_pd(a, vscale);
        const __mmask8 ok = _mm512_cmp_pd_mask(a, lo62, _CMP_GT_OQ) & _mm512_cmp_pd_mask(a, hi62, _CMP_LT_OQ);
        bad += __builtin_popcount((unsigned)(valid & (__mmask8)~ok));
        a = _mm512_maskz_mov_pd(ok, a);
        __m512i t = _mm512_cvttpd_epi64(a);
        t = _mm512_mask_sub_epi64(t, _mm512_cmp_pd_mask(_mm512_cvtepi64_pd(t), a, _CMP_GT_OQ), t, one);
        t = _mm512_mask_add_epi64(t, _mm512_cmp_pd_mask(_mm512_sub_pd(a, _mm512_cvtepi64_pd(t)), half, _CMP_GE_OQ),
                                  t, one);
        __m512i v = _mm512_min_epi64(_mm512_max_epi64(_mm512_add_epi64(vzp, t), vmin), vmax);
        if (q_bytes == 1)
            _mm512_mask_cvtepi64_storeu_epi8((int8_t *)out + k, valid, v);
        else if (q_bytes == 2)
            _mm512_mask_cvtepi64_storeu_epi16((int16_t *)out + k, valid, v);
        else
            _mm512_mask_cvtepi64_storeu_epi32((int32_t *)out + k, valid, v);
    }
    return bad;
}
#endif

/* x_bytes: 4 or 8; q_bytes: 1, 2 or 4 */
static int64_t qsim_quantize(int isa, int x_bytes, const void *x, int64_t n, double scale, int64_t zp,
                             int64_t qmin, int64_t qmax, int q_bytes, void *out) {
    int64_t bad = 0;
#if QSIM_X86
    if (isa == QSIM_ISA_AVX512VNNI)
        return qsim_quantize_avx512(x_bytes, x, n, scale, zp, qmin, qmax, q_bytes, out);
#endif
#define QSIM_QUANTIZE_CALL(xn, real_t, qn, q_t) \
    QSIM_DISPATCH(isa, qsim_quantize_##xn##_##qn, (const real_t *)x, n, scale, zp, qmin, qmax, (q_t *)out, &bad)
    if (x_bytes == 4) {
        if (q_bytes == 1) QSIM_QUANTIZE_CALL(f32, float, i8, int8_t);
        else if (q_bytes == 2) QSIM_QUANTIZE_CALL(f32, float, i16, int16_t);
        else QSIM_QUANTIZE_CALL(f32, float, i32, int32_t);
    } else {
        if (q_bytes == 1) QSIM_QUANTIZE_CALL(f64, double, i8, int8_t);
        else if (q_bytes == 2) QSIM_QUANTIZE_CALL(f64, double, i16, int16_t);
        else QSIM_QUANTIZE_CALL(f64, double, i32, int32_t);
    }
#undef QSIM_QUANTIZE_CALL
    return bad;
}

#endif
