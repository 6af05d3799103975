/* The calibration observers' pass over one float32 activation (kernels/quant_ops.pyx scan_f32,
 * scan_bins_f32, add_bin_counts_f32; qsim/quant/observers.py): extremes, exact zeros,
 * finiteness and, with counts, the histogram bin of every value, in one pass.
 *
 * Definition (every path gives exactly these integers and floats):
 *   finite = every x[k] - x[k] == 0 (inf - inf and NaN - NaN are NaN);
 *   lo, hi = the smallest and largest value; when that value is zero, the first zero of x
 *            (keeps its sign: a sequential `if (v < lo) lo = v` from lo = x[0] gives that);
 *   zeros  = how many x[k] == 0 (either sign);
 *   bin(k) = floor((double)x[k] * inv) - first, computed in double: exact, since a float32 times
 *            a power of two `inv` is a double, floor of a double is an integer, and the
 *            difference of two integers below 2^53 in magnitude is exact whenever it is below
 *            2^53 (so an in-range result is never a rounding: the caller keeps |first| < 2^52);
 *   counts[bin(k)] += 1 where 0 <= bin(k) < size; inside = every bin(k) is so.
 * When finite is false the other results are unspecified (the caller raises).
 *
 * Counting: exact zeros are not scattered (they are counted in `zeros` and added to bin
 * -first at the end: a ReLU output is mostly zeros, and one counter incremented back to back
 * waits on its own store); the other values go to QSIM_SCAN_COPIES interleaved uint32 copies
 * of the histogram (value k to copy k % QSIM_SCAN_COPIES; on the AVX-512 path the k-th counted
 * value of a run: which copy changes no total), flushed into the int64 counts every
 * QSIM_SCAN_CHUNK values so no copy can overflow. Values out of range (and NaN) go to a dummy
 * slot past the bins. The vector paths compute bins 16 (AVX-512) or 8 (AVX2) at a time.
 */
#ifndef QSIM_SCAN_STATS_H
#define QSIM_SCAN_STATS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "isa_paths.h"

#define QSIM_SCAN_COPIES 4
#define QSIM_SCAN_CHUNK ((int64_t)1 << 28)     /* < 2^32 per copy: uint32 never wraps */

typedef struct {
    float lo, hi;          /* value extremes (zero sign fixed by qsim_scan_f32 afterwards) */
    int64_t zeros;
    int bad;               /* a value was not finite */
    int out;               /* a value's bin was outside [0, size) */
} qsim_scan_acc;

/* x[0..n): extremes, zeros, finiteness; with sub (not NULL) bins into
 * sub[(k % COPIES) * stride + bin] (bin `size` is the dummy). `k0`: the index of x[0] mod COPIES. */
static inline void qsim_scan_scalar(const float *x, int64_t n, double inv, double firstd, double sized,
                                    uint32_t *sub, int64_t stride, int64_t size, int64_t k0,
                                    qsim_scan_acc *acc) {
    float lo = acc->lo, hi = acc->hi;
    int64_t zeros = 0;
    int bad = 0, out = 0;
    for (int64_t k = 0; k < n; k++) {
        const float v = x[k];
        bad |= !(v - v == 0.0f);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        zeros += v == 0.0f;
        if (sub) {
            const double j = floor((double)v * inv) - firstd;
            const int in = j >= 0.0 && j < sized;
            out |= !in;
            const int64_t slot = in && v != 0.0f ? (int64_t)j : size;
            sub[((k0 + k) % QSIM_SCAN_COPIES) * stride + slot] += 1;
        }
    }
    acc->lo = lo;
    acc->hi = hi;
    acc->zeros += zeros;
    acc->bad |= bad;
    acc->out |= out;
}

static void qsim_scan_base(const float *x, int64_t n, double inv, double firstd, double sized,
                           uint32_t *sub, int64_t stride, int64_t size, qsim_scan_acc *acc) {
    qsim_scan_scalar(x, n, inv, firstd, sized, sub, stride, size, 0, acc);
}

#if QSIM_X86
/* The vector paths bin in float32: v * inv is exact there too when inv >= 1 (a power of two
 * scaling up never rounds; an overflow gives inf, out of range as the double is), and with
 * |first| < 2^24 and size < 2^20 the int32 floor minus first is the double's bin whenever
 * either is in range (a wrapped int32 difference is still out of range). qsim_scan_f32
 * takes the portable path when these do not hold. */
