/* Elementwise binary operators with broadcasting (ADD, SUB, MAXIMUM, MINIMUM, MUL) and the
 * integer reductions (REDUCE_SUM, REDUCE_MAX, REDUCE_MIN), TOSA 0.30 2.5 and 2.9.
 *
 * Broadcasting (spec 1.8.4 apply_broadcast): the caller collapses the output to at most
 * QSIM_EW_RANK dimensions and gives each input's element stride per dimension, 0 along a
 * broadcast dimension; the innermost dimension runs with strides (1,1), (1,0) or (0,1) in
 * separate loops so they vectorize. Arithmetic is in int64: int32 operands give
 * |a +- b| < 2^33 and |a * b| <= 2^62, exact. A result outside int32 (apply_add/apply_sub
 * REQUIRE, or MUL's REQUIRE after the rounding shift) sets *bad; the Python side then hands
 * the call to the reference, which raises the spec's message. Compiled per ISA path (isa_paths.h).
 */
#ifndef QSIM_QELEM_H
#define QSIM_QELEM_H

#include <stdint.h>
#include "isa_paths.h"

#define QSIM_EW_RANK 6
enum { QSIM_EW_ADD = 0, QSIM_EW_SUB = 1, QSIM_EW_MAX = 2, QSIM_EW_MIN = 3, QSIM_EW_MUL = 4 };

/* MUL (2.5.14): int32 with shift > 0 rounds (product + 2^(shift-1)) >> shift, written as the
 * floor shift plus one when the dropped bits reach one half (no int64 overflow at shift 63);
 * otherwise the product's low 32 bits are the result (the narrowing store wraps). */
#define QSIM_EW_EXPR(OP, x, y)                                                            \
    ((OP) == QSIM_EW_ADD ? (x) + (y) :                                                     \
     (OP) == QSIM_EW_SUB ? (x) - (y) :                                                     \
     (OP) == QSIM_EW_MAX ? ((x) > (y) ? (x) : (y)) :                                       \
     (OP) == QSIM_EW_MIN ? ((x) < (y) ? (x) : (y)) :                                       \
     (shift == 0 ? (x) * (y) :                                                             \
      (((x) * (y)) >> shift) + ((((x) * (y)) & mask) >= half)))

/* range check only where the spec has a REQUIRE (ADD, SUB, MUL with a shift) */
#define QSIM_EW_CHECKED(OP) ((OP) == QSIM_EW_ADD || (OP) == QSIM_EW_SUB || (OP) == QSIM_EW_MUL)

