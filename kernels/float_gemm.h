/* The float executor's convolution GEMM (qsim/runtime/float_ops/conv_gemm.py):
 *     out[b][gi*m + r][p] = sum over k of w[gi][r][k] * cols[b][gi][k][p]  (+ bias, relu/clamp)
 * with the im2col `cols` never built: it is packed straight from the NCHW input into the
 * B panels the micro-kernel reads.
 *
 * Bits: every output element is ONE chain of fused multiply-adds in k order,
 *     acc = fma(w[r][0], col[0][p], +0.0f); acc = fma(w[r][k], col[k][p], acc) for k = 1 .. K-1,
 * then acc + bias[r] (one float32 add), then numpy's maximum/minimum for a fused relu/clamp.
 * The blocking only decides where that chain is parked between k blocks (in `out`, as the
 * float32 it is in the register), never its order, so the result does not depend on the
 * block sizes, on which thread computes the element, on the batch the sample is in or on the
 * instruction set: the AVX-512 and AVX2 kernels use vfmadd (one rounding per step) and the
 * portable one fmaf (the same rounding by definition), so all paths give the same bits.
 * (The file is built with -ffp-contract=off: only these explicit fma calls fuse.)
 * Accuracy: a sequential float32 sum, |error| <= K * eps * sum |w||x| (the tests' bound).
 *
 * Layout:
 * - A (weights): panels of QSIM_GM = 8 rows, packed[gi][panel][k][8] (rows past m are 0.0f),
 *   made once per call by qsim_gemm_pack_a;
 * - B (columns): for one k block [k0, k1) and a run of output pixels, panels of QSIM_GN = 48
 *   pixels, Bp[panel][k - k0][48], gathered from the input with the conv's geometry (0.0f
 *   outside it and past the last pixel);
 * - micro-kernel: an 8 x (16 * nv) tile (nv <= 3) in registers: on AVX-512 24 zmm accumulators,
 *   per k 3 vector loads of B and 8 broadcasts of A; AVX2 runs the same tile as 4-row x
 *   24-column pieces (12 ymm accumulators).
 * Work is cut into tasks (sample, group, block of pixel panels, part of the rows); a task's
 * range [t0, t1) runs in one call without the GIL, so the caller's threads split a layer with
 * one hand-off each.
 */
#ifndef QSIM_FLOAT_GEMM_H
#define QSIM_FLOAT_GEMM_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "isa_paths.h"
#include "float_conv.h"

#define QSIM_GM 8        /* rows (output channels) per A panel and micro-tile */
#define QSIM_GN 48       /* pixels per B panel (row stride of a packed panel) */
#define QSIM_GKC 256     /* k block: an A slice (8 KB) and a B panel (48 KB) per micro-kernel call */
#define QSIM_GEMM_PANEL_OUTER_KC 64   /* k blocks this long loop over the B panels outside the rows */

/* packed[gi][p][k][8] = w[gi][p*8 + i][k] (0.0f past m), panels [p0, p1) of every group */
static void qsim_gemm_pack_a(const float *w, int64_t g, int64_t m, int64_t K, float *packed, int64_t q0,
                             int64_t q1) {
    const int64_t panels = (m + QSIM_GM - 1) / QSIM_GM;
    for (int64_t q = q0; q < q1; q++) {                  /* q = gi * panels + p */
        const int64_t gi = q / panels, p = q % panels;
        float *dst = packed + q * K * QSIM_GM;
        for (int64_t i = 0; i < QSIM_GM; i++) {
            const int64_t r = p * QSIM_GM + i;
            if (r >= m) {
                for (int64_t k = 0; k < K; k++) dst[k * QSIM_GM + i] = 0.0f;
                continue;
            }
            const float *src = w + (gi * m + r) * K;
            for (int64_t k = 0; k < K; k++) dst[k * QSIM_GM + i] = src[k];
        }
    }
}

/* The conv's geometry: input plane x[b][c] of H x W, KH x KW taps, stride, dilation, leading
 * padding (pt, pl; negative crops), OW output columns. */
typedef struct {
    const float *x;
    int64_t C, H, W, KH, KW, sy, sx, dy, dx, pt, pl, OW;
    /* NULL, or the gather table of small strided layers (qsim_gemm_pack_b_gather):
     * gather[t * gstride + n] = iy * W + ix, the plane element that tap t = ky*KW + kx of
     * output pixel n reads, or -1 where that is padding; gstride >= N rounded up to 16, the
     * entries past N -1 */
    const int32_t *gather;
    int64_t gstride;
} qsim_gemm_geo;

/* The pixel runs of one task's pixels [n0, n0 + npix): pieces that stay in one output row and
 * one B panel, as (oy, ox0, count, panel * QSIM_GN + column) in seg[4*i ..]; returns their count
 * (at most npix + npix / QSIM_GN + 1). Made once per task, so packing each k row divides nothing. */
