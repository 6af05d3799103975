/* Input patch moments of a depthwise convolution (dilation 1) for adaptive weight rounding
 * (qsim/quant/rounding.py PatchMoments.add_depthwise), straight from one input channel:
 *
 *   so[a*K + b] += sum over oy, ox of v(a) v(b)   (a <= b),   s1[a] += sum of v(a),
 *   v(a) = xp[oy*sy + ay][ox*sx + ax],  a = ay*KW + ax,
 *
 * xp [Hp][Wp] the window of the channel the outputs read, as doubles, padding as 0.
 * Products of two float32 are exact in double; every sum has a fixed order, per channel (no
 * dependence on the thread split or on the channel block a channel is summed in). Built with
 * -ffp-contract=off: no fused multiply-add changes a rounding.
 *
 * For a tap offset (dy, dx) = b - a, the row sums T_ay[j] = sum over oy of
 * xp[oy*sy + ay][j] * xp[oy*sy + ay + dy][j + dx] are elementwise over j (vector code); the
 * one for ay + sy is the one for ay minus its first row's products plus the next row's.
 * Each pair (a, a + d) then adds OW terms of T_ay, strided by sx, all ax of one ay side by
 * side (independent sums). About 2 Hp Wp operations per offset instead of OH OW per pair.
 */
#ifndef QSIM_DW_MOMENTS_H
#define QSIM_DW_MOMENTS_H

#include <stdint.h>
#include "isa_paths.h"

/* Channel blocks: QSIM_DWM_CB channels side by side, innermost (one AVX-512 vector of
 * doubles, two AVX2 ones). Every array below holds QSIM_DWM_CB lanes per element:
 * xp[(r*Wp + j)*CB + l] is channel l's xp[r][j]. Each lane goes through exactly the
 * operations, in the order, of the one-channel formulation above (elementwise over the lanes,
 * no reduction across them), so a channel's totals are the same bits whatever block, lane or
 * ISA path it is computed in; lanes past the last channel hold zeros and are never stored. */
#define QSIM_DWM_CB 8

/* t[j] = sum over oy < OH of r0[oy*step + j] * r1[oy*step + j] (r1 == NULL: of r0 alone),
 * j in [j0, j1), oy in increasing order; step and offsets in elements (CB doubles each) */
QSIM_INLINE void qsim_dwm_rows(const double *restrict r0, const double *restrict r1,
                                 int64_t step, int64_t OH, double *restrict t,
                                 int64_t j0, int64_t j1)
{
    const int64_t L = QSIM_DWM_CB;
    for (int64_t j = j0 * L; j < j1 * L; j++)
        t[j] = 0.0;
    for (int64_t oy = 0; oy < OH; oy++) {
        const double *restrict a = r0 + oy * step * L;
        if (r1) {
            const double *restrict b = r1 + oy * step * L;
            for (int64_t j = j0 * L; j < j1 * L; j++)
                t[j] = t[j] + a[j] * b[j];
        } else {
            for (int64_t j = j0 * L; j < j1 * L; j++)
                t[j] = t[j] + a[j];
        }
    }
}

/* t[j] = (prev[j] - old0[j] * old1[j]) + new0[j] * new1[j]  (old1/new1 NULL: no products) */
QSIM_INLINE void qsim_dwm_slide(const double *restrict prev, const double *restrict old0,
                                  const double *restrict old1, const double *restrict new0,
                                  const double *restrict new1, double *restrict t,
                                  int64_t j0, int64_t j1)
{
    const int64_t L = QSIM_DWM_CB;
    if (old1) {
        for (int64_t j = j0 * L; j < j1 * L; j++)
            t[j] = (prev[j] - old0[j] * old1[j]) + new0[j] * new1[j];
    } else {
        for (int64_t j = j0 * L; j < j1 * L; j++)
            t[j] = (prev[j] - old0[j]) + new0[j];
    }
}

/* out[ax - ax0] = t[ax] + t[sx + ax] + ... + t[(OW - 1)*sx + ax] for ax in [ax0, ax1), each
 * added in increasing ox; the ax sums run side by side (independent chains). */
