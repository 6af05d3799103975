/* float32 depthwise convolution for the float executor (qsim/kernels/float_conv.py): plane by
 * plane on NCHW data (any channel multiplier and stride), on a flat index over a phase-split
 * padded copy of the plane, so that narrow images and strides vectorize too.
 *
 * Bits: every output element is the float conv's one definition (the conv GEMM's too,
 * float_gemm.h; reference qsim/runtime/float_ops/fma.py): acc = fma(w0, x0, +0.0f), then
 * acc = fma(wk, xk, acc) for each further tap in row-major kernel order, each rounded once
 * (padding reads +0.0f and takes its fma too), then + bias when there is one (one float32 add,
 * as numpy's out + bias). The vector copies (isa_paths.h) only run 16, 8 or 4 outputs of that
 * sequence side by side; the fmas are explicit (qsim_v16_fma) and the build uses
 * -ffp-contract=off, so the compiler fuses nothing else.
 *
 * Output planes are independent: callers split them over threads.
 */
#ifndef QSIM_FLOAT_CONV_H
#define QSIM_FLOAT_CONV_H

#include <stdint.h>
#include <string.h>
#include "isa_paths.h"
#include "float_dw_rows.h"

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

/* taps of one flat block of QSIM_DWF_CB outputs: acc = +0.0, then acc = fma(w, x, acc) per tap
 * in row-major order, on GCC vector types (4 x 16 floats: zmm, ymm or xmm pairs, whatever the
 * path's target is) so the accumulators stay in registers; a plane's last block runs whole
 * too (its extra outputs read the scratch slack and are dropped). */
typedef float qsim_v16f __attribute__((vector_size(64)));
typedef float qsim_v16f_u __attribute__((vector_size(64), aligned(4), may_alias));

/* acc = w * x + acc rounded once, lane by lane (C's fmaf): each path's copy turns the loop into
 * its fused multiply-add (vfmadd on zmm, two on ymm for AVX2); the portable copy calls the C
 * library's fmaf, which rounds once too, so every path gives the same bits. Pointers, not
 * vector values, cross the call (no vector-ABI question for the SSE2 copy). */
QSIM_INLINE void qsim_v16_fma(qsim_v16f *acc, const qsim_v16f *w, const float *x) {
    const qsim_v16f xv = *(const qsim_v16f_u *)x;
    qsim_v16f r;      /* a fresh vector, unrolled: GCC's AVX-512 copy kept the lanes scalar otherwise */
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) r[i] = __builtin_fmaf((*w)[i], xv[i], (*acc)[i]);
    *acc = r;
}