static int64_t qsim_gemm_runs(int64_t OW, int64_t n0, int64_t npix, int64_t *seg) {
    int64_t count = 0, n = n0;
    const int64_t n1 = n0 + npix;
    while (n < n1) {
        const int64_t ox0 = n % OW, col = (n - n0) % QSIM_GN;
        int64_t cnt = OW - ox0;
        if (cnt > QSIM_GN - col) cnt = QSIM_GN - col;
        if (cnt > n1 - n) cnt = n1 - n;
        seg[4 * count] = n / OW;
        seg[4 * count + 1] = ox0;
        seg[4 * count + 2] = cnt;
        seg[4 * count + 3] = n - n0;
        count++;
        n += cnt;
    }
    return count;
}

/* Bp[j][k - k0][c] for pixels [n0, n0 + npix) of sample b (runs from qsim_gemm_runs), channel
 * offset c0 (the group's first input channel), k in [k0, k1) with k = (c*KH + ky)*KW + kx: the
 * im2col value of that pixel, 0.0f outside the input. (Columns past npix are never read: the
 * vector kernels take the last panel's whole vectors only, the tail kernel its last columns.) */
QSIM_INLINE void qsim_gemm_pack_b_body(const qsim_gemm_geo *g, int64_t b, int64_t c0, int64_t k0, int64_t k1,
                                       int64_t n0, int64_t npix, const int64_t *seg, int64_t nseg, float *Bp) {
    const int64_t kc = k1 - k0, taps = g->KH * g->KW, OW = g->OW, W = g->W, sx = g->sx;
    const int64_t panel = kc * QSIM_GN;
    if (taps == 1 && g->sy == 1 && sx == 1 && g->pt == 0 && g->pl == 0 && W == OW) {
        /* pointwise: pixel n is element n of the plane, each panel row one contiguous run */
        for (int64_t k = k0; k < k1; k++) {
            const float *src = g->x + (b * g->C + c0 + k) * g->H * W + n0;
            for (int64_t j = 0; j * QSIM_GN < npix; j++) {
                const int64_t cnt = npix - j * QSIM_GN < QSIM_GN ? npix - j * QSIM_GN : QSIM_GN;
                float *restrict dst = Bp + j * panel + (k - k0) * QSIM_GN;
                const float *restrict s = src + j * QSIM_GN;
                for (int64_t i = 0; i < cnt; i++) dst[i] = s[i];
            }
        }
        return;
    }
    int64_t c = k0 / taps, t = k0 % taps;
    for (int64_t k = k0; k < k1; k++) {
        const int64_t ky = t / g->KW, kx = t % g->KW;
        const float *plane = g->x + (b * g->C + c0 + c) * g->H * W;
        const int64_t off = kx * g->dx - g->pl, yoff = ky * g->dy - g->pt;
        /* output columns ox with 0 <= ox*sx + off < W: [first, lastc) */
        int64_t first = off >= 0 ? 0 : (-off + sx - 1) / sx;
        int64_t lastc = W - 1 - off >= 0 ? (W - 1 - off) / sx + 1 : 0;
        if (lastc > OW) lastc = OW;
        if (first > lastc) first = lastc;
        float *krow = Bp + (k - k0) * QSIM_GN;
        for (int64_t i = 0; i < nseg; i++) {
            const int64_t *sg = seg + 4 * i;
            const int64_t ox0 = sg[1], cnt = sg[2], at = sg[3];
            float *restrict dst = krow + (at / QSIM_GN) * panel + at % QSIM_GN;
            const int64_t iy = sg[0] * g->sy + yoff;
            if (iy < 0 || iy >= g->H) {
                for (int64_t q = 0; q < cnt; q++) dst[q] = 0.0f;
                continue;
            }
            const float *restrict row = plane + iy * W + off;
            const int64_t ox1 = ox0 + cnt;
            const int64_t lo = first > ox0 ? (first < ox1 ? first : ox1) : ox0;
            const int64_t hi = lastc < ox1 ? (lastc > lo ? lastc : lo) : ox1;
            for (int64_t ox = ox0; ox < lo; ox++) dst[ox - ox0] = 0.0f;
            if (sx == 1) {
                for (int64_t ox = lo; ox < hi; ox++) dst[ox - ox0] = row[ox];
            } else if (sx == 2) {
                /* 16 columns from two vectors of the row, their even lanes (a stem's stride 2: the
                 * element-wise copy was most of the stem's time); the vectors stay within the row
                 * (their last element 2*ox + 31 <= W - 1 - off), the rest goes one by one */
                int64_t ox = lo;
                for (; ox + 16 <= hi && 2 * ox + 31 <= W - 1 - off; ox += 16) {
                    const qsim_v16f a = *(const qsim_v16f_u *)(row + 2 * ox);
                    const qsim_v16f e = *(const qsim_v16f_u *)(row + 2 * ox + 16);
                    *(qsim_v16f_u *)(dst + ox - ox0) = __builtin_shuffle(
                        a, e, (qsim_v16i){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30});
                }
                for (; ox < hi; ox++) dst[ox - ox0] = row[ox * 2];
            } else {
                for (int64_t ox = lo; ox < hi; ox++) dst[ox - ox0] = row[ox * sx];
            }
            for (int64_t ox = hi; ox < ox1; ox++) dst[ox - ox0] = 0.0f;
        }
        if (++t == taps) {
            t = 0;
            c++;
        }
    }
}
/* one copy per path: the copies are most of the packing's time, and AVX-512 moves 16 floats a go */
#define QSIM_PACK_B_PARAMS (const qsim_gemm_geo *g, int64_t b, int64_t c0, int64_t k0, int64_t k1, int64_t n0, \
    int64_t npix, const int64_t *seg, int64_t nseg, float *Bp)
