/* The integer GEMMs: int8 x int8 -> int32 (TOSA CONV2D / CONV3D / TRANSPOSE_CONV2D /
 * FULLY_CONNECTED / MATMUL, and CVM conv2d / dense) and the int16 modes (int48 accumulator, at
 * the end), each as an "implicit GEMM" over a prepared activation buffer.
 *
 * Operand A (activations) is a uint8 buffer holding a' = x + 128 (x int8), with every
 * padding position (spatial padding, channel padding up to a multiple of 4, the holes of a
 * transposed convolution) filled with input_zp + 128, i.e. x == input_zp: such a position
 * contributes (x - input_zp) * w == 0, exactly what the spec's skipped taps contribute.
 * Row p of the GEMM (one output pixel) at K index (t, k) reads
 *     A[rows[p] + taps[t] + k],   0 <= t < T, 0 <= k < 4*K4
 * so a convolution needs no im2col copy: rows[] are pixel origins and taps[] kernel offsets.
 *
 * Operand B (weights) is packed once per weight array (the Python side caches it):
 *   VNNI/portable layout: panels of up to 64 output columns; inside a panel of NV*16 columns,
 *     for each K quad q: NV*16 columns x 4 int8 (the vpdpbusd operand order).
 *   AVX2 layout: panels of 16 columns; for each K pair: 16 columns x 2 int16.
 *
 * Exactness: the kernels accumulate sum a' * w in 32-bit lanes that wrap modulo 2^32
 * (vpdpbusd and vpaddd do not saturate; the portable path uses uint32). The epilogue adds
 * colcorr[n] = bias[n] - (128 + input_zp) * sum_k w[k][n] and subtracts rowcorr[p] (the
 * weight zero-point term), also modulo 2^32. The true result is proven (or checked) by the
 * caller to lie in int32, and two integers equal modulo 2^32 that both lie in int32 are equal:
 * the stored value is the spec's result bit for bit (vpmaddubsw is avoided: it saturates).
 */
#ifndef QSIM_QGEMM_H
#define QSIM_QGEMM_H

#include <stdint.h>
#include <string.h>
#include "isa_paths.h"

#define QSIM_VNNI_PANEL 64   /* output columns per VNNI panel (4 zmm of int32) */
#define QSIM_AVX2_PANEL 16   /* output columns per AVX2 panel (2 ymm of int32) */
/* zero bytes after the VNNI packing: the AMX path's last B tile may read up to 15 K quads of
 * a 64-column panel past its end (qgemm_amx.h) */
#define QSIM_PACK_SLACK (15 * 4 * QSIM_VNNI_PANEL)

static inline int64_t qsim_round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* ---------------------------------------------------------------- packing ----------------
 * Source weight w(n, t, c) = src[n*s_n + t*s_t + c*s_c] (int8), n < N, t < T, c < C.
 * K index k = t*C4 + c with C4 = round_up(C, 4); positions c >= C and n >= N pack as 0.
 * colsum[n] receives sum_{t,c} w(n,t,c) (int32: |sum| <= T*C*128).
 */
static size_t qsim_pack_bytes(int isa, int64_t N, int64_t T, int64_t C) {
    int64_t K = T * qsim_round_up(C, 4);
    if (isa == QSIM_ISA_AVX2) return (size_t)(qsim_round_up(N, QSIM_AVX2_PANEL) * K * 2);
    return (size_t)(qsim_round_up(N, 16) * K + QSIM_PACK_SLACK);
}

