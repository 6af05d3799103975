"""Spec 2.10 data layout: CONCAT, PAD, RESHAPE, REVERSE, SLICE, TILE, TRANSPOSE.
No data conversion: outputs keep the input's type."""
from __future__ import annotations

import numpy as np

from ..signature import BOOL, F32, I8, I16, I32, Arg, Attr, AttrKind, Call, OperatorDef, define, modes

LAYOUT_MODES = modes(("Boolean", BOOL), ("signed 8", I8), ("signed 16", I16), ("signed 32", I32),
                     ("fp32", F32), names=("in_out_t",))


def _layout(name, section, attrs, check, ref, ranks=None, input_name="input1", variadic=False):
    return define(OperatorDef(
        name, section, inputs=(Arg(input_name, "in_out_t", ranks, variadic=variadic),), attrs=attrs,
        outputs=(Arg("output", "in_out_t"),), modes=LAYOUT_MODES, check=check, ref=ref))


def _check_concat(call: Call):
    shapes, axis = call.shapes, call.attrs["axis"]
    call.error_if(not shapes, "length(input1) == 0", "an empty input list")
    first = shapes[0]
    call.error_if(axis < 0 or axis >= len(first), "axis < 0 || axis >= rank(shapes1[0])",
                  f"axis={axis}, input1[0] of shape {list(first)}")
    for k, s in enumerate(shapes):
        call.error_if(len(s) != len(first), "rank(input_shape) != rank(shapes1[0])",
                      f"input1[{k}] of shape {list(s)} vs input1[0] of shape {list(first)}")
        for i, (d, d0) in enumerate(zip(s, first)):
            call.error_if(d != d0 and i != axis, "input_shape[index] != shapes1[0][index] && index != axis",
                          f"input1[{k}] of shape {list(s)}, dimension {i}")
    return [tuple(sum(s[axis] for s in shapes) if i == axis else d for i, d in enumerate(first))]


CONCAT = _layout("CONCAT", "2.10.1", (Attr("axis", AttrKind.INT),), _check_concat,
                 lambda i, a: [np.concatenate(i, axis=a["axis"])], variadic=True)


def _check_pad(call: Call):
    shape, padding = call.shapes[0], call.attrs["padding"]
    call.error_if(len(padding) != len(shape), "padding shape != [rank(input1), 2]",
                  f"{len(padding)} pairs for an input of rank {len(shape)}")
    for i, (b, a) in enumerate(padding):
        call.error_if(b < 0 or a < 0, "pad_size < 0", f"padding[{i}] = ({b}, {a})")
    return [tuple(d + b + a for d, (b, a) in zip(shape, padding))]


# The spec's `index[i] >= length(shape[i])` is read as index1[i] >= shape1[i] (docs/tosa.md).
PAD = _layout("PAD", "2.10.2", (Attr("padding", AttrKind.PAIRS), Attr("pad_const", AttrKind.SCALAR, "in_out_t")),
              _check_pad, lambda i, a: [np.pad(i[0], a["padding"], constant_values=a["pad_const"])])


def _check_reshape(call: Call):
    shape, new = call.shapes[0], call.attrs["new_shape"]
    call.error_if(any(d < 1 for d in new), "new_shape[i] < 1 (tensor dimensions are >= 1, spec 1.8.1)",
                  f"new_shape={list(new)}")
    size = int(np.prod(shape, dtype=np.int64))
    call.error_if(size != int(np.prod(new, dtype=np.int64)), "tensor_size(shape1) != tensor_size(shape)",
                  f"input of shape {list(shape)} and new_shape={list(new)}")
    return [tuple(new)]


RESHAPE = _layout("RESHAPE", "2.10.3", (Attr("new_shape", AttrKind.INTS),), _check_reshape,
                  lambda i, a: [i[0].reshape(a["new_shape"])])


def _check_reverse(call: Call):
    shape, axis = call.shapes[0], call.attrs["axis"]
    call.error_if(axis < 0 or axis >= len(shape), "axis < 0 || axis >= rank(shape)",
                  f"axis={axis}, input of shape {list(shape)}")
    return [shape]


