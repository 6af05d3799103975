# cython: language_level=3
"""Float executor loops that numpy runs far from the machine's speed.

depthwise2d_f32: a 2-D depthwise convolution (one input channel per group, channel multiplier
m) of float32 NCHW data. Each output plane is summed tap by tap in row-major kernel order,
starting from +0.0, one float32 multiply and one float32 add per tap (padding reads 0.0 and
is added too), exactly the operations of fastops_nn._depthwise's numpy loop: the results are
the same bits. Planes [lo, hi) of out (flattened batch x channel) are independent, so callers
split them over threads (the GIL is released). Built with -ffp-contract=off: no fused
multiply-add may change a rounding.
"""
from libc.stdint cimport int64_t


def depthwise2d_f32(const float[:, :, :, ::1] x, const float[:, :, ::1] w, float[:, :, :, ::1] out,
                    int64_t m, int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t pt, int64_t pl,
                    int64_t lo, int64_t hi):
    cdef int64_t OC = out.shape[1], OH = out.shape[2], OW = out.shape[3]
    cdef int64_t IH = x.shape[2], IW = x.shape[3], KH = w.shape[1], KW = w.shape[2]
    cdef int64_t p, bi, oc, c, ky, kx, oy, ox, iy, off, first, last
    cdef float wv
    cdef float *orow
    cdef const float *irow
    if hi <= lo:
        return
    with nogil:
        for p in range(lo, hi):
            bi = p // OC
            oc = p % OC
            c = oc // m
            for oy in range(OH):
                orow = &out[bi, oc, oy, 0]
                for ox in range(OW):
                    orow[ox] = 0.0
            for ky in range(KH):
                for kx in range(KW):
                    wv = w[oc, ky, kx]
                    for oy in range(OH):
                        orow = &out[bi, oc, oy, 0]
                        iy = oy * sy + ky * dy - pt
                        if iy < 0 or iy >= IH:
                            for ox in range(OW):
                                orow[ox] = orow[ox] + wv * <float>0.0
                            continue
                        irow = &x[bi, c, iy, 0]
                        off = kx * dx - pl
                        # columns reading inside the row: first..last (ix = ox*sx + off)
                        first = 0 if off >= 0 else (-off + sx - 1) // sx
                        last = (IW - 1 - off) // sx + 1 if IW - 1 - off >= 0 else 0
                        if last > OW:
                            last = OW
                        if first > last:
                            first = last
                        for ox in range(first):
                            orow[ox] = orow[ox] + wv * <float>0.0
                        if sx == 1:
                            _axpy_f32(orow + first, irow + first + off, wv, last - first)
                        else:
                            for ox in range(first, last):
                                orow[ox] = orow[ox] + wv * irow[ox * sx + off]
                        for ox in range(last, OW):
                            orow[ox] = orow[ox] + wv * <float>0.0


cdef inline void _axpy_f32(float *y, const float *x, float a, int64_t n) noexcept nogil:
    """y[k] = y[k] + a * x[k] in float32 (separate multiply and add: -ffp-contract=off)."""
    cdef int64_t k
    for k in range(n):
        y[k] = y[k] + a * x[k]