QSIM_INLINE void
qsim_pack_weights_body(int isa, const int8_t *restrict src, int64_t N, int64_t T, int64_t C,
                       int64_t s_n, int64_t s_t, int64_t s_c, void *restrict dst,
                       int32_t *restrict colsum) {
    const int64_t C4 = qsim_round_up(C, 4), K = T * C4;
    const int avx2 = isa == QSIM_ISA_AVX2;
    const int64_t NP = avx2 ? qsim_round_up(N, QSIM_AVX2_PANEL) : qsim_round_up(N, 16);
    /* column sums, walking memory in its own order */
    for (int64_t n = 0; n < N; n++) colsum[n] = 0;
    if (!avx2) memset((int8_t *)dst + NP * K, 0, QSIM_PACK_SLACK);
    /* (unit strides spelled out so the compiler vectorizes with runtime shapes) */
    if (s_n == 1) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < C; c++) {
                const int8_t *row = src + t * s_t + c * s_c;
                for (int64_t n = 0; n < N; n++) colsum[n] += row[n];
            }
    } else if (s_c == 1) {
        for (int64_t n = 0; n < N; n++)
            for (int64_t t = 0; t < T; t++) {
                const int8_t *row = src + n * s_n + t * s_t;
                int32_t acc = 0;
                for (int64_t c = 0; c < C; c++) acc += row[c];
                colsum[n] += acc;
            }
    } else {
        for (int64_t n = 0; n < N; n++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t c = 0; c < C; c++) colsum[n] += src[n * s_n + t * s_t + c * s_c];
    }
    for (int64_t p0 = 0; p0 < NP; p0 += QSIM_VNNI_PANEL) {
        /* VNNI: one panel of up to 64 columns, k quads; AVX2: four 16-column panels, k pairs */
        const int64_t width = NP - p0 < QSIM_VNNI_PANEL ? NP - p0 : QSIM_VNNI_PANEL;
        for (int64_t t = 0; t < T; t++)
            for (int64_t c4 = 0; c4 < C4; c4 += 4) {
                const int64_t k = t * C4 + c4;
                const int full = p0 + width <= N && c4 + 4 <= C;
                if (!avx2 && full && s_n == 1) {
                    /* MATMUL's B: four contiguous rows -> one little-endian quad per column
                     * (a loop the compiler vectorizes; the generic path below is per byte) */
                    const uint8_t *r0 = (const uint8_t *)src + t * s_t + c4 * s_c + p0;
                    const uint8_t *r1 = r0 + s_c, *r2 = r1 + s_c, *r3 = r2 + s_c;
                    uint32_t *o = (uint32_t *)((int8_t *)dst + p0 * K + (k / 4) * (width * 4));
                    for (int64_t j = 0; j < width; j++)
                        o[j] = (uint32_t)r0[j] | ((uint32_t)r1[j] << 8) | ((uint32_t)r2[j] << 16)
                             | ((uint32_t)r3[j] << 24);
                    continue;
                }
                int8_t quad[QSIM_VNNI_PANEL][4];
                for (int64_t kk = 0; kk < 4; kk++) {
                    const int8_t *row = src + t * s_t + (c4 + kk) * s_c + p0 * s_n;
                    if (full && s_n == 1)        /* MATMUL's B: a contiguous row of columns */
                        for (int64_t j = 0; j < width; j++) quad[j][kk] = row[j];
                    else
                        for (int64_t j = 0; j < width; j++)
                            quad[j][kk] = (full || (p0 + j < N && c4 + kk < C)) ? row[j * s_n] : 0;
                }
                if (!avx2) {
                    memcpy((int8_t *)dst + p0 * K + (k / 4) * (width * 4), quad, (size_t)(width * 4));
                    continue;
                }
                for (int64_t j = 0; j < width; j++) {
                    int16_t *panel = (int16_t *)dst + (p0 + j / QSIM_AVX2_PANEL * QSIM_AVX2_PANEL) * K;
                    for (int64_t kk = 0; kk < 4; kk++) {
                        int64_t kx = k + kk;
                        panel[(kx / 2) * (2 * QSIM_AVX2_PANEL) + (j % QSIM_AVX2_PANEL) * 2 + (kx & 1)] = quad[j][kk];
                    }
                }
            }
    }
}

/* --------------------------------------------------------- activation buffer -------------
 * Builds A for a (up to 3-D) convolution from an int8 NDHWC tensor x[N][D][H][W][C]:
 * A[n][PD][PH][PW][C4] = x + 128 at positions (d*ud + od, y*uy + oy, x*ux + ox), elsewhere
 * fill (= input_zp + 128). u* are upsampling factors (1 except for TRANSPOSE_CONV2D),
 * o* offsets (the leading padding; negative offsets crop).
 */
