/* Adaptive weight rounding's greedy passes (qsim/quant/rounding.py adaptive_round and
 * round_from_rows), one output channel per call, compiled once per instruction-set path
 * (isa_paths.h) so the vector width of the updates follows the machine.
 *
 * The only loops the compiler vectorises are elementwise updates (y[k] = y[k] + d * x[k], a
 * conversion to float): no sum is reassociated, and the build passes -ffp-contract=off, so
 * each element is rounded exactly as in the scalar loop and every path gives the same bits
 * (tested against the numpy loops and across paths). The decisions (gain < -tol) read one
 * element at a time in weight order, as the numpy reference does.
 */
#ifndef QSIM_ROUND_PASSES_H
#define QSIM_ROUND_PASSES_H

#include <stdint.h>
#include "isa_paths.h"

/* y[k] = y[k] + a * x[k] for k < n (separate multiply and add) */
QSIM_INLINE void qsim_rp_axpy(double *restrict y, const double *restrict x, double a, int64_t n)
{
    for (int64_t k = 0; k < n; k++)
        y[k] = y[k] + a * x[k];
}

/* Up to max_passes passes over the K weights of one channel, in place: q the current
 * integers (as doubles), fl/ce the two candidates, gr = H e, h the channel's group's K x K
 * matrix (row-major). Stops after a pass with no move or whose moves lowered the objective
 * by less than stop_fraction * objective. *passes = the passes run. */
QSIM_INLINE void qsim_rp_channel_body(double *restrict q, const double *restrict fl,
                                      const double *restrict ce, double *restrict gr,
                                      const double *restrict h, int64_t K, double tol,
                                      int64_t max_passes, double stop_fraction, double objective,
                                      int64_t *restrict passes)
{
    for (int64_t p = 0; p < max_passes; p++) {
        int64_t moved = 0;
        double drop = 0.0;
        for (int64_t j = 0; j < K; j++) {
            double cur = q[j];
            double other = cur == fl[j] ? ce[j] : fl[j];
            double delta = other - cur;
            if (delta == 0.0)
                continue;
            const double *hr = h + j * K;
            double gain = (2.0 * delta) * gr[j] + (delta * delta) * hr[j];
            if (!(gain < -tol))
                continue;
            q[j] = other;
            qsim_rp_axpy(gr, hr, delta, K);
            moved++;
            drop = drop - gain;
        }
        *passes = p + 1;
        if (moved == 0 || drop < stop_fraction * objective)
            break;
    }
}

QSIM_VERSIONS(qsim_rp_channel,
              (double *restrict q, const double *restrict fl, const double *restrict ce,
               double *restrict gr, const double *restrict h, int64_t K, double tol,
               int64_t max_passes, double stop_fraction, double objective, int64_t *passes),
              (q, fl, ce, gr, h, K, tol, max_passes, stop_fraction, objective, passes))

static void qsim_round_channel(int isa, double *q, const double *fl, const double *ce, double *gr,
                               const double *h, int64_t K, double tol, int64_t max_passes,
                               double stop_fraction, double objective, int64_t *passes)
{
    QSIM_DISPATCH(isa, qsim_rp_channel, q, fl, ce, gr, h, K, tol, max_passes, stop_fraction,
                  objective, passes);
}

/* One block of weights j0 .. j0 + b - 1 of one channel in the rows form: q/fl/ce the
 * channel's rows (all K weights), rs its residual X e (P floats, as the gradient GEMM reads
 * it), xt [K][P] the rows transposed (floats), g the block's gradient X^T r (b doubles,
 * updated for the block's later weights through hb, the block's b x b X^T X), diag X^T X's
 * diagonal (K). A move adds d * x_j to rs in float32 (d = +-1: the product is exact). Adds
 * the moves to *moved and what they lowered the objective by to *drop. */
QSIM_INLINE void qsim_rp_block_body(double *restrict q, const double *restrict fl,
                                      const double *restrict ce, float *restrict rs,
                                      const float *restrict xt, int64_t P,
                                      double *restrict g, const double *restrict hb, int64_t b,
                                      const double *restrict diag, double tol, int64_t j0,
                                      int64_t *restrict moved, double *restrict drop)
{
    for (int64_t t = 0; t < b; t++) {
        int64_t j = j0 + t;
        double cur = q[j];
        double other = cur == fl[j] ? ce[j] : fl[j];
        double delta = other - cur;
        if (delta == 0.0)
            continue;
        double gain = (2.0 * delta) * g[t] + (delta * delta) * diag[j];
        if (!(gain < -tol))
            continue;
        q[j] = other;
        const float *xr = xt + j * P;
        float d = (float)delta;                 /* +-1: exact */
        for (int64_t p = 0; p < P; p++)
            rs[p] = rs[p] + d * xr[p];
        const double *hr = hb + t * b;
        for (int64_t u = t + 1; u < b; u++)
            g[u] = g[u] + delta * hr[u];
        *moved += 1;
        *drop = *drop - gain;
    }
}

QSIM_VERSIONS(qsim_rp_block,
              (double *restrict q, const double *restrict fl, const double *restrict ce,
               float *restrict rs, const float *restrict xt, int64_t P,
               double *restrict g, const double *restrict hb, int64_t b,
               const double *restrict diag, double tol, int64_t j0, int64_t *restrict moved,
               double *restrict drop),
              (q, fl, ce, rs, xt, P, g, hb, b, diag, tol, j0, moved, drop))

static void qsim_round_block(int isa, double *q, const double *fl, const double *ce, float *rs,
                               const float *xt, int64_t P, double *g, const double *hb, int64_t b,
                               const double *diag, double tol, int64_t j0, int64_t *moved,
                               double *drop)
{
    QSIM_DISPATCH(isa, qsim_rp_block, q, fl, ce, rs, xt, P, g, hb, b, diag, tol, j0, moved, drop);
}

#endif
