/* float32 depthwise convolution for the float executor (qsim/kernels/float_conv.py): plane by
 * plane on NCHW data (any channel multiplier), or across channels on a padded NHWC buffer
 * (multiplier 1; for narrow images, where NCHW rows are too short to vectorize).
 *
 * Bits: every output element is summed exactly like the reference loop
 * (qsim.skriptnd.fastops_nn._depthwise): acc = +0.0f, then for each tap in row-major kernel
 * order acc = acc + w * x, one float32 multiply and one float32 add (padding reads +0.0f and
 * is added too). The vector copies (isa_paths.h) only run 16 or 8 channels of that sequence
 * side by side; the build uses -ffp-contract=off, so no fused multiply-add changes a rounding.
 *
 * Output rows (NHWC) or planes (NCHW) are independent: callers split them over threads.
 */
#ifndef QSIM_FLOAT_CONV_H
#define QSIM_FLOAT_CONV_H

#include <stdint.h>
#include <string.h>
#include "isa_paths.h"

#define QSIM_DWF_CB 64   /* outputs per register block: 4 zmm / 8 ymm of accumulators */

/* ---- NCHW, any multiplier m: output plane p = b*OC + oc reads input channel oc / m.
 * Each plane first gets a zero-padded copy in `scratch` (PH*PW floats, L1/L2-sized), so every
 * tap is one uniform loop over a block of outputs with the accumulators in registers.
 * pt, pl: leading padding (negative: the first input rows/columns are cropped). */
QSIM_INLINE void qsim_dw_plane_f32_body(const float *restrict x, int64_t C, int64_t H, int64_t W,
                                        const float *restrict w, int64_t m, int64_t KH, int64_t KW,
                                        int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t pt,
                                        int64_t pl, float *restrict out, int64_t OH, int64_t OW,
                                        float *restrict scratch, int64_t p0, int64_t p1) {
    const int64_t OC = C * m;
    const int64_t PH = sy * (OH - 1) + dy * (KH - 1) + 1, PW = sx * (OW - 1) + dx * (KW - 1) + 1;
    const int64_t y0 = pt > 0 ? 0 : -pt, y1 = H < PH - pt ? H : PH - pt;   /* input rows kept */
    const int64_t x0 = pl > 0 ? 0 : -pl, x1 = W < PW - pl ? W : PW - pl;
    for (int64_t p = p0; p < p1; p++) {
        const int64_t b = p / OC, oc = p % OC;
        const float *src = x + (b * C + oc / m) * H * W;
        for (int64_t i = 0; i < PH * PW; i++) scratch[i] = 0.0f;
        for (int64_t y = y0; y < y1; y++)
            for (int64_t xx = x0; xx < x1; xx++) scratch[(y + pt) * PW + xx + pl] = src[y * W + xx];
        const float *wp = w + oc * KH * KW;
        float *o = out + p * OH * OW;
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox0 = 0; ox0 < OW; ox0 += QSIM_DWF_CB) {
                float acc[QSIM_DWF_CB];
                const int64_t n = OW - ox0 < QSIM_DWF_CB ? OW - ox0 : QSIM_DWF_CB;
                for (int j = 0; j < QSIM_DWF_CB; j++) acc[j] = 0.0f;
                for (int64_t ky = 0; ky < KH; ky++)
                    for (int64_t kx = 0; kx < KW; kx++) {
                        const float wv = wp[ky * KW + kx];
                        const float *s = scratch + (oy * sy + ky * dy) * PW + ox0 * sx + kx * dx;
                        if (n == QSIM_DWF_CB && sx == 1)
                            for (int j = 0; j < QSIM_DWF_CB; j++) acc[j] = acc[j] + wv * s[j];
                        else
                            for (int64_t j = 0; j < n; j++) acc[j] = acc[j] + wv * s[j * sx];
                    }
                for (int64_t j = 0; j < n; j++) o[oy * OW + ox0 + j] = acc[j];
            }
    }
}

#define QSIM_DW_PLANE_F32_PARAMS (const float *x, int64_t C, int64_t H, int64_t W, const float *w, \
    int64_t m, int64_t KH, int64_t KW, int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t pt,  \
    int64_t pl, float *out, int64_t OH, int64_t OW, float *scratch, int64_t p0, int64_t p1)
QSIM_VERSIONS(qsim_dw_plane_f32, QSIM_DW_PLANE_F32_PARAMS,
              (x, C, H, W, w, m, KH, KW, sy, sx, dy, dx, pt, pl, out, OH, OW, scratch, p0, p1))
static void qsim_depthwise_nchw_f32(int isa, const float *x, int64_t C, int64_t H, int64_t W,
                                    const float *w, int64_t m, int64_t KH, int64_t KW, int64_t sy,
                                    int64_t sx, int64_t dy, int64_t dx, int64_t pt, int64_t pl,
                                    float *out, int64_t OH, int64_t OW, float *scratch, int64_t p0,
                                    int64_t p1) {
    QSIM_DISPATCH(isa, qsim_dw_plane_f32, x, C, H, W, w, m, KH, KW, sy, sx, dy, dx, pt, pl, out, OH,
                  OW, scratch, p0, p1);
}

/* ---- NHWC, multiplier 1: xp[B][PH][PW][C] (the padded input), wt[KH*KW][C],
 * out[B][OH][OW][C]; output rows r = b*OH + oy in [r0, r1). */

