/* float32 depthwise convolution for the float executor (qsim/kernels/float_conv.py): plane by
 * plane on NCHW data (any channel multiplier and stride), on a flat index over a phase-split
 * padded copy of the plane, so that narrow images and strides vectorize too.
 *
 * Bits: every output element is summed exactly like the reference loop
 * (qsim.skriptnd.fastops_nn._depthwise): acc = +0.0f, then for each tap in row-major kernel
 * order acc = acc + w * x, one float32 multiply and one float32 add (padding reads +0.0f and
 * is added too), then + bias when there is one (one float32 add, as numpy's out + bias). The
 * vector copies (isa_paths.h) only run 16, 8 or 4 outputs of that sequence side by side; the
 * build uses -ffp-contract=off, so no fused multiply-add changes a rounding.
 *
 * Output planes are independent: callers split them over threads.
 */
#ifndef QSIM_FLOAT_CONV_H
#define QSIM_FLOAT_CONV_H

#include <stdint.h>
#include <string.h>
#include "isa_paths.h"

/* ---- NCHW, any multiplier m: output plane p = b*OC + oc reads input channel oc / m.
 *
 * Each plane first gets a zero-padded copy in `scratch`, split into sy*sx phase planes
 * phase[py][px][r][c] = padded[r*sy + py][c*sx + px] of PHp x PWp floats. Output (oy, ox) of
 * tap (ky, kx) reads phase[(ky*dy) % sy][(kx*dx) % sx][oy + ky*dy/sy][ox + kx*dx/sx], so on
 * the flat index i = oy*PWp + ox every tap is one contiguous run at a fixed offset, whatever
 * the stride and however narrow the image: the outputs are computed QSIM_DWF_CB at a time on
 * that flat index (accumulators in registers), then the OW valid columns of each row are
 * stored with the bias (and, given y, the following relu/clamp into y; with bound_only that
 * relu/clamp is applied before the store and out holds only the bounded values). (Columns ox >= OW of the flat grid are computed and dropped: PWp is at
 * least OW + (kx*dx)/sx for every tap, so valid outputs never read across a row.)
 * pt, pl: leading padding (negative: the first input rows/columns are cropped).
 * scratch: qsim_dw_scratch_floats(...) floats. */
#define QSIM_DWF_CB 64   /* outputs per register block: 4 zmm / 8 ymm / 16 xmm accumulators */

static inline int64_t qsim_dw_phase_w(int64_t OW, int64_t KW, int64_t sx, int64_t dx) {
    return (sx * (OW - 1) + dx * (KW - 1) + 1 + sx - 1) / sx;
}
static inline int64_t qsim_dw_phase_h(int64_t OH, int64_t KH, int64_t sy, int64_t dy) {
    return (sy * (OH - 1) + dy * (KH - 1) + 1 + sy - 1) / sy;
}
/* the flat accumulator rows (OH*PWp rounded up to a block), the phase planes, and zeros after
 * them for the reads of the dropped outputs of the last rows (never the accumulators: a value
 * read there could shrink into subnormals, which cost a hundred cycles each) */
static inline int64_t qsim_dw_acc_floats(int64_t OH, int64_t PWp) {
    return (OH * PWp + QSIM_DWF_CB - 1) / QSIM_DWF_CB * QSIM_DWF_CB;
}
static inline int64_t qsim_dw_scratch_floats(int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t sy,
                                             int64_t sx, int64_t dy, int64_t dx) {
    const int64_t PHp = qsim_dw_phase_h(OH, KH, sy, dy), PWp = qsim_dw_phase_w(OW, KW, sx, dx);
    return sy * sx * PHp * PWp + 2 * qsim_dw_acc_floats(OH, PWp);
}

/* taps of one flat block of QSIM_DWF_CB outputs: acc = +0.0, then acc = acc + w*x per tap in
 * row-major order, on GCC vector types (4 x 16 floats: zmm, ymm or xmm pairs, whatever the
 * path's target is) so the accumulators stay in registers; a plane's last block runs whole
 * too (its extra outputs read the scratch slack and are dropped). */
typedef float qsim_v16f __attribute__((vector_size(64)));
typedef float qsim_v16f_u __attribute__((vector_size(64), aligned(4), may_alias));