QSIM_INLINE void
qsim_prepare_input_u8_body(const int8_t *x, int64_t N, int64_t D, int64_t H, int64_t W,
                           int64_t C, int64_t PD, int64_t PH, int64_t PW, int64_t C4,
                           int64_t ud, int64_t uy, int64_t ux, int64_t od, int64_t oy,
                           int64_t ox, uint8_t fill, uint8_t *A) {
    if (D == PD && H == PH && W == PW && C == C4 && ud == 1 && uy == 1 && ux == 1 && !od && !oy && !ox) {
        /* no padding anywhere (FULLY_CONNECTED, MATMUL, unpadded 1x1 convs): one flat pass */
        const int64_t total = N * D * H * W * C;
        for (int64_t i = 0; i < total; i++) A[i] = (uint8_t)(x[i] ^ 0x80);
        return;
    }
    memset(A, fill, (size_t)(N * PD * PH * PW * C4));
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) {
            int64_t pd = d * ud + od;
            if (pd < 0 || pd >= PD) continue;
            for (int64_t y = 0; y < H; y++) {
                int64_t py = y * uy + oy;
                if (py < 0 || py >= PH) continue;
                for (int64_t xx = 0; xx < W; xx++) {
                    int64_t px = xx * ux + ox;
                    if (px < 0 || px >= PW) continue;
                    const int8_t *s = x + (((n * D + d) * H + y) * W + xx) * C;
                    uint8_t *o = A + (((n * PD + pd) * PH + py) * PW + px) * C4;
                    for (int64_t c = 0; c < C; c++) o[c] = (uint8_t)(s[c] ^ 0x80);
                }
            }
        }
}

/* rowsum[p] = sum over the row's K positions of a' (uint32 wraps; exact below 2^32). */
QSIM_INLINE void
qsim_row_sums_body(const uint8_t *A, const int64_t *rows, int64_t M, const int64_t *taps,
                   int64_t T, int64_t K4, uint32_t *rowsum) {
    for (int64_t p = 0; p < M; p++) {
        uint32_t s = 0;
        for (int64_t t = 0; t < T; t++) {
            const uint8_t *a = A + rows[p] + taps[t];
            for (int64_t k = 0; k < 4 * K4; k++) s += a[k];
        }
        rowsum[p] = s;
    }
}

#if QSIM_X86
/* MATMUL's B (one tap, columns contiguous: s_n == 1) on the VNNI/AMX layout, in registers: each
 * group of 4 K rows x 16..64 columns becomes the panel's quad row by two rounds of byte/word
 * unpacks and a 128-bit lane transpose (the same bytes qsim_pack_weights_body places one by
 * one), and the column sums come from vpdpbusd of the quads with a vector of ones (u8 1 x s8 w:
 * each lane adds its column's four weights, exact: |sum| <= K * 128 < 2^31). Columns >= N and
 * K rows >= C are zero, as there. */
