"""A zero layout.pad whose only reader is a 2-D nn.conv, folded into that conv's own padding.

TensorFlow-style exports (EfficientNet-Lite0's static_padding, ONNX Pad before Conv) pad the
image explicitly and convolve without padding: the pad op writes a whole padded copy of the
activation (2.3 ms of EfficientNet-Lite0's 17 ms on one thread) that the conv only reads once.
The conv pads by itself at no cost (its GEMM packing and depthwise loop read +0.0f outside the
image), so when the pad's output is wanted by nothing else the plan drops the pad step and runs
the conv on the unpadded input with the pad's widths added to its own.

Same bits: each conv output is the same chain of products in the same tap order either way
(kernels/float_gemm.h, float_conv.h), and every tap outside the image reads +0.0f exactly as
it read the pad's +0.0f. The pad is folded only when all of this holds:
- it is `layout.pad`, method CONSTANT, its value absent or a constant float32 +0.0 (not -0.0:
  a -0.0 tap can change the sign of a zero sum), no widths on the batch and channel axes;
- its output is float32, rank 4, static, read by exactly one op, as that op's first input and
  nowhere else, and neither kept nor streamed to a callback (every tensor the caller may see is
  still made: calibration streams them all, so it never takes this path);
- that op is nn.conv in NCX layout with an explicit padding list (an automatic padding depends
  on the input size) and without ceil_mode;
- neither op has a model-defined body, subgraphs or run-time attributes (int_fusion.fusable).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

import numpy as np

from .. import ir
from .int_fusion import fusable


def fold_pads(graph: ir.Graph, order: tuple, keep: frozenset | None, streamed: Callable[[str], bool],
              reads: Callable[[ir.Graph, ir.Op], Iterable[str]]) -> tuple:
    """`order` with each foldable pad removed and its conv reading the pad's input; keep None
    (every tensor returned) folds nothing. reads(graph, op): the tensors op reads."""
    if keep is None:
        return order
    readers: dict[str, list[int]] = {}
    for i, op in enumerate(order):
        for name in reads(graph, op):
            readers.setdefault(name, []).append(i)
    ops, dropped = list(order), set()
    for i, pad in enumerate(order):
        if pad.kind.name != "layout.pad" or len(pad.outputs) != 1:
            continue
        name = pad.outputs[0]
        at = readers.get(name, [])
        if len(at) != 1 or name in keep or streamed(name):
            continue
        conv = ops[at[0]]
        padding = _folded_padding(graph, pad, conv)
        if padding is None:
            continue
        ops[at[0]] = dataclasses.replace(conv, inputs=(pad.inputs[0],) + tuple(conv.inputs[1:]),
                                         attrs={**conv.attrs, "padding": padding})
        dropped.add(i)
    return tuple(op for i, op in enumerate(ops) if i not in dropped)


def _folded_padding(graph: ir.Graph, pad: ir.Op, conv: ir.Op) -> tuple | None:
    """The conv's padding with the pad's widths added, or None when the pair may not be folded."""
    name = pad.outputs[0]
    if conv.kind.name != "nn.conv" or not conv.inputs or conv.inputs[0] != name or \
            list(conv.inputs).count(name) != 1 or not fusable(pad) or not fusable(conv):
        return None
    if conv.attrs.get("data_format", "NCX") != "NCX" or conv.attrs.get("ceil_mode", False):
        return None
    own = conv.attrs.get("padding")
    if not isinstance(own, (tuple, list)) or len(own) != 4 or not all(type(p) is int for p in own):
        return None
    if pad.attrs.get("method", "CONSTANT") != "CONSTANT" or not _zero_value(graph, pad):
        return None
    out, src = graph.tensor(name), graph.tensor(pad.inputs[0])
    if out.dtype.numpy != np.float32 or src.dtype.numpy != np.float32 or out.rank != 4 or src.rank != 4 \
            or not out.is_static or not src.is_static:
        return None
    widths = _widths(pad)
    if widths is None or widths[0] != (0, 0) or widths[1] != (0, 0):
        return None
    (t, b), (left, r) = widths[2], widths[3]
    return (own[0] + t, own[1] + left, own[2] + b, own[3] + r)


def _zero_value(graph: ir.Graph, pad: ir.Op) -> bool:
    if len(pad.inputs) < 2 or not pad.inputs[1]:
        return True                                     # the default value: 0
    t = graph.tensor(pad.inputs[1])
    if not t.is_constant or np.size(t.data) != 1:
        return False
    v = np.asarray(t.data).reshape(())
    return v.dtype == np.float32 and v == 0.0 and not np.signbit(v)


def _widths(pad: ir.Op) -> list | None:
    """(before, after) per axis of a rank-4 pad, or None when the attributes are not plain."""
    axes = pad.attrs.get("axes")
    axes = tuple(range(4)) if axes is None else tuple(axes)
    padding = pad.attrs.get("padding")
    if not isinstance(padding, (tuple, list)) or len(padding) != 2 * len(axes) or \
            not all(type(p) is int and p >= 0 for p in padding) or not all(type(a) is int for a in axes):
        return None
    axes = tuple(a + 4 if a < 0 else a for a in axes)
    if len(set(axes)) != len(axes) or not all(0 <= a < 4 for a in axes):
        return None
    widths = [(0, 0)] * 4
    for i, a in enumerate(axes):
        widths[a] = (padding[i], padding[len(axes) + i])
    return widths
