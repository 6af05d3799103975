/* One ISA path's copy of the depthwise moments' blocked helpers and sample body
 * (dw_moments.h, which includes this file once per path after defining):
 *   QSIM_DWM_SFX     the path's suffix (avx512, avx2, base): the names end in _SFX
 *   QSIM_DWM_TARGET  its function attribute (isa_paths.h), empty for the baseline
 *   QSIM_DWM_VT      its vector of doubles (a native register: GCC keeps it in registers)
 *   QSIM_DWM_JB      how many elements' sums a block keeps in registers
 * The macros are undefined at the end. Every path does the same lane operations in the same
 * order (see dw_moments.h), so the same bits. No include guard: included once per path.
 */
#define QSIM_DWM_CAT2(a, b) a##_##b
#define QSIM_DWM_CAT(a, b) QSIM_DWM_CAT2(a, b)
#define QSIM_DWM_NAME(name) QSIM_DWM_CAT(name, QSIM_DWM_SFX)
#define QSIM_DWM_HELPER static QSIM_DWM_TARGET inline __attribute__((always_inline))
/* vectors per element: an element is QSIM_DWM_CB doubles (one channel block's lanes) */
#define QSIM_DWM_VPE ((int64_t)(QSIM_DWM_CB * sizeof(double) / sizeof(QSIM_DWM_VT)))

QSIM_DWM_HELPER QSIM_DWM_VT QSIM_DWM_NAME(qsim_dwm_load)(const double *p)
{
    QSIM_DWM_VT v;
    __builtin_memcpy(&v, p, sizeof v);     /* no alignment or aliasing assumed */
    return v;
}

QSIM_DWM_HELPER void QSIM_DWM_NAME(qsim_dwm_store)(double *p, QSIM_DWM_VT v)
{
    __builtin_memcpy(p, &v, sizeof v);
}

/* For element i < n (n a constant after inlining: the sums stay in registers), the sum over
 * k < count of r0[k*step + i] * r1[k*step + i] (r1 == NULL: of r0[k*step + i] alone), from 0.0
 * in increasing k; then out(i) = that sum (add 0) or out(i) = out(i) + that sum (add 1),
 * out(i) = out + i * out_step. Offsets and steps in elements (CB doubles each). */
QSIM_DWM_HELPER void QSIM_DWM_NAME(qsim_dwm_sums_n)(const double *restrict r0,
                                                    const double *restrict r1, int64_t step,
                                                    int64_t count, double *restrict out,
                                                    int64_t out_step, int add, const int64_t n)
{
    const int64_t L = QSIM_DWM_CB, VPE = QSIM_DWM_VPE, VW = L / VPE;
    QSIM_DWM_VT acc[QSIM_DWM_JB * QSIM_DWM_VPE];
    for (int64_t i = 0; i < n * VPE; i++)
        acc[i] = (QSIM_DWM_VT){0};
    for (int64_t k = 0; k < count; k++) {
        const double *a = r0 + k * step * L;
        if (r1) {
            const double *b = r1 + k * step * L;
            for (int64_t i = 0; i < n * VPE; i++)
                acc[i] = acc[i] + QSIM_DWM_NAME(qsim_dwm_load)(a + i * VW)
                                  * QSIM_DWM_NAME(qsim_dwm_load)(b + i * VW);
        } else {
            for (int64_t i = 0; i < n * VPE; i++)
                acc[i] = acc[i] + QSIM_DWM_NAME(qsim_dwm_load)(a + i * VW);
        }
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t v = 0; v < VPE; v++) {
            double *d = out + i * out_step * L + v * VW;
            QSIM_DWM_VT sum = acc[i * VPE + v];
            QSIM_DWM_NAME(qsim_dwm_store)(d, add ? QSIM_DWM_NAME(qsim_dwm_load)(d) + sum : sum);
        }
}

/* qsim_dwm_sums_n for the elements e in [e0, e1), JB at a time: element e reads r0 + e and
 * r1 + e, and writes out + (e - e0) * out_step. */