static QSIM_TARGET_VNNI void
qsim_pack_kn_vnni(const int8_t *src, int64_t N, int64_t C, int64_t s_c, int8_t *dst, int32_t *colsum) {
    const int64_t C4 = qsim_round_up(C, 4), NP = qsim_round_up(N, 16), K = C4;
    const __m512i ones = _mm512_set1_epi8(1);
    memset(dst + NP * K, 0, QSIM_PACK_SLACK);
    for (int64_t p0 = 0; p0 < NP; p0 += QSIM_VNNI_PANEL) {
        const int64_t width = NP - p0 < QSIM_VNNI_PANEL ? NP - p0 : QSIM_VNNI_PANEL;
        const int64_t live = N - p0 < width ? N - p0 : width;
        const __mmask64 cols = live >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << live) - 1);
        const int nv = (int)(width / 16);
        __m512i sums[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                           _mm512_setzero_si512()};
        int8_t *o = dst + p0 * K;
        for (int64_t c4 = 0; c4 < C4; c4 += 4, o += width * 4) {
            __m512i r[4];
            for (int kk = 0; kk < 4; kk++)
                r[kk] = c4 + kk < C ? _mm512_maskz_loadu_epi8(cols, src + (c4 + kk) * s_c + p0)
                                    : _mm512_setzero_si512();
            const __m512i t0 = _mm512_unpacklo_epi8(r[0], r[1]), t1 = _mm512_unpackhi_epi8(r[0], r[1]);
            const __m512i t2 = _mm512_unpacklo_epi8(r[2], r[3]), t3 = _mm512_unpackhi_epi8(r[2], r[3]);
            /* q0..q3: in 128-bit lane L, the quads of columns 16L + 0..3, 4..7, 8..11, 12..15 */
            const __m512i q0 = _mm512_unpacklo_epi16(t0, t2), q1 = _mm512_unpackhi_epi16(t0, t2);
            const __m512i q2 = _mm512_unpacklo_epi16(t1, t3), q3 = _mm512_unpackhi_epi16(t1, t3);
            const __m512i a = _mm512_shuffle_i64x2(q0, q1, 0x44), b = _mm512_shuffle_i64x2(q2, q3, 0x44);
            const __m512i c = _mm512_shuffle_i64x2(q0, q1, 0xEE), d = _mm512_shuffle_i64x2(q2, q3, 0xEE);
            __m512i v[4];
            v[0] = _mm512_shuffle_i64x2(a, b, 0x88);     /* columns 0..15, 4 bytes each */
            v[1] = _mm512_shuffle_i64x2(a, b, 0xDD);     /* 16..31 */
            v[2] = _mm512_shuffle_i64x2(c, d, 0x88);     /* 32..47 */
            v[3] = _mm512_shuffle_i64x2(c, d, 0xDD);     /* 48..63 */
            for (int j = 0; j < nv; j++) {
                _mm512_storeu_si512((void *)(o + 64 * j), v[j]);
                sums[j] = _mm512_dpbusd_epi32(sums[j], ones, v[j]);
            }
        }
        for (int j = 0; j < nv && 16 * j < live; j++) {
            const int64_t left = live - 16 * j;
            _mm512_mask_storeu_epi32(colsum + p0 + 16 * j,
                                     left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u), sums[j]);
        }
    }
}
#endif

/* The packing and preparation loops above are compiled once per ISA (isa_paths.h). */
#define QSIM_PACK_PARAMS (int isa, const int8_t *src, int64_t N, int64_t T, int64_t C, int64_t s_n, \
                          int64_t s_t, int64_t s_c, void *dst, int32_t *colsum)
#define QSIM_PACK_ARGS (isa, src, N, T, C, s_n, s_t, s_c, dst, colsum)
QSIM_VERSIONS(qsim_pack_weights, QSIM_PACK_PARAMS, QSIM_PACK_ARGS)
static void qsim_pack_weights QSIM_PACK_PARAMS {
#if QSIM_X86
    if (isa >= QSIM_ISA_AVX512VNNI && T == 1 && s_n == 1) {
        qsim_pack_kn_vnni(src, N, C, s_c, (int8_t *)dst, colsum);
        return;
    }
#endif
    QSIM_DISPATCH(isa, qsim_pack_weights, isa, src, N, T, C, s_n, s_t, s_c, dst, colsum);
}

#define QSIM_PREPARE_PARAMS (const int8_t *x, int64_t N, int64_t D, int64_t H, int64_t W, int64_t C, \
    int64_t PD, int64_t PH, int64_t PW, int64_t C4, int64_t ud, int64_t uy, int64_t ux,          \
    int64_t od, int64_t oy, int64_t ox, uint8_t fill, uint8_t *A)
QSIM_VERSIONS(qsim_prepare_input_u8, QSIM_PREPARE_PARAMS,
                   (x, N, D, H, W, C, PD, PH, PW, C4, ud, uy, ux, od, oy, ox, fill, A))
static void qsim_prepare_input_u8(int isa, const int8_t *x, int64_t N, int64_t D, int64_t H,
                                  int64_t W, int64_t C, int64_t PD, int64_t PH, int64_t PW,
                                  int64_t C4, int64_t ud, int64_t uy, int64_t ux, int64_t od,
                                  int64_t oy, int64_t ox, uint8_t fill, uint8_t *A) {
    QSIM_DISPATCH(isa, qsim_prepare_input_u8, x, N, D, H, W, C, PD, PH, PW, C4, ud, uy, ux, od,
                   oy, ox, fill, A);
}