QSIM_VERSIONS(qsim_gemm_pack_b, QSIM_PACK_B_PARAMS, (g, b, c0, k0, k1, n0, npix, seg, nseg, Bp))

/* The B panels of pack_b from the gather table instead of the pixel runs: on images whose
 * output rows are short (Fashion-MNIST's 28 to 4 pixels), a run is a handful of pixels and
 * working out each run per k row cost more than the copies (57 % of such a layer's time was
 * packing, 33 % the products). Row k = (c, t) of panel j is plane c read at the table's row t,
 * 0.0f where it says -1: the same values as the runs give. AVX-512 gathers 16 at a time. */
#if QSIM_X86
/* dst[i] = plane[at[i]] (0.0f where at[i] is -1) for i < cnt rounded up to 16: the table's rows
 * are padded with -1 past N to a multiple of 16, and a panel row has 48 columns (those past
 * npix are never read) */
static QSIM_TARGET_AVX512 void qsim_gather_row_avx512(float *dst, const float *plane, const int32_t *at,
                                                      int64_t cnt) {
    const __m512i none = _mm512_set1_epi32(-1);
    for (int64_t i = 0; i < cnt; i += 16) {
        const __m512i where = _mm512_loadu_si512((const void *)(at + i));
        const __mmask16 inside = _mm512_cmpneq_epi32_mask(where, none);
        _mm512_storeu_ps(dst + i, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), inside, where, plane, 4));
    }
}
#endif

static void qsim_gemm_pack_b_gather(int isa, const qsim_gemm_geo *g, int64_t b, int64_t c0, int64_t k0, int64_t k1,
                                    int64_t n0, int64_t npix, float *Bp) {
    const int64_t taps = g->KH * g->KW, panel = (k1 - k0) * QSIM_GN, HW = g->H * g->W;
    for (int64_t k = k0; k < k1; k++) {
        const float *plane = g->x + (b * g->C + c0 + k / taps) * HW;
        const int32_t *idx = g->gather + (k % taps) * g->gstride + n0;
        for (int64_t j = 0; j * QSIM_GN < npix; j++) {
            const int64_t cnt = npix - j * QSIM_GN < QSIM_GN ? npix - j * QSIM_GN : QSIM_GN;
            float *dst = Bp + j * panel + (k - k0) * QSIM_GN;
            const int32_t *at = idx + j * QSIM_GN;
#if QSIM_X86
            if (isa == QSIM_ISA_AVX512VNNI) {
                qsim_gather_row_avx512(dst, plane, at, cnt);
                continue;
            }
#endif
            for (int64_t i = 0; i < cnt; i++) dst[i] = at[i] >= 0 ? plane[at[i]] : 0.0f;
        }
    }
    (void)isa;
}

/* pack_b by the table when the layer has one, else by the pixel runs */
static inline void qsim_gemm_pack_cols(int isa, const qsim_gemm_geo *g, int64_t b, int64_t c0, int64_t k0,
                                       int64_t k1, int64_t n0, int64_t npix, const int64_t *seg, int64_t nseg,
                                       float *Bp) {
    if (g->gather != NULL)
        qsim_gemm_pack_b_gather(isa, g, b, c0, k0, k1, n0, npix, Bp);
    else
        QSIM_DISPATCH(isa, qsim_gemm_pack_b, g, b, c0, k0, k1, n0, npix, seg, nseg, Bp);
}

/* What a micro-kernel does with its finished tile (the last k block): + bias[r] (NULL: nothing
 * added, not even +0.0f), then mode 1: y = relu/clamp of it as well, mode 2: out gets the
 * relu/clamp instead. The relu/clamp is numpy's maximum(v, lo) then minimum(v, hi): a NaN stays,
 * equal zeros give the bound (vector compares "not <=" / "not >=", true for a NaN). */
typedef struct {
    const float *bias;        /* the tile's first row's bias, or NULL */
    float *y;                 /* mode 1: the tile in y (row stride ldc) */
    int mode, has_hi;
    float lo, hi;
} qsim_gemm_fin;

/* ---- micro-kernels: c[r][0 .. 16*nv) (row stride ldc) for r < 8, over kc steps of
 * a[k][8] and b[k][48]; `load`: continue the chains parked in c, else start them from +0.0f;
 * fin: the epilogue above on the finished tile (NULL: an intermediate k block). */
