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
 * outside the plane), planes [p0, p1) of x [P][H][W] and out [P][OH][OW]. */
static void qsim_max_pool_f32(const float *x, int64_t H, int64_t W, float *out, int64_t OH, int64_t OW,
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

/* dst[p][r][0:cols] = src[p][r][0:cols] for planes [p0, p1), any plane and row strides (in floats):
 * a conv's pixel grid cropped to its output width, or a plane copied into its zero padding. */
static void qsim_copy_planes_f32(const float *src, int64_t src_plane, int64_t src_row, float *dst, int64_t dst_plane,
                                 int64_t dst_row, int64_t rows, int64_t cols, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; p++)
        for (int64_t r = 0; r < rows; r++)
            memcpy(dst + p * dst_plane + r * dst_row, src + p * src_plane + r * src_row, (size_t)cols * sizeof(float));
}

#endif