REVERSE = _layout("REVERSE", "2.10.4", (Attr("axis", AttrKind.INT),), _check_reverse,
                  lambda i, a: [np.flip(i[0], axis=a["axis"]).copy()], ranks=(1, 2, 3, 4), input_name="input")


def _check_slice(call: Call):
    shape, start, size = call.shapes[0], call.attrs["start"], call.attrs["size"]
    call.error_if(len(shape) != len(start) or len(shape) != len(size),
                  "rank(input1) != length(start) || rank(input1) != length(size)",
                  f"input of shape {list(shape)}, start={list(start)}, size={list(size)}")
    for i, (d, st, sz) in enumerate(zip(shape, start, size)):
        call.error_if(st < 0, "start[index] < 0", f"start[{i}]={st}")
        call.error_if(sz <= 0, "size[index] <= 0", f"size[{i}]={sz}")
        call.error_if(st + sz > d, "start[index] + size[index] > shape1[index]",
                      f"axis {i}: start {st} + size {sz} > {d}")
    return [tuple(size)]


SLICE = _layout("SLICE", "2.10.5", (Attr("start", AttrKind.INTS), Attr("size", AttrKind.INTS)), _check_slice,
                lambda i, a: [i[0][tuple(slice(s, s + n) for s, n in zip(a["start"], a["size"]))].copy()],
                ranks=(1, 2, 3, 4))


def _check_tile(call: Call):
    shape, mult = call.shapes[0], call.attrs["multiples"]
    call.error_if(len(mult) != len(shape), "length(multiples) != rank(shape1)",
                  f"multiples={list(mult)} for an input of shape {list(shape)}")
    call.error_if(any(m < 1 for m in mult), "shape1[i] * multiples[i] != shape[i] with shape[i] >= 1",
                  f"multiples={list(mult)}")
    return [tuple(d * m for d, m in zip(shape, mult))]


TILE = _layout("TILE", "2.10.6", (Attr("multiples", AttrKind.INTS),), _check_tile,
               lambda i, a: [np.tile(i[0], a["multiples"])], ranks=(1, 2, 3, 4))


def _check_transpose(call: Call):
    shape, perms = call.shapes[0], call.attrs["perms"]
    call.error_if(len(shape) < 1, "rank(input1) < 1", "a rank-0 input")
    call.error_if(len(perms) != len(shape), "length(perms) != rank(input1)",
                  f"perms={list(perms)} for an input of shape {list(shape)}")
    used = set()
    for p in perms:
        call.error_if(p >= len(shape), "index >= rank(shape1)", f"perms={list(perms)}")
        call.error_if(p < 0, "index < 0", f"perms={list(perms)}")
        call.error_if(p in used, "indexes_used[index] == true", f"perms={list(perms)} repeats {p}")
        used.add(p)
    return [tuple(shape[p] for p in perms)]


def _transpose(x: np.ndarray, perms) -> np.ndarray:
    """np.transpose(x, perms) as a new C-ordered array. When the output's last axis is short and
    not x's last (NCHW -> NHWC of an image: 3 channels), numpy's copy walks that axis innermost
    with a large input stride; one strided copy per index of that axis walks x's rows instead
    (5x faster for EfficientNet-Lite0's int8 input). A copy either way: the same values."""
    view = np.transpose(x, perms)
    if view.ndim < 2 or perms[-1] == x.ndim - 1 or not 1 < view.shape[-1] <= 8 or view.size < 4096:
        return view.copy()
    out = np.empty(view.shape, dtype=x.dtype)
    for c in range(view.shape[-1]):
        out[..., c] = view[..., c]
    return out


TRANSPOSE = _layout("TRANSPOSE", "2.10.7", (Attr("perms", AttrKind.INTS),), _check_transpose,
                    lambda i, a: [_transpose(i[0], a["perms"])], ranks=None)