QSIM_INLINE void qsim_dw_flat_block(const float *restrict base, const int64_t *restrict off,
                                    const float *restrict wp, int64_t taps, float *restrict acc_out) {
    qsim_v16f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};     /* +0.0f in every lane */
    for (int64_t t = 0; t < taps; t++) {
        const float wv = wp[t];
        const float *src = base + off[t];
        a0 = a0 + wv * *(const qsim_v16f_u *)(src);
        a1 = a1 + wv * *(const qsim_v16f_u *)(src + 16);
        a2 = a2 + wv * *(const qsim_v16f_u *)(src + 32);
        a3 = a3 + wv * *(const qsim_v16f_u *)(src + 48);
    }
    *(qsim_v16f_u *)(acc_out) = a0;
    *(qsim_v16f_u *)(acc_out + 16) = a1;
    *(qsim_v16f_u *)(acc_out + 32) = a2;
    *(qsim_v16f_u *)(acc_out + 48) = a3;
}

/* stride 2: input columns xx in [x0, x1) go to padded column c = xx + pl, even c to
 * even[c / 2], odd c to odd[c / 2]; 32 at a time through two vector shuffles */
typedef int32_t qsim_v16i __attribute__((vector_size(64)));
QSIM_INLINE void qsim_dw_split_pairs(const float *restrict src, int64_t x0, int64_t x1, int64_t pl,
                                     float *restrict even, float *restrict odd) {
    int64_t xx = x0;
    if (xx < x1 && ((xx + pl) & 1)) {
        odd[(xx + pl) >> 1] = src[xx];
        xx++;
    }
    /* from here c = xx + pl is even: pair (xx, xx + 1) goes to (even[j], odd[j]), j = c / 2 */
    int64_t j = (xx + pl) >> 1;
    const qsim_v16i evens = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
    const qsim_v16i odds = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
    for (; xx + 32 <= x1; xx += 32, j += 16) {
        const qsim_v16f lo = *(const qsim_v16f_u *)(src + xx), hi = *(const qsim_v16f_u *)(src + xx + 16);
        *(qsim_v16f_u *)(even + j) = __builtin_shuffle(lo, hi, evens);
        *(qsim_v16f_u *)(odd + j) = __builtin_shuffle(lo, hi, odds);
    }
    for (; xx + 1 < x1; xx += 2, j++) {
        even[j] = src[xx];
        odd[j] = src[xx + 1];
    }
    if (xx < x1) even[j] = src[xx];
}

QSIM_INLINE void qsim_dw_plane_f32_body(const float *restrict x, int64_t C, int64_t H, int64_t W,
                                        const float *restrict w, const float *restrict bias,
                                        int64_t m, int64_t KH, int64_t KW,
                                        int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t pt,
                                        int64_t pl, float *restrict out, int64_t OH, int64_t OW,
                                        float *restrict y, float lo, float hi, int has_hi, int bound_only,
                                        float *restrict scratch, int64_t *restrict off,
                                        int64_t p0, int64_t p1) {
    const int64_t OC = C * m;
    const int64_t PH = sy * (OH - 1) + dy * (KH - 1) + 1, PW = sx * (OW - 1) + dx * (KW - 1) + 1;
    const int64_t PHp = qsim_dw_phase_h(OH, KH, sy, dy), PWp = qsim_dw_phase_w(OW, KW, sx, dx);
    const int64_t phase = PHp * PWp, planes = sy * sx * phase;
    const int64_t flat = OH * PWp, accn = qsim_dw_acc_floats(OH, PWp);
    float *restrict acc = scratch;
    scratch += accn;                          /* the phase planes, then accn zeros */
    const int64_t y0 = pt > 0 ? 0 : -pt, y1 = H < PH - pt ? H : PH - pt;   /* input rows kept */
    const int64_t x0 = pl > 0 ? 0 : -pl, x1 = W < PW - pl ? W : PW - pl;
    for (int64_t ky = 0; ky < KH; ky++)
        for (int64_t kx = 0; kx < KW; kx++) {
            const int64_t ry = ky * dy, rx = kx * dx;
            off[ky * KW + kx] = ((ry % sy) * sx + rx % sx) * phase + (ry / sy) * PWp + rx / sx;
        }
    for (int64_t i = planes; i < planes + accn; i++) scratch[i] = 0.0f;
    for (int64_t p = p0; p < p1; p++) {
        const int64_t b = p / OC, oc = p % OC;
        const float *src = x + (b * C + oc / m) * H * W;
        for (int64_t i = 0; i < planes; i++) scratch[i] = 0.0f;
        for (int64_t y = y0; y < y1; y++) {
            const int64_t r = y + pt;
            float *row = scratch + (r % sy) * sx * phase + (r / sy) * PWp;
            if (sx == 1) {
                for (int64_t xx = x0; xx < x1; xx++) row[xx + pl] = src[y * W + xx];
            } else if (sx == 2) {
                qsim_dw_split_pairs(src + y * W, x0, x1, pl, row, row + phase);
            } else {
                for (int64_t px = 0; px < sx; px++) {     /* padded column c = xx + pl, c % sx == px */
                    const int64_t first = x0 + (((px - x0 - pl) % sx) + sx) % sx;
                    float *dst = row + px * phase;
                    for (int64_t xx = first, j = (first + pl) / sx; xx < x1; xx += sx, j++) dst[j] = src[y * W + xx];
                }
            }
        }
        const float *wp = w + oc * KH * KW;
        for (int64_t i = 0; i < flat; i += QSIM_DWF_CB)
            qsim_dw_flat_block(scratch + i, off, wp, KH * KW, acc + i);
        float *o = out + p * OH * OW;
        const float bv = bias != NULL ? bias[oc] : 0.0f;
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                float v = acc[oy * PWp + ox];
                if (bias != NULL) v = v + bv;
                if (bound_only) {             /* only the bounded value is wanted: out holds it */
                    v = (v > lo || v != v) ? v : lo;
                    if (has_hi) v = (v < hi || v != v) ? v : hi;
                }
                o[oy * OW + ox] = v;
            }
        if (y != NULL) {                      /* the following relu/clamp, as numpy's maximum/minimum */
            float *yo = y + p * OH * OW;
            for (int64_t i = 0; i < OH * OW; i++) {
                float v = o[i];
                v = (v > lo || v != v) ? v : lo;
                if (has_hi) v = (v < hi || v != v) ? v : hi;
                yo[i] = v;
            }
        }
    }
}

