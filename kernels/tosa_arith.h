/* TOSA 0.30 1.9.2 apply_scale_32 / apply_scale_16 for the C kernels.
 *
 * qsim/tosa/arith.py is the definition; these are its C transcription for the compiled
 * kernels (a per-element Python call is not an option there), and the kernel tests compare
 * the two on the sharp cases (ties, shift 2 and 62, double_round). The REQUIRE conditions are
 * not raised here: each helper ORs a violation into *bad and the Python wrapper raises
 * UnpredictableError, so the loops stay branch-free and vectorize.
 */
#ifndef QSIM_TOSA_ARITH_H
#define QSIM_TOSA_ARITH_H
#include <stdint.h>

/* value: int64 holding an int32 (or, for scale16, int48) value. 2 <= shift <= 62 and
 * multiplier >= 0 are checked once per call by the wrapper. round32 = 1 << (shift-1) and
 * dround = (double_round && shift > 31) ? 1 << 30 : 0 are per-channel constants. */
static inline __attribute__((always_inline)) int64_t
qsim_apply_scale_32(int64_t value, int64_t multiplier, int64_t shift, int64_t round32,
                    int64_t dround, int *bad) {
    int64_t lim = (int64_t)1 << (shift - 2);
    *bad |= (value < -lim) | (value >= lim);
    /* |value| < 2^(shift-2), multiplier < 2^31: |product| < 2^(shift+29) <= 2^91 would overflow,
     * but value is at most 2^32 here (int32 minus a zero point), so |product| < 2^63. */
    int64_t r = round32 + (value >= 0 ? dround : -dround);
    return (value * multiplier + r) >> shift;
}

/* |value| < 2^47, 0 <= multiplier < 2^15: |product| < 2^62, + round <= 2^61: fits int64. */
static inline __attribute__((always_inline)) int64_t
qsim_apply_scale_16(int64_t value, int64_t multiplier, int64_t shift, int64_t round16, int *bad) {
    int64_t r = (value * multiplier + round16) >> shift;
    *bad |= (r < -2147483648LL) | (r > 2147483647LL);
    return r;
}

#endif
