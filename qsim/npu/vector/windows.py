"""Window operators whose source positions are not one affine pattern: AVG_POOL2D with padding
and RESIZE (TOSA 0.30 2.3.2, 2.12.1) as vector jobs.

The vector DMA walks affine loop nests only (hw/vector_isa.py, "stream pattern"). Along one
output axis these operators read, per output index o, a source start and a window that vary
with o: AVG_POOL2D's window is clipped at the borders (TOSA sums and counts only the valid
taps, so a border window has its own divisor), RESIZE samples at (o·stride + offset) / 2^shift.
So each axis is cut into runs: output indices o0, o0 + P, o0 + 2P, ... whose source start
advances by a constant and whose window (or sampling phase) is the same. P is 1 for pooling
and 2^shift / gcd(stride, 2^shift) for RESIZE (the phase repeats after P outputs). One job per
(row run, column run) then covers its outputs with an affine pattern:

- AVG_POOL2D: the window group walks only the valid taps (kx' columns, ky' rows), so the
  vector unit's AVG divides by reciprocal_scale(kx'·ky'), the spec's count of valid taps;
  padded taps are never read (TOSA skips them, it does not read them as the zero point).
  A window of more taps than the unit's reciprocal ROM holds (a global pool over 56 x 56)
  is a REDUCE_SUM job into int32 and a PASS job whose output scaler is the compiler's
  reciprocal_scale(count): the spec's sum-then-scale, in two steps.
- RESIZE NEAREST: a PASS copy from the nearer tap (d >= 2^shift / 2 picks i1, as the spec).
- RESIZE BILINEAR (int8 -> int32): a DOT group over the taps (x0, x1) x (y0, y1) with the
  run's four weights (2^shift - dy)(2^shift - dx), ..., dy·dx broadcast from DRAM; a tap whose
  weight is 0 for the whole run (d = 0) is not read. The sum is the spec's acc exactly
  (|acc| <= 2^7 · 2^22 fits the 32-bit lanes). int16 BILINEAR outputs int48: not supported.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import UnsupportedError
from ...hw.vector_isa import DEFAULT_MAX_POOL_COUNT, INT32_MAX, INT32_MIN, VectorInstr, VectorOp
from ...tosa.arith import reciprocal_scale
from .program import Job

MAX_JOBS = 4096         # beyond this many (row run, column run) jobs the operator stays on the host


@dataclass(frozen=True)
class Run:
    """Output indices first, first + step, ... (count of them) reading from source index
    start + k·start_step, all with the same window or phase `key`."""
    first: int
    count: int
    step: int
    start: int
    start_step: int
    key: tuple


def axis_runs(starts, keys, period: int) -> list[Run]:
    """Cuts one axis (source start and key per output index) into runs (module docstring)."""
    n = len(starts)
    out = []
    for residue in range(min(period, n)):
        idx = list(range(residue, n, period))
        i = 0
        while i < len(idx):
            j, step = i + 1, None
            while j < len(idx) and keys[idx[j]] == keys[idx[i]]:
                d = int(starts[idx[j]]) - int(starts[idx[j - 1]])
                if step is not None and d != step:
                    break
                step, j = d, j + 1
            out.append(Run(idx[i], j - i, period, int(starts[idx[i]]), step or 0, keys[idx[i]]))
            i = j
    return out


def _check_jobs(rows: list, cols: list, what: str) -> None:
    if len(rows) * len(cols) > MAX_JOBS:
        raise UnsupportedError(f"{what} needs {len(rows)} x {len(cols)} vector jobs (one per run of outputs "
                               f"with an affine source pattern); the compiler stops at {MAX_JOBS}")


def _nhwc_strides(shape, nbytes: int) -> list[int]:
    _, h, w, c = shape
    return [h * w * c * nbytes, w * c * nbytes, c * nbytes, nbytes]


def _window_job(instr_of, yr: Run, xr: Run, x_shape, x_base, x_bytes, out_shape, out_base, o_bytes,
                group_of, extra=()):
    """The job of one (row run, column run): outputs [n, yr.count, xr.count, ch]."""
    xs, os_ = _nhwc_strides(x_shape, x_bytes), _nhwc_strides(out_shape, o_bytes)
    shape = (out_shape[0], yr.count, xr.count, out_shape[3])
    o_strides = _run_strides(out_shape, yr, xr, o_bytes)
    base = out_base + yr.first * os_[1] + xr.first * os_[2]
    a = (x_base + yr.start * xs[1] + xr.start * xs[2], [xs[0], yr.start_step * xs[1], xr.start_step * xs[2], xs[3]],
         x_bytes)
    return Job(instr_of, shape, base, o_strides, o_bytes, [a, *extra], lane_dim=3, group=group_of(xs))


def avg_pool(image, attrs, x, x_base, x_bytes, out_shape, out_base, o_bytes, lo, hi, lanes) -> list:
    """AVG_POOL2D (any padding) as runs of equally clipped windows."""
    ky, kx = (int(v) for v in attrs["kernel"])
    sy, sx = (int(v) for v in attrs["stride"])
    pt, _, pl, _ = (int(v) for v in attrs["pad"])
    _, h, w, _ = x.shape

    def axis(size, out, k, s, before):
        lo_ = np.arange(out) * s - before
        start, end = np.maximum(lo_, 0), np.minimum(lo_ + k, size)
        if (end <= start).any():
            raise UnsupportedError("AVG_POOL2D with a window of only padding (no valid tap to average)")
        return axis_runs(start, [(int(v),) for v in end - start], 1)

    rows, cols = axis(h, out_shape[1], ky, sy, pt), axis(w, out_shape[2], kx, sx, pl)
    _check_jobs(rows, cols, "AVG_POOL2D")
    izp, ozp = int(attrs.get("input_zp", 0)), int(attrs.get("output_zp", 0))
    sums = None                     # int32 scratch of the window sums, for windows beyond the ROM
    configs = []
    for yr in rows:
        for xr in cols:
            taps = yr.key[0] * xr.key[0]

            def job(instr, base, nbytes, yr=yr, xr=xr):
                return _window_job(instr, yr, xr, x.shape, x_base, x_bytes, out_shape, base, nbytes,
                                   lambda xs: [(xr.key[0], [xs[2]]), (yr.key[0], [xs[1]])])
            if taps <= DEFAULT_MAX_POOL_COUNT:
                configs += job(lambda f, n: VectorInstr(VectorOp.AVG, 0, zp_a=izp, zp_o=ozp, clamp_lo=lo,
                                                        clamp_hi=hi), out_base, o_bytes).configs(lanes)
                continue
            # beyond the reciprocal ROM: the spec's two steps as two jobs, the int32 sums
            # (REDUCE_SUM) and apply_scale_32(sum, reciprocal_scale(taps)) + output_zp (PASS with
            # the output scaler, single rounding), the compiler computing reciprocal_scale
            if sums is None:
                sums = image.reserve(int(np.prod(out_shape)) * 4)
            configs += job(lambda f, n: VectorInstr(VectorOp.REDUCE_SUM, 0, zp_a=izp), sums, 4).configs(lanes)
            multiplier, shift = reciprocal_scale(taps)
            scale = Job(lambda f, n: VectorInstr(VectorOp.PASS, 0, scale_o=True, mult_o=(int(multiplier),),
                                                 shift_o=(int(shift),), zp_o=ozp, clamp_lo=lo, clamp_hi=hi),
                        (out_shape[0], yr.count, xr.count, out_shape[3]),
                        out_base + (yr.first * out_shape[2] + xr.first) * out_shape[3] * o_bytes,
                        _run_strides(out_shape, yr, xr, o_bytes), o_bytes,
                        [(sums + (yr.first * out_shape[2] + xr.first) * out_shape[3] * 4,
                          _run_strides(out_shape, yr, xr, 4), 4)], lane_dim=3)
            configs += scale.configs(lanes)
    return configs


def _run_strides(shape, yr: Run, xr: Run, nbytes: int) -> list[int]:
    s = _nhwc_strides(shape, nbytes)
    return [s[0], yr.step * s[1], xr.step * s[2], s[3]]


def _resize_axis(out: int, stride: int, offset: int, shift: int, size: int):
    """(i0, i1, d) per output index (spec 2.12.1; the reference checked i0 <= i1)."""
    pos = np.arange(out, dtype=np.int64) * stride + offset
    i = pos >> shift
    return np.maximum(i, 0), np.minimum(i + 1, size - 1), pos - (i << shift)


def resize(image, attrs, x, x_base, x_bytes, out_shape, out_base, o_bytes, lanes) -> list:
    shift = int(attrs["shift"])
    unit = 1 << shift
    bilinear = str(attrs["mode"]).upper() == "BILINEAR"
    if bilinear and x_bytes != 1:
        raise UnsupportedError("RESIZE BILINEAR of int16 outputs int48: the vector unit's lanes are 32 bits")
    axes = []
    for k, (size, out) in enumerate(((x.shape[1], out_shape[1]), (x.shape[2], out_shape[2]))):
        stride, offset = int(attrs["stride"][k]), int(attrs["offset"][k])
        i0, i1, d = _resize_axis(out, stride, offset, shift, size)
        period = unit // math.gcd(stride, unit)
        if bilinear:
            # a zero phase reads one tap, so the other tap's distance does not split the run
            axes.append(axis_runs(i0, [(int(dd), int(b) - int(a) if dd else 0) for a, b, dd in zip(i0, i1, d)],
                                  period))
        else:
            axes.append(axis_runs(np.where(d >= unit // 2, i1, i0), [()] * out, period))
    rows, cols = axes
    _check_jobs(rows, cols, "RESIZE")
    configs = []
    for yr in rows:
        for xr in cols:
            if not bilinear:
                job = _window_job(lambda f, n: VectorInstr(VectorOp.PASS, 0), yr, xr, x.shape, x_base,
                                  x_bytes, out_shape, out_base, o_bytes, lambda xs: [])
            else:
                (dy, step_y), (dx, step_x) = yr.key, xr.key
                weights = np.array([(unit - dy) * (unit - dx), (unit - dy) * dx, dy * (unit - dx), dy * dx], "<i4")
                w = (image.add(weights), [0, 0, 0, 0], 4)

                def group(xs, dx=dx, dy=dy, step_x=step_x, step_y=step_y):
                    return [(2 if dx else 1, [step_x * xs[2], 4]), (2 if dy else 1, [step_y * xs[1], 8])]
                job = _window_job(lambda f, n: VectorInstr(VectorOp.DOT, 0, clamp_lo=INT32_MIN,
                                                                    clamp_hi=INT32_MAX),
                                  yr, xr, x.shape, x_base, x_bytes, out_shape, out_base, o_bytes, group, extra=(w,))
            configs += job.configs(lanes)
    return configs
