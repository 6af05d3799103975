"""NMS operators: get_valid_count and non_max_suppression (cvm-formalization, "NMS Operator").

Box rows are [class_id, score, x1, y1, x2, y2] (corner format, K = 6 for NMS).
overlap_ratio is the CVM runtime's integer IoU in percent, which the formalization
names but does not define (docs/cvm.md):
    sum  = (x1b - x1a)(y1b - y1a) + (x2b - x2a)(y2b - y2a)   (the two box areas)
    if sum <= 0: 0
    w, h = max(0, min(right edges) - max(left edges)), same for y
    union = sum - w*h; if union <= 0: 0
    iou = floor(100 * w*h / union)            (exact, in Python integers)
A candidate p is kept when iou(p, q) < iou_threshold for every kept q, so
iou_threshold = 101 (or more) never suppresses: 100 is full overlap.
Ordering: stable by score, descending (equal scores keep their input order).
Rows past the kept ones are -1.

Precision: Y keeps X's precision but at least 2 (it holds -1); valid_count needs
required_precision(N).
"""
from __future__ import annotations

import numpy as np

from .opdef import REQUIRED, OpDef, define
from .precision import required_precision


def _gvc_infer(chk, shapes, attrs):
    b, n, k = chk.rank(shapes, 0, 3, "(B, N, K)")
    chk.require(k >= 2, f"{chk.tensor('X')} has shape {list(shapes[0])}: K = {k} must be >= 2 "
                "(column 1 is the score)")
    chk.int_attr(attrs, "score_threshold")
    return [(b,), (b, n, k)]


def get_valid_count_reference(inputs, attrs):
    (x,) = inputs
    b, n, k = x.shape
    valid = x[:, :, 1] > attrs["score_threshold"]
    count = valid.sum(axis=1).astype(np.int64)
    y = np.full_like(x, -1)
    for bi in range(b):
        kept = x[bi][valid[bi]]           # boolean selection keeps the input order
        y[bi, :len(kept)] = kept
    return [count, y]


define(OpDef("get_valid_count", ("X",), ("valid_count", "Y"), {"score_threshold": 0}, _gvc_infer,
             lambda chk, precs, shapes, attrs: [required_precision(shapes[0][1]), max(precs[0], 2)],
             get_valid_count_reference, doc="rows with score > score_threshold first, then -1 rows"))


def overlap_ratio(a, c) -> int:
    """CVM integer IoU in percent of boxes a, c = (x1, y1, x2, y2)."""
    ax1, ay1, ax2, ay2 = (int(v) for v in a)
    cx1, cy1, cx2, cy2 = (int(v) for v in c)
    total = (ax2 - ax1) * (ay2 - ay1) + (cx2 - cx1) * (cy2 - cy1)
    if total <= 0:
        return 0
    w = max(0, min(ax2, cx2) - max(ax1, cx1))
    h = max(0, min(ay2, cy2) - max(ay1, cy1))
    union = total - w * h
    if union <= 0:
        return 0
    return (100 * w * h) // union


def _nms_infer(chk, shapes, attrs):
    b, n, k = chk.rank(shapes, 0, 3, "(B, N, 6)")
    chk.require(k == 6, f"{chk.tensor('X')} has shape {list(shapes[0])}: K = {k} must be 6 "
                "([class_id, score, x1, y1, x2, y2])")
    chk.require(tuple(shapes[1]) == (b,), f"{chk.tensor('valid_count')} has shape {list(shapes[1])}; "
                f"it must be [{b}] (one count per batch)")
    chk.int_attr(attrs, "iou_threshold", 1, bound_doc="iou_threshold is in (0, +inf); 101 = full overlap")
    chk.int_attr(attrs, "max_output_size")
    chk.int_attr(attrs, "top_k")
    chk.bool_attr(attrs, "force_suppress")
    return [(b, n, k)]


def non_max_suppression_reference(inputs, attrs):
    x, valid_count = inputs
    bsz, n, k = x.shape
    y = np.full_like(x, -1)
    mos = attrs["max_output_size"]
    tk = attrs["top_k"]
    thr = attrs["iou_threshold"]
    force = attrs["force_suppress"]
    for b in range(bsz):
        t = max(min(n, int(valid_count[b])), 0)
        order = sorted(range(t), key=lambda i: (-int(x[b, i, 1]), i))   # I: score desc, index asc
        r = x[b, order]                                                   # R
        limit_p = t if tk < 0 else min(tk, t)                             # p in [0, min(TK, T))
        limit_n = t if mos < 0 else min(mos, t)                           # n < min(T, MOS, |U|)
        kept: list[int] = []
        for p in range(limit_p):
            if len(kept) >= limit_n:
                break          # U is built in order, so its first min(T, MOS) members are final
            if r[p, 0] < 0:
                continue
            if all(not (force or r[p, 0] == r[q, 0]) or overlap_ratio(r[p, 2:6], r[q, 2:6]) < thr
                   for q in kept):
                kept.append(p)
        if kept:
            y[b, :len(kept)] = r[kept]
    return [y]


define(OpDef("non_max_suppression", ("X", "valid_count"), ("Y",),
             {"iou_threshold": REQUIRED, "max_output_size": -1, "force_suppress": False, "top_k": -1},
             _nms_infer, lambda chk, precs, shapes, attrs: [max(precs[0], 2)],
             non_max_suppression_reference, doc="greedy NMS by score, -1 filled"))
