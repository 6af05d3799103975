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
as numpy's `out += bias` did. A relu/clamp that follows the conv (runtime/float_ops/fusion.py)
is applied to each tile as it is finished, with numpy's maximum/minimum values.
"""
from __future__ import annotations

import numpy as np

from ...kernels.cpu_features import current_isa
from ...kernels.extensions import extension
from ...kernels.float_conv import im2col_rows
from ...numerics import ceil_div
from ...threads import apply_blas_threads, single_thread_blas, split_rows, thread_count
from .bounds import bounded

_float_ops = extension("_float_ops")   # raises KernelsUnavailableError when missing or broken

ROW_TILE = 256      # output channels per tile at most
COL_TILE = 1024     # output pixels of one sample per tile at most
ALIGN = 16          # tile edges on multiples of 16 (one AVX-512 register of float32)


def spans(n: int, most: int) -> list[tuple[int, int]]:
    """[0, n) in near-equal parts of at most `most` (edges on multiples of ALIGN but the last)."""
    parts = max(1, ceil_div(n, most))
    size = ceil_div(ceil_div(n, parts), ALIGN) * ALIGN if parts > 1 else n
    return [(lo, min(n, lo + size)) for lo in range(0, max(n, 1), max(size, 1))]


def conv_gemm(w: np.ndarray, cols: np.ndarray, bias: np.ndarray | None, dtype: np.dtype,
              bound: tuple | None = None, bound_only: bool = False) -> tuple[np.ndarray | None, np.ndarray | None]:
    """w [g][m][K], cols [batch][g][K][X] (the im2col; its rows may be strided), bias [g*m] or
    None: returns out [batch][g*m][X] in `dtype`, and with bound = (lo, hi) also
    minimum(maximum(out, lo), hi) (hi None: maximum only), computed tile by tile while the
    tile is in the cache (float32; other dtypes: numpy after the product), else None.
    bound_only (with a bound): only the bounded result is wanted: (None, bounded), made in
    the product's own buffer by the same tile pass (the same values, one array written); the
    numpy path for other dtypes still returns both."""
    g, m, _ = w.shape
    batch, X = cols.shape[0], cols.shape[3]
    out = np.empty((batch, g * m, X), dtype=dtype)
    if out.size == 0 or w.shape[2] == 0 or dtype != np.float32 or (bias is not None and bias.dtype != dtype):
        _numpy_gemm(w, cols, bias, out)
        return _unbounded_and_bounded(out, None, bound, bound_only, tiles_bounded=False)
    y = None if bound is None or bound_only else np.empty_like(out)
    columns = spans(X, COL_TILE)
    _run_tiles(w, bias, bound, out, y, [(gi, b, c) for gi in range(g) for b in range(batch) for c in columns],
               lambda gi, b, c0, c1: cols[b, gi, :, c0:c1])
    return _unbounded_and_bounded(out, y, bound, bound_only, tiles_bounded=True)


def _unbounded_and_bounded(out, y, bound, bound_only, tiles_bounded: bool):
    """(out, y) as conv_gemm returns them. tiles_bounded: _run_tiles applied the bound (into y,
    or with bound_only into out itself); else out and numpy's bounded(out)."""
    if bound is None:
        return out, None
    if not tiles_bounded:
        return out, bounded(out, *bound)
    return (None, out) if bound_only else (out, y)