#define QSIM_DW_PLANE_F32_PARAMS (const float *x, int64_t C, int64_t H, int64_t W, const float *w, \
    const float *bias, int64_t m, int64_t KH, int64_t KW, int64_t sy, int64_t sx, int64_t dy,      \
    int64_t dx, int64_t pt, int64_t pl, float *out, int64_t OH, int64_t OW, float *y, float lo,     \
    float hi, int has_hi, int bound_only, float *scratch, int64_t *off, int64_t p0, int64_t p1)
QSIM_VERSIONS(qsim_dw_plane_f32, QSIM_DW_PLANE_F32_PARAMS,
              (x, C, H, W, w, bias, m, KH, KW, sy, sx, dy, dx, pt, pl, out, OH, OW, y, lo, hi, has_hi,
               bound_only, scratch, off, p0, p1))
static void qsim_depthwise_nchw_f32(int isa, const float *x, int64_t C, int64_t H, int64_t W,
                                    const float *w, const float *bias, int64_t m, int64_t KH,
                                    int64_t KW, int64_t sy, int64_t sx, int64_t dy, int64_t dx,
                                    int64_t pt, int64_t pl, float *out, int64_t OH, int64_t OW,
                                    float *y, float lo, float hi, int has_hi, int bound_only,
                                    float *scratch, int64_t *off, int64_t p0, int64_t p1) {
    QSIM_DISPATCH(isa, qsim_dw_plane_f32, x, C, H, W, w, bias, m, KH, KW, sy, sx, dy, dx, pt, pl, out,
                  OH, OW, y, lo, hi, has_hi, bound_only, scratch, off, p0, p1);
}

/* ---- the im2col of one GEMM tile: channels [c0, c1) of sample b, output rows [oy0, oy1):
 * cols[c - c0][ky*KW + kx][oy - oy0][ox] = x[b][c][oy*sy + ky*dy - pt][ox*sx + kx*dx - pl], +0.0f
 * outside the input (a copy: the GEMM sees exactly the columns numpy's window copies would
 * build; one tile's, small enough to stay in the cache). */