QSIM_VERSIONS(qsim_row_sums, (const uint8_t *A, const int64_t *rows, int64_t M,
                   const int64_t *taps, int64_t T, int64_t K4, uint32_t *rowsum),
                   (A, rows, M, taps, T, K4, rowsum))
static void qsim_row_sums(int isa, const uint8_t *A, const int64_t *rows, int64_t M,
                          const int64_t *taps, int64_t T, int64_t K4, uint32_t *rowsum) {
    QSIM_DISPATCH(isa, qsim_row_sums, A, rows, M, taps, T, K4, rowsum);
}

/* ------------------------------------------------------------- portable path ------------ */
static void qsim_gemm_portable(const uint8_t *A, const int64_t *rows, int64_t M,
                               const int64_t *taps, int64_t T, int64_t K4, const int8_t *B,
                               int64_t N, const int32_t *colcorr, const int32_t *rowcorr,
                               int32_t *out, int64_t ldo) {
    const int64_t NP = qsim_round_up(N, 16), K = T * K4 * 4;
    uint32_t acc[QSIM_VNNI_PANEL];
    for (int64_t p0 = 0; p0 < NP; p0 += QSIM_VNNI_PANEL) {
        int64_t width = NP - p0 < QSIM_VNNI_PANEL ? NP - p0 : QSIM_VNNI_PANEL;
        const int8_t *panel = B + p0 * K;
        for (int64_t p = 0; p < M; p++) {
            for (int64_t j = 0; j < width; j++) acc[j] = 0;
            const int8_t *b = panel;
            for (int64_t t = 0; t < T; t++) {
                const uint8_t *a = A + rows[p] + taps[t];
                for (int64_t q = 0; q < K4; q++, b += width * 4) {
                    uint32_t a0 = a[4 * q], a1 = a[4 * q + 1], a2 = a[4 * q + 2], a3 = a[4 * q + 3];
                    for (int64_t j = 0; j < width; j++)
                        acc[j] += a0 * (uint32_t)(int32_t)b[4 * j] + a1 * (uint32_t)(int32_t)b[4 * j + 1]
                                + a2 * (uint32_t)(int32_t)b[4 * j + 2] + a3 * (uint32_t)(int32_t)b[4 * j + 3];
                }
            }
            uint32_t rc = rowcorr ? (uint32_t)rowcorr[p] : 0u;
            int64_t jmax = N - p0 < width ? N - p0 : width;
            for (int64_t j = 0; j < jmax; j++)
                out[p * ldo + p0 + j] = (int32_t)(acc[j] + (uint32_t)colcorr[p0 + j] - rc);
        }
    }
}

#if QSIM_X86
/* ------------------------------------------------------------- AVX-512 VNNI -------------
 * Micro-kernel: MR rows x NV*16 columns held in MR*NV zmm accumulators (MR*NV <= 24, plus NV
 * weight registers and one broadcast: at most 29 of the 32 zmm registers).
 */
#define QSIM_VNNI_MR 6
#ifndef QSIM_VNNI_KC4
#define QSIM_VNNI_KC4 256  /* K quads per cache block (64 KiB of a 64-column panel, in L2) */
#endif

