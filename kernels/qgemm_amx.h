/* The int8 GEMM of qgemm.h on AMX tiles (Intel AMX-INT8: TDPBUSD), for CPUs that report
 * amx_tile and amx_int8 and whose OS grants the tile data permission (cpu_features.h).
 *
 * Operands: the same as the VNNI path, in the same layouts. A is the uint8 buffer of
 * a' = x + 128 read through rows[] and taps[]; B is the VNNI packing (panels of up to 64
 * columns, for each K quad the panel's columns x 4 bytes), so a B tile is 16 consecutive quad
 * rows of 16 columns, loaded with the panel's row stride (width * 4 bytes). When K is not a
 * multiple of 64 the last B tile also reads up to 15 quad rows past the panel's K (the next
 * panel, or the zero slack qsim_pack_bytes adds after the last one): they meet A's zero K
 * padding, and 0 * w adds 0.
 *
 * A tiles need 16 rows of 64 contiguous K bytes at one stride. Where a tile's 16 rows are
 * equally spaced in the buffer and each tap's run of 4*K4 bytes is whole tiles
 * (FULLY_CONNECTED, MATMUL and 1x1 convolutions with channels a multiple of 64; a 3x3 conv's
 * tiles inside one output row), the tile loads from the buffer in place. Otherwise (a tile
 * across two output rows, a run that ends inside a tile, the last rows of M) its rows are first
 * copied into a per-thread scratch [rows][KP] (KP = K rounded up to 64; the pad bytes are 0,
 * rows past M are zero and never stored), once per block of QSIM_AMX_MC rows for every panel
 * of B.
 *
 * Exactness: TDPBUSD adds, to each int32 lane, four products u8 x s8 (each within
 * [-32640, 32385], their sum within [-130560, 129540]) and wraps modulo 2^32 like vpdpbusd
 * (no saturation: the SDM's DPBD is a plain 32-bit add). A's zero K padding adds 0 whatever B
 * holds there. So every tile accumulator equals sum_k a'(p,k) w(k,n) modulo 2^32 whatever the
 * length of K; the column corrections go in modulo 2^32 either as the tiles' starting values
 * (full blocks without row corrections) or in the epilogue with the row corrections
 * (vpaddd/vpsubd), and the caller's bound proof
 * (|every partial sum of the spec's accumulation| <= 2^31 - 1, gemm_ops.py) makes the stored
 * value the spec's, exactly as on the VNNI path: no K split is needed for exactness (the VNNI
 * path splits long K only for the cache), and none is made here.
 *
 * Tiles: 0-3 accumulators (2 row tiles x 2 column tiles = 32 rows x 32 columns of int32), 4-5
 * the A tiles (16 rows x 64 bytes), 6-7 the B tiles (16 quad rows x 64 bytes); per 64 bytes of
 * K: 4 loads, 4 TDPBUSD. The configuration is loaded at the start of each call and released at
 * the end (the tile state is per thread; the permission is per process, cpu_features.h).
 * Loop order: per row block, column blocks of B that stay in L2; in one, each 32-row slab of
 * A (in L1 for K up to ~1 KiB) meets every column pair before the next slab.
 * qsim_gemm_amx_s8 is the same GEMM with A holding int8 x itself (TDPBSSD, s8 x s8: each
 * product within [-16256, 16384], four per lane added modulo 2^32 the same way): MATMUL reads
 * its operand in place, with the corrections of the unshifted operand (tosa_ops.pyx).
 * The scratch of each thread is kept for the next call (at most QSIM_AMX_MC * KP bytes of the
 * largest K it met) and never freed: the pool's threads live as long as the process.
 */
#ifndef QSIM_QGEMM_AMX_H
#define QSIM_QGEMM_AMX_H

#include <stdlib.h>
#include "cpu_features.h"
#include "isa_paths.h"

#define QSIM_AMX_MC 256   /* rows per scratch block of A (256 * KP bytes, in L2) */

#if QSIM_X86

#define QSIM_AMX_KB 64    /* K bytes per tile step (a tile row) */
#ifndef QSIM_AMX_L2_BYTES
#define QSIM_AMX_L2_BYTES (1 << 20)   /* bytes of B a column block keeps in L2 */
#endif
#define QSIM_TARGET_AMX __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq")))