/* The AVX-512 path bins 16 values a time and packs the bins of the counted ones (in range and
 * not zero) into a buffer (compress), QSIM_SCAN_RUN values at a time; a scalar loop then adds
 * the run's bins into the copies of the histogram, four interleaved (neighbouring values often
 * share a bin). The bins went straight from the vector into the copies before: GCC turned the
 * reload of the stored lanes into 16 lane extracts per vector, which cost more than the binning
 * (EfficientNet-Lite0's calibration). Which copy a value lands in changes no total. */
#define QSIM_SCAN_RUN 1024
static QSIM_TARGET_AVX512 void qsim_scan_avx512(const float *x, int64_t n, double inv, double firstd,
                                                double sized, uint32_t *sub, int64_t stride,
                                                int64_t size, qsim_scan_acc *acc) {
    const __m512 zero = _mm512_setzero_ps(), vinv = _mm512_set1_ps((float)inv);
    const __m512i vfirst = _mm512_set1_epi32((int32_t)firstd), vsize = _mm512_set1_epi32((int32_t)size);
    __m512 vlo = _mm512_set1_ps(acc->lo), vhi = _mm512_set1_ps(acc->hi);
    __mmask16 bad = 0, out = 0;
    int64_t zeros = 0, k = 0;
    int32_t run[QSIM_SCAN_RUN + 16];
    uint32_t *c0 = sub, *c1 = sub + stride, *c2 = sub + 2 * stride, *c3 = sub + 3 * stride;
    while (k + 16 <= n) {
        const int64_t end = n - k > QSIM_SCAN_RUN ? k + QSIM_SCAN_RUN : n;
        int64_t kept = 0;
        for (; k + 16 <= end; k += 16) {
            const __m512 v = _mm512_loadu_ps(x + k);
            bad |= _mm512_cmp_ps_mask(_mm512_sub_ps(v, v), zero, _CMP_NEQ_UQ);
            vlo = _mm512_min_ps(vlo, v);
            vhi = _mm512_max_ps(vhi, v);
            const __mmask16 z = _mm512_cmp_ps_mask(v, zero, _CMP_EQ_OQ);
            zeros += __builtin_popcount((unsigned)z);
            if (sub) {
                /* floor to int32 (out of int32 range and NaN: INT32_MIN), minus first, in range
                 * as unsigned */
                const __m512i j = _mm512_sub_epi32(_mm512_cvt_roundps_epi32(
                    _mm512_mul_ps(v, vinv), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), vfirst);
                const __mmask16 in = _mm512_cmplt_epu32_mask(j, vsize);
                out |= (__mmask16)~in;
                const __mmask16 keep = in & (__mmask16)~z;
                _mm512_storeu_si512((void *)(run + kept), _mm512_maskz_compress_epi32(keep, j));
                kept += __builtin_popcount((unsigned)keep);
            }
        }
        int64_t i = 0;
        for (; i + 4 <= kept; i += 4) {
            c0[run[i]] += 1;
            c1[run[i + 1]] += 1;
            c2[run[i + 2]] += 1;
            c3[run[i + 3]] += 1;
        }
        for (; i < kept; i++)
            c0[run[i]] += 1;
    }
    qsim_scan_acc tail = {_mm512_reduce_min_ps(vlo), _mm512_reduce_max_ps(vhi), 0, 0, 0};
    qsim_scan_scalar(x + k, n - k, inv, firstd, sized, sub, stride, size, k, &tail);
    acc->lo = tail.lo;
    acc->hi = tail.hi;
    acc->zeros += zeros + tail.zeros;
    acc->bad |= (bad != 0) | tail.bad;
    acc->out |= (out != 0) | tail.out;
}

