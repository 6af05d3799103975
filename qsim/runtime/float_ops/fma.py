"""float32 fused multiply-add in numpy, rounded once like C's fmaf (numpy has none).

fma_f32(a, b, c) = round_to_float32(a * b + c), with a single rounding:
- a * b of two float32 is exact in float64 (24 + 24 significant bits <= 53, and its exponent
  stays far inside float64's range);
- s = p + c in float64 rounds once; TwoSum gives its exact error e = (p + c) - s (no overflow:
  |p|, |c| < 2**256);
- where e != 0 and s's last significand bit is even, s moves one float64 ulp towards e: that is
  p + c rounded to odd, which keeps the sticky information of the bits cut off. Rounding a
  round-to-odd value of at least p + 2 bits (53 >= 24 + 2) to float32 gives the correctly
  rounded float32 of the exact sum (Boldo and Melquiond's round-to-odd theorem), subnormal
  float32 results included (they have fewer bits still).
Infinities and NaNs: e is NaN or 0 there and s is left alone, so inf * 0, inf - inf and NaN
inputs give NaN and a finite sum never moves; signed zeros come from float64's own add (the
same as fmaf's: +0.0 for w * x = -0.0 plus +0.0).
"""
from __future__ import annotations

import numpy as np


def fma_f32(a, b, c) -> np.ndarray:
    """round_to_float32(a * b + c) with one rounding, elementwise (broadcasting); float32 inputs."""
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.asarray(a, dtype=np.float32).astype(np.float64) * np.asarray(b, dtype=np.float32)
        c64 = np.asarray(c, dtype=np.float32).astype(np.float64)
        s = np.asarray(p + c64)
        bb = s - p                                   # TwoSum (Knuth): the exact error of s
        e = (p - (s - bb)) + (c64 - bb)
        move = (e != 0) & np.isfinite(e) & ((s.view(np.int64) & 1) == 0)
        s = np.where(move, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
        return s.astype(np.float32)


def fma_chain_f32(weights, windows) -> np.ndarray:
    """acc = fma(w0, x0, +0.0), then acc = fma(wk, xk, acc) for k = 1, 2, ... over the pairs given
    in order: the float conv's definition of one output (the GEMM's and the depthwise loop's)."""
    acc = None
    for w, x in zip(weights, windows):
        acc = fma_f32(w, x, np.float32(0.0) if acc is None else acc)
    return acc
