# cython: language_level=3
"""Quantizer inner loops that numpy cannot vectorise (sequential per output channel).

round_passes: the greedy coordinate descent of qsim/quant/rounding.py's adaptive_round, one
output channel at a time (kernels/round_passes.h, one copy per instruction-set path).
Channels never interact, so rows [lo, hi) can run on their own thread (the GIL is
released); per channel the arithmetic is the numpy loop's, operation by operation in the
same order (gain = (2*delta)*grad + (delta*delta)*diag, grad += delta*H[j]), so the
integers are identical to the numpy version for any split of the rows and any path.

conv_patches_f32: a convolution's input patches, gathered for the moments adaptive rounding reads.
The build passes -ffp-contract=off: no fused multiply-add may change a rounding.

scan_f32, scan_bins_f32, add_bin_counts_f32: the calibration observers' pass over one float32
activation (range, exact zeros, finiteness; histogram bin counts; kernels/scan_stats.h, vector
code per ISA path) instead of numpy's float64 copy and half a dozen temporaries; integers and
exact extremes, so the histograms are the ones numpy's formulation gives.
"""
from libc.stdint cimport int64_t
from libc.math cimport frexp, floor
from libc.stdlib cimport malloc, free


cdef extern from "round_passes.h" nogil:
    void qsim_round_channel(int isa, double *q, const double *fl, const double *ce, double *gr,
                            const double *h, int64_t K, double tol, int64_t max_passes,
                            double stop_fraction, double objective, int64_t *passes)
    void qsim_round_block(int isa, double *q, const double *fl, const double *ce, float *rs,
                            const float *xt, int64_t P, double *g, const double *hb, int64_t b,
                            const double *diag, double tol, int64_t j0, int64_t *moved,
                            double *drop)


def round_passes(int isa, double[:, ::1] q, const double[:, ::1] floor_, const double[:, ::1] ceil_,
                 double[:, ::1] grad, const double[:, :, ::1] h, const int64_t[::1] group_of,
                 double tol, int max_passes, int64_t lo, int64_t hi, double stop_fraction,
                 double[::1] objective, int64_t[::1] passes):
    """Runs up to max_passes passes over the K weights of channels lo..hi-1 in place:
    q [OC, K] current integers (as float), floor_/ceil_ the two candidates, grad = H e,
    h [groups, K, K], group_of[o] the group of channel o.
    A channel stops after a pass with no move, or whose moves lowered its objective by less
    than stop_fraction times objective[o] (e^T H e at nearest rounding; stop_fraction 0: only
    the first rule); passes[o] = the passes it ran. Per channel kernels/round_passes.h, on
    the instruction-set path `isa` (qsim/kernels/cpu_features.py; the same bits on each)."""
    cdef int64_t o, K = q.shape[1]
    if hi <= lo or K == 0:
        return
    with nogil:
        for o in range(lo, hi):
            qsim_round_channel(isa, &q[o, 0], &floor_[o, 0], &ceil_[o, 0], &grad[o, 0],
                               &h[group_of[o], 0, 0], K, tol, max_passes, stop_fraction,
                               objective[o], &passes[o])


# The observers' and evaluation statistics' entry points take the ISA path (and add_error_stats
# the sample size and running totals) since this version: a build without this name is older
# sources, which qsim/kernels/extensions.py reports as out of date instead of a TypeError.
STATS_SIGNATURES = 2


cdef extern from "scan_stats.h" nogil:
    int qsim_scan_f32(int isa, const float *x, int64_t n, double inv, int64_t first, int64_t *counts,
                      int64_t size, float *lo, float *hi, int64_t *zeros, int *finite, int *inside)
    double qsim_pairwise_f32(int isa, const float *a, int64_t n)


cdef enum:
    SCAN_MAX_BINS = 1 << 20     # scan_stats.h's int32 slots and float32 bins need < 2^24; observers use ~2^11


cdef tuple _scan(int isa, const float[::1] x, int log2_width, int64_t first, int64_t[::1] counts):
    """(min, max, exact zeros, all finite, inside) of kernels/scan_stats.h's pass over x, with
    counts (not None) binned at width 2^log2_width from bin `first`; x is not empty."""
    cdef float lo = 0, hi = 0
    cdef int64_t zeros = 0
    cdef int finite = 1, inside = 1, ok = 1
    cdef int64_t *c = NULL
    cdef int64_t size = 0
    cdef double inv = 1.0
    if counts is not None:
        size = counts.shape[0]
        # bin indices of real values stay below 2^53 in magnitude (observers.py MANTISSA_BITS):
        # first is then a double, and every in-range bin an exact difference
        if size > SCAN_MAX_BINS or first > (<int64_t>1 << 53) or first < -(<int64_t>1 << 53):
            raise ValueError(f"scan: {size} bins from {first}: beyond the observer's histograms")
        inv = 2.0 ** (-log2_width)
        c = &counts[0] if size else NULL
    with nogil:
        ok = qsim_scan_f32(isa, &x[0], x.shape[0], inv, first, c, size, &lo, &hi, &zeros, &finite, &inside)
    if not ok:
        raise MemoryError("scan: histogram copies")
    return <double>lo, <double>hi, zeros, bool(finite), bool(inside and (counts is None or size > 0))