#if QSIM_X86
QSIM_INLINE QSIM_TARGET_AVX512 __m512 qsim_bound512(__m512 v, const qsim_gemm_fin *f) {
    v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_set1_ps(f->lo), _CMP_NLE_UQ), _mm512_set1_ps(f->lo), v);
    if (f->has_hi)
        v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_set1_ps(f->hi), _CMP_NGE_UQ), _mm512_set1_ps(f->hi), v);
    return v;
}
QSIM_INLINE QSIM_TARGET_AVX512 void qsim_fin512(__m512 v, float *c, int64_t off, float bias, const qsim_gemm_fin *f) {
    if (f->bias != NULL) v = _mm512_add_ps(v, _mm512_set1_ps(bias));
    if (f->mode == 2) v = qsim_bound512(v, f);
    _mm512_storeu_ps(c + off, v);
    if (f->mode == 1) _mm512_storeu_ps(f->y + off, qsim_bound512(v, f));
}
QSIM_INLINE QSIM_TARGET_AVX2 __m256 qsim_bound256(__m256 v, const qsim_gemm_fin *f) {
    v = _mm256_blendv_ps(_mm256_set1_ps(f->lo), v, _mm256_cmp_ps(v, _mm256_set1_ps(f->lo), _CMP_NLE_UQ));
    if (f->has_hi)
        v = _mm256_blendv_ps(_mm256_set1_ps(f->hi), v, _mm256_cmp_ps(v, _mm256_set1_ps(f->hi), _CMP_NGE_UQ));
    return v;
}
QSIM_INLINE QSIM_TARGET_AVX2 void qsim_fin256(__m256 v, float *c, int64_t off, float bias, const qsim_gemm_fin *f) {
    if (f->bias != NULL) v = _mm256_add_ps(v, _mm256_set1_ps(bias));
    if (f->mode == 2) v = qsim_bound256(v, f);
    _mm256_storeu_ps(c + off, v);
    if (f->mode == 1) _mm256_storeu_ps(f->y + off, qsim_bound256(v, f));
}

#define QSIM_GEMM512(NV)                                                                          \
static QSIM_TARGET_AVX512 void qsim_gemm_k512_##NV(int64_t kc, const float *restrict a,            \
                                                   const float *restrict b,                        \
                                                   const int64_t *restrict bo, float *restrict c,  \
                                                   int64_t ldc, int load,                          \
                                                   const qsim_gemm_fin *fin, const float *pf,      \
                                                   const float *pfa) {                             \
    __m512 acc[QSIM_GM][NV];                                                                        \
    _Pragma("GCC unroll 8") for (int r = 0; r < QSIM_GM; r++)                                      \
        _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++)                                       \
            acc[r][v] = load ? _mm512_loadu_ps(c + r * ldc + 16 * v) : _mm512_setzero_ps();        \
    for (int64_t k = 0; k < kc; k++) {                                                            \
        __m512 bv[NV];                                                                              \
        const float *bk = b + bo[k];                                                                \
        _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_ps(bk + 16 * v); \
        if (pf != NULL) {                                                                           \
            _mm_prefetch((const char *)(pf + bo[k]), _MM_HINT_T0);                                  \
            _mm_prefetch((const char *)(pf + bo[k] + 16), _MM_HINT_T0);                             \
            _mm_prefetch((const char *)(pf + bo[k] + 32), _MM_HINT_T0);                             \
            _mm_prefetch((const char *)(pf + bo[k] + 47), _MM_HINT_T0);                             \
        }                                                                                           \
        if (pfa != NULL) _mm_prefetch((const char *)(pfa + QSIM_GM * k), _MM_HINT_T0);              \
        _Pragma("GCC unroll 8") for (int r = 0; r < QSIM_GM; r++) {                                \
            const __m512 av = _mm512_set1_ps(a[r]);                                                 \
            _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++)                                   \
                acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);                                  \
        }                                                                                           \
        a += QSIM_GM;                                                                               \
    }                                                                                               \
    if (fin == NULL) {                                                                              \
        _Pragma("GCC unroll 8") for (int r = 0; r < QSIM_GM; r++)                                  \
            _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++)                                   \
                _mm512_storeu_ps(c + r * ldc + 16 * v, acc[r][v]);                                  \
        return;                                                                                     \
    }                                                                                               \
    _Pragma("GCC unroll 8") for (int r = 0; r < QSIM_GM; r++)                                      \
        _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++)                                       \
            qsim_fin512(acc[r][v], c, r * ldc + 16 * v, fin->bias != NULL ? fin->bias[r] : 0.0f, fin); \
}
QSIM_GEMM512(1)
QSIM_GEMM512(2)
QSIM_GEMM512(3)

/* AVX2: rows [r0, r0 + 4) of the tile, NV ymm (8 columns each) from column c0 */
#define QSIM_GEMM256(NV)                                                                          \
static QSIM_TARGET_AVX2 void qsim_gemm_k256_##NV(int64_t kc, const float *restrict a,              \
                                                 const float *restrict b,                          \
                                                 const int64_t *restrict bo, float *restrict c,    \
                                                 int64_t ldc, int load,                            \
                                                 const qsim_gemm_fin *fin) {                       \
    __m256 acc[4][NV];                                                                              \
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)                                            \
        _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++)                                       \
            acc[r][v] = load ? _mm256_loadu_ps(c + r * ldc + 8 * v) : _mm256_setzero_ps();         \
    for (int64_t k = 0; k < kc; k++) {                                                            \
        __m256 bv[NV];                                                                              \
        const float *bk = b + bo[k];                                                                \
        _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) bv[v] = _mm256_loadu_ps(bk + 8 * v);  \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                      \
            const __m256 av = _mm256_broadcast_ss(a + r);                                           \
            _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++)                                   \
                acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);                                  \
        }                                                                                           \
        a += QSIM_GM;                                                                               \
    }                                                                                               \
    if (fin == NULL) {                                                                              \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)                                        \
            _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++)                                   \
                _mm256_storeu_ps(c + r * ldc + 8 * v, acc[r][v]);                                   \
        return;                                                                                     \
    }                                                                                               \
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)                                            \
        _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++)                                       \
            qsim_fin256(acc[r][v], c, r * ldc + 8 * v, fin->bias != NULL ? fin->bias[r] : 0.0f, fin); \
}
QSIM_GEMM256(1)
QSIM_GEMM256(2)
QSIM_GEMM256(3)
#endif

