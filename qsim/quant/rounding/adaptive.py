"""Adaptive weight rounding: choose, for every int8 weight, the floor or the ceiling of
w / scale so that the layer's output error over the calibration data is smallest.

Rounding each weight to nearest minimizes each weight's own error, but a layer adds K
products: its output error is e . x, with e the K rounding errors (in real units) of one
output channel and x one input patch. Over the calibration patches the mean squared error is

    E[(e . x)^2] = e^T H e,      H = E[x x^T]   (K x K, per group of a grouped convolution)

and inputs of neighbouring taps are strongly correlated in natural images, so errors that
cancel in the sum matter much less than errors that add up. With bias correction on, the
mean error is corrected afterwards and H is the covariance E[x x^T] - E[x] E[x]^T.

The search (greedy coordinate descent, each weight restricted to {floor, floor + 1} of
w / scale and to the weight range) starts at round-to-nearest and accepts only moves that
lower e^T H e: the result is never worse than nearest on the calibration data, and every
weight stays within one step of its real value. Only the integers change: scales, the
integer graph and its bit-exactness contract are as with nearest rounding.

This module holds the search (adaptive_round on H, round_from_rows on a few kept rows) and its
driver in the lowering (round_layer); the moments it reads, and watch_layers that picks the
layers before calibration, are in moments.py.
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ...numerics import nnef_round
from ...kernels.cpu_features import current_isa
from ...kernels.extensions import extension
from ...threads import single_thread_blas, split_rows
from .moments import InputMoments

MAX_PASSES = 8                 # passes over the K weights of every channel (converges in 2-4)
STOP_FRACTION = 1e-2           # a channel stops after a pass that lowers its objective by less
                               # than this fraction of its objective at nearest rounding
BLOCK_COLUMNS = 64             # weights per gradient GEMM of round_from_rows
ROUNDING_MODES = ("nearest", "adaptive")

_quant_ops = extension("_quant_ops")   # raises KernelsUnavailableError when missing or broken


def adaptive_round(w: np.ndarray, scales: np.ndarray, h: np.ndarray,
                   qmin: int = -127, qmax: int = 127, stop_fraction: float | None = None) -> np.ndarray:
    """Integers q [OC, K] (int64) with q - w/scale in (-1, 1) minimizing, per output
    channel o, e_o^T H_g(o) e_o for e_o = q_o * scale_o - w_o.

    w: [OC, K] real weights; scales: [OC] (per channel) or [1]; h: [groups, K, K] with
    output channel o in group o // (OC / groups). Starts from round-to-nearest (NNEF's
    round, floor(x + 0.5), as params.quantize) and only takes moves that lower the objective.
    A channel's search ends after a pass with no move, after MAX_PASSES, or after a pass
    that lowered its objective by less than `stop_fraction` (default STOP_FRACTION) of its
    objective at nearest rounding: later passes buy little on the calibration data and
    nothing measurable on held-out data (docs/quantize.md)."""
    oc, k = w.shape
    groups = h.shape[0]
    stop_fraction = STOP_FRACTION if stop_fraction is None else stop_fraction
    e, q, floor, ceil = _candidates(w, scales, qmin, qmax)
    # per-channel objective in step units: (q - v)^T (s^2 H) (q - v) (v = w / s); s^2 > 0
    # changes no decision, so H alone is used.
    if groups == 1:
        hk = h[0]
        grad = e @ hk                                              # [OC, K]: (H e)_k
        diag = np.broadcast_to(np.diag(hk), (oc, k))
    else:
        hg = h[np.arange(oc) // (oc // groups)]                    # [OC, K, K]
        grad = np.einsum("ok,okl->ol", e, hg)
        diag = np.einsum("okk->ok", hg)
    tol = 1e-12 * float(np.max(np.abs(diag))) if diag.size else 0.0
    objective = np.einsum("ok,ok->o", e, grad)                     # e^T H e per channel
    kernel = _round_passes_kernel()
    if kernel is not None and oc and k:
        group_of = (np.arange(oc, dtype=np.int64) // (oc // groups)) if groups > 1 \
            else np.zeros(oc, np.int64)
        hc = np.ascontiguousarray(h, dtype=np.float64)
        q, grad = np.ascontiguousarray(q), np.ascontiguousarray(grad, dtype=np.float64)
        floor, ceil = np.ascontiguousarray(floor), np.ascontiguousarray(ceil)
        passes = np.zeros(oc, np.int64)
        # channels are independent: rows of q and grad split over threads, same integers
        isa = current_isa().code
        split_rows(oc, lambda lo, hi: kernel(isa, q, floor, ceil, grad, hc, group_of, tol, MAX_PASSES,
                                             lo, hi, stop_fraction, objective, passes), min_rows=1)
        return q.astype(np.int64)
    return _round_passes_numpy(q, floor, ceil, grad, diag, h if groups == 1 else hg, groups, tol,
                               objective, stop_fraction)


def _candidates(w: np.ndarray, scales, qmin: int, qmax: int):
    """(e = q - w / scale, q = round-to-nearest start, floor, floor + 1), float64 [OC, K], in
    the range: one compiled pass (kernels/quant_ops.pyx rounding_candidates) with the doubles
    of _candidates_numpy."""
    oc = w.shape[0]
    s = np.ascontiguousarray(np.broadcast_to(np.asarray(scales, np.float64).reshape(-1), (oc,)))
    if w.dtype not in (np.float32, np.float64):
        w = w.astype(np.float64)
    w = np.ascontiguousarray(w)
    e, q, floor, ceil = (np.empty(w.shape) for _ in range(4))
    _quant_ops.rounding_candidates(w, s, float(qmin), float(qmax), e, q, floor, ceil)
    return e, q, floor, ceil


def _candidates_numpy(w: np.ndarray, scales, qmin: int, qmax: int):
    """_candidates in numpy (the reference the compiled pass is tested against)."""
    oc = w.shape[0]
    s = np.broadcast_to(np.asarray(scales, np.float64).reshape(-1), (oc,))
    v = w / s[:, None]                                             # weights in steps
    q = np.clip(nnef_round(v), qmin, qmax)
    floor = np.clip(np.floor(v), qmin, qmax)
    ceil = np.clip(floor + 1, qmin, qmax)
    return q - v, q, floor, ceil


def round_from_rows(w: np.ndarray, scales: np.ndarray, rows: np.ndarray, mean: np.ndarray | None,
                    qmin: int = -127, qmax: int = 127, stop_fraction: float | None = None) -> np.ndarray:
    """See _round_from_rows; its GEMMs run on one BLAS thread (the channels' moves are split
    over qsim's threads): the same integers for any thread count, and no OpenBLAS worker
    spinning between the many block GEMMs (measured under load 10: the lowering of
    ResNet-18 took 3.5x the wall time at 2 threads than at 1 with BLAS on 2 threads)."""
    with single_thread_blas():
        return _round_from_rows(w, scales, rows, mean, qmin, qmax, stop_fraction)


def _round_from_rows(w, scales, rows, mean, qmin, qmax, stop_fraction) -> np.ndarray:
    """adaptive_round's integers for a layer of one group whose H = X^T X / P comes from few
    rows X [P, K] (P <= K; minus the mean row `mean` first when given: the covariance), without
    forming H. Per channel the residual r = X e (P values) replaces the gradient H e (K values):
    a move of weight j costs P multiply-adds on r instead of K on a K x K matrix's row, and
    the gradient X^T r is formed a block of BLOCK_COLUMNS weights at a time by one GEMM over
    all channels. Same search (start at nearest, weights in order, a move taken when it lowers
    e^T H e by more than the tolerance, up to MAX_PASSES passes; a pass without moves, or one
    that lowers the objective by less than stop_fraction of its value at nearest, ends a
    channel's search); the objective is the same quadratic form, rounded otherwise, so only
    near-ties can go the other way. The gradient GEMM covers only the channels still
    searching. Channels are split over threads (same integers)."""
    oc, k = w.shape
    stop_fraction = STOP_FRACTION if stop_fraction is None else stop_fraction
    e, q, floor, ceil = _candidates(w, scales, qmin, qmax)
    xt = np.array(rows.T, dtype=np.float64, order="C")            # [K, P], one transposing cast
    if mean is not None:
        xt -= mean.reshape(-1, 1)
    diag = np.einsum("kp,kp->k", xt, xt)                           # X^T X's diagonal
    tol = 1e-12 * float(np.max(diag)) if diag.size else 0.0
    q, floor, ceil = (np.ascontiguousarray(a) for a in (q, floor, ceil))
    starts = range(0, k, BLOCK_COLUMNS)
    grams = [np.ascontiguousarray(xt[j0:j0 + BLOCK_COLUMNS] @ xt[j0:j0 + BLOCK_COLUMNS].T)
             for j0 in starts]                                     # each block's X^T X
    xt32 = xt.astype(np.float32)
    del xt
    # the residual X e per channel [OC, P] in float32, as the gradient GEMMs read it: each
    # move adds +-x_j to it in float32 (the moments themselves carry float32 GEMM rounding;
    # on ResNet-18's layer4, 405 of 2.36M integers differ from a float64 residual's, at
    # near-ties, and the kernel moves half the bytes)
    r32 = e.astype(np.float32) @ xt32
    active = np.ones(oc, np.int8)
    objective = np.einsum("op,op->o", r32, r32, dtype=np.float64)   # e^T X^T X e per channel
    kernel = _quant_ops.round_block_from_rows
    isa = current_isa().code
    for _ in range(MAX_PASSES):
        moved = np.zeros(oc, np.int64)
        drop = np.zeros(oc)
        live = np.flatnonzero(active)
        some = live.size < oc
        for j0, hb in zip(starts, grams):
            # [OC, b]: X^T r on the block, a float32 GEMM (twice float64's speed); rows of
            # the channels still searching only (the others' rows are never read)
            if some:
                g = np.zeros((oc, min(BLOCK_COLUMNS, k - j0)))
                g[live] = r32[live] @ xt32[j0:j0 + BLOCK_COLUMNS].T
            else:
                g = (r32 @ xt32[j0:j0 + BLOCK_COLUMNS].T).astype(np.float64)
            split_rows(oc, lambda lo, hi: kernel(isa, q, floor, ceil, r32, xt32, g, hb, diag, tol, j0,
                                                 active, moved, drop, lo, hi), min_rows=1)
        active &= ((moved > 0) & ~(drop < stop_fraction * objective)).astype(np.int8)
        if not active.any():
            break
    return q.astype(np.int64)


def _round_passes_kernel():
    """The compiled pass loop (kernels/quant_ops.pyx). A missing or broken build is an error
    (KernelsUnavailableError, with the rebuild hint), never a silent switch to the numpy loop
    below, which stays as the reference the compiled loop is tested against."""
    return _quant_ops.round_passes


def _round_passes_numpy(q, floor, ceil, grad, diag, hmat, groups, tol, objective, stop_fraction):
    """The greedy passes over all channels at once (reference for the compiled loop)."""
    k = q.shape[1]
    hk = hmat[0] if groups == 1 else None
    hg = hmat if groups != 1 else None
    active = np.ones(q.shape[0], bool)
    for _ in range(MAX_PASSES):
        moved = np.zeros(q.shape[0], np.int64)
        drop = np.zeros(q.shape[0])
        for j in range(k):
            other = np.where(q[:, j] == floor[:, j], ceil[:, j], floor[:, j])
            delta = other - q[:, j]
            gain = 2.0 * delta * grad[:, j] + delta * delta * diag[:, j]
            take = np.nonzero(active & (delta != 0) & (gain < -tol))[0]
            if take.size == 0:
                continue
            d = delta[take]
            q[take, j] = other[take]
            grad[take] += d[:, None] * (hk[j][None, :] if groups == 1 else hg[take, j, :])
            moved[take] += 1
            drop[take] -= gain[take]
        active &= (moved > 0) & ~(drop < stop_fraction * objective)
        if not active.any():
            break
    return q.astype(np.int64)


def round_layer(moments: InputMoments | None, key: str, w: np.ndarray, wq: np.ndarray,
                quant: ir.QuantInfo, centered: bool) -> np.ndarray:
    """The int8 weights of layer `key` (w and wq in their float layout, output channels
    first) rounded adaptively when calibration collected its input moments, else wq."""
    if moments is None:
        return wq
    if key in moments.rounded:
        return moments.rounded[key]
    stats = moments.moments.get(key)
    flat = w.reshape(w.shape[0], -1)
    if stats is None or flat.shape[1] != stats.patch or w.shape[0] % stats.groups:
        return wq
    if stats.holding:
        # few rows (<= K): round on the rows themselves, no K x K matrix
        rows, mean = stats.consume_rows()
        q = round_from_rows(flat, quant.scales(), rows, mean[0] if centered else None)
        del rows
    else:
        # the layer's integers are cached below, so its moments are needed no more: consumed
        # (each layer's K x K totals freed as it is rounded bounds the lowering's peak memory)
        q = adaptive_round(flat, quant.scales(), stats.second_moment(centered, consume=True))
    out = q.reshape(w.shape).astype(wq.dtype)
    moments.rounded[key] = out
    return out