static inline int64_t qsim_amx_kpad(int64_t K) { return (K + QSIM_AMX_KB - 1) / QSIM_AMX_KB * QSIM_AMX_KB; }

/* columns per block of B: whole 64-column panels, K x columns <= QSIM_AMX_L2_BYTES (at least
 * one panel) */
static inline int64_t qsim_amx_column_block(int64_t KP, int64_t NP) {
    int64_t panels = QSIM_AMX_L2_BYTES / (KP * QSIM_VNNI_PANEL);
    if (panels < 1) panels = 1;
    return panels * QSIM_VNNI_PANEL < NP ? panels * QSIM_VNNI_PANEL : NP;
}

/* 1 once this process may run tile instructions, -1 when it may not (checked at the first
 * AMX call, so a caller that skipped the feature detection gets the VNNI path, not SIGILL) */
static int qsim_amx_allowed;

static int qsim_amx_permitted(void) {
    int state = __atomic_load_n(&qsim_amx_allowed, __ATOMIC_ACQUIRE);
    if (state == 0) {
        state = qsim_cpu_has_amx_int8() ? 1 : -1;
        __atomic_store_n(&qsim_amx_allowed, state, __ATOMIC_RELEASE);
    }
    return state > 0;
}

/* The per-thread A scratch, kept between calls. */
static __thread uint8_t *qsim_amx_scratch;
static __thread size_t qsim_amx_scratch_bytes;

static uint8_t *qsim_amx_scratch_for(size_t bytes) {
    if (bytes > qsim_amx_scratch_bytes) {
        free(qsim_amx_scratch);
        qsim_amx_scratch = (uint8_t *)aligned_alloc(64, (bytes + 63) / 64 * 64);
        qsim_amx_scratch_bytes = qsim_amx_scratch ? bytes : 0;
    }
    return qsim_amx_scratch;
}

/* rows[0..m) of the implicit GEMM into S[r][KP] (taps side by side, zero K padding), zero
 * rows from m up to 16 (the tile's rows past M: computed, never stored) */
static void qsim_amx_pack_tile(const uint8_t *A, const int64_t *rows, int64_t m,
                               const int64_t *taps, int64_t T, int64_t K4, int64_t KP, uint8_t *S) {
    const int64_t run = 4 * K4, K = T * run;
    for (int64_t r = 0; r < m; r++) {
        uint8_t *d = S + r * KP;
        for (int64_t t = 0; t < T; t++) memcpy(d + t * run, A + rows[r] + taps[t], (size_t)run);
        memset(d + K, 0, (size_t)(KP - K));
    }
    if (m < 16) memset(S + m * KP, 0, (size_t)((16 - m) * KP));
}

/* Where an A tile's 16 rows are read: row i, K byte t*run + j at base + i*stride + taps[t] + j.
 * In place: the buffer's row origin, spacing and tap offsets. From the scratch: S's row, KP
 * and the taps' positions there (t * run). */
typedef struct {
    const uint8_t *base;
    int64_t stride;
    const int64_t *taps;
} qsim_amx_source;

/* One 32x32 (or 16-row / 16-column) block: tiles 0..3 <- init + sum over K of A rows x B
 * columns (init: 0, or, for a full block, the 32 columns' corrections, the same in every row).
 * K is T runs of `run` bytes (run a multiple of 64) for both A tiles. a_resident: K is one
 * 64-byte step and the caller loaded the A tiles 4 (and 5) already (kept for a slab's every
 * column pair: half the tile loads of a 32x32 block when K <= 64, attention's QK^T). */