def scan_f32(int isa, const float[::1] x):
    """(min, max, number of exact zeros, all finite) of float32 values in one pass, for the
    calibration observers (qsim/quant/observers.py); min and max are exact (as doubles; a
    zero extreme is the first zero of x, sign included). kernels/scan_stats.h on the ISA
    path `isa` (qsim/kernels/cpu_features.py): the same results on every path."""
    if x.shape[0] == 0:
        return 0.0, 0.0, 0, True
    return _scan(isa, x, 0, 0, None)[:4]


def scan_bins_f32(int isa, const float[::1] x, int log2_width, int64_t first, int64_t[::1] counts):
    """scan_f32 and add_bin_counts_f32 in one pass, for a histogram whose bins are already
    set: returns (min, max, exact zeros, all finite, inside) and adds every value's bin to
    counts[floor(v / 2^log2_width) - first] while it falls inside counts. inside is False when
    a value fell outside (counts then hold only part of the values and the caller discards
    them) or was not finite. Extremes, zeros and counts are exact, as in the two passes.
    When a value is not finite, everything but `finite` is unspecified (the caller raises)."""
    if x.shape[0] == 0:
        return 0.0, 0.0, 0, True, True
    return _scan(isa, x, log2_width, first, counts)


def add_bin_counts_f32(int isa, const float[::1] x, int log2_width, int64_t first, int64_t[::1] counts):
    """counts[floor(v / 2^log2_width) - first] += 1 for every v of x. Exact: a float32 widened
    to double and scaled by a power of two is exact while |v| / width < 2^53 (the observer
    chooses the width so), and the floor of such a double is an exact integer. The caller sizes
    counts to cover floor(min / width) .. floor(max / width) (a value outside is not counted)."""
    if x.shape[0]:
        _scan(isa, x, log2_width, first, counts)


def row_sums_f64(const float[:, :, :] p, double[:, ::1] out):
    """out[g, k] = sum over i of p[g, i, k] in float64, added in order i = 0, 1, ... -- the
    order numpy's p.sum(axis=1, dtype=np.float64) takes for K >= 2 (tested; for K == 1 numpy
    sums pairwise, and the caller keeps numpy), at memory speed instead of numpy's
    buffered cast along a strided axis."""
    cdef Py_ssize_t g, i, k, G = p.shape[0], P = p.shape[1], K = p.shape[2]
    with nogil:
        for g in range(G):
            for k in range(K):
                out[g, k] = 0.0
            for i in range(P):
                for k in range(K):
                    out[g, k] = out[g, k] + <double>p[g, i, k]


def conv_patches_f32(const float[:, :, :, :] x, float[:, :, :] out, int64_t groups,
                     int64_t KH, int64_t KW, int64_t sy, int64_t sx, int64_t dy, int64_t dx,
                     int64_t pt, int64_t pl, int64_t OH, int64_t OW):
    """The input patches of an NCHW convolution for adaptive rounding's moments
    (qsim/quant/conv_geometry.py conv_patches): out[g, (n*OH + oy)*OW + ox, (c*KH + ky)*KW + kx] =
    x[n, g*icg + c, oy*sy + ky*dy - pt, ox*sx + kx*dx - pl], 0.0 outside the input (padding).
    A copy: the same floats as the numpy formulation (pad, sliding window, transpose), in one
    pass over the output instead of a padded copy and a 7-axis strided copy. Any strides, but
    out's last axis contiguous (a pending buffer's tail is strided along the others)."""
    if out.shape[2] > 1 and out.strides[2] != sizeof(float):
        raise ValueError("conv_patches_f32: out's last axis must be contiguous")
    cdef int64_t N = x.shape[0], H = x.shape[2], W = x.shape[3]
    cdef int64_t icg = x.shape[1] // groups, g, n, oy, ox, c, ky, kx, iy, ix, row
    # strides in floats (a float32 array's strides are multiples of 4 bytes)
    cdef int64_t xs0 = x.strides[0] // 4, xs1 = x.strides[1] // 4, xs2 = x.strides[2] // 4
    cdef int64_t xs3 = x.strides[3] // 4, os0 = out.strides[0] // 4, os1 = out.strides[1] // 4
    cdef const float *xb
    cdef const float *src
    cdef float *ob
    cdef float *dst
    if N == 0 or OH <= 0 or OW <= 0 or out.shape[2] == 0 or groups == 0:
        return
    xb = &x[0, 0, 0, 0]
    ob = &out[0, 0, 0]
    with nogil:
        if os0 < os1:
            # rows outermost: out's groups of one row are side by side (PatchMoments' row-major
            # buffer), so the writes go through memory in order
            row = 0
            for n in range(N):
                for oy in range(OH):
                    for ox in range(OW):
                        for g in range(groups):
                            _patch(xb + n * xs0 + g * icg * xs1, ob + g * os0 + row * os1, icg, KH, KW,
                                   oy * sy - pt, ox * sx - pl, dy, dx, H, W, xs1, xs2, xs3)
                        row += 1
        else:
            for g in range(groups):
                row = 0
                for n in range(N):
                    for oy in range(OH):
                        for ox in range(OW):
                            _patch(xb + n * xs0 + g * icg * xs1, ob + g * os0 + row * os1, icg, KH, KW,
                                   oy * sy - pt, ox * sx - pl, dy, dx, H, W, xs1, xs2, xs3)
                            row += 1


