"""The float convolution's GEMM, out[b, g*m + i] = w[g, i] @ cols[b, g] (+ bias),
in tiles that depend only on the layer's shape.

Why tiles:
- both cores: the tiles run on qsim's thread pool (qsim.threads.split_rows), each one BLAS call
  on a single OpenBLAS thread (threads.single_thread_blas says why not OpenBLAS's own threads);
- reproducible floats: BLAS picks its kernels by the matrix sizes, and the same column of a
  product can come out differently in the last bits for different column counts (measured
  with this OpenBLAS on 186 of 844 conv shapes, batch of N vs one sample). The tiles here are
  cut from one sample's (m, K, X) alone, never from the thread count or the batch, so every
  output element is the same call on the same data whatever QSIM_THREADS is and whatever
  batch the sample is in: a sample's result in a batch equals its result run alone.
- no transposing copy for a batch: each tile writes its rows of sample b straight into the
  NCHW result [B][g*m][X].

Bits: a layer whose sample fits in one tile (m <= ROW_TILE, X <= COL_TILE) is one GEMM of the
whole sample, as before tiling; bias is added after the product in float32 (out + bias),
as numpy's `out += bias` did.
"""
from __future__ import annotations

import numpy as np

from ...kernels.extensions import extension
from ...numerics import ceil_div
from ...threads import single_thread_blas, split_rows

_float_ops = extension("_float_ops")   # raises KernelsUnavailableError when missing or broken

ROW_TILE = 128      # output channels per tile at most
COL_TILE = 1024     # output pixels of one sample per tile at most
ALIGN = 16          # tile edges on multiples of 16 (one AVX-512 register of float32)


def spans(n: int, most: int) -> list[tuple[int, int]]:
    """[0, n) in near-equal parts of at most `most` (edges on multiples of ALIGN but the last)."""
    parts = max(1, ceil_div(n, most))
    size = ceil_div(ceil_div(n, parts), ALIGN) * ALIGN if parts > 1 else n
    return [(lo, min(n, lo + size)) for lo in range(0, max(n, 1), max(size, 1))]


def conv_gemm(w: np.ndarray, cols: np.ndarray, bias: np.ndarray | None, dtype: np.dtype) -> np.ndarray:
    """w [g][m][K], cols [batch][g][K][X] (the im2col; its rows may be strided), bias [g*m] or
    None: returns out [batch][g*m][X] in `dtype`."""
    g, m, _ = w.shape
    batch, X = cols.shape[0], cols.shape[3]
    out = np.empty((batch, g * m, X), dtype=dtype)
    if out.size == 0 or w.shape[2] == 0:
        out[...] = 0 if bias is None else bias.reshape(1, -1, 1)
        return out
    rows, columns = spans(m, ROW_TILE), spans(X, COL_TILE)
    tiles = [(gi, b, r, c) for gi in range(g) for b in range(batch) for r in rows for c in columns]
    compiled_bias = bias is not None and dtype == bias.dtype == np.float32
    b_col = None if bias is None else bias.reshape(g * m, 1)

    def work(lo: int, hi: int) -> None:
        for gi, b, (r0, r1), (c0, c1) in tiles[lo:hi]:
            r0, r1 = gi * m + r0, gi * m + r1
            o = out[b, r0:r1, c0:c1]
            np.matmul(w[gi, r0 - gi * m:r1 - gi * m], cols[b, gi, :, c0:c1], out=o)
            if compiled_bias:     # numpy's add on a strided tile is 4x slower than on whole rows
                _float_ops.add_row_bias_f32(out[b], bias, r0, r1, c0, c1)
            elif b_col is not None:
                np.add(o, b_col[r0:r1], out=o)

    with single_thread_blas():
        split_rows(len(tiles), work, min_rows=1)
    return out