static inline __attribute__((always_inline)) QSIM_TARGET_AMX void
qsim_amx_block(const int signed_a, const int two_rows, const int two_cols, const int a_resident, qsim_amx_source a0,
               qsim_amx_source a1, int64_t T, int64_t run, const int8_t *bcol, int64_t bstride,
               const int32_t *init) {
    if (init) {     /* stride 0: the 16 corrections of a tile's columns in each of its rows */
        _tile_loadd(0, init, 0);
        _tile_loadd(1, init + 16, 0);
        _tile_loadd(2, init, 0);
        _tile_loadd(3, init + 16, 0);
    } else {
        _tile_zero(0);
        if (two_cols) _tile_zero(1);
        if (two_rows) _tile_zero(2);
        if (two_rows && two_cols) _tile_zero(3);
    }
    const int8_t *b = bcol;
    for (int64_t t = 0; t < T; t++) {
        const uint8_t *at0 = a0.base + a0.taps[t], *at1 = a1.base + a1.taps[t];
        /* per step: A 16 rows x 64 K bytes; B 16 quad rows (those 64 K bytes) of 16 columns,
         * the next 16 columns 64 bytes on */
        for (int64_t j = 0; j < run; j += QSIM_AMX_KB, b += (QSIM_AMX_KB / 4) * bstride) {
            if (!a_resident) _tile_loadd(4, at0 + j, a0.stride);
            _tile_loadd(6, b, bstride);
            if (two_cols) _tile_loadd(7, b + 64, bstride);
            if (two_rows && !a_resident) _tile_loadd(5, at1 + j, a1.stride);
            if (signed_a) {      /* s8 x s8: A holds x itself (qsim_gemm_amx_s8) */
                _tile_dpbssd(0, 4, 6);
                if (two_cols) _tile_dpbssd(1, 4, 7);
                if (two_rows) _tile_dpbssd(2, 5, 6);
                if (two_rows && two_cols) _tile_dpbssd(3, 5, 7);
            } else {
                _tile_dpbusd(0, 4, 6);
                if (two_cols) _tile_dpbusd(1, 4, 7);
                if (two_rows) _tile_dpbusd(2, 5, 6);
                if (two_rows && two_cols) _tile_dpbusd(3, 5, 7);
            }
        }
    }
}

/* 1 when rows[0..16) are equally spaced (the 16 rows an A tile loads) */
static inline int qsim_amx_evenly_spaced(const int64_t *rows) {
    const int64_t step = rows[1] - rows[0];
    if (step <= 0) return 0;
    for (int64_t i = 2; i < 16; i++)
        if (rows[i] - rows[0] != i * step) return 0;
    return 1;
}

/* acc[32][32] (tiles stored) + colcorr - rowcorr -> out, m rows x ncols columns */
static inline __attribute__((always_inline)) QSIM_TARGET_AMX void
qsim_amx_epilogue(const int32_t *acc, int64_t m, int64_t ncols, const int32_t *colcorr,
                  const int32_t *rowcorr, int32_t *out, int64_t ldo) {
    for (int64_t v = 0; v < 2 && 16 * v < ncols; v++) {
        const int64_t left = ncols - 16 * v;
        const __mmask16 mask = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
        const __m512i cc = _mm512_maskz_loadu_epi32(mask, colcorr + 16 * v);
        for (int64_t r = 0; r < m; r++) {
            __m512i x = _mm512_add_epi32(_mm512_loadu_si512((const void *)(acc + r * 32 + 16 * v)), cc);
            if (rowcorr) x = _mm512_sub_epi32(x, _mm512_set1_epi32(rowcorr[r]));
            _mm512_mask_storeu_epi32(out + r * ldo + 16 * v, mask, x);
        }
    }
}

#define QSIM_AMX_STORE(tile, offset) _tile_stored(tile, acc + (offset), 32 * 4)

/* One block of m <= 32 rows x ncols <= 32 columns into out (see qsim_gemm_amx). Full 32x32
 * blocks without row corrections start from the column corrections and store the tiles
 * straight into out: no epilogue pass (what small K, e.g. attention's 64, spends most on);
 * others go through acc and the epilogue. */
