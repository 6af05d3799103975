/* float32 max pooling and plane copies for the float executor (qsim/runtime/float_ops/nn.py,
 * conv_gemm.py), plane by plane on NCHW data.
 *
 * Max pool bits: the reference (nn._pool) starts from the first tap's window, padding read as
 * -inf, and takes acc = numpy.maximum(acc, tap) for every further tap in row-major kernel order,
 * numpy.maximum(a, b) being (a > b || a != a) ? a : b (a NaN stays, and of two equal values,
 * +0.0 and -0.0 included, the second is kept). Starting from acc = -inf instead and skipping the
 * padded taps gives the same bits: maximum(-inf, t) is t for every t (NaN and -inf included), and
 * maximum(acc, -inf) is acc for every acc (when acc is -inf the result -inf has its bits).
 * Each output is one such sequence; planes are independent, so callers cut them into parts.
 */
#ifndef QSIM_FLOAT_POOL_H
#define QSIM_FLOAT_POOL_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "isa_paths.h"

/* the first o in [0, n) with lo <= s*o + off, and one past the last with s*o + off < hi (s > 0) */
static inline void qsim_pool_span(int64_t n, int64_t s, int64_t off, int64_t lo, int64_t hi,
                                  int64_t *first, int64_t *end) {
    int64_t a = off >= lo ? 0 : (lo - off + s - 1) / s;
    int64_t b = off >= hi ? 0 : (hi - off + s - 1) / s;
    *first = a < n ? a : n;
    *end = b < n ? b : n;
    if (*end < *first)
        *end = *first;
}

/* out[p][oy][ox] = max over taps (ky, kx) of x[p][sy*oy + dy*ky - pt][sx*ox + dx*kx - pl] (-inf
 * outside the plane), planes [p0, p1) of x [P][H][W] and out [P][OH][OW]: the AVX2 and portable
 * paths, one pass per tap over each output row (loops the compiler vectorizes itself). */
QSIM_INLINE void qsim_max_pool_taps_body(const float *x, int64_t H, int64_t W, float *out, int64_t OH, int64_t OW,
                              int64_t KH, int64_t KW, int64_t sy, int64_t sx, int64_t dy, int64_t dx,
                              int64_t pt, int64_t pl, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; p++) {
        const float *plane = x + p * H * W;
        float *acc_plane = out + p * OH * OW;
        for (int64_t oy = 0; oy < OH; oy++) {
            float *acc = acc_plane + oy * OW;
            for (int64_t ox = 0; ox < OW; ox++)
                acc[ox] = -INFINITY;
            for (int64_t ky = 0; ky < KH; ky++) {
                const int64_t iy = sy * oy + dy * ky - pt;
                if (iy < 0 || iy >= H)
                    continue;
                const float *row = plane + iy * W;
                for (int64_t kx = 0; kx < KW; kx++) {
                    const int64_t off = dx * kx - pl;        /* ix = sx*ox + off */
                    int64_t first, end;
                    qsim_pool_span(OW, sx, off, 0, W, &first, &end);
                    if (first == end)
                        continue;
                    const float *src = row + (sx * first + off);     /* inside the row */
                    if (sx == 1) {
                        for (int64_t i = 0; i < end - first; i++) {
                            const float a = acc[first + i], t = src[i];
                            acc[first + i] = (a > t || a != a) ? a : t;
                        }
                    } else {
                        for (int64_t i = 0; i < end - first; i++) {
                            const float a = acc[first + i], t = src[sx * i];
                            acc[first + i] = (a > t || a != a) ? a : t;
                        }
                    }
                }
            }
        }
    }
}

/* one output, its taps in order (the AVX-512 path's border columns: a handful per row) */
static float qsim_pool_one(const float *plane, int64_t H, int64_t W, int64_t oy, int64_t ox, int64_t KH, int64_t KW,
                           int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t pt, int64_t pl) {
    float acc = -INFINITY;
    for (int64_t ky = 0; ky < KH; ky++) {
        const int64_t iy = sy * oy + dy * ky - pt;
        if (iy < 0 || iy >= H)
            continue;
        for (int64_t kx = 0; kx < KW; kx++) {
            const int64_t ix = sx * ox + dx * kx - pl;
            if (ix < 0 || ix >= W)
                continue;
            const float t = plane[iy * W + ix];
            acc = (acc > t || acc != acc) ? acc : t;
        }
    }
    return acc;
}

#define QSIM_MAX_POOL_PARAMS (const float *x, int64_t H, int64_t W, float *out, int64_t OH, int64_t OW, int64_t KH, \
    int64_t KW, int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t pt, int64_t pl, int64_t p0, int64_t p1)