static QSIM_TARGET_AVX2 void qsim_scan_avx2(const float *x, int64_t n, double inv, double firstd,
                                            double sized, uint32_t *sub, int64_t stride,
                                            int64_t size, qsim_scan_acc *acc) {
    const __m256 zero = _mm256_setzero_ps(), vinv = _mm256_set1_ps((float)inv);
    const __m256i vfirst = _mm256_set1_epi32((int32_t)firstd), vsize = _mm256_set1_epi32((int32_t)size);
    const __m256i none = _mm256_set1_epi32(-1);
    const __m256i copy_offset = _mm256_mullo_epi32(
        _mm256_and_si256(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(QSIM_SCAN_COPIES - 1)),
        _mm256_set1_epi32((int32_t)stride));
    const __m256i dummy = _mm256_set1_epi32((int32_t)size);
    __m256 vlo = _mm256_set1_ps(acc->lo), vhi = _mm256_set1_ps(acc->hi);
    __m256 bad = zero;
    __m256i out = _mm256_setzero_si256();
    int64_t zeros = 0, k = 0;
    int32_t slot[8];
    for (; k + 8 <= n; k += 8) {
        const __m256 v = _mm256_loadu_ps(x + k);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_sub_ps(v, v), zero, _CMP_NEQ_UQ));
        vlo = _mm256_min_ps(vlo, v);
        vhi = _mm256_max_ps(vhi, v);
        const __m256 z = _mm256_cmp_ps(v, zero, _CMP_EQ_OQ);
        zeros += __builtin_popcount((unsigned)_mm256_movemask_ps(z));
        if (sub) {
            /* floor is exact, its truncation too (out of int32 range and NaN: INT32_MIN) */
            const __m256i j = _mm256_sub_epi32(_mm256_cvttps_epi32(_mm256_floor_ps(_mm256_mul_ps(v, vinv))), vfirst);
            const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), j),
                                                   _mm256_cmpgt_epi32(vsize, j));
            out = _mm256_or_si256(out, _mm256_xor_si256(in, none));
            const __m256i keep = _mm256_andnot_si256(_mm256_castps_si256(z), in);
            const __m256i s = _mm256_add_epi32(_mm256_blendv_epi8(dummy, j, keep), copy_offset);
            _mm256_storeu_si256((__m256i *)slot, s);
            for (int l = 0; l < 8; l++)
                sub[slot[l]] += 1;
        }
    }
    float lo8[8], hi8[8];
    _mm256_storeu_ps(lo8, vlo);
    _mm256_storeu_ps(hi8, vhi);
    qsim_scan_acc tail = {lo8[0], hi8[0], 0, 0, 0};
    for (int l = 1; l < 8; l++) {
        tail.lo = lo8[l] < tail.lo ? lo8[l] : tail.lo;
        tail.hi = hi8[l] > tail.hi ? hi8[l] : tail.hi;
    }
    qsim_scan_scalar(x + k, n - k, inv, firstd, sized, sub, stride, size, k, &tail);
    acc->lo = tail.lo;
    acc->hi = tail.hi;
    acc->zeros += zeros + tail.zeros;
    acc->bad |= _mm256_movemask_ps(bad) != 0 || tail.bad;
    acc->out |= !_mm256_testz_si256(out, out) || tail.out;
}
#endif

/* The pass (see the top of this file). counts == NULL: no bins (then inv, first, size are
 * unused and *inside is 1). Returns 0 when a copy of the histogram could not be allocated. */
static int qsim_scan_f32(int isa, const float *x, int64_t n, double inv, int64_t first,
                         int64_t *counts, int64_t size, float *lo, float *hi, int64_t *zeros,
                         int *finite, int *inside) {
    qsim_scan_acc acc = {x[0], x[0], 0, 0, 0};
    const int64_t stride = size + 1 + 16;      /* the dummy slot, and copies apart in the cache */
    uint32_t *sub = NULL;
    if (counts) {
        sub = (uint32_t *)calloc((size_t)(QSIM_SCAN_COPIES * stride), sizeof(uint32_t));
        if (!sub)
            return 0;
    }
    /* the vector paths' float32 bins need inv >= 1 and |first| below 2^24 (see above; the
     * caller keeps size below 2^20) */
    const int64_t f32_bound = (int64_t)1 << 24;
    const int path = !counts || (inv >= 1.0 && first > -f32_bound && first < f32_bound)
                     ? isa : QSIM_ISA_PORTABLE;
    for (int64_t start = 0; start < n; start += QSIM_SCAN_CHUNK) {
        const int64_t m = n - start < QSIM_SCAN_CHUNK ? n - start : QSIM_SCAN_CHUNK;
        QSIM_DISPATCH(path, qsim_scan, x + start, m, inv, (double)first, (double)size, sub, stride, size, &acc);
        if (sub) {
            for (int c = 0; c < QSIM_SCAN_COPIES; c++) {
                uint32_t *s = sub + c * stride;
                for (int64_t j = 0; j < size; j++)
                    counts[j] += s[j];
                memset(s, 0, (size_t)stride * sizeof(uint32_t));
            }
        }
    }
    free(sub);
    /* a zero extreme is the first zero of x, sign included (see the top) */
    if (acc.lo == 0.0f || acc.hi == 0.0f) {
        int64_t k = 0;
        while (k < n && x[k] != 0.0f)
            k++;
        if (k < n) {
            if (acc.lo == 0.0f)
                acc.lo = x[k];
            if (acc.hi == 0.0f)
                acc.hi = x[k];
        }
    }
    if (counts && acc.zeros && -first >= 0 && -first < size)
        counts[-first] += acc.zeros;
    *lo = acc.lo;
    *hi = acc.hi;
    *zeros = acc.zeros;
    *finite = !acc.bad;
    *inside = counts ? !acc.out : 1;
    return 1;
}