QSIM_DWM_HELPER void QSIM_DWM_NAME(qsim_dwm_sums)(const double *restrict r0,
                                                  const double *restrict r1, int64_t step,
                                                  int64_t count, int64_t e0, int64_t e1,
                                                  double *restrict out, int64_t out_step, int add)
{
    const int64_t L = QSIM_DWM_CB;
    /* n <= JB always holds where a call runs; the test drops the cases past JB - 1 at compile
     * time (their register arrays would be too short) */
#define QSIM_DWM_SUMS_AT(e, n) if ((n) <= QSIM_DWM_JB) QSIM_DWM_NAME(qsim_dwm_sums_n)(r0 + (e) * L,  \
        r1 ? r1 + (e) * L : 0, step, count, out + ((e) - e0) * out_step * L, out_step, add, n)
    int64_t e = e0;
    for (; e + QSIM_DWM_JB <= e1; e += QSIM_DWM_JB)
        QSIM_DWM_SUMS_AT(e, QSIM_DWM_JB);
    switch (e1 - e) {                /* the last e1 - e < JB (cases past JB - 1 never run) */
    case 5: QSIM_DWM_SUMS_AT(e, 5); break;
    case 4: QSIM_DWM_SUMS_AT(e, 4); break;
    case 3: QSIM_DWM_SUMS_AT(e, 3); break;
    case 2: QSIM_DWM_SUMS_AT(e, 2); break;
    case 1: QSIM_DWM_SUMS_AT(e, 1); break;
    default: break;
    }
#undef QSIM_DWM_SUMS_AT
}

/* t[j] = sum over oy < OH of r0[oy*step + j] * r1[oy*step + j] (r1 == NULL: of r0 alone),
 * j in [j0, j1), oy in increasing order */
#define QSIM_DWM_ROWS(r0, r1, step, OH, t, j0, j1) \
    QSIM_DWM_NAME(qsim_dwm_sums)(r0, r1, step, OH, j0, j1, (t) + (j0) * QSIM_DWM_CB, 1, 0)
/* dst(ax) = dst(ax) + (t[ax] + t[sx + ax] + ... + t[(OW - 1)*sx + ax]) for ax in [ax0, ax1),
 * dst(ax) = dst + (ax - ax0) * dst_step: each tap's strided sum, then its total */
#define QSIM_DWM_STRIDED(t, sx, OW, ax0, ax1, dst, dst_step) \
    QSIM_DWM_NAME(qsim_dwm_sums)(t, 0, sx, OW, ax0, ax1, dst, dst_step, 1)

/* One sample of one channel block. xp: [Hp][Wp][CB]; tsum: KH * Wp * CB doubles of scratch;
 * so: [K*K][CB] (pairs a <= b written), s1: [K][CB]. This path's copy: every
 * path's operations are elementwise or in a fixed order, so every path gives the same bits. */
static QSIM_DWM_TARGET void QSIM_DWM_NAME(qsim_dw_moments)(const double *restrict xp, int64_t Hp, int64_t Wp,
                                      int64_t KH, int64_t KW, int64_t sy, int64_t sx,
                                      int64_t OH, int64_t OW, double *restrict tsum,
                                      double *restrict so, double *restrict s1)
{
    const int64_t L = QSIM_DWM_CB;
    int64_t K = KH * KW, step = sy * Wp;
    (void)Hp;
    /* linear sums */
    for (int64_t ay = 0; ay < KH; ay++) {
        double *t = tsum + ay * Wp * L;
        if (ay < sy)
            QSIM_DWM_ROWS(xp + ay * Wp * L, 0, step, OH, t, 0, Wp);
        else
            qsim_dwm_slide(tsum + (ay - sy) * Wp * L, xp + (ay - sy) * Wp * L, 0,
                           xp + (ay - sy + OH * sy) * Wp * L, 0, t, 0, Wp);
        QSIM_DWM_STRIDED(t, sx, OW, 0, KW, s1 + ay * KW * L, 1);
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
                    QSIM_DWM_ROWS(r0, r1, step, OH, t, j0, j1);
                else
                    qsim_dwm_slide(tsum + (ay - sy) * Wp * L, r0 - step * L, r1 - step * L,
                                   r0 + (OH - 1) * step * L, r1 + (OH - 1) * step * L, t, j0, j1);
                /* pair (a, b) = (ay*KW + ax, a + dy*KW + dx): its total at so[a*K + b],
                 * K + 1 entries further for ax + 1 */
                int64_t a0 = ay * KW + ax0;
                QSIM_DWM_STRIDED(t, sx, OW, ax0, ax1, so + (a0 * K + a0 + dy * KW + dx) * L, K + 1);
            }
        }
    }
}

#undef QSIM_DWM_ROWS
#undef QSIM_DWM_STRIDED
#undef QSIM_DWM_CAT2
#undef QSIM_DWM_CAT
#undef QSIM_DWM_NAME
#undef QSIM_DWM_HELPER
#undef QSIM_DWM_VPE
#undef QSIM_DWM_SFX
#undef QSIM_DWM_TARGET
#undef QSIM_DWM_VT
#undef QSIM_DWM_JB