QSIM_INLINE void qsim_dwm_strided(const double *restrict t, int64_t sx, int64_t OW,
                                    int64_t ax0, int64_t ax1, double *restrict out)
{
    const int64_t L = QSIM_DWM_CB;
    int64_t n = (ax1 - ax0) * L;
    for (int64_t i = 0; i < n; i++)
        out[i] = 0.0;
    for (int64_t ox = 0; ox < OW; ox++) {
        const double *restrict r = t + (ox * sx + ax0) * L;
        for (int64_t i = 0; i < n; i++)
            out[i] = out[i] + r[i];
    }
}

/* One sample of one channel block. xp: [Hp][Wp][CB]; tsum: KH * Wp * CB doubles of scratch;
 * so: [K*K][CB] (pairs a <= b written), s1: [K][CB]. One body compiled per ISA path
 * (isa_paths.h): the operations are elementwise or in a fixed order, so every path gives the
 * same bits. */
QSIM_INLINE void qsim_dw_moments_body(const double *restrict xp, int64_t Hp, int64_t Wp,
                                      int64_t KH, int64_t KW, int64_t sy, int64_t sx,
                                      int64_t OH, int64_t OW, double *restrict tsum,
                                      double *restrict so, double *restrict s1)
{
    const int64_t L = QSIM_DWM_CB;
    int64_t K = KH * KW, step = sy * Wp;
    double part[64 * QSIM_DWM_CB];                 /* KW <= 64 (the caller checks) */
    (void)Hp;
    /* linear sums */
    for (int64_t ay = 0; ay < KH; ay++) {
        double *t = tsum + ay * Wp * L;
        if (ay < sy)
            qsim_dwm_rows(xp + ay * Wp * L, 0, step, OH, t, 0, Wp);
        else
            qsim_dwm_slide(tsum + (ay - sy) * Wp * L, xp + (ay - sy) * Wp * L, 0,
                           xp + (ay - sy + OH * sy) * Wp * L, 0, t, 0, Wp);
        qsim_dwm_strided(t, sx, OW, 0, KW, part);
        for (int64_t i = 0; i < KW * L; i++)
            s1[ay * KW * L + i] = s1[ay * KW * L + i] + part[i];
    }
    /* pairs a <= b by offset (dy, dx) = b - a: dy > 0 with any dx, or dy == 0 with dx >= 0 */
    for (int64_t dy = 0; dy < KH; dy++) {
        for (int64_t dx = dy > 0 ? -(KW - 1) : 0; dx < KW; dx++) {
            int64_t j0 = dx < 0 ? -dx : 0, j1 = dx > 0 ? Wp - dx : Wp;     /* j + dx inside */
            int64_t ax0 = j0, ax1 = dx > 0 ? KW - dx : KW;
            for (int64_t ay = 0; ay + dy < KH; ay++) {
                double *t = tsum + ay * Wp * L;
                const double *r0 = xp + ay * Wp * L, *r1 = xp + ((ay + dy) * Wp + dx) * L;
                if (ay < sy)
                    qsim_dwm_rows(r0, r1, step, OH, t, j0, j1);
                else
                    qsim_dwm_slide(tsum + (ay - sy) * Wp * L, r0 - step * L, r1 - step * L,
                                   r0 + (OH - 1) * step * L, r1 + (OH - 1) * step * L, t, j0, j1);
                qsim_dwm_strided(t, sx, OW, ax0, ax1, part);
                for (int64_t ax = ax0; ax < ax1; ax++) {
                    int64_t a = ay * KW + ax, b = (ay + dy) * KW + ax + dx;
                    double *dst = so + (a * K + b) * L;
                    const double *src = part + (ax - ax0) * L;
                    for (int64_t l = 0; l < L; l++)
                        dst[l] = dst[l] + src[l];
                }
            }
        }
    }
}

QSIM_VERSIONS(qsim_dw_moments,
              (const double *xp, int64_t Hp, int64_t Wp, int64_t KH, int64_t KW, int64_t sy,
               int64_t sx, int64_t OH, int64_t OW, double *tsum, double *so, double *s1),
              (xp, Hp, Wp, KH, KW, sy, sx, OH, OW, tsum, so, s1))

static void qsim_dw_moments_block(int isa, const double *xp, int64_t Hp, int64_t Wp,
                                  int64_t KH, int64_t KW, int64_t sy, int64_t sx, int64_t OH,
                                  int64_t OW, double *tsum, double *so, double *s1)
{
    QSIM_DISPATCH(isa, qsim_dw_moments, xp, Hp, Wp, KH, KW, sy, sx, OH, OW, tsum, so, s1);
}

#endif