/* portable: the same chains with fmaf (correctly rounded by C99: the bits of vfmadd) */
static void qsim_gemm_kbase(int64_t kc, const float *restrict a, const float *restrict b,
                            const int64_t *restrict bo, float *restrict c, int64_t ldc, int load, int64_t width,
                            const qsim_gemm_fin *fin) {
    for (int r = 0; r < QSIM_GM; r++)
        for (int64_t j = 0; j < width; j++) {
            float acc = load ? c[r * ldc + j] : 0.0f;
            for (int64_t k = 0; k < kc; k++) acc = fmaf(a[k * QSIM_GM + r], b[bo[k] + j], acc);
            c[r * ldc + j] = acc;
        }
    if (fin != NULL && (fin->bias != NULL || fin->mode))
        qsim_tile_epilogue_f32_body(c, fin->y, ldc, fin->bias, 0, QSIM_GM, 0, width, fin->mode, fin->lo, fin->hi,
                                    fin->has_hi);
}

/* one 8 x width tile (width a multiple of 16, <= 48) on the chosen path. pf, pfa: NULL, or the
 * B columns (same row offsets bo) and the A slice (kc x 8) a later tile reads, which the AVX-512
 * kernel prefetches while it computes this one: a 1x1 conv read in place streams K planes at
 * once, more than the hardware prefetchers follow, and a 7x7 layer streams its weights from the
 * L3 cache once per inference (in a network both waited on their loads: 10-25 % of such a
 * layer's time with cold caches). Prefetches change no value. */
static inline void qsim_gemm_tile(int isa, int64_t kc, const float *a, const float *b, const int64_t *bo, float *c,
                                  int64_t ldc, int load, int64_t width, const qsim_gemm_fin *fin, const float *pf,
                                  const float *pfa) {
#if QSIM_X86
    if (isa == QSIM_ISA_AVX512VNNI) {
        if (width == 48) qsim_gemm_k512_3(kc, a, b, bo, c, ldc, load, fin, pf, pfa);
        else if (width == 32) qsim_gemm_k512_2(kc, a, b, bo, c, ldc, load, fin, pf, pfa);
        else qsim_gemm_k512_1(kc, a, b, bo, c, ldc, load, fin, pf, pfa);
        return;
    }
    if (isa == QSIM_ISA_AVX2) {
        for (int64_t r0 = 0; r0 < QSIM_GM; r0 += 4)
            for (int64_t j = 0; j < width; j += 24) {
                const int64_t nv = (width - j) >= 24 ? 3 : (width - j) / 8;
                const float *ap = a + r0, *bp = b + j;
                float *cp = c + r0 * ldc + j;
                qsim_gemm_fin part, *fp = NULL;
                if (fin != NULL) {                /* rows r0.., columns j.. of the tile */
                    part = *fin;
                    if (part.bias != NULL) part.bias += r0;
                    if (part.y != NULL) part.y += r0 * ldc + j;
                    fp = &part;
                }
                if (nv == 3) qsim_gemm_k256_3(kc, ap, bp, bo, cp, ldc, load, fp);
                else if (nv == 2) qsim_gemm_k256_2(kc, ap, bp, bo, cp, ldc, load, fp);
                else qsim_gemm_k256_1(kc, ap, bp, bo, cp, ldc, load, fp);
            }
        return;
    }
#endif
    (void)isa;
    (void)pf;
    (void)pfa;
    qsim_gemm_kbase(kc, a, b, bo, c, ldc, load, width, fin);
}

/* ---- tail columns (a pixel count that is not a multiple of 16: 7x7 = 48 + 1, 14x14 = 192 + 4):
 * the vector kernels would spend a whole 16-wide vector on each one. Here the rows are the
 * vector instead: acc[p][j] holds rows 8p .. 8p+7 of column j (one ymm of an A panel's k row
 * times the broadcast b[k][j]), NP panels x T columns at a time. The same fma chain per element
 * in the same k order, so the same bits. c: the first panel's first row at the first tail
 * column; rows_total: rows from there that exist (the rest are not read or written). */
