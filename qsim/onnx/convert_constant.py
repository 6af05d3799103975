"""ONNX → NNEF 2.0, part four: the operators that only make constants (Shape, Size, Constant,
ConstantOfShape, Range), which always fold at import (shapes are static), and Cast."""
from __future__ import annotations

import math

import numpy as np
import onnx

from .. import ir
from ..limits import check_tensor_size
from .builder import NodeContext, constant_value
from .convert_base import as_dtype, converter, folder
from .protobuf import tensor_array


def _check_size(ctx: NodeContext, shape, itemsize: int) -> None:
    check_tensor_size([int(d) for d in shape], itemsize, f"result of {ctx.where}", ctx.builder.location)



@converter("Shape")
def _shape(ctx: NodeContext) -> list:
    x = ctx.input(0, "data")
    start, end = int(ctx.attr("start", 0)), ctx.attr("end")
    dims = list(x.shape)
    begin = max(0, min(len(dims), start + len(dims) if start < 0 else start))
    stop = len(dims) if end is None else int(end)
    stop = max(0, min(len(dims), stop + len(dims) if stop < 0 else stop))
    return [constant_value(ctx.output_names[0], np.asarray(dims[begin:stop], dtype=np.int64))]


@converter("Size")
def _size(ctx: NodeContext) -> list:
    return [constant_value(ctx.output_names[0], np.asarray(math.prod(ctx.input(0, "data").shape), np.int64))]


def constant_of_node(ctx: NodeContext) -> np.ndarray:
    """The value of a Constant node (one of its value attributes)."""
    given = [k for k in ("value", "value_float", "value_floats", "value_int", "value_ints") if k in ctx.attrs]
    if len(given) != 1:
        others = [k for k in ctx.attrs if k.startswith(("value_string", "sparse_value"))]
        ctx.fail(f"has value attributes {given + others}, expected one numeric value",
                 unsupported=bool(others) and not given)
    key = given[0]
    value = ctx.attrs[key]
    if key == "value":
        return tensor_array(ctx.model, value, f"{ctx.where}: value")
    dtype = np.float32 if key.startswith("value_float") else np.int64
    return np.asarray(value, dtype=dtype)


@converter("Constant")
def _constant(ctx: NodeContext) -> list:
    return [constant_value(ctx.output_names[0], constant_of_node(ctx))]


@converter("ConstantOfShape")
def _constant_of_shape(ctx: NodeContext) -> list:
    shape = ctx.ints(0, "input")
    if any(s < 0 for s in shape):
        ctx.fail(f"shape {shape} has negative values")
    value = ctx.attr("value")
    fill = np.zeros((1,), np.float32) if value is None else tensor_array(ctx.model, value, f"{ctx.where}: value")
    if fill.size != 1:
        ctx.fail(f"value has {fill.size} elements, expected 1")
    _check_size(ctx, shape, fill.dtype.itemsize)
    return [constant_value(ctx.output_names[0], np.full(shape, fill.reshape(-1)[0], dtype=fill.dtype))]


@converter("Range")
def _range(ctx: NodeContext) -> list:
    start, limit, delta = (ctx.constant(i, n) for i, n in ((0, "start"), (1, "limit"), (2, "delta")))
    if any(a.size != 1 for a in (start, limit, delta)):
        ctx.fail("start, limit and delta must be scalars")
    s, lim, d = (a.reshape(-1)[0] for a in (start, limit, delta))
    if d == 0:
        ctx.fail("delta is 0")
    count = max(int(math.ceil((float(lim) - float(s)) / float(d))), 0)
    _check_size(ctx, [count], start.dtype.itemsize)
    return [constant_value(ctx.output_names[0], (s + d * np.arange(count)).astype(start.dtype))]


# Unsigned types wider than qsim's are held in int64: a cast to them (what torch writes for shape
# arithmetic, e.g. Cast(to=UINT64) before a Range or Reshape) gives the same values for every
# value below 2^63, which all shapes, indices and counts are; a graph output of that type is
# written as int64.
_WIDE_UNSIGNED = (onnx.TensorProto.UINT32, onnx.TensorProto.UINT64)


def _cast_target(ctx: NodeContext) -> ir.DType:
    code = int(ctx.attr("to", 0))
    return ir.DType.I64 if code in _WIDE_UNSIGNED else as_dtype(ctx, code, "target type 'to'")


@converter("Cast")
def _cast(ctx: NodeContext) -> list:
    x = ctx.input(0, "input")
    target = _cast_target(ctx)
    if target == x.dtype:
        return [x]
    if target in (ir.DType.F16, ir.DType.F64):
        ctx.fail(f"cast to {target}", unsupported=True, hint="qsim executes float32 models")
    return [ctx.emit1("layout.cast", [x], {"R": target.short}, target, x.shape, final=True)]


@folder("Cast")
def _fold_cast(ctx: NodeContext, arrays: list) -> list:
    target = _cast_target(ctx)
    _check_size(ctx, arrays[0].shape, target.numpy.itemsize)
    with np.errstate(all="ignore"):
        return [arrays[0].astype(target.numpy)]


@converter("Trilu")
def _trilu(ctx: NodeContext) -> list:
    """Only of constants (folded below): what torch writes for a causal attention mask
    (generate_square_subsequent_mask, is_causal=True), whose shape is static."""
    ctx.fail("Trilu of a tensor computed at run time", unsupported=True,
             hint="qsim folds Trilu of constants (causal attention masks); export the mask as a constant")


@folder("Trilu")
def _fold_trilu(ctx: NodeContext, arrays: list) -> list:
    x = arrays[0]
    if x.ndim < 2:
        ctx.fail(f"input of rank {x.ndim}; Trilu needs rank 2 or more")
    k = 0 if len(arrays) < 2 or arrays[1] is None else arrays[1]
    if np.asarray(k).size != 1:
        ctx.fail("k must be a scalar")
    k = int(np.asarray(k).reshape(-1)[0])
    # numpy's triu/tril keep the diagonal k like ONNX and apply to the last two axes
    return [np.triu(x, k) if int(ctx.attr("upper", 1)) else np.tril(x, k)]
