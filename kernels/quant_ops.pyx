# cython: language_level=3
"""Quantizer inner loops that numpy cannot vectorise (sequential per output channel).

round_passes: the greedy coordinate descent of qsim/quant/rounding.py's adaptive_round, one
output channel at a time. Channels never interact, so rows [lo, hi) can run on their own
thread (the GIL is released); per channel the arithmetic is the numpy loop's, operation by
operation in the same order (gain = (2*delta)*grad + (delta*delta)*diag, grad += delta*H[j]),
so the integers are identical to the numpy version for any split of the rows.
The build passes -ffp-contract=off: no fused multiply-add may change a rounding.
"""
from libc.stdint cimport int64_t


def round_passes(double[:, ::1] q, const double[:, ::1] floor_, const double[:, ::1] ceil_,
                 double[:, ::1] grad, const double[:, :, ::1] h, const int64_t[::1] group_of,
                 double tol, int max_passes, int64_t lo, int64_t hi):
    """Runs up to max_passes passes over the K weights of channels lo..hi-1 in place:
    q [OC, K] current integers (as float), floor_/ceil_ the two candidates, grad = H e,
    h [groups, K, K], group_of[o] the group of channel o."""
    cdef int64_t o, j, k, K = q.shape[1], g
    cdef int p, moved
    cdef double other, delta, gain, cur
    cdef double *gr
    cdef double *qr
    cdef const double *hr
    cdef const double *fr
    cdef const double *cr
    if hi <= lo or K == 0:
        return
    with nogil:
        for o in range(lo, hi):
            g = group_of[o]
            gr, qr, fr, cr = &grad[o, 0], &q[o, 0], &floor_[o, 0], &ceil_[o, 0]
            for p in range(max_passes):
                moved = 0
                for j in range(K):
                    cur = qr[j]
                    other = cr[j] if cur == fr[j] else fr[j]
                    delta = other - cur
                    if delta == 0.0:
                        continue
                    hr = &h[g, j, 0]
                    gain = (2.0 * delta) * gr[j] + (delta * delta) * hr[j]
                    if not gain < -tol:
                        continue
                    qr[j] = other
                    _axpy(gr, hr, delta, K)
                    moved += 1
                if moved == 0:
                    break


cdef inline void _axpy(double *y, const double *x, double a, int64_t n) noexcept nogil:
    """y[k] = y[k] + a * x[k] (separate multiply and add: -ffp-contract=off)."""
    cdef int64_t k
    for k in range(n):
        y[k] = y[k] + a * x[k]