#if QSIM_X86
#define QSIM_GEMMT(NP, T)                                                                         \
static QSIM_TARGET_AVX2 void qsim_gemm_tail_##NP##_##T(int64_t kc, const float *restrict a, int64_t lda,     \
                                                       const float *restrict b, const int64_t *restrict bo,  \
                                                       float *restrict c,                                    \
                                                       int64_t ldc, int64_t rows_total, int load) {          \
    __m256 acc[NP][T];                                                                              \
    float buf[QSIM_GM];                                                                             \
    _Pragma("GCC unroll 8") for (int p = 0; p < NP; p++)                                           \
        _Pragma("GCC unroll 3") for (int j = 0; j < T; j++) {                                      \
            if (load) {                                                                             \
                for (int r = 0; r < QSIM_GM; r++)                                                  \
                    buf[r] = p * QSIM_GM + r < rows_total ? c[(p * QSIM_GM + r) * ldc + j] : 0.0f; \
                acc[p][j] = _mm256_loadu_ps(buf);                                                   \
            } else {                                                                                \
                acc[p][j] = _mm256_setzero_ps();                                                    \
            }                                                                                       \
        }                                                                                           \
    for (int64_t k = 0; k < kc; k++) {                                                            \
        _Pragma("GCC unroll 3") for (int j = 0; j < T; j++) {                                      \
            const __m256 bv = _mm256_broadcast_ss(b + bo[k] + j);                                   \
            _Pragma("GCC unroll 8") for (int p = 0; p < NP; p++)                                   \
                acc[p][j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + p * lda), bv, acc[p][j]);           \
        }                                                                                           \
        a += QSIM_GM;                                                                               \
    }                                                                                               \
    _Pragma("GCC unroll 8") for (int p = 0; p < NP; p++)                                           \
        _Pragma("GCC unroll 3") for (int j = 0; j < T; j++) {                                      \
            _mm256_storeu_ps(buf, acc[p][j]);                                                       \
            for (int r = 0; r < QSIM_GM && p * QSIM_GM + r < rows_total; r++)                       \
                c[(p * QSIM_GM + r) * ldc + j] = buf[r];                                            \
        }                                                                                           \
}
QSIM_GEMMT(8, 1)
QSIM_GEMMT(4, 2)
QSIM_GEMMT(4, 3)
QSIM_GEMMT(1, 1)
QSIM_GEMMT(1, 2)
QSIM_GEMMT(1, 3)
#endif

static void qsim_gemm_tail_base(int64_t kc, const float *a, int64_t lda, int64_t np, const float *b,
                                const int64_t *bo, int64_t T, float *c, int64_t ldc, int64_t rows_total, int load) {
    for (int64_t r = 0; r < np * QSIM_GM && r < rows_total; r++)
        for (int64_t j = 0; j < T; j++) {
            const float *ar = a + (r / QSIM_GM) * lda + r % QSIM_GM;
            float acc = load ? c[r * ldc + j] : 0.0f;
            for (int64_t k = 0; k < kc; k++) acc = fmaf(ar[k * QSIM_GM], b[bo[k] + j], acc);
            c[r * ldc + j] = acc;
        }
}

/* the T tail columns of A panels [p0, p1) (a: panel p0's k-block slice, lda: floats between
 * panels; c: row 8*p0 at the first tail column) */
static void qsim_gemm_tail(int isa, int64_t kc, const float *a, int64_t lda, int64_t p0, int64_t p1,
                           const float *b, const int64_t *bo, int64_t T, float *c, int64_t ldc, int64_t rows_total,
                           int load) {
#if QSIM_X86
    if (isa != QSIM_ISA_PORTABLE) {
        for (int64_t j = 0; j < T; j += 3) {
            const int64_t t = T - j < 3 ? T - j : 3, step = t == 1 ? 8 : 4;
            int64_t p = p0;
            for (; p + step <= p1; p += step) {
                const float *ap = a + (p - p0) * lda;
                float *cp = c + (p - p0) * QSIM_GM * ldc + j;
                const int64_t rows = rows_total - (p - p0) * QSIM_GM;
                if (t == 1) qsim_gemm_tail_8_1(kc, ap, lda, b + j, bo, cp, ldc, rows, load);
                else if (t == 2) qsim_gemm_tail_4_2(kc, ap, lda, b + j, bo, cp, ldc, rows, load);
                else qsim_gemm_tail_4_3(kc, ap, lda, b + j, bo, cp, ldc, rows, load);
            }
            for (; p < p1; p++) {
                const float *ap = a + (p - p0) * lda;
                float *cp = c + (p - p0) * QSIM_GM * ldc + j;
                const int64_t rows = rows_total - (p - p0) * QSIM_GM;
                if (t == 1) qsim_gemm_tail_1_1(kc, ap, lda, b + j, bo, cp, ldc, rows, load);
                else if (t == 2) qsim_gemm_tail_1_2(kc, ap, lda, b + j, bo, cp, ldc, rows, load);
                else qsim_gemm_tail_1_3(kc, ap, lda, b + j, bo, cp, ldc, rows, load);
            }
        }
        return;
    }
#endif
    (void)isa;
    qsim_gemm_tail_base(kc, a, lda, p1 - p0, b, bo, T, c, ldc, rows_total, load);
}

/* The B panels of every k block of sample 0, group 0, pixels [0, npix) (nblk == 1), k blocks
 * [kb0, kb1): block kb at dst + kb*QSIM_GKC * npan * QSIM_GN, as the driver reads them. Threads
 * split the k blocks; then the row-split tasks share one copy (7x7 and 14x14 layers: each
 * thread packed all of it before). seg: room for the runs (as in the driver's scratch). */