cdef inline void _patch(const float *xg, float *dst, int64_t icg, int64_t KH, int64_t KW,
                        int64_t y0, int64_t x0, int64_t dy, int64_t dx, int64_t H, int64_t W,
                        int64_t xs1, int64_t xs2, int64_t xs3) noexcept nogil:
    """One patch row: dst[(c*KH + ky)*KW + kx] = x_g[c, y0 + ky*dy, x0 + kx*dx], 0 outside."""
    cdef int64_t c, ky, kx, iy, ix
    cdef const float *src
    for c in range(icg):
        for ky in range(KH):
            iy = y0 + ky * dy
            if iy < 0 or iy >= H:
                for kx in range(KW):
                    dst[kx] = 0.0
            else:
                src = xg + c * xs1 + iy * xs2
                for kx in range(KW):
                    ix = x0 + kx * dx
                    dst[kx] = src[ix * xs3] if 0 <= ix < W else 0.0
            dst += KW


cdef inline int64_t _edge_bin(double v, double first, double last, double inv_width,
                              const double *edges, int64_t bins) noexcept nogil:
    """The bin of np.histogram(np.clip(v, first, last), bins, (first, last)) (v not NaN):
    numpy's equal-width index ((v - first) / (last - first)) * bins, then its corrections
    against the exact edges. inv_width is 1 / (last - first) when that is a power of two
    (then x * inv_width == x / (last - first) exactly, one division fewer), else 0."""
    cdef int64_t j
    if v < first:
        v = first
    elif v > last:
        v = last
    if inv_width != 0.0:
        j = <int64_t>(((v - first) * inv_width) * <double>bins)
    else:
        j = <int64_t>(((v - first) / (last - first)) * <double>bins)
    if j == bins:
        j -= 1
    if v < edges[j]:
        j -= 1
    if v >= edges[j + 1] and j != bins - 1:
        j += 1
    return j


cdef double _exact_inverse(double width):
    """1 / width when width is a power of two (an exact reciprocal), else 0."""
    cdef int e
    if width > 0.0 and frexp(width, &e) == 0.5:
        return 1.0 / width
    return 0.0


def add_clipped_histogram(const double[::1] x, double first, double last, const double[::1] edges,
                          int64_t[::1] counts):
    """counts += np.histogram(np.clip(x, first, last), bins=len(counts), range=(first, last))[0]
    for the evaluation's error histograms, in one pass: numpy's equal-width algorithm step by
    step (index ((v - first) / (last - first)) * bins, then the edge corrections against
    edges = np.linspace(first, last, bins + 1)); NaN is counted nowhere, as there."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef int64_t bins = counts.shape[0]
    cdef double v, inv_width = _exact_inverse(last - first)
    with nogil:
        for i in range(n):
            v = x[i]
            if v == v:
                counts[_edge_bin(v, first, last, inv_width, &edges[0], bins)] += 1


from libc.math cimport fabs, NAN
from libc.stdint cimport int32_t

cdef extern from "eval_stats.h" nogil:
    int QSIM_STATS_LANES
    void qsim_stats_errors(int isa, int q_bytes, const void *q, int64_t stride, int f_bytes,
                           const void *f, int64_t m, int64_t zp, double scale, double *e)
    void qsim_stats_sums_f32(int isa, const float *f, const double *e, int64_t m, double *sums)
    void qsim_stats_sums_f64(int isa, const double *f, const double *e, int64_t m, double *sums)
    int64_t qsim_stats_slots(int isa, const double *e, int64_t m, double r, double first, double inv_step,
                             double tol_k, int32_t bins, int32_t *slot, int32_t *near, int64_t *n_near,
                             int64_t *zeros)
    void qsim_stats_count(const int32_t *slot, int64_t n, int64_t *lanes)
    void qsim_stats_rows_i8(const signed char *src, int64_t s2, int64_t rows, int64_t D, signed char *out)
    int64_t qsim_quantize(int isa, int x_bytes, const void *x, int64_t n, double scale, int64_t zp,
                          int64_t qmin, int64_t qmax, int q_bytes, void *out)
    int64_t qsim_stats_block_i8_f32(int isa, const signed char *q, const float *f, int64_t m, int32_t zp,
                                    double scale, double r, double first, double inv_step, double tol_k,
                                    double tol_max, int32_t bins, double *e, double *sums, int32_t *slot,
                                    int32_t *near, int64_t *n_near, int64_t *zeros)

cdef enum:
    STATS_BLOCK = 1024     # add_error_stats' blocks: its sums' fixed order
    STATS_MAX_BINS = 256
    STATS_LANES = 8        # interleaved copies of the histogram (eval_stats.h QSIM_STATS_LANES)
    STATS_LANE_STRIDE = 264    # counters from one copy to the next (eval_stats.h QSIM_STATS_LANE_STRIDE)
    STATS_TILE_BYTES = 1 << 19     # add_error_stats' transposed rows of q (L2-sized)

# |zp| below this: q - zp fits an int32 for 16-bit codes (eval_stats.h qsim_stats_errors' unit path)
cdef int64_t STATS_ZP_LIMIT = (<int64_t>1 << 31) - (1 << 16)

ctypedef fused int_codes:
    signed char
    short
    int
    int64_t

ctypedef fused real_values:
    float
    double


cdef bint _is_power_of_two_grid(const double[::1] edges, int64_t bins, double *step):
    """True when edges[k] == first + k * w exactly (as real numbers) with w a power of two:
    w = (last - first) / bins exact, first a whole multiple of w (so every first + k * w is a
    double) and each edge equal to it."""
    cdef double first = edges[0], w = (edges[bins] - edges[0]) / <double>bins
    cdef int64_t k
    if _exact_inverse(w) == 0.0 or w * <double>bins != edges[bins] - first:
        return False
    if fabs(first / w) > 2.0 ** 52 or first / w != <double>(<int64_t>(first / w)):
        return False
    for k in range(bins + 1):
        if edges[k] != first + <double>k * w:
            return False
    step[0] = w
    return True


cdef void _copy_rows(const int_codes *src, int64_t s1, int64_t s2, int64_t rows, int64_t D,
                     int_codes *out) noexcept nogil:
    """out[g * D + d] = src[g * s1 + d * s2] for g < rows, d < D (strides in elements): rows of
    q gathered pixel by pixel, so each pixel's `rows` neighbouring codes are read together."""
    cdef int64_t g, d
    cdef const int_codes *px
    for d in range(D):
        px = src + d * s2
        for g in range(rows):
            out[g * D + d] = px[g * s1]