#define QSIM_MAX_POOL_ARGS (x, H, W, out, OH, OW, KH, KW, sy, sx, dy, dx, pt, pl, p0, p1)
static void qsim_max_pool_f32_base QSIM_MAX_POOL_PARAMS { qsim_max_pool_taps_body QSIM_MAX_POOL_ARGS; }
#if QSIM_X86
static QSIM_TARGET_AVX2 void qsim_max_pool_f32_avx2 QSIM_MAX_POOL_PARAMS { qsim_max_pool_taps_body QSIM_MAX_POOL_ARGS; }

/* AVX-512: every output takes its taps in row-major order with the accumulator in a register
 * (the tap passes above make each load wait on the store before it). Columns whose taps all lie
 * inside the row run 16 at a time at stride 1 and 2 (stride 2: lanes 0, 2, .. 14 of src[0 ..]
 * and 1, 3, .. 15 of src[15 ..], i.e. src[0], src[2], .. src[30], never past the last tap's
 * element); a row's last block starts at c1 - 16, computing some columns again (the same
 * values); the border columns go one by one, skipping taps outside the plane (max with -inf
 * changes nothing). numpy.maximum(acc, t): acc where acc > t or acc is a NaN, else t. */
static QSIM_TARGET_AVX512 void qsim_max_pool_f32_avx512 QSIM_MAX_POOL_PARAMS {
    const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 17, 19, 21, 23, 25, 27, 29, 31);
    const int64_t last = dx * (KW - 1) - pl;           /* the last tap's column offset */
    /* columns [c0, c1): sx*ox - pl >= 0 and sx*ox + last <= W - 1 */
    int64_t c0 = (pl + sx - 1) / sx, c1 = W - 1 - last >= 0 ? (W - 1 - last) / sx + 1 : 0;
    if (c0 > OW) c0 = OW;
    if (c1 > OW) c1 = OW;
    if (c1 < c0) c1 = c0;
    const int vec = (sx == 1 || sx == 2) && c1 - c0 >= 16;
    for (int64_t p = p0; p < p1; p++) {
        const float *plane = x + p * H * W;
        for (int64_t oy = 0; oy < OH; oy++) {
            float *o = out + (p * OH + oy) * OW;
            int64_t ox = 0;
            if (vec) {
                for (; ox < c0; ox++) o[ox] = qsim_pool_one(plane, H, W, oy, ox, KH, KW, sy, sx, dy, dx, pt, pl);
                for (; ox < c1; ox += 16) {
                    if (ox + 16 > c1) ox = c1 - 16;
                    __m512 acc = _mm512_set1_ps(-INFINITY);
                    for (int64_t ky = 0; ky < KH; ky++) {
                        const int64_t iy = sy * oy + dy * ky - pt;
                        if (iy < 0 || iy >= H)
                            continue;
                        const float *src = plane + iy * W + sx * ox - pl;
                        for (int64_t kx = 0; kx < KW; kx++, src += dx) {
                            const __m512 t = sx == 1 ? _mm512_loadu_ps(src)
                                : _mm512_permutex2var_ps(_mm512_loadu_ps(src), evens, _mm512_loadu_ps(src + 15));
                            const __mmask16 keep = _mm512_cmp_ps_mask(acc, t, _CMP_GT_OQ) |
                                                   _mm512_cmp_ps_mask(acc, acc, _CMP_UNORD_Q);
                            acc = _mm512_mask_blend_ps(keep, t, acc);
                        }
                    }
                    _mm512_storeu_ps(o + ox, acc);
                }
            }
            for (; ox < OW; ox++) o[ox] = qsim_pool_one(plane, H, W, oy, ox, KH, KW, sy, sx, dy, dx, pt, pl);
        }
    }
}
#endif
static void qsim_max_pool_f32(int isa, const float *x, int64_t H, int64_t W, float *out, int64_t OH, int64_t OW,
                              int64_t KH, int64_t KW, int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t pt,
                              int64_t pl, int64_t p0, int64_t p1) {
    QSIM_DISPATCH(isa, qsim_max_pool_f32, x, H, W, out, OH, OW, KH, KW, sy, sx, dy, dx, pt, pl, p0, p1);
}

/* dst[p][r][0:cols] = src[p][r][0:cols] for planes [p0, p1), any plane and row strides (in floats):
 * a conv's pixel grid cropped to its output width, or a plane copied into its zero padding. */
static void qsim_copy_planes_f32(const float *src, int64_t src_plane, int64_t src_row, float *dst, int64_t dst_plane,
                                 int64_t dst_row, int64_t rows, int64_t cols, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; p++)
        for (int64_t r = 0; r < rows; r++)
            memcpy(dst + p * dst_plane + r * dst_row, src + p * src_plane + r * src_row, (size_t)cols * sizeof(float));
}

#endif