static inline __attribute__((always_inline)) QSIM_TARGET_AMX void
qsim_amx_block_out(const int signed_a, int64_t m, int two_cols, int64_t ncols, int a_resident,
                   qsim_amx_source a0, qsim_amx_source a1,
                   int64_t KT, int64_t run, const int8_t *bcol, int64_t bstride,
                   const int32_t *colcorr, const int32_t *rowcorr, int32_t *out, int64_t ldo,
                   int32_t *acc) {
    if (ncols == 32 && !rowcorr && m == 32) {
        qsim_amx_block(signed_a, 1, 1, a_resident, a0, a1, KT, run, bcol, bstride, colcorr);
        _tile_stored(0, out, ldo * 4); _tile_stored(1, out + 16, ldo * 4);
        _tile_stored(2, out + 16 * ldo, ldo * 4); _tile_stored(3, out + 16 * ldo + 16, ldo * 4);
        return;
    }
    if (m > 16 && two_cols) {
        qsim_amx_block(signed_a, 1, 1, a_resident, a0, a1, KT, run, bcol, bstride, 0);
        QSIM_AMX_STORE(0, 0); QSIM_AMX_STORE(1, 16);
        QSIM_AMX_STORE(2, 16 * 32); QSIM_AMX_STORE(3, 16 * 32 + 16);
    } else if (m > 16) {
        qsim_amx_block(signed_a, 1, 0, a_resident, a0, a1, KT, run, bcol, bstride, 0);
        QSIM_AMX_STORE(0, 0); QSIM_AMX_STORE(2, 16 * 32);
    } else if (two_cols) {
        qsim_amx_block(signed_a, 0, 1, a_resident, a0, a1, KT, run, bcol, bstride, 0);
        QSIM_AMX_STORE(0, 0); QSIM_AMX_STORE(1, 16);
    } else {
        qsim_amx_block(signed_a, 0, 0, a_resident, a0, a1, KT, run, bcol, bstride, 0);
        QSIM_AMX_STORE(0, 0);
    }
    qsim_amx_epilogue(acc, m, ncols, colcorr, rowcorr, out, ldo);
}

/* out[p][n] = sum_k a'(p,k) w(k,n) + colcorr[n] - rowcorr[p] (modulo 2^32), as qsim_gemm_vnni.
 * Returns 0, or -1 when the process may not use AMX or the scratch could not be allocated
 * (nothing written: the caller runs the VNNI path on the same operands). */
static inline __attribute__((always_inline)) QSIM_TARGET_AMX int
qsim_gemm_amx_body(const int signed_a, const uint8_t *A, const int64_t *rows, int64_t M,
                   const int64_t *taps, int64_t T, int64_t K4, const int8_t *B, int64_t N,
                   const int32_t *colcorr, const int32_t *rowcorr, int32_t *out, int64_t ldo) {
    const int64_t K = T * K4 * 4, KP = qsim_amx_kpad(K), NP = (N + 15) / 16 * 16;
    const int64_t mc = M < QSIM_AMX_MC ? (M + 15) / 16 * 16 : QSIM_AMX_MC;
    /* whole tiles of taps: A tiles may load in place, K walks tap by tap; else the scratch
     * holds whole rows and K is one run of KP */
    const int by_tap = (4 * K4) % QSIM_AMX_KB == 0;
    const int64_t KT = by_tap ? T : 1, run = by_tap ? 4 * K4 : KP;
    const int64_t nb = qsim_amx_column_block(KP, NP);
    const int resident = KT * run == QSIM_AMX_KB;    /* one K step: A tiles kept per slab */
    if (!qsim_amx_permitted()) return -1;
    uint8_t *S = qsim_amx_scratch_for((size_t)(mc * KP) + (size_t)KT * sizeof(int64_t));
    if (!S) return -1;
    int64_t *stap = (int64_t *)(S + mc * KP);    /* the taps' positions in a scratch row */
    for (int64_t t = 0; t < KT; t++) stap[t] = t * run;
    /* palette 1; every tile 16 rows x 64 bytes (C: 16 x 16 int32, A: 16 rows x 64 K bytes,
     * B: 16 K quads x 16 columns x 4 bytes) */
    unsigned char config[64] __attribute__((aligned(64)));
    memset(config, 0, sizeof config);
    config[0] = 1;
    for (int t = 0; t < 8; t++) {
        config[16 + 2 * t] = 64;
        config[48 + t] = 16;
    }
    _tile_loadconfig(config);
    int32_t acc[32 * 32] __attribute__((aligned(64)));
    qsim_amx_source src[QSIM_AMX_MC / 16];       /* where each 16-row tile of the block reads */
    for (int64_t mb = 0; mb < M; mb += mc) {
        const int64_t mrows = M - mb < mc ? M - mb : mc;
        for (int64_t r0 = 0; r0 < mrows; r0 += 16) {
            const int64_t *tr = rows + mb + r0;
            if (by_tap && mrows - r0 >= 16 && qsim_amx_evenly_spaced(tr)) {
                src[r0 / 16] = (qsim_amx_source){A + tr[0], tr[1] - tr[0], taps};
            } else {
                const int64_t m = mrows - r0 < 16 ? mrows - r0 : 16;
                qsim_amx_pack_tile(A, tr, m, taps, T, K4, KP, S + r0 * KP);
                src[r0 / 16] = (qsim_amx_source){S + r0 * KP, KP, stap};
            }
        }
        /* column blocks of B that stay in L2 (nb columns x K bytes <= QSIM_AMX_L2_BYTES); in a
         * block, each 32-row slab of A (32 x K bytes, in L1 for K up to ~1 KiB) meets every
         * column pair before the next slab */
        for (int64_t n0 = 0; n0 < NP; n0 += nb) {
            const int64_t nend = NP - n0 < nb ? NP : n0 + nb;
            for (int64_t r0 = 0; r0 < mrows; r0 += 32) {
                const int64_t m = mrows - r0 < 32 ? mrows - r0 : 32;
                const qsim_amx_source a0 = src[r0 / 16], a1 = m > 16 ? src[r0 / 16 + 1] : a0;
                const int64_t p = mb + r0;
                if (resident) {
                    _tile_loadd(4, a0.base + a0.taps[0], a0.stride);
                    if (m > 16) _tile_loadd(5, a1.base + a1.taps[0], a1.stride);
                }
                for (int64_t p0 = n0; p0 < nend; p0 += QSIM_VNNI_PANEL) {
                    const int64_t width = NP - p0 < QSIM_VNNI_PANEL ? NP - p0 : QSIM_VNNI_PANEL;
                    const int8_t *panel = B + p0 * K;
                    for (int64_t c0 = 0; c0 < width; c0 += 32)
                        qsim_amx_block_out(signed_a, m, width - c0 >= 32, N - p0 - c0 < 32 ? N - p0 - c0 : 32,
                                           resident, a0, a1, KT, run, panel + c0 * 4, width * 4,
                                           colcorr + p0 + c0, rowcorr ? rowcorr + p : 0,
                                           out + p * ldo + p0 + c0, ldo, acc);
                }
            }
        }
    }
    _tile_release();
    return 0;
}