static inline __attribute__((always_inline)) QSIM_TARGET_VNNI void
qsim_vnni_tile(const int MR, const int NV, const uint8_t *A, const int64_t *rows,
               const int64_t *taps, int64_t T, int64_t K4, const int8_t *panel, int64_t width,
               const int32_t *colcorr, const int32_t *rowcorr, int32_t *out, int64_t ldo,
               int64_t ncols, int accumulate) {
    __m512i acc[QSIM_VNNI_MR][4];
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++) acc[r][v] = _mm512_setzero_si512();
    /* later K blocks add to the stored partial result; the corrections go in once, first */
    if (accumulate) colcorr = 0, rowcorr = 0;
    const int8_t *b = panel;
    for (int64_t t = 0; t < T; t++) {
        const uint8_t *a[QSIM_VNNI_MR];
        for (int r = 0; r < MR; r++) a[r] = A + rows[r] + taps[t];
        for (int64_t q = 0; q < K4; q++, b += width * 4) {
            __m512i w[4];
            for (int v = 0; v < NV; v++) w[v] = _mm512_loadu_si512((const void *)(b + 64 * v));
            for (int r = 0; r < MR; r++) {
                int32_t quad;
                memcpy(&quad, a[r] + 4 * q, 4);
                __m512i av = _mm512_set1_epi32(quad);
                for (int v = 0; v < NV; v++) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], av, w[v]);
            }
        }
    }
    for (int v = 0; v < NV; v++) {
        int64_t left = ncols - 16 * v;
        if (left <= 0) break;
        __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
        __m512i cc = colcorr ? _mm512_maskz_loadu_epi32(m, colcorr + 16 * v) : _mm512_setzero_si512();
        for (int r = 0; r < MR; r++) {
            __m512i x = _mm512_add_epi32(acc[r][v], cc);
            if (accumulate) x = _mm512_add_epi32(x, _mm512_maskz_loadu_epi32(m, out + r * ldo + 16 * v));
            if (rowcorr) x = _mm512_sub_epi32(x, _mm512_set1_epi32(rowcorr[r]));
            _mm512_mask_storeu_epi32(out + r * ldo + 16 * v, m, x);
        }
    }
}

#define QSIM_VNNI_CASE(mr, nv) \
    qsim_vnni_tile(mr, nv, A + 4 * kb, rows + p, taps, T, kc, panel + kb * width * 4, width, \
                   colcorr + p0, rowcorr ? rowcorr + p : 0, out + p * ldo + p0, ldo, ncols, kb > 0)
#define QSIM_VNNI_ROWS(nv) \
    switch (mr) { case 6: QSIM_VNNI_CASE(6, nv); break; case 5: QSIM_VNNI_CASE(5, nv); break; \
                  case 4: QSIM_VNNI_CASE(4, nv); break; case 3: QSIM_VNNI_CASE(3, nv); break; \
                  case 2: QSIM_VNNI_CASE(2, nv); break; default: QSIM_VNNI_CASE(1, nv); }

/* Loop order (Goto-style): a block of QSIM_GEMM_MC rows of A (<= MC * K bytes, sized for L2)
 * meets every 64-column panel of B before the next row block; inside a panel, K is split into
 * blocks of at most QSIM_VNNI_KC4 quads (single-tap GEMMs only) so the panel's K block stays
 * in L1/L2 while every row tile of the block uses it. Later K blocks add to the stored
 * partial sums (modulo 2^32, like everything else here). */
#ifndef QSIM_GEMM_MC
#define QSIM_GEMM_MC 240   /* rows per A block: a multiple of QSIM_VNNI_MR and QSIM_AVX2_MR */
#endif

static QSIM_TARGET_VNNI void
qsim_gemm_vnni(const uint8_t *A, const int64_t *rows, int64_t M, const int64_t *taps, int64_t T,
               int64_t K4, const int8_t *B, int64_t N, const int32_t *colcorr,
               const int32_t *rowcorr, int32_t *out, int64_t ldo) {
    const int64_t NP = qsim_round_up(N, 16), K = T * K4 * 4;
    const int64_t kstep = (T == 1 && K4 > 2 * QSIM_VNNI_KC4) ? QSIM_VNNI_KC4 : K4;
    for (int64_t mb = 0; mb < M; mb += QSIM_GEMM_MC) {
        const int64_t mend = M - mb < QSIM_GEMM_MC ? M : mb + QSIM_GEMM_MC;
        for (int64_t p0 = 0; p0 < NP; p0 += QSIM_VNNI_PANEL) {
            const int64_t width = NP - p0 < QSIM_VNNI_PANEL ? NP - p0 : QSIM_VNNI_PANEL;
            const int64_t ncols = N - p0 < width ? N - p0 : width;
            const int8_t *panel = B + p0 * K;
            const int nv = (int)(width / 16);
            for (int64_t kb = 0; kb < K4; kb += kstep) {
                const int64_t kc = K4 - kb < kstep ? K4 - kb : kstep;
                for (int64_t p = mb; p < mend; p += QSIM_VNNI_MR) {
                    const int mr = (int)(mend - p < QSIM_VNNI_MR ? mend - p : QSIM_VNNI_MR);
                    switch (nv) {
                        case 4: QSIM_VNNI_ROWS(4); break;
                        case 3: QSIM_VNNI_ROWS(3); break;
                        case 2: QSIM_VNNI_ROWS(2); break;
                        default: QSIM_VNNI_ROWS(1);
                    }
                }
            }
        }
    }
}