#define QSIM_EW_DEF(OP, iname, in_t)                                                          \
QSIM_INLINE void qsim_ew_##OP##_##iname##_body(const in_t *a, const in_t *b, int32_t *out,     \
        int rank, const int64_t *shape, const int64_t *sa, const int64_t *sb, int shift,        \
        int *bad) {                                                                         \
    const int64_t mask = shift ? (int64_t)(((uint64_t)1 << shift) - 1) : 0;                  \
    const int64_t half = shift ? (int64_t)((uint64_t)1 << (shift - 1)) : 0;                  \
    const int checked = QSIM_EW_CHECKED(OP) && !((OP) == QSIM_EW_MUL && shift == 0);        \
    int64_t idx[QSIM_EW_RANK] = {0};                                                        \
    const int64_t n = shape[rank - 1], ia = sa[rank - 1], ib = sb[rank - 1];                 \
    int64_t outer = 1;                                                                      \
    for (int d = 0; d < rank - 1; d++) outer *= shape[d];                                   \
    int b_ = 0;                                                                             \
    for (int64_t o = 0; o < outer; o++) {                                                   \
        int64_t pa = 0, pb = 0;                                                             \
        for (int d = 0; d < rank - 1; d++) { pa += idx[d] * sa[d]; pb += idx[d] * sb[d]; }  \
        const in_t *x = a + pa, *y = b + pb;                                                \
        int32_t *z = out + o * n;                                                           \
        if (ia == 1 && ib == 1) {                                                           \
            for (int64_t i = 0; i < n; i++) {                                               \
                int64_t u = x[i], v = y[i], r = QSIM_EW_EXPR(OP, u, v);                     \
                b_ |= checked & ((r < INT32_MIN) | (r > INT32_MAX));                        \
                z[i] = (int32_t)r;                                                          \
            }                                                                               \
        } else if (ib == 0) {                                                               \
            const int64_t v = y[0];                                                         \
            for (int64_t i = 0; i < n; i++) {                                               \
                int64_t u = x[i * ia], r = QSIM_EW_EXPR(OP, u, v);                          \
                b_ |= checked & ((r < INT32_MIN) | (r > INT32_MAX));                        \
                z[i] = (int32_t)r;                                                          \
            }                                                                               \
        } else {                                                                            \
            for (int64_t i = 0; i < n; i++) {                                               \
                int64_t u = x[i * ia], v = y[i * ib], r = QSIM_EW_EXPR(OP, u, v);           \
                b_ |= checked & ((r < INT32_MIN) | (r > INT32_MAX));                        \
                z[i] = (int32_t)r;                                                          \
            }                                                                               \
        }                                                                                   \
        for (int d = rank - 2; d >= 0; d--) {      /* odometer over the outer dimensions */ \
            if (++idx[d] < shape[d]) break;                                                 \
            idx[d] = 0;                                                                     \
        }                                                                                   \
    }                                                                                       \
    *bad |= b_;                                                                             \
}                                                                                           \
QSIM_VERSIONS(qsim_ew_##OP##_##iname,                                                       \
    (const in_t *a, const in_t *b, int32_t *out, int rank, const int64_t *shape,              \
     const int64_t *sa, const int64_t *sb, int shift, int *bad),                             \
    (a, b, out, rank, shape, sa, sb, shift, bad))

QSIM_EW_DEF(0, i32, int32_t)
QSIM_EW_DEF(1, i32, int32_t)
QSIM_EW_DEF(2, i32, int32_t)
QSIM_EW_DEF(3, i32, int32_t)
QSIM_EW_DEF(4, i32, int32_t)
QSIM_EW_DEF(4, i16, int16_t)
QSIM_EW_DEF(4, i8, int8_t)