static QSIM_TARGET_AMX int
qsim_gemm_amx(const uint8_t *A, const int64_t *rows, int64_t M, const int64_t *taps, int64_t T,
              int64_t K4, const int8_t *B, int64_t N, const int32_t *colcorr,
              const int32_t *rowcorr, int32_t *out, int64_t ldo) {
    return qsim_gemm_amx_body(0, A, rows, M, taps, T, K4, B, N, colcorr, rowcorr, out, ldo);
}

/* The same GEMM with A holding int8 x itself (no +128 shift, no activation buffer: MATMUL reads
 * its operand A in place), TDPBSSD (s8 x s8, each product within [-16256, 16384], four per
 * lane added modulo 2^32 like TDPBUSD): out = sum_k x w + colcorr - rowcorr modulo 2^32, the
 * caller's corrections made for x (tosa_ops.pyx matmul_i8). Returns -1 as qsim_gemm_amx. */
static QSIM_TARGET_AMX int
qsim_gemm_amx_s8(const int8_t *A, const int64_t *rows, int64_t M, const int64_t *taps, int64_t T,
                 int64_t K4, const int8_t *B, int64_t N, const int32_t *colcorr,
                 const int32_t *rowcorr, int32_t *out, int64_t ldo) {
    return qsim_gemm_amx_body(1, (const uint8_t *)A, rows, M, taps, T, K4, B, N, colcorr, rowcorr, out, ldo);
}

#else  /* no AMX off x86: the callers' checks see it refused */
static int qsim_amx_permitted(void) { return 0; }
static int qsim_gemm_amx_s8(const int8_t *A, const int64_t *rows, int64_t M, const int64_t *taps, int64_t T,
                            int64_t K4, const int8_t *B, int64_t N, const int32_t *colcorr,
                            const int32_t *rowcorr, int32_t *out, int64_t ldo) {
    (void)A; (void)rows; (void)M; (void)taps; (void)T; (void)K4; (void)B; (void)N; (void)colcorr;
    (void)rowcorr; (void)out; (void)ldo;
    return -1;
}
#endif /* QSIM_X86 */
#endif