def conv_im2col_gemm(x: np.ndarray, w: np.ndarray, kernel, stride, dilation, before, out_size,
                     bias: np.ndarray | None, bound: tuple | None = None, bound_only: bool = False):
    """The 2-D float32 convolution with its im2col built tile by tile (cache-sized, never the
    whole [C*KH*KW][OH*OW] matrix): x [batch][g*fc][H][W], w [g][m][fc*KH*KW]. Returns (out
    [batch][g*m][OH*OW], the bounded out or None) as conv_gemm does (bound_only too); column
    tiles are runs of whole output rows (a shape-fixed count)."""
    g, m, _ = w.shape
    batch, fc = x.shape[0], x.shape[1] // g
    (KH, KW), (OH, OW) = kernel, out_size
    out = np.empty((batch, g * m, OH * OW), dtype=np.float32)
    y = None if bound is None or bound_only else np.empty_like(out)
    row_spans = spans_of_rows(OH, OW)

    def columns(gi, b, c0, c1):
        oy0, oy1 = c0 // OW, c1 // OW
        cols = im2col_rows(x, kernel, stride, dilation, before, OW, b, gi * fc, (gi + 1) * fc, oy0, oy1)
        return cols.reshape(fc * KH * KW, (oy1 - oy0) * OW)

    _run_tiles(w, bias, bound, out, y, [(gi, b, (oy0 * OW, oy1 * OW)) for gi in range(g) for b in range(batch)
                                        for oy0, oy1 in row_spans], columns)
    return _unbounded_and_bounded(out, y, bound, bound_only, tiles_bounded=True)


def spans_of_rows(rows: int, width: int) -> list[tuple[int, int]]:
    """[0, rows) in near-equal runs of whole rows of at most COL_TILE elements (at least one row)."""
    most = max(1, COL_TILE // max(width, 1))
    parts = max(1, ceil_div(rows, most))
    size = ceil_div(rows, parts)
    return [(lo, min(rows, lo + size)) for lo in range(0, max(rows, 1), max(size, 1))]


def _run_tiles(w, bias, bound, out, y, column_tiles, columns_of) -> None:
    """For every column tile (gi, b, (c0, c1)) and every row span of m: out[b, rows, c0:c1] =
    w[gi, rows] @ columns_of(gi, b, c0, c1), then bias and bound on that tile (the bound into
    y, or with a bound and no y into out itself). The GEMM calls
    are fixed by the shapes; how they are grouped into tasks for the threads is not (a task
    takes a column tile, its columns once, and all or part of its row spans), so the bits never
    depend on the thread count."""
    g, m, _ = w.shape
    rows = spans(m, ROW_TILE)
    lo, hi = (None, None) if bound is None else (float(bound[0]), None if bound[1] is None else float(bound[1]))
    in_place = bound is not None and y is None
    threads = thread_count()
    # enough tasks for the threads: split a column tile's row spans when there are few column tiles
    groups = max(1, min(len(rows), ceil_div(threads, len(column_tiles))))
    row_groups = [rows[i * len(rows) // groups:(i + 1) * len(rows) // groups] for i in range(groups)]
    tasks = [(tile, rg) for tile in column_tiles for rg in row_groups]
    isa = current_isa().code

    def work(lo_t: int, hi_t: int) -> None:
        for (gi, b, (c0, c1)), row_group in tasks[lo_t:hi_t]:
            cols = columns_of(gi, b, c0, c1)
            for r0, r1 in row_group:
                r0, r1 = gi * m + r0, gi * m + r1
                np.matmul(w[gi, r0 - gi * m:r1 - gi * m], cols, out=out[b, r0:r1, c0:c1])
                # + bias and the bound on the tile while it is in the cache (kernels/float_conv.h)
                if bias is not None or bound is not None:
                    _float_ops.tile_epilogue_f32(isa, out[b], bias, None if y is None else y[b], lo, hi,
                                                 r0, r1, c0, c1, in_place)

    if threads == 1:                  # no pool hand-off: a small layer's tiles cost ~10 us less
        apply_blas_threads()          # numpy's BLAS on one thread too (a no-op once it is)
        work(0, len(tasks))
        return
    with single_thread_blas():
        split_rows(len(tasks), work, min_rows=1)


def _numpy_gemm(w: np.ndarray, cols: np.ndarray, bias: np.ndarray | None, out: np.ndarray) -> None:
    """The same products for other dtypes and empty shapes, one sample and group at a time."""
    g, m, _ = w.shape
    for b in range(cols.shape[0]):
        for gi in range(g):
            o = out[b, gi * m:(gi + 1) * m]
            if w.shape[2] == 0:
                o[...] = 0
            else:
                np.matmul(w[gi], cols[b, gi], out=o)
            if bias is not None:
                o += bias[gi * m:(gi + 1) * m].reshape(m, 1)