/* ------------------------------------------------------------- AVX2 (exact) -------------
 * vpmaddwd on zero-extended u8 activations and sign-extended int8 weights (both int16):
 * a0*w0 + a1*w1 <= 2 * 255 * 128 never saturates. MR=6 rows x 16 columns: 12 accumulators.
 */
#define QSIM_AVX2_MR 6

static inline __attribute__((always_inline)) QSIM_TARGET_AVX2 void
qsim_avx2_tile(const int MR, const uint8_t *A, const int64_t *rows, const int64_t *taps,
               int64_t T, int64_t K4, const int16_t *panel, const int32_t *colcorr,
               const int32_t *rowcorr, int32_t *out, int64_t ldo, int64_t ncols) {
    __m256i acc[QSIM_AVX2_MR][2];
    for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    const __m256i zx_lo = _mm256_set1_epi32((int)0x80018000u);   /* bytes 0, -, 1, - */
    const __m256i zx_hi = _mm256_set1_epi32((int)0x80038002u);   /* bytes 2, -, 3, - */
    const int16_t *b = panel;
    for (int64_t t = 0; t < T; t++) {
        const uint8_t *a[QSIM_AVX2_MR];
        for (int r = 0; r < MR; r++) a[r] = A + rows[r] + taps[t];
        for (int64_t q = 0; q < K4; q++, b += 4 * QSIM_AVX2_PANEL) {
            __m256i w0 = _mm256_loadu_si256((const __m256i *)b);
            __m256i w1 = _mm256_loadu_si256((const __m256i *)(b + 16));
            __m256i w2 = _mm256_loadu_si256((const __m256i *)(b + 32));
            __m256i w3 = _mm256_loadu_si256((const __m256i *)(b + 48));
            for (int r = 0; r < MR; r++) {
                int32_t quad;
                memcpy(&quad, a[r] + 4 * q, 4);
                /* (a0 | a1 << 16) and (a2 | a3 << 16): two zero-extended int16 pairs, made in
                 * vector registers by byte shuffles of the broadcast quad (0x80 selects a 0) */
                __m256i all = _mm256_set1_epi32(quad);
                __m256i lo = _mm256_shuffle_epi8(all, zx_lo);
                __m256i hi = _mm256_shuffle_epi8(all, zx_hi);
                acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(lo, w0));
                acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(lo, w1));
                acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(hi, w2));
                acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(hi, w3));
            }
        }
    }
    int32_t tmp[16];
    for (int r = 0; r < MR; r++) {
        _mm256_storeu_si256((__m256i *)tmp, acc[r][0]);
        _mm256_storeu_si256((__m256i *)(tmp + 8), acc[r][1]);
        uint32_t rc = rowcorr ? (uint32_t)rowcorr[r] : 0u;
        for (int64_t j = 0; j < ncols; j++)
            out[r * ldo + j] = (int32_t)((uint32_t)tmp[j] + (uint32_t)colcorr[j] - rc);
    }
}

#define QSIM_AVX2_CASE(mr) \
    qsim_avx2_tile(mr, A, rows + p, taps, T, K4, panel, colcorr + p0, \
                   rowcorr ? rowcorr + p : 0, out + p * ldo + p0, ldo, ncols)