static void qsim_im2col_rows_f32(const float *x, int64_t C, int64_t H, int64_t W, int64_t KH,
                                 int64_t KW, int64_t sy, int64_t sx, int64_t dy, int64_t dx,
                                 int64_t pt, int64_t pl, int64_t OW, float *cols, int64_t b,
                                 int64_t c0, int64_t c1, int64_t oy0, int64_t oy1) {
    const int64_t rows = oy1 - oy0;
    for (int64_t c = c0; c < c1; c++) {
        const float *plane = x + (b * C + c) * H * W;
        for (int64_t ky = 0; ky < KH; ky++)
            for (int64_t kx = 0; kx < KW; kx++) {
                float *o = cols + (((c - c0) * KH + ky) * KW + kx) * rows * OW;
                const int64_t off = kx * dx - pl;
                int64_t first = off >= 0 ? 0 : (-off + sx - 1) / sx;
                int64_t last = W - 1 - off >= 0 ? (W - 1 - off) / sx + 1 : 0;
                if (last > OW) last = OW;
                if (first > last) first = last;
                for (int64_t oy = oy0; oy < oy1; oy++, o += OW) {
                    const int64_t iy = oy * sy + ky * dy - pt;
                    if (iy < 0 || iy >= H) {
                        for (int64_t ox = 0; ox < OW; ox++) o[ox] = 0.0f;
                        continue;
                    }
                    const float *row = plane + iy * W + off;
                    for (int64_t ox = 0; ox < first; ox++) o[ox] = 0.0f;
                    if (sx == 1)
                        memcpy(o + first, row + first, (size_t)(last - first) * sizeof(float));
                    else
                        for (int64_t ox = first; ox < last; ox++) o[ox] = row[ox * sx];
                    for (int64_t ox = last; ox < OW; ox++) o[ox] = 0.0f;
                }
            }
    }
}

/* ---- the conv GEMM's epilogue on one tile of out[rows][ld] (qsim/runtime/float_ops/conv_gemm.py):
 * out[r][c] = out[r][c] + bias[r] for r in [r0, r1), c in [c0, c1), one float32 add each (as
 * numpy's out += bias); then, with `bounded`, y[r][c] = minimum(maximum(out, lo), hi) (numpy's
 * values: a NaN stays NaN, two equal zeros give the bound) written to a second array of the
 * same layout while the tile is in the cache; with bounded == 2 (nobody reads the unbounded
 * result) into out itself instead, y unused: the same values, half the memory traffic. */
QSIM_INLINE void qsim_tile_epilogue_f32_body(float *restrict out, float *restrict y, int64_t ld,
                                             const float *restrict bias, int64_t r0, int64_t r1,
                                             int64_t c0, int64_t c1, int bounded, float lo, float hi,
                                             int has_hi) {
    for (int64_t r = r0; r < r1; r++) {
        float *restrict o = out + r * ld;
        const float bv = bias != NULL ? bias[r] : 0.0f;
        if (bounded == 2) {                   /* only the bounded value is wanted: one pass, in place */
            for (int64_t c = c0; c < c1; c++) {
                float v = o[c];
                if (bias != NULL) v = v + bv;
                v = (v > lo || v != v) ? v : lo;
                if (has_hi) v = (v < hi || v != v) ? v : hi;
                o[c] = v;
            }
            continue;
        }
        if (bias != NULL)
            for (int64_t c = c0; c < c1; c++) o[c] = o[c] + bv;
        if (bounded) {
            float *restrict yr = y + r * ld;
            for (int64_t c = c0; c < c1; c++) {
                float v = o[c];
                v = (v > lo || v != v) ? v : lo;
                if (has_hi) v = (v < hi || v != v) ? v : hi;
                yr[c] = v;
            }
        }
    }
}
#define QSIM_TILE_EPILOGUE_PARAMS (float *out, float *y, int64_t ld, const float *bias, int64_t r0, \
    int64_t r1, int64_t c0, int64_t c1, int bounded, float lo, float hi, int has_hi)
QSIM_VERSIONS(qsim_tile_epilogue_f32, QSIM_TILE_EPILOGUE_PARAMS,
              (out, y, ld, bias, r0, r1, c0, c1, bounded, lo, hi, has_hi))
static void qsim_tile_epilogue_f32(int isa, float *out, float *y, int64_t ld, const float *bias, int64_t r0,
                                   int64_t r1, int64_t c0, int64_t c1, int bounded, float lo, float hi,
                                   int has_hi) {
    QSIM_DISPATCH(isa, qsim_tile_epilogue_f32, out, y, ld, bias, r0, r1, c0, c1, bounded, lo, hi, has_hi);
}

#endif
