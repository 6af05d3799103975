"""`quant` (NNEF 2.0 4.6) and `algo` (4.7) operators as numpy."""
from __future__ import annotations

import numpy as np

from ...numerics import nnef_round
from .base import fail, norm_axis, register


def _per_channel(op, value, x, axis, name):
    """A uniform value, or a pack along `channel_axis` broadcast against x."""
    v = np.asarray(value, dtype=np.float64)
    if v.ndim == 0 or v.size == 1:
        return v.reshape(())
    if v.ndim != 1 or v.shape[0] != x.shape[axis]:
        fail(op, f"'{name}' has {v.size} items; expected 1 or {x.shape[axis]} "
             f"(input extent at channel_axis={axis})")
    return v.reshape([-1 if d == axis else 1 for d in range(x.ndim)])


def _quant_setup(op, ins, at):
    x = np.asarray(ins[0])
    bits = int(at["bits"])
    if bits <= 0:
        fail(op, f"bits must be positive; got {bits}")
    axis = norm_axis(at.get("channel_axis", 1), x.ndim, op) if x.ndim else 0
    return x, bits, bool(at.get("signed", True)), bool(at.get("symmetric", False)), axis


@register("quant.zero_point_linear_quantize")
def zero_point_linear_quantize(ins, at):
    op = "quant.zero_point_linear_quantize"
    x, bits, signed, symmetric, axis = _quant_setup(op, ins, at)
    r = 2 ** (bits - 1) - 1 if signed else 2 ** bits - 1
    m = 0 if not signed else (-r if symmetric else -r - 1)
    zp = _per_channel(op, at["zero_point"], x, axis, "zero_point")
    sc = _per_channel(op, at["scale"], x, axis, "scale")
    if np.any(sc <= 0):
        fail(op, f"scale must be positive; got {at['scale']}")
    q = np.clip(zp + nnef_round(x / sc), m, r)
    return [((q - zp) * sc).astype(x.dtype)]


@register("quant.min_max_linear_quantize")
def min_max_linear_quantize(ins, at):
    op = "quant.min_max_linear_quantize"
    x, bits, signed, symmetric, axis = _quant_setup(op, ins, at)
    r = float(2 ** bits - 1 - int(signed and symmetric))
    p = float(2 ** (bits - 1) - int(symmetric)) if signed else 0.0
    mn = _per_channel(op, at["min"], x, axis, "min")
    mx = _per_channel(op, at["max"], x, axis, "max")
    sc = mx - mn
    q = nnef_round((np.clip(x, mn, mx) - mn) / sc * r) - p
    return [((q + p) / r * sc + mn).astype(x.dtype)]


@register("algo.top_k")
def top_k(ins, at):
    """Ties keep index order (a stable sort); sorted=false returns the k picks in index order."""
    x = np.asarray(ins[0])
    k = int(at["k"])
    if k <= 0:
        fail("algo.top_k", f"'k' must be positive; got {k}")
    axis = norm_axis(at.get("axis", 0), x.ndim, "algo.top_k")
    k = min(k, x.shape[axis])
    key = -x if at.get("largest", True) else x
    order = np.argsort(key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    if not at.get("sorted", True):
        idx = np.sort(idx, axis=axis)
    return [np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)]


def _corners(boxes, fmt):
    if fmt == "CORNERS":
        y1 = np.minimum(boxes[:, 0], boxes[:, 2]); y2 = np.maximum(boxes[:, 0], boxes[:, 2])
        x1 = np.minimum(boxes[:, 1], boxes[:, 3]); x2 = np.maximum(boxes[:, 1], boxes[:, 3])
        return y1, x1, y2, x2
    cx, cy, w, h = boxes.T
    return cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2


@register("algo.nonmax_suppress")
def nonmax_suppress(ins, at):
    """Greedy per (batch, class): visit boxes by descending score (ties by index), keep a box
    unless its IoU with a kept box exceeds iou_threshold; scores <= score_threshold are dropped.
    Output rows are (batch, class, box), batch-major, then class, then selection order.
    CORNERS boxes are [y1, x1, y2, x2] (either corner order), CENTER [x, y, w, h]."""
    boxes, scores = np.asarray(ins[0], np.float64), np.asarray(ins[1], np.float64)
    fmt = at.get("box_format", "CORNERS")
    if fmt not in ("CORNERS", "CENTER"):
        fail("algo.nonmax_suppress", f"'box_format' must be one of ['CORNERS', 'CENTER']; got {fmt!r}")
    b, n, _ = boxes.shape
    limit = int(at.get("max_outputs_per_class", n))
    thr = float(at.get("iou_threshold", 0.0))
    if not 0.0 <= thr <= 1.0 or limit < 0:
        fail("algo.nonmax_suppress", f"'iou_threshold'={thr} must be in [0, 1] and "
             f"'max_outputs_per_class'={limit} non-negative")
    sthr = at.get("score_threshold")
    rows = []
    for bi in range(b):
        y1, x1, y2, x2 = _corners(boxes[bi], fmt)
        area = (y2 - y1) * (x2 - x1)
        for ci in range(scores.shape[1]):
            s = scores[bi, ci]
            order = [i for i in np.argsort(-s, kind="stable") if sthr is None or s[i] > sthr]
            kept = []
            for i in order:
                if len(kept) >= limit:
                    break
                if kept:
                    k = np.asarray(kept)
                    ih = np.clip(np.minimum(y2[i], y2[k]) - np.maximum(y1[i], y1[k]), 0, None)
                    iw = np.clip(np.minimum(x2[i], x2[k]) - np.maximum(x1[i], x1[k]), 0, None)
                    inter = ih * iw
                    union = area[i] + area[k] - inter
                    iou = np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)
                    if np.any(iou > thr):
                        continue
                kept.append(i)
            rows.extend((bi, ci, i) for i in kept)
    return [np.asarray(rows, dtype=np.int64).reshape(-1, 3)]