/* numpy's pairwise summation of float32 values widened to float64 (numpy/_core/src/umath/
 * loops_utils.h pairwise_sum, which np.add.reduce runs along a contiguous axis): sequential
 * from 0 below 8 values, eight interleaved partial sums up to 128 (then combined as
 * ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)) and the rest added in order), halves cut
 * at a multiple of 8 above. The eight partial sums are the lanes of one vector: the same
 * additions in the same order as the scalar form, so numpy's bits (the calibration's channel
 * means, kernels/quant_ops.pyx channel_sums_f32). */
typedef double qsim_v8d __attribute__((vector_size(64)));
typedef float qsim_v8f __attribute__((vector_size(32)));

QSIM_INLINE double qsim_pairwise_leaf_body(const float *a, int64_t n) {
    double res = 0.0;
    if (n < 8) {
        for (int64_t i = 0; i < n; i++)
            res = res + (double)a[i];
        return res;
    }
    qsim_v8f x;
    __builtin_memcpy(&x, a, sizeof x);
    qsim_v8d r = __builtin_convertvector(x, qsim_v8d);
    int64_t i = 8;
    for (; i < n - (n % 8); i += 8) {
        __builtin_memcpy(&x, a + i, sizeof x);
        r = r + __builtin_convertvector(x, qsim_v8d);
    }
    res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++)
        res = res + (double)a[i];
    return res;
}

#define QSIM_PAIRWISE_DEF(suffix, target, leaf)                                                \
static target double qsim_pairwise_f32_##suffix(const float *a, int64_t n) {                   \
    if (n <= 128)                                                                             \
        return leaf(a, n);                                                                    \
    int64_t n2 = n / 2;                                                                       \
    n2 -= n2 % 8;                                                                             \
    return qsim_pairwise_f32_##suffix(a, n2) + qsim_pairwise_f32_##suffix(a + n2, n - n2);    \
}
#if QSIM_X86
/* The leaf body in AVX-512 intrinsics: one VCVTPS2PD from memory widens 8 floats into the
 * partial sums' register (GCC's generic tuning split the generic vector's conversion into two
 * 4-wide ones, an extract and an insert: three times the vector operations per 8 values, on
 * the ports the adds need; channel_sums_f32 on EfficientNet-Lite0's calibration shapes took
 * 1.29x the time). The same exact widening and the same additions in the same order. */
static QSIM_TARGET_AVX512 inline __attribute__((always_inline)) double qsim_pairwise_leaf_avx512(
        const float *a, int64_t n) {
    if (n < 8)
        return qsim_pairwise_leaf_body(a, n);
    __m512d r = _mm512_cvtps_pd(_mm256_loadu_ps(a));
    int64_t i = 8;
    for (; i < n - (n % 8); i += 8)
        r = _mm512_add_pd(r, _mm512_cvtps_pd(_mm256_loadu_ps(a + i)));
    double l[8];
    _mm512_storeu_pd(l, r);
    double res = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
    for (; i < n; i++)
        res = res + (double)a[i];
    return res;
}
QSIM_PAIRWISE_DEF(avx512, QSIM_TARGET_AVX512, qsim_pairwise_leaf_avx512)
QSIM_PAIRWISE_DEF(avx2, QSIM_TARGET_AVX2, qsim_pairwise_leaf_body)
#endif
QSIM_PAIRWISE_DEF(base, , qsim_pairwise_leaf_body)

static double qsim_pairwise_f32(int isa, const float *a, int64_t n) {
#if QSIM_X86
    if (isa == QSIM_ISA_AVX512VNNI)
        return qsim_pairwise_f32_avx512(a, n);
    if (isa == QSIM_ISA_AVX2)
        return qsim_pairwise_f32_avx2(a, n);
#endif
    return qsim_pairwise_f32_base(a, n);
}

#endif