cdef void _fill_tile(const int_codes *base, int64_t a, int64_t b, int64_t s0, int64_t s1, int64_t s2,
                     int64_t rows, int64_t D, int_codes *tile) noexcept nogil:
    """Rows b..b+rows of sample a of q (strides s0, s1, s2) into `tile` in the float order."""
    if sizeof(int_codes) == 1:
        if s1 == 1:
            qsim_stats_rows_i8(<const signed char *>(base + a * s0 + b), s2, rows, D, <signed char *>tile)
            return
    _copy_rows(base + a * s0 + b * s1, s1, s2, rows, D, tile)


def add_error_stats(int isa, const int_codes[:, :, :] q, const real_values[::1] f, const double[::1] scale,
                    const int64_t[::1] zero_point, int64_t inner, double lsb_scale,
                    const double[::1] edges, int64_t[::1] counts, int64_t sample, double signal,
                    double noise, double[:, ::1] sample_sums=None):
    """One pass of the evaluation's per-tensor statistics (qsim/quant/evaluate.py
    _IntegerView.add). Per element (the definition): d = (q - zp[c]) * scale[c] in float64
    (params.dequantize), e = d - f, v = e / lsb_scale; counts += the histogram of v clipped to
    the edges' range in numpy's equal-width bins (np.histogram(np.clip(v, first, last), bins,
    (first, last)), as add_clipped_histogram; NaN counted nowhere); returns (signal + sum f^2,
    noise + sum e^2), summed in the order below.
    Element i of f (flat) is q[a, b, d] with i = (a * B + b) * D + d: q is a strided view (the
    float layout's transpose of the integer tensor, merged to three axes), read in place, or,
    when its rows interleave (an NHWC tensor read as NCHW: stride C along a row, 1 across
    rows), copied a tile of whole rows at a time into the float order (L2-sized, STATS_TILE_BYTES;
    8-bit codes by 8 x 8 byte transposes, eval_stats.h qsim_stats_rows_i8), so that each cache
    line of q is fetched once for many rows, not once per element. The
    channel of element i is (i // inner) % len(scale) (one scale: per tensor).

    Bins at memory speed with the same counts: on a grid edges[k] == first + k * w with w a
    power of two (ERROR_EDGES_LSB) the bin of v is floor((v - first) / w) clamped to the bins;
    it is taken from t = (e * (1 / lsb) - first) / w, a multiply instead of a division,
    whenever t is farther from every interior edge than the roundings separating it from v
    can move it (exact zeros are exact); the rare others, and every element on other edges,
    take the division and numpy's edge corrections. Exact zeros (e == 0, often a third of the
    elements: zeros in both graphs) are counted apart and added to the bin of 0 at the end; the
    other bins are packed and counted into interleaved copies of the histogram. The vector parts
    are kernels/eval_stats.h, on the ISA path `isa` (qsim/kernels/cpu_features.py; every path
    gives the same bits). A block whose codes are 8-bit, contiguous (in q or in the tile) and
    of one scale, with float32 values on the multiply path, takes the three passes at once
    (eval_stats.h qsim_stats_block_i8_f32: one pass in registers on the AVX-512 path).

    The sums, returned added to the running totals `signal` and `noise`: the elements come in
    samples of `sample` elements (f's length a multiple of it); per sample, blocks of
    STATS_BLOCK elements from its first element, element i into partial sum i % 4 of its
    block, combined as (s0 + s1) + (s2 + s3), the blocks added in order from 0, and the
    sample's total added to the running total; the samples in order. Fixed, so deterministic,
    the same bits however the samples are batched into calls (a batch of one sample a call is
    the same as many a call), and as accurate as numpy's pairwise sums to a few ulps (not the
    same bits). The build passes -ffp-contract=off (no fused multiply-add).
    `sample_sums` ([samples, 2], optional): each sample's (signal, noise) total is also written
    there, the values the running totals take in (qsim/quant/evaluation/distributed.py merges
    them in sample order: the bits of one running total)."""
    cdef int64_t A = q.shape[0], B = q.shape[1], D = q.shape[2]
    cdef Py_ssize_t n = A * B * D
    cdef int64_t C = scale.shape[0], bins = counts.shape[0]
    cdef int64_t item = sizeof(int_codes)
    if f.shape[0] != n or zero_point.shape[0] != C or C == 0 or inner <= 0 or sample <= 0 or n % sample:
        raise ValueError("add_error_stats: q, f, scale, zero_point and the sample size do not fit")
    if edges.shape[0] != bins + 1 or bins > STATS_MAX_BINS or bins == 0:
        raise ValueError("add_error_stats: edges must have len(counts) + 1 entries, 1..256 bins")
    if q.strides[0] % item or q.strides[1] % item or q.strides[2] % item:
        raise ValueError("add_error_stats: q's strides are not whole elements")
    if sample_sums is not None and (sample_sums.shape[0] != n // sample or sample_sums.shape[1] != 2):
        raise ValueError("add_error_stats: sample_sums must be [samples, 2]")
    if n == 0:
        return signal, noise
    cdef double *sample_out = &sample_sums[0, 0] if sample_sums is not None else NULL
    cdef int64_t s0 = q.strides[0] // item, s1 = q.strides[1] // item, s2 = q.strides[2] // item
    cdef const int_codes *base = &q[0, 0, 0]
    cdef double first = edges[0], last = edges[bins]
    cdef double inv_width = _exact_inverse(last - first)
    cdef double step = 0.0, inv_step = 0.0, r = 0.0, tol_k = 0.0
    # the multiply path: a grid of powers of two and a reciprocal of lsb that is a normal number
    cdef bint fast = _is_power_of_two_grid(edges, bins, &step)
    if fast:
        inv_step = 1.0 / step
        r = 1.0 / lsb_scale
        fast = lsb_scale > 2.0 ** -1000 and lsb_scale < 2.0 ** 1000
        # |t - (v - first) / w| <= (4.02 |v'| + |first|) * 2^-53 / w (v' = e * r: two
        # roundings from e / lsb, v one; the subtraction one more): 2^-49 covers it 4x over
        tol_k = inv_step * 2.0 ** -49
    cdef int64_t lanes[STATS_LANES][STATS_LANE_STRIDE]
    cdef int32_t jb[STATS_BLOCK + 8]
    cdef int32_t near[STATS_BLOCK]
    cdef double eb[STATS_BLOCK + 8]
    cdef double sums[8]
    cdef double sample_signal = 0.0, sample_noise = 0.0, x
    cdef Py_ssize_t sample_end = sample
    cdef Py_ssize_t start = 0, stop, i, k, m, m4, seg
    cdef int64_t a, b, d, c, run_left, j, lane, n_near, n_slot, q_stride, zeros = 0, m8
    cdef const int_codes *p
    # q's rows interleaved (the NHWC integer tensor read as NCHW: element stride C along a row,
    # 1 across rows): rows are copied, a tile of G whole rows of one sample at a time, into a
    # contiguous buffer in the float order, reading each cache line of q for G rows at once
    # (reading a row at stride C would fetch a line per element, again for every row)
    cdef bint tiled = D > 1 and s2 != 1 and B > 1 and (s1 if s1 > 0 else -s1) < (s2 if s2 > 0 else -s2)
    cdef int64_t tile_rows = 0, tile_a = -1, tile_b = 0
    cdef int_codes *tile = NULL
    cdef const int_codes *p_block
    # whole blocks in one pass (qsim_stats_block_i8_f32): 8-bit codes, float32 values, one scale
    # and zero point, the multiply path with its AVX-512 bound below 1/4 (see eval_stats.h), and
    # the codes contiguous in q or, tiled, in the tile
    cdef double tol_max = (max(fabs(first), fabs(last)) + step + fabs(first)) * tol_k
    cdef bint contiguous = s2 == 1 and (B == 1 or s1 == D) and (A == 1 or s0 == B * D)
    cdef bint one_pass = (sizeof(int_codes) == 1 and sizeof(real_values) == 4 and fast and C == 1
                          and tol_max < 0.25 and (tiled or contiguous)
                          and -STATS_ZP_LIMIT < zero_point[0] < STATS_ZP_LIMIT)
    if tiled:
        tile_rows = max(1, min(B, STATS_TILE_BYTES // (D * item)))
        tile = <int_codes *>malloc(tile_rows * D * item)
        if tile == NULL:
            raise MemoryError("add_error_stats: tile buffer")
    with nogil:
        for lane in range(STATS_LANES):
            for j in range(bins):
                lanes[lane][j] = 0
        while start < n:
            stop = start + STATS_BLOCK if start + STATS_BLOCK < sample_end else sample_end
            m = stop - start
            n_near = 0
            p_block = NULL
            if one_pass:
                a = start // (D * B)
                b = (start // D) % B
                if not tiled:
                    p_block = base + start
                else:
                    if a != tile_a or b < tile_b or b >= tile_b + tile_rows:
                        tile_a, tile_b = a, b
                        _fill_tile(base, a, b, s0, s1, s2, min(tile_rows, B - b), D, tile)
                    if (stop - 1) // (D * B) == a and ((stop - 1) // D) % B < tile_b + tile_rows:
                        p_block = tile + (b - tile_b) * D + start % D
            if p_block != NULL:
                for k in range(8):
                    sums[k] = 0.0
                n_slot = qsim_stats_block_i8_f32(isa, <const signed char *>p_block, <const float *>&f[start], m,
                                                 <int32_t>zero_point[0], scale[0], r, first, inv_step, tol_k,
                                                 tol_max, <int32_t>bins, eb, sums, jb, near, &n_near, &zeros)
            else:
                # 1. e computed, in runs of one channel and one row of q
                d = start % D
                b = (start // D) % B
                a = start // (D * B)
                c = (start // inner) % C
                run_left = inner - start % inner if C > 1 else n    # one scale: one run
                i = start
                while i < stop:
                    seg = stop - i
                    if D - d < seg:
                        seg = D - d
                    if run_left < seg:
                        seg = run_left
                    if tiled:
                        if a != tile_a or b < tile_b or b >= tile_b + tile_rows:
                            tile_a, tile_b = a, b
                            _fill_tile(base, a, b, s0, s1, s2, min(tile_rows, B - b), D, tile)
                        p = tile + (b - tile_b) * D + d
                        q_stride = 1
                    else:
                        p = base + a * s0 + b * s1 + d * s2
                        q_stride = s2
                    qsim_stats_errors(isa, sizeof(int_codes), p, q_stride, sizeof(real_values), &f[i], seg,
                                      zero_point[c], scale[c], &eb[i - start])
                    i += seg
                    d += seg
                    if d == D:
                        d = 0
                        b += 1
                        if b == B:
                            b = 0
                            a += 1
                    run_left -= seg
                    if run_left == 0:
                        run_left = inner
                        c += 1
                        if c == C:
                            c = 0
                # 2. the block's sums: element start + k into partial sum k % 4
                for k in range(8):
                    sums[k] = 0.0
                m4 = m - m % 4
                if real_values is float:
                    qsim_stats_sums_f32(isa, &f[start], eb, m4, sums)
                else:
                    qsim_stats_sums_f64(isa, &f[start], eb, m4, sums)
                for k in range(m4, m):
                    x = <double>f[start + k]
                    sums[k & 3] += x * x
                    sums[4 + (k & 3)] += eb[k] * eb[k]
                # 3. the bins: packed (eval_stats.h qsim_stats_slots; the padding NaN is counted
                # nowhere); exact zeros counted, near an edge listed (off the grid: every element)
                n_slot = 0
                if fast:
                    m8 = (m + 7) & ~7
                    for k in range(m, m8):
                        eb[k] = NAN
                    n_slot = qsim_stats_slots(isa, eb, m8, r, first, inv_step, tol_k, <int32_t>bins, jb, near,
                                              &n_near, &zeros)
                else:
                    for k in range(m):
                        if eb[k] == eb[k]:
                            near[n_near] = <int32_t>k
                            n_near += 1
            sample_signal = sample_signal + ((sums[0] + sums[1]) + (sums[2] + sums[3]))
            sample_noise = sample_noise + ((sums[4] + sums[5]) + (sums[6] + sums[7]))
            if stop == sample_end:
                signal = signal + sample_signal
                noise = noise + sample_noise
                if sample_out != NULL:
                    sample_out[0] = sample_signal
                    sample_out[1] = sample_noise
                    sample_out += 2
                sample_signal = sample_noise = 0.0
                sample_end += sample
            # the packed bins counted in STATS_LANES interleaved copies, the near ones divided
            qsim_stats_count(jb, n_slot, &lanes[0][0])
            for i in range(n_near):
                k = near[i]
                j = _edge_bin(eb[k] / lsb_scale, first, last, inv_width, &edges[0], bins)
                lanes[k & (STATS_LANES - 1)][j] += 1
            start = stop
        for lane in range(STATS_LANES):
            for j in range(bins):
                counts[j] += lanes[lane][j]
        if zeros:       # e == 0 exactly (either sign): v = 0, numpy's bin of 0
            counts[_edge_bin(0.0, first, last, inv_width, &edges[0], bins)] += zeros
    free(tile)
    return signal, noise


ctypedef fused rounded_weight:
    float
    double


def rounding_candidates(const rounded_weight[:, ::1] w, const double[::1] scale, double qmin,
                        double qmax, double[:, ::1] e, double[:, ::1] q, double[:, ::1] floor_,
                        double[:, ::1] ceil_):
    """Adaptive rounding's start and candidates (qsim/quant/rounding.py _candidates) in one
    pass: v = w[o, k] / scale[o] (w widened to double), q = clip(nnef_round(v)), floor_ =
    clip(floor(v)), ceil_ = clip(floor_ + 1), e = q - v, with numpy's formulation's
    operations (nnef_round: floor(v) + 1 where v - floor(v) >= 0.5, then + 0.0; clip as
    numpy's maximum then minimum), so the same doubles."""
    cdef Py_ssize_t o, k, OC = w.shape[0], K = w.shape[1]
    cdef double v, lo, r, f
    if (scale.shape[0] != OC or e.shape[0] != OC or q.shape[0] != OC or floor_.shape[0] != OC
            or ceil_.shape[0] != OC or e.shape[1] != K or q.shape[1] != K or floor_.shape[1] != K
            or ceil_.shape[1] != K):
        raise ValueError("rounding_candidates: shapes differ")
    with nogil:
        for o in range(OC):
            for k in range(K):
                v = <double>w[o, k] / scale[o]
                lo = floor(v)
                r = (lo + 1.0 if v - lo >= 0.5 else lo) + 0.0
                r = _clip(r, qmin, qmax)
                f = _clip(lo, qmin, qmax)
                q[o, k] = r
                floor_[o, k] = f
                ceil_[o, k] = _clip(f + 1.0, qmin, qmax)
                e[o, k] = r - v


cdef inline double _clip(double x, double lo, double hi) noexcept nogil:
    """np.clip(x, lo, hi) for x not NaN: maximum then minimum (keeps -0.0)."""
    if x < lo:
        x = lo
    if x > hi:
        x = hi
    return x


def round_block_from_rows(int isa, double[:, ::1] q, const double[:, ::1] floor_,
                          const double[:, ::1] ceil_, float[:, ::1] r32, const float[:, ::1] xt32,
                          double[:, ::1] g, const double[:, ::1] hb, const double[::1] diag,
                          double tol, int64_t j0, const signed char[::1] active,
                          int64_t[::1] moved, double[::1] drop, int64_t lo, int64_t hi):
    """One block of adaptive rounding's greedy pass in the rows form (qsim/quant/rounding.py
    round_from_rows), channels lo..hi-1 in place: for each weight j = j0 + t of the block in
    order, the move to the other candidate is taken when 2 d g[o, t] + d^2 diag[j] < -tol;
    then r32[o] += d xt32[j] (the channel's residual X e over the P rows, float32, as the next
    block's gradient GEMM reads it) and g[o, t'] += d hb[t, t'] for the block's later weights
    (hb = the block's X^T X). g [OC, b] holds the block's gradient X^T r at the block's start.
    Channels with active[o] == 0 are skipped; moved[o] counts the moves and drop[o] adds up
    how much they lowered the objective (-gain). Channels never interact: any split of the
    rows gives the same integers. Per channel kernels/round_passes.h on the instruction-set
    path `isa` (the same bits on each)."""
    cdef int64_t o, b = g.shape[1], P = r32.shape[1]
    if hi <= lo or b == 0:
        return
    with nogil:
        for o in range(lo, hi):
            if active[o]:
                qsim_round_block(isa, &q[o, 0], &floor_[o, 0], &ceil_[o, 0], &r32[o, 0],
                                   &xt32[0, 0], P, &g[o, 0], &hb[0, 0], b, &diag[0], tol, j0,
                                   &moved[o], &drop[o])


cdef extern from "dw_moments.h" nogil:
    enum: QSIM_DWM_CB
    void qsim_dw_moments_block(int isa, const double *xp, int64_t Hp, int64_t Wp, int64_t KH, int64_t KW,
                               int64_t sy, int64_t sx, int64_t OH, int64_t OW, double *tsum,
                               double *so, double *s1)
    void qsim_dwm_prefetch_totals(const double *so, const double *s1, int64_t K)
    void qsim_dwm_window(int isa, const float *xc, double *xp, int64_t Hp, int64_t Wp,
                         const int64_t *src_row, const int64_t *src_col, int64_t xs1, int64_t xs2,
                         int64_t xs3, int64_t lanes)


DEPTHWISE_LANES = QSIM_DWM_CB


def depthwise_moments_f32(int isa, const float[:, :, :, :] x, double[:, :, ::1] sum_outer,
                          double[:, :, ::1] sum_x, int64_t KH, int64_t KW, int64_t sy, int64_t sx,
                          int64_t pt, int64_t pl, int64_t OH, int64_t OW, int64_t lo, int64_t hi):
    """Adds the input patch moments of a depthwise convolution (dilation 1) for the channel
    blocks lo..hi-1 straight from its NCHW input x, without gathering the patches
    (qsim/quant/rounding.py PatchMoments.add_depthwise), into lane-interleaved totals
    (DEPTHWISE_LANES channels per block, channel c = block * lanes + l):
        sum_outer[block, a*K + b, l] += sum over n, oy, ox of v(a) v(b)   (a <= b only),
        sum_x[block, a, l] += sum of v(a),
    v(a) = x[n, c, oy*sy + ay - pt, ox*sx + ax - pl] (0 outside x: padding), a = ay*KW + ax.
    Float64 sums of exact products in a fixed order per channel (kernels/dw_moments.h), the
    block's channels side by side in the vector lanes: the same bits for any split of the
    blocks over threads. Per sample, a block's window is copied to doubles [Hp][Wp][lane]
    (dw_moments.h qsim_dwm_window; lanes past the last channel of x as zeros: their totals are
    never read). `isa`: the
    instruction-set path (qsim/kernels/cpu_features.py), the same bits on each."""
    cdef int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3], K = KH * KW
    # A stride past the kernel (a sampled lattice: sample_stride) leaves rows / columns no
    # patch reads: the window is copied without them, patches side by side (stride KH / KW).
    # The kernel then forms exactly the products and sums it formed before for every entry it
    # adds up (each patch's own rows and columns, in the same order; with sy >= KH no row
    # slides either way): the same bits, for fewer operations on the unread gaps.
    cdef int64_t ky = sy if sy < KH else KH, kx = sx if sx < KW else KW
    cdef int64_t Hp = (OH - 1) * ky + KH, Wp = (OW - 1) * kx + KW, L = QSIM_DWM_CB
    if hi <= lo or N == 0 or OH <= 0 or OW <= 0:
        return
    if (sum_outer.shape[1] != K * K or sum_x.shape[1] != K or sum_outer.shape[2] != L
            or sum_x.shape[2] != L or KW > 64 or hi > sum_outer.shape[0] or hi > sum_x.shape[0]
            or hi * L - L >= C):
        raise ValueError("depthwise_moments_f32: totals are not [blocks, K*K | K, lanes] "
                         "(K = KH * KW, KW <= 64) for these blocks")
    cdef int64_t xs0 = x.strides[0] // 4, xs1 = x.strides[1] // 4, xs2 = x.strides[2] // 4
    cdef int64_t xs3 = x.strides[3] // 4
    cdef const float *xb = &x[0, 0, 0, 0]
    cdef double *xp = <double *>malloc(Hp * Wp * L * sizeof(double))
    cdef double *tsum = <double *>malloc(KH * Wp * L * sizeof(double))
    cdef int64_t *src_row = <int64_t *>malloc(Hp * sizeof(int64_t))
    cdef int64_t *src_col = <int64_t *>malloc(Wp * sizeof(int64_t))
    cdef int64_t blk, c0, lanes, n, r
    if xp == NULL or tsum == NULL or src_row == NULL or src_col == NULL:
        free(xp)
        free(tsum)
        free(src_row)
        free(src_col)
        raise MemoryError("depthwise_moments_f32: scratch rows")
    for r in range(Hp):                 # window row r: patch row r // ky, tap row r % ky
        src_row[r] = _window_source(r, ky, sy, pt, H)
    for r in range(Wp):
        src_col[r] = _window_source(r, kx, sx, pl, W)
    with nogil:
        for blk in range(lo, hi):
            c0 = blk * L
            lanes = L if C - c0 > L else C - c0
            if blk + 1 < hi:
                qsim_dwm_prefetch_totals(&sum_outer[blk + 1, 0, 0], &sum_x[blk + 1, 0, 0], K)
            for n in range(N):
                qsim_dwm_window(isa, xb + n * xs0 + c0 * xs1, xp, Hp, Wp, src_row, src_col,
                                xs1, xs2, xs3, lanes)
                qsim_dw_moments_block(isa, xp, Hp, Wp, KH, KW, ky, kx, OH, OW, tsum,
                                      &sum_outer[blk, 0, 0], &sum_x[blk, 0, 0])
    free(xp)
    free(tsum)
    free(src_row)
    free(src_col)


cdef int64_t _window_source(int64_t r, int64_t k, int64_t s, int64_t pad, int64_t size) noexcept:
    """The input index of window index r (patches `k` apart in the window, `s` in the padded
    input, k <= s), -1 for padding."""
    cdef int64_t i = (r // k) * s + r % k - pad if k < s else r - pad
    return i if 0 <= i < size else -1


def channel_sums_f32(const float[:, :, ::1] x, double[::1] out, int isa=0):
    """out[c] = sum over n and r of x[n, c, r] as float64, the bits of numpy's
    x.astype(np.float64).sum(axis=(0, 2)) for one sample (n = 1: one pairwise sum per channel,
    kernels/scan_stats.h qsim_pairwise_f32 on the ISA path `isa`; the calibration's channel
    means, qsim/quant/calibrate.py). Tested against numpy."""
    cdef Py_ssize_t n, c, N = x.shape[0], C = x.shape[1], R = x.shape[2]
    cdef double acc
    if out.shape[0] != C:
        raise ValueError("channel_sums_f32: out must have one entry per channel")
    with nogil:
        for c in range(C):
            acc = 0.0
            for n in range(N):
                if R:
                    acc = acc + qsim_pairwise_f32(isa, &x[n, c, 0], R)
            out[c] = acc


ctypedef fused quantized_code:
    signed char
    short
    int

ctypedef fused real_input:
    float
    double


def quantize_per_tensor(int isa, const real_input[::1] x, double scale, int64_t zero_point, int64_t qmin,
                        int64_t qmax, quantized_code[::1] out):
    """out = clip(zero_point + nnef_round(x / scale), qmin, qmax) per element (qsim/quant/params.py
    quantize, per tensor; kernels/eval_stats.h qsim_quantize, one vector copy per ISA path):
    x widened to double, the division, floor(a) + 1 where a - floor(a) >= 0.5, then the int64
    sum and the clip, the numpy formulation's operations, so the same integers. Returns False
    (out unspecified) when some a is not finite or beyond 2^62, where numpy's float -> int64
    cast is the definition; the caller then takes the numpy path. qmin..qmax must fit out's
    type."""
    cdef int64_t bad = 0
    if out.shape[0] != x.shape[0]:
        raise ValueError("quantize_per_tensor: x and out differ in length")
    if x.shape[0] == 0:
        return True
    with nogil:
        bad = qsim_quantize(isa, sizeof(real_input), &x[0], x.shape[0], scale, zero_point, qmin, qmax,
                            sizeof(quantized_code), &out[0])
    return bad == 0