static void qsim_gemm_prepack(int isa, const qsim_gemm_geo *geo, int64_t K, int64_t npix, int64_t kb0, int64_t kb1,
                              float *dst, int64_t *seg) {
    const int64_t npan = (npix + QSIM_GN - 1) / QSIM_GN;
    const int64_t nseg = geo->gather != NULL ? 0 : qsim_gemm_runs(geo->OW, 0, npix, seg);
    for (int64_t kb = kb0; kb < kb1; kb++) {
        const int64_t k0 = kb * QSIM_GKC, k1 = K - k0 < QSIM_GKC ? K : k0 + QSIM_GKC;
        qsim_gemm_pack_cols(isa, geo, 0, 0, k0, k1, 0, npix, seg, nseg, dst + k0 * npan * QSIM_GN);
    }
}

/* The layer: x as in qsim_gemm_geo (one sample [C][H][W] per b), groups g of m output
 * channels over fc input channels (K = fc*KH*KW), packed A from qsim_gemm_pack_a, output
 * out[b][g*m][N] (N = OH*OW pixels), bias[g*m] or NULL, then with `bounded` the relu/clamp
 * (qsim_tile_epilogue_f32: into y, or with bounded == 2 into out).
 * Tasks t in [t0, t1): t = ((b*g + gi)*nblk + blk)*msplit + ms: pixel panels
 * [blk*ppb, (blk+1)*ppb) of sample b and group gi, A panels [ms*mp/msplit, (ms+1)*mp/msplit).
 * prepacked (one sample, one group, one block: batch * g * nblk == 1): the B panels of all k
 * from qsim_gemm_prepack, shared by the tasks instead of each packing its own copy.
 * direct (stride 1): no packing at all; row k of the columns of pixel n of sample b, group gi
 * is direct[(b*C + gi*fc)*dplane + doff[k] + n] (a pointwise conv: the input itself, doff[k] =
 * k*H*W; otherwise a zero-padded copy whose rows are as wide as the pixel grid, see conv_gemm.py).
 * Every read stays inside `direct` (the caller sizes it), whatever the pixel count.
 * scratch: qsim_gemm_scratch_floats(K, ppb) floats. */
static inline int64_t qsim_gemm_scratch_floats(int64_t K, int64_t ppb) {
    const int64_t kc = K < QSIM_GKC ? K : QSIM_GKC;
    /* B panels, the 8 x 48 buffer, the runs (int64), the packed panels' row offsets (int64) */
    return ppb * kc * QSIM_GN + QSIM_GM * QSIM_GN + 2 * 4 * (ppb * QSIM_GN + ppb + 1) + 2 * QSIM_GKC;
}