static QSIM_TARGET_AVX2 void
qsim_gemm_avx2(const uint8_t *A, const int64_t *rows, int64_t M, const int64_t *taps, int64_t T,
               int64_t K4, const int16_t *B, int64_t N, const int32_t *colcorr,
               const int32_t *rowcorr, int32_t *out, int64_t ldo) {
    const int64_t NP = qsim_round_up(N, QSIM_AVX2_PANEL), K = T * K4 * 4;
    /* row blocks of A (as in qsim_gemm_vnni) meet every 16-column panel before the next */
    for (int64_t mb = 0; mb < M; mb += QSIM_GEMM_MC) {
        const int64_t mend = M - mb < QSIM_GEMM_MC ? M : mb + QSIM_GEMM_MC;
        for (int64_t p0 = 0; p0 < NP; p0 += QSIM_AVX2_PANEL) {
            const int64_t ncols = N - p0 < QSIM_AVX2_PANEL ? N - p0 : QSIM_AVX2_PANEL;
            const int16_t *panel = B + p0 * K;
            for (int64_t p = mb; p < mend; p += QSIM_AVX2_MR) {
                switch ((int)(mend - p < QSIM_AVX2_MR ? mend - p : QSIM_AVX2_MR)) {
                    case 6: QSIM_AVX2_CASE(6); break; case 5: QSIM_AVX2_CASE(5); break;
                    case 4: QSIM_AVX2_CASE(4); break; case 3: QSIM_AVX2_CASE(3); break;
                    case 2: QSIM_AVX2_CASE(2); break; default: QSIM_AVX2_CASE(1);
                }
            }
        }
    }
}
#endif /* QSIM_X86 */

#include "qgemm_amx.h"

/* out[p][n] = sum_k a'(p,k) * w(k,n) + colcorr[n] - rowcorr[p]  (all modulo 2^32). */
static void qsim_gemm(int isa, const uint8_t *A, const int64_t *rows, int64_t M,
                      const int64_t *taps, int64_t T, int64_t K4, const void *B, int64_t N,
                      const int32_t *colcorr, const int32_t *rowcorr, int32_t *out, int64_t ldo) {
#if QSIM_X86
    /* AMX takes the VNNI packing; without the permission or its scratch the VNNI path runs, and
     * for one or two rows (a 16-row tile would be mostly padding) it is the faster one */
    if (isa == QSIM_ISA_AVX512AMX && M > 2
        && qsim_gemm_amx(A, rows, M, taps, T, K4, (const int8_t *)B, N, colcorr, rowcorr, out, ldo) == 0)
        return;
    if (isa >= QSIM_ISA_AVX512VNNI) {
        qsim_gemm_vnni(A, rows, M, taps, T, K4, (const int8_t *)B, N, colcorr, rowcorr, out, ldo);
        return;
    }
    if (isa == QSIM_ISA_AVX2) {
        qsim_gemm_avx2(A, rows, M, taps, T, K4, (const int16_t *)B, N, colcorr, rowcorr, out, ldo);
        return;
    }
#endif
    qsim_gemm_portable(A, rows, M, taps, T, K4, (const int8_t *)B, N, colcorr, rowcorr, out, ldo);
}

/* ------------------------------------------------------------ int16 modes ----------------
 * CONV/FC 16x8 and MATMUL 16x16: A int16 (zero points are 0 in these modes, so padding is 0),
 * Wt int16 [N][T*K] with K values per tap, acc int64 (the spec's int48_t accumulator; the
 * caller proved T*K*2^30 + |bias| < 2^47, so no partial sum leaves int48).
 */
QSIM_INLINE void qsim_gemm_i16_body(const int16_t *A, const int64_t *rows, int64_t M,
                                    const int64_t *taps, int64_t T, int64_t K,
                                    const int16_t *Wt, int64_t N, const int64_t *bias,
                                    int64_t *out) {
    for (int64_t p = 0; p < M; p++)
        for (int64_t j = 0; j < N; j++) {
            int64_t acc = 0;
            const int16_t *w = Wt + j * T * K;
            for (int64_t t = 0; t < T; t++) {
                const int16_t *a = A + rows[p] + taps[t];
                for (int64_t k = 0; k < K; k++) acc += (int64_t)((int32_t)a[k] * (int32_t)w[t * K + k]);
            }
            out[p * N + j] = acc + (bias ? bias[j] : 0);
        }
}
QSIM_VERSIONS(qsim_gemm_i16,
    (const int16_t *A, const int64_t *rows, int64_t M, const int64_t *taps, int64_t T, int64_t K,
     const int16_t *Wt, int64_t N, const int64_t *bias, int64_t *out),
    (A, rows, M, taps, T, K, Wt, N, bias, out))

#include "qgemm_i16.h"

#endif