/* One output pixel's channels [c0, c0 + n): called with n == QSIM_DWF_CB (a constant after
 * inlining: the accumulators stay in registers) or with the remainder. */
QSIM_INLINE void qsim_dw_nhwc_block(const float *restrict xb, int64_t PW, int64_t C,
                                    const float *restrict wt, int64_t KH, int64_t KW, int64_t iy,
                                    int64_t ix, int64_t dy, int64_t dx, int64_t c0, int64_t n,
                                    float *restrict o) {
    float acc[QSIM_DWF_CB];
    for (int64_t j = 0; j < n; j++) acc[j] = 0.0f;
    for (int64_t ky = 0; ky < KH; ky++)
        for (int64_t kx = 0; kx < KW; kx++) {
            const float *s = xb + ((iy + ky * dy) * PW + ix + kx * dx) * C + c0;
            const float *w = wt + (ky * KW + kx) * C + c0;
            for (int64_t j = 0; j < n; j++) acc[j] = acc[j] + w[j] * s[j];
        }
    for (int64_t j = 0; j < n; j++) o[c0 + j] = acc[j];
}

QSIM_INLINE void qsim_dw_f32_body(const float *restrict xp, int64_t PH, int64_t PW, int64_t C,
                                  const float *restrict wt, int64_t KH, int64_t KW, int64_t sy,
                                  int64_t sx, int64_t dy, int64_t dx, float *restrict out,
                                  int64_t OH, int64_t OW, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        const int64_t b = r / OH, oy = r % OH;
        const float *xb = xp + b * PH * PW * C;
        for (int64_t ox = 0; ox < OW; ox++) {
            float *o = out + (r * OW + ox) * C;
            int64_t c0 = 0;
            for (; c0 + QSIM_DWF_CB <= C; c0 += QSIM_DWF_CB)
                qsim_dw_nhwc_block(xb, PW, C, wt, KH, KW, oy * sy, ox * sx, dy, dx, c0, QSIM_DWF_CB, o);
            if (c0 < C)
                qsim_dw_nhwc_block(xb, PW, C, wt, KH, KW, oy * sy, ox * sx, dy, dx, c0, C - c0, o);
        }
    }
}

#define QSIM_DW_F32_PARAMS (const float *xp, int64_t PH, int64_t PW, int64_t C, const float *wt, \
    int64_t KH, int64_t KW, int64_t sy, int64_t sx, int64_t dy, int64_t dx, float *out,           \
    int64_t OH, int64_t OW, int64_t r0, int64_t r1)
QSIM_VERSIONS(qsim_dw_f32, QSIM_DW_F32_PARAMS,
              (xp, PH, PW, C, wt, KH, KW, sy, sx, dy, dx, out, OH, OW, r0, r1))
static void qsim_depthwise_nhwc_f32(int isa, const float *xp, int64_t PH, int64_t PW, int64_t C,
                                    const float *wt, int64_t KH, int64_t KW, int64_t sy,
                                    int64_t sx, int64_t dy, int64_t dx, float *out, int64_t OH,
                                    int64_t OW, int64_t r0, int64_t r1) {
    QSIM_DISPATCH(isa, qsim_dw_f32, xp, PH, PW, C, wt, KH, KW, sy, sx, dy, dx, out, OH, OW, r0, r1);
}

/* ---- im2col of a 2-D NCHW float32 convolution, for the float executor's GEMM:
 * cols[b][c][ky][kx][oy][ox] = x[b][c][oy*sy + ky*dy - pt][ox*sx + kx*dx - pl], +0.0f outside
 * the input (a copy: the GEMM sees exactly the buffer numpy's window copies would build).
 * Planes p = b*C + c in [p0, p1). */
static void qsim_im2col_f32(const float *x, int64_t C, int64_t H, int64_t W, int64_t KH,
                            int64_t KW, int64_t sy, int64_t sx, int64_t dy, int64_t dx,
                            int64_t pt, int64_t pl, int64_t OH, int64_t OW, float *cols,
                            int64_t p0, int64_t p1, int64_t B, int batch_inner) {
    /* layout of cols: [B][C][KH*KW][OH*OW], or with batch_inner [C][KH*KW][B][OH*OW] (the
     * GEMM's [C*KH*KW][B*OH*OW] operand of a batch, with no transposing copy) */
    const int64_t X = OH * OW;
    const int64_t tap_stride = batch_inner ? B * X : X;
    for (int64_t p = p0; p < p1; p++) {
        const float *plane = x + p * H * W;
        const int64_t b = p / C, c = p % C;
        float *o0 = batch_inner ? cols + c * KH * KW * B * X + b * X : cols + p * KH * KW * X;
        for (int64_t ky = 0; ky < KH; ky++)
            for (int64_t kx = 0; kx < KW; kx++) {
                float *o = o0 + (ky * KW + kx) * tap_stride;
                const int64_t off = kx * dx - pl;
                /* output columns reading inside the row: ox in [first, last) */
                int64_t first = off >= 0 ? 0 : (-off + sx - 1) / sx;
                int64_t last = W - 1 - off >= 0 ? (W - 1 - off) / sx + 1 : 0;
                if (last > OW) last = OW;
                if (first > last) first = last;
                for (int64_t oy = 0; oy < OH; oy++, o += OW) {
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

#endif