/* dtype code: 0 int8, 2 int16, 4 int32 (the RESCALE codes); ADD/SUB/MAX/MIN are int32 only */
static void qsim_elementwise(int isa, int op, int dcode, const void *a, const void *b,
                             int32_t *out, int rank, const int64_t *shape, const int64_t *sa,
                             const int64_t *sb, int shift, int *bad) {
#define QSIM_EW_CALL(OP, iname, in_t) \
    QSIM_DISPATCH(isa, qsim_ew_##OP##_##iname, (const in_t *)a, (const in_t *)b, out, rank, shape, sa, sb, shift, bad)
    switch (op) {
        case QSIM_EW_ADD: QSIM_EW_CALL(0, i32, int32_t); break;
        case QSIM_EW_SUB: QSIM_EW_CALL(1, i32, int32_t); break;
        case QSIM_EW_MAX: QSIM_EW_CALL(2, i32, int32_t); break;
        case QSIM_EW_MIN: QSIM_EW_CALL(3, i32, int32_t); break;
        default:
            if (dcode == 0) QSIM_EW_CALL(4, i8, int8_t);
            else if (dcode == 2) QSIM_EW_CALL(4, i16, int16_t);
            else QSIM_EW_CALL(4, i32, int32_t);
    }
#undef QSIM_EW_CALL
}

/* ------------------------------------------------------------ reductions -----------------
 * x viewed as [outer][n][inner] (n = the reduced axis). SUM (int32): acc = apply_add(acc, x)
 * in index order from 0, so every partial sum must stay in int32 (REQUIRE, *bad); int64
 * accumulators hold them exactly (|partial| <= n * 2^31 < 2^63). MAX/MIN start from the first
 * element (the spec's minimum/maximum start values give the same result for n >= 1; TOSA
 * shapes have n >= 1). acc: int64 scratch of `inner`. */
#define QSIM_RED_DEF(kind, iname, in_t)                                                       \
QSIM_INLINE void qsim_reduce_##kind##_##iname##_body(const in_t *x, int64_t outer, int64_t n,  \
        int64_t inner, int64_t *acc, in_t *out, int *bad) {                                 \
    int b_ = 0;                                                                             \
    for (int64_t o = 0; o < outer; o++) {                                                   \
        const in_t *s = x + o * n * inner;                                                  \
        in_t *r = out + o * inner;                                                          \
        if (kind != 0 && inner == 1) {   /* reduced axis innermost: a vectorizable scan */  \
            in_t m = s[0];                                                                  \
            if (kind == 1) for (int64_t j = 1; j < n; j++) m = s[j] > m ? s[j] : m;         \
            else for (int64_t j = 1; j < n; j++) m = s[j] < m ? s[j] : m;                   \
            r[0] = m;                                                                       \
        } else if (kind != 0) {     /* MAX/MIN accumulate in the output type itself */      \
            for (int64_t i = 0; i < inner; i++) r[i] = s[i];                                \
            for (int64_t j = 1; j < n; j++) {                                               \
                const in_t *v = s + j * inner;                                              \
                if (kind == 1) for (int64_t i = 0; i < inner; i++) r[i] = v[i] > r[i] ? v[i] : r[i]; \
                else for (int64_t i = 0; i < inner; i++) r[i] = v[i] < r[i] ? v[i] : r[i];  \
            }                                                                               \
        } else if (inner == 1) {    /* reduced axis innermost: one running sum */           \
            int64_t t = 0;                                                                  \
            for (int64_t j = 0; j < n; j++) {                                               \
                t += s[j];                                                                  \
                b_ |= (t < INT32_MIN) | (t > INT32_MAX);                                    \
            }                                                                               \
            r[0] = (in_t)t;                                                                 \
        } else {                                                                            \
            for (int64_t i = 0; i < inner; i++) acc[i] = 0;                                 \
            for (int64_t j = 0; j < n; j++)                                                 \
                for (int64_t i = 0; i < inner; i++) {                                       \
                    acc[i] += s[j * inner + i];                                             \
                    b_ |= (acc[i] < INT32_MIN) | (acc[i] > INT32_MAX);                      \
                }                                                                           \
            for (int64_t i = 0; i < inner; i++) r[i] = (in_t)acc[i];                        \
        }                                                                                   \
    }                                                                                       \
    *bad |= b_;                                                                             \
}                                                                                           \
QSIM_VERSIONS(qsim_reduce_##kind##_##iname,                                                 \
    (const in_t *x, int64_t outer, int64_t n, int64_t inner, int64_t *acc, in_t *out, int *bad), \
    (x, outer, n, inner, acc, out, bad))

QSIM_RED_DEF(0, i32, int32_t)
QSIM_RED_DEF(1, i8, int8_t)
QSIM_RED_DEF(1, i16, int16_t)
QSIM_RED_DEF(1, i32, int32_t)
QSIM_RED_DEF(2, i8, int8_t)
QSIM_RED_DEF(2, i16, int16_t)
QSIM_RED_DEF(2, i32, int32_t)

/* kind: 0 SUM (int32 only), 1 MAX, 2 MIN; dcode as for qsim_elementwise */
static void qsim_reduce(int isa, int kind, int dcode, const void *x, int64_t outer, int64_t n,
                        int64_t inner, int64_t *acc, void *out, int *bad) {
#define QSIM_RED_CALL(K, iname, in_t) \
    QSIM_DISPATCH(isa, qsim_reduce_##K##_##iname, (const in_t *)x, outer, n, inner, acc, (in_t *)out, bad)
    if (kind == 0) { QSIM_RED_CALL(0, i32, int32_t); return; }
    if (kind == 1) {
        if (dcode == 0) QSIM_RED_CALL(1, i8, int8_t);
        else if (dcode == 2) QSIM_RED_CALL(1, i16, int16_t);
        else QSIM_RED_CALL(1, i32, int32_t);
        return;
    }
    if (dcode == 0) QSIM_RED_CALL(2, i8, int8_t);
    else if (dcode == 2) QSIM_RED_CALL(2, i16, int16_t);
    else QSIM_RED_CALL(2, i32, int32_t);
#undef QSIM_RED_CALL
}

#endif