static void qsim_conv_gemm_f32(int isa, const qsim_gemm_geo *geo, int64_t g, int64_t m, int64_t fc,
                               const float *packed, const float *bias, float *out, float *y, int64_t N,
                               int bounded, float lo, float hi, int has_hi, int64_t nblk, int64_t ppb,
                               int64_t msplit, int64_t t0, int64_t t1, const float *prepacked,
                               const float *direct, int64_t dplane, const int64_t *doff, float *scratch) {
    const int64_t K = fc * geo->KH * geo->KW, mp = (m + QSIM_GM - 1) / QSIM_GM;
    const int64_t kc_most = K < QSIM_GKC ? K : QSIM_GKC;
    float *Bp = scratch, *tmp = scratch + ppb * kc_most * QSIM_GN;
    int64_t *seg = (int64_t *)(tmp + QSIM_GM * QSIM_GN);      /* 8-byte aligned: malloc'd, even offsets */
    int64_t *rowk = seg + 4 * (ppb * QSIM_GN + ppb + 1);     /* a packed panel's row k is at k * 48 */
    for (int64_t k = 0; k < QSIM_GKC; k++) rowk[k] = k * QSIM_GN;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t ms = t % msplit, blk = (t / msplit) % nblk, bg = t / msplit / nblk;
        const int64_t b = bg / g, gi = bg % g;
        const int64_t n0 = blk * ppb * QSIM_GN;
        if (n0 >= N) continue;
        const int64_t npix = N - n0 < ppb * QSIM_GN ? N - n0 : ppb * QSIM_GN;
        const int64_t npan = (npix + QSIM_GN - 1) / QSIM_GN;
        const int64_t p0 = ms * mp / msplit, p1 = (ms + 1) * mp / msplit;
        const int64_t in_last = npix - (npan - 1) * QSIM_GN, vec_last = in_last / 16 * 16, tail = in_last % 16;
        float *o = out + (b * g * m + gi * m) * N;            /* this sample's group's rows */
        if (p1 <= p0) continue;
        const int64_t nseg = direct != NULL || geo->gather != NULL ? 0 : qsim_gemm_runs(geo->OW, n0, npix, seg);
        /* direct: the columns are read in place, row k of pixel n at base + doff[k] + n */
        const float *base = direct != NULL ? direct + (b * geo->C + gi * fc) * dplane : NULL;
        for (int64_t k0 = 0; k0 < K; k0 += QSIM_GKC) {
            const int64_t k1 = K - k0 < QSIM_GKC ? K : k0 + QSIM_GKC, kc = k1 - k0;
            const int last = k1 == K;
            const int64_t *bo = direct != NULL ? doff + k0 : rowk;
            if (direct != NULL)
                ;
            else if (prepacked != NULL)               /* packed once for all tasks (qsim_gemm_prepack) */
                Bp = (float *)prepacked + k0 * npan * QSIM_GN;
            else
                qsim_gemm_pack_cols(isa, geo, b, gi * fc, k0, k1, n0, npix, seg, nseg, Bp);
            /* long k blocks: one B panel (kc x 48 floats) stays in the L1 cache while every row
             * panel's A slice (kc x 8) streams past it, the products reading 8 floats of A per k
             * step from the L2 cache instead of 48 of B; short ones (a 1x1 conv on few channels)
             * keep the rows outer, writing the output row by row. The tiles are independent:
             * the order changes no bits. */
            const int panel_outer = kc >= QSIM_GEMM_PANEL_OUTER_KC;
            const int64_t outer_n = panel_outer ? npan : p1 - p0, inner_n = panel_outer ? p1 - p0 : npan;
            for (int64_t io = 0; io < outer_n * inner_n; io++) {
                const int64_t j = panel_outer ? io / inner_n : io % inner_n;
                const int64_t p = p0 + (panel_outer ? io % inner_n : io / inner_n);
                const int64_t c0 = n0 + j * QSIM_GN;
                /* the whole vectors of the panel; the last panel's tail columns come after */
                const int64_t cols = j < npan - 1 ? QSIM_GN : vec_last;
                const float *bp = direct != NULL ? base + c0 : Bp + j * kc * QSIM_GN;
                if (cols == 0) continue;
                /* read in place: the first row panel over a B panel prefetches the next one; the
                 * next row panel's A slice is prefetched by the tile before its first use */
                const float *pf = direct != NULL && p == p0 && j + 1 < npan ? bp + QSIM_GN : NULL;
                const float *pfa = p + 1 < p1 && (panel_outer || j == npan - 1)
                                       ? packed + ((gi * mp + p + 1) * K + k0) * QSIM_GM : NULL;
                {
                    const float *ap = packed + ((gi * mp + p) * K + k0) * QSIM_GM;
                    const int64_t r0 = p * QSIM_GM, rows = m - r0 < QSIM_GM ? m - r0 : QSIM_GM;
                    if (rows == QSIM_GM) {            /* the epilogue in registers */
                        qsim_gemm_fin fin = {bias == NULL ? NULL : bias + gi * m + r0,
                                             y == NULL ? NULL : y + (b * g * m + gi * m + r0) * N + c0,
                                             bounded, has_hi, lo, hi};
                        qsim_gemm_tile(isa, kc, ap, bp, bo, o + r0 * N + c0, N, k0 > 0, cols,
                                       last && (bias != NULL || bounded) ? &fin : NULL, pf, pfa);
                        continue;
                    }
                    /* the last rows of m: through an 8 x 48 buffer */
                    memset(tmp, 0, QSIM_GM * QSIM_GN * sizeof(float));   /* no stale subnormals */
                    if (k0 > 0)
                        for (int64_t r = 0; r < rows; r++)
                            memcpy(tmp + r * QSIM_GN, o + (r0 + r) * N + c0, (size_t)cols * sizeof(float));
                    qsim_gemm_tile(isa, kc, ap, bp, bo, tmp, QSIM_GN, k0 > 0, cols, NULL, pf, pfa);
                    for (int64_t r = 0; r < rows; r++)
                        memcpy(o + (r0 + r) * N + c0, tmp + r * QSIM_GN, (size_t)cols * sizeof(float));
                    if (last && (bias != NULL || bounded))   /* + bias, relu/clamp: numpy's values */
                        qsim_tile_epilogue_f32(isa, o, y == NULL ? NULL : y + (b * g * m + gi * m) * N, N,
                                               bias == NULL ? NULL : bias + gi * m, r0, r0 + rows, c0,
                                               c0 + cols, bounded, lo, hi, has_hi);
                }
            }
            if (tail > 0) {                           /* the last panel's tail columns, all rows */
                const int64_t c0 = n0 + (npan - 1) * QSIM_GN + vec_last, r0 = p0 * QSIM_GM;
                const int64_t r1 = p1 * QSIM_GM < m ? p1 * QSIM_GM : m;
                qsim_gemm_tail(isa, kc, packed + ((gi * mp + p0) * K + k0) * QSIM_GM, K * QSIM_GM, p0, p1,
                               direct != NULL ? base + c0 : Bp + (npan - 1) * kc * QSIM_GN + vec_last, bo, tail,
                               o + r0 * N + c0, N, r1 - r0, k0 > 0);
                if (last && (bias != NULL || bounded))
                    qsim_tile_epilogue_f32(isa, o, y == NULL ? NULL : y + (b * g * m + gi * m) * N, N,
                                           bias == NULL ? NULL : bias + gi * m, r0, r1, c0, c0 + tail, bounded,
                                           lo, hi, has_hi);
            }
        }
    }
}

#endif