QSIM_INLINE void qsim_dw_flat_block(const float *restrict base, const int64_t *restrict off,
                                    const float *restrict wp, int64_t taps, float *restrict acc_out) {
    qsim_v16f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};     /* +0.0f in every lane */
    for (int64_t t = 0; t < taps; t++) {
        const float *src = base + off[t];
        qsim_v16f wv;                               /* the tap's weight in every lane */
        for (int i = 0; i < 16; i++) wv[i] = wp[t];
        qsim_v16_fma(&a0, &wv, src);
        qsim_v16_fma(&a1, &wv, src + 16);
        qsim_v16_fma(&a2, &wv, src + 32);
        qsim_v16_fma(&a3, &wv, src + 48);
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

/* yo[i] = minimum(maximum(o[i], lo), hi) (hi unused without has_hi), numpy's values: a NaN stays
 * NaN, two equal zeros give the bound; yo may be o (in place) */
QSIM_INLINE void qsim_bound_copy(const float *o, float *yo, int64_t n, float lo, float hi, int has_hi) {
    for (int64_t i = 0; i < n; i++) {
        float v = o[i];
        v = (v > lo || v != v) ? v : lo;
        if (has_hi) v = (v < hi || v != v) ? v : hi;
        yo[i] = v;
    }
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
    /* zeroed once: every plane's copy below writes the same positions (input rows [y0, y1),
     * columns [x0, x1)), so the padding and the slack stay +0.0 for every plane of the call */
    for (int64_t i = 0; i < planes + accn; i++) scratch[i] = 0.0f;
    for (int64_t p = p0; p < p1; p++) {
        const int64_t b = p / OC, oc = p % OC;
        const float *src = x + (b * C + oc / m) * H * W;
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
        /* + bias, then the following relu/clamp (numpy's maximum/minimum) in the same pass over
         * each row: into out itself when only the bounded value is wanted, else into y */
        float *yp = y != NULL ? y + p * OH * OW : NULL;
        for (int64_t oy = 0; oy < OH; oy++) {
            const float *restrict a = acc + oy * PWp;
            float *restrict orow = o + oy * OW;
            if (bound_only) {                 /* only the bounded value is wanted: out holds it */
                for (int64_t ox = 0; ox < OW; ox++) {
                    float v = bias != NULL ? a[ox] + bv : a[ox];
                    v = (v > lo || v != v) ? v : lo;
                    if (has_hi) v = (v < hi || v != v) ? v : hi;
                    orow[ox] = v;
                }
                continue;
            }
            if (bias != NULL)
                for (int64_t ox = 0; ox < OW; ox++) orow[ox] = a[ox] + bv;
            else
                for (int64_t ox = 0; ox < OW; ox++) orow[ox] = a[ox];
            if (yp != NULL)
                qsim_bound_copy(orow, yp + oy * OW, OW, lo, hi, has_hi);
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
#if QSIM_X86
    if (isa >= QSIM_ISA_AVX512VNNI && qsim_dw_rows_fits(KW, sy, sx)) {   /* in place, same bits (float_dw_rows.h) */
        qsim_dw_rows_avx512(x, C, H, W, w, bias, m, KH, KW, sy, sx, dy, dx, pt, pl, out, OH, OW, y, lo, hi, has_hi,
                            bound_only, p0, p1);
        return;
    }
#endif
    QSIM_DISPATCH(isa, qsim_dw_plane_f32, x, C, H, W, w, bias, m, KH, KW, sy, sx, dy, dx, pt, pl, out,
                  OH, OW, y, lo, hi, has_hi, bound_only, scratch, off, p0, p1);
}

/* ---- NCHW, multiplier 1, QSIM_DWC channels side by side: for small planes (14x14, 7x7) the
 * flat blocks above waste most of their lanes on the dropped columns and pay a plane's setup
 * for a few hundred outputs. Here a block of 16 channels of one sample is copied into a
 * zero-padded [PH][PW][16] scratch (channel innermost), the 16 channels' taps into [taps][16],
 * and each output pixel is one vector of 16 channels: acc = +0.0, then acc = fma(w, x, acc) per
 * tap in row-major kernel order (padding read as +0.0 and added too), then + bias, then the
 * relu/clamp: per element exactly the operations of the plane kernel, so the same bits. Eight
 * output pixels of a row are summed side by side (eight independent fma chains; a row's last
 * block too, its pixels past the row dropped). The results
 * go to a [OH*OW][16] scratch and are copied back plane by plane (out, and y when given).
 * Work unit q = b * ceil(C / 16) + channel block; callers split [q0, q1) over threads.
 * scratch: qsim_dwc_scratch_floats(...) floats. */
#define QSIM_DWC 16
#define QSIM_DWC_PIX 8

/* r[i][l] <- r[l][i] for 16 vectors of 16 lanes: four butterfly stages, stage b swapping bit b
 * of the row index with bit b of the lane index (two-source shuffles with constant indices) */
QSIM_INLINE void qsim_v16_transpose(qsim_v16f *r) {
#define QSIM_T_STAGE(b, lo_idx, hi_idx)                                                           \
    for (int i = 0; i < 16; i++)                                                                  \
        if (!(i & (b))) {                                                                         \
            const qsim_v16f p = r[i], q = r[i + (b)];                                              \
            r[i] = __builtin_shuffle(p, q, (qsim_v16i)lo_idx);                                     \
            r[i + (b)] = __builtin_shuffle(p, q, (qsim_v16i)hi_idx);                               \
        }
    QSIM_T_STAGE(1, ((qsim_v16i){0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30}),
                 ((qsim_v16i){1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}))
    QSIM_T_STAGE(2, ((qsim_v16i){0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29}),
                 ((qsim_v16i){2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31}))
    QSIM_T_STAGE(4, ((qsim_v16i){0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27}),
                 ((qsim_v16i){4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31}))
    QSIM_T_STAGE(8, ((qsim_v16i){0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}),
                 ((qsim_v16i){8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}))
#undef QSIM_T_STAGE
}

static inline int64_t qsim_dwc_scratch_floats(int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t sy,
                                              int64_t sx, int64_t dy, int64_t dx) {
    const int64_t PH = sy * (OH - 1) + dy * (KH - 1) + 1, PW = sx * (OW - 1) + dx * (KW - 1) + 1;
    return QSIM_DWC * (PH * PW + QSIM_DWC_PIX * sx + KH * KW + OH * OW + QSIM_DWC_PIX);
}

QSIM_INLINE void qsim_dwc_f32_body(const float *restrict x, int64_t C, int64_t H, int64_t W,
                                   const float *restrict w, const float *restrict bias, int64_t KH, int64_t KW,
                                   int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t pt, int64_t pl,
                                   float *restrict out, int64_t OH, int64_t OW, float *restrict y, float lo,
                                   float hi, int has_hi, int bound_only, float *restrict scratch,
                                   int64_t q0, int64_t q1) {
    const int64_t PH = sy * (OH - 1) + dy * (KH - 1) + 1, PW = sx * (OW - 1) + dx * (KW - 1) + 1;
    const int64_t taps = KH * KW, nblk = (C + QSIM_DWC - 1) / QSIM_DWC, HW = H * W, OHW = OH * OW;
    float *restrict pad = scratch;                        /* [PH][PW][16] */
    float *restrict wt = pad + (PH * PW + QSIM_DWC_PIX * sx) * QSIM_DWC;   /* [taps][16] after the slack */
    float *restrict res = wt + taps * QSIM_DWC;           /* [OH*OW][16], then 8 pixels of slack */
    const int64_t y0 = pt > 0 ? 0 : -pt, y1 = H < PH - pt ? H : PH - pt;    /* input rows kept */
    const int64_t x0 = pl > 0 ? 0 : -pl, x1 = W < PW - pl ? W : PW - pl;
    /* zeroed once, and again only before a block of fewer than 16 channels: a full block's
     * copy writes the same positions of pad and wt as the one before it (the padding and the
     * slack stay +0.0); a short block leaves its lanes nc.. unwritten, which must read +0.0
     * (dropped lanes, but stale values there could be subnormals, a hundred cycles each) */
    int zeroed = 0;
    for (int64_t q = q0; q < q1; q++) {
        const int64_t b = q / nblk, c0 = (q % nblk) * QSIM_DWC;
        const int64_t nc = C - c0 < QSIM_DWC ? C - c0 : QSIM_DWC;
        if (!zeroed || nc < QSIM_DWC) {
            for (int64_t i = 0; i < (PH * PW + QSIM_DWC_PIX * sx) * QSIM_DWC; i++) pad[i] = 0.0f;
            for (int64_t i = 0; i < taps * QSIM_DWC; i++) wt[i] = 0.0f;
            zeroed = nc == QSIM_DWC;     /* after a short block the next one zeroes again */
        }
        const float *plane0 = x + (b * C + c0) * HW;
        int64_t done = 0;                     /* input pixels copied 16 at a time (whole image only) */
        if (y0 == 0 && y1 == H && x0 == 0 && x1 == W) {
            int64_t yy = 0, xx = 0;
            for (; done + QSIM_DWC <= HW; done += QSIM_DWC) {
                qsim_v16f r[QSIM_DWC];
                if (nc == QSIM_DWC) {
                    for (int c = 0; c < QSIM_DWC; c++) r[c] = *(const qsim_v16f_u *)(plane0 + c * HW + done);
                } else {
                    for (int c = 0; c < QSIM_DWC; c++) {
                        r[c] = (qsim_v16f){0};
                        if (c < nc) r[c] = *(const qsim_v16f_u *)(plane0 + c * HW + done);
                    }
                }
                qsim_v16_transpose(r);        /* r[k]: pixel done + k, its 16 channels */
                for (int k = 0; k < QSIM_DWC; k++) {
                    *(qsim_v16f_u *)(pad + ((yy + pt) * PW + xx + pl) * QSIM_DWC) = r[k];
                    if (++xx == W) { xx = 0; yy++; }
                }
            }
        }
        for (int64_t c = 0; c < nc; c++) {
            const float *src = plane0 + c * HW;
            /* rows before done / W were copied whole by the transposes above */
            for (int64_t yy = y0 > done / W ? y0 : done / W; yy < y1; yy++) {
                float *dst = pad + ((yy + pt) * PW + pl) * QSIM_DWC + c;
                int64_t xx = x0;
                if (yy * W + xx < done) xx = done - yy * W > x1 ? x1 : done - yy * W;
                for (; xx < x1; xx++) dst[xx * QSIM_DWC] = src[yy * W + xx];
            }
            for (int64_t t = 0; t < taps; t++) wt[t * QSIM_DWC + c] = w[(c0 + c) * taps + t];
        }
        /* + bias, then the bound where only the bounded values are wanted, on the registers */
        qsim_v16f bv = {0};
        for (int c = 0; c < nc; c++) bv[c] = bias != NULL ? bias[c0 + c] : 0.0f;
        for (int64_t oy = 0; oy < OH; oy++) {
            for (int64_t ox = 0; ox < OW; ox += QSIM_DWC_PIX) {
                /* a row's last block runs whole too: its extra pixels read the next row or the
                 * zeroed slack after the scratch, and are dropped */
                qsim_v16f a[QSIM_DWC_PIX];
                for (int r = 0; r < QSIM_DWC_PIX; r++) a[r] = (qsim_v16f){0};
                for (int64_t ky = 0; ky < KH; ky++) {
                    const float *row = pad + ((oy * sy + ky * dy) * PW + ox * sx) * QSIM_DWC;
                    for (int64_t kx = 0; kx < KW; kx++) {
                        const qsim_v16f wv = *(const qsim_v16f_u *)(wt + (ky * KW + kx) * QSIM_DWC);
                        const float *src = row + kx * dx * QSIM_DWC;
                        /* unrolled: the eight accumulators stay in registers */
                        _Pragma("GCC unroll 8") for (int r = 0; r < QSIM_DWC_PIX; r++)
                            qsim_v16_fma(&a[r], &wv, src + r * sx * QSIM_DWC);
                    }
                }
                /* all eight stored, a row's last block too (a fixed-size store; the variable
                 * count became a rep movs): its extra pixels land on the next row's first
                 * ones, which that row's blocks overwrite later, or in the slack after res */
                float *restrict rv = res + (oy * OW + ox) * QSIM_DWC;
                for (int r = 0; r < QSIM_DWC_PIX; r++)
                    *(qsim_v16f_u *)(rv + r * QSIM_DWC) = bias != NULL ? a[r] + bv : a[r];
                /* the bound as scalar code over the lanes, which the compiler vectorizes (GCC's
                 * generic 16-lane comparisons came out lane by lane) */
                if (bound_only)
                    for (int j = 0; j < QSIM_DWC_PIX * QSIM_DWC; j++) {
                        float v = rv[j];
                        v = (v > lo || v != v) ? v : lo;
                        if (has_hi) v = (v < hi || v != v) ? v : hi;
                        rv[j] = v;
                    }
            }
        }
        /* back to NCHW, 16 pixels at a time through the transpose */
        float *out0 = out + (b * C + c0) * OHW;
        int64_t i = 0;
        for (; i + QSIM_DWC <= OHW; i += QSIM_DWC) {
            qsim_v16f r[QSIM_DWC];
            for (int k = 0; k < QSIM_DWC; k++) r[k] = *(const qsim_v16f_u *)(res + (i + k) * QSIM_DWC);
            qsim_v16_transpose(r);            /* r[c]: channel c, pixels i .. i + 15 */
            if (nc == QSIM_DWC) {
                for (int c = 0; c < QSIM_DWC; c++) *(qsim_v16f_u *)(out0 + c * OHW + i) = r[c];
            } else {
                for (int c = 0; c < nc; c++) *(qsim_v16f_u *)(out0 + c * OHW + i) = r[c];
            }
        }
        for (int64_t c = 0; c < nc; c++) {
            float *o = out0 + c * OHW;
            for (int64_t j = i; j < OHW; j++) o[j] = res[j * QSIM_DWC + c];
            if (y != NULL)                                /* the following relu/clamp, numpy's values */
                qsim_bound_copy(o, y + (b * C + c0 + c) * OHW, OHW, lo, hi, has_hi);
        }
    }
}

#define QSIM_DWC_F32_PARAMS (const float *x, int64_t C, int64_t H, int64_t W, const float *w,        \
    const float *bias, int64_t KH, int64_t KW, int64_t sy, int64_t sx, int64_t dy, int64_t dx,         \
    int64_t pt, int64_t pl, float *out, int64_t OH, int64_t OW, float *y, float lo, float hi,          \
    int has_hi, int bound_only, float *scratch, int64_t q0, int64_t q1)
QSIM_VERSIONS(qsim_dwc_f32, QSIM_DWC_F32_PARAMS,
              (x, C, H, W, w, bias, KH, KW, sy, sx, dy, dx, pt, pl, out, OH, OW, y, lo, hi, has_hi, bound_only,
               scratch, q0, q1))
static void qsim_depthwise_cblock_f32(int isa, const float *x, int64_t C, int64_t H, int64_t W, const float *w,
                                      const float *bias, int64_t KH, int64_t KW, int64_t sy, int64_t sx,
                                      int64_t dy, int64_t dx, int64_t pt, int64_t pl, float *out, int64_t OH,
                                      int64_t OW, float *y, float lo, float hi, int has_hi, int bound_only,
                                      float *scratch, int64_t q0, int64_t q1) {
    QSIM_DISPATCH(isa, qsim_dwc_f32, x, C, H, W, w, bias, KH, KW, sy, sx, dy, dx, pt, pl, out, OH, OW, y, lo,
                  hi, has_hi, bound_only, scratch, q0, q1);
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
