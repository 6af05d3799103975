"""layout.gather (output[s.., n.., t..] = data[s.., index[n..], t..]) → TOSA GATHER (2.11.1).

GATHER reads values [N, K, C] with indices [N, W] into [N, W, C]: the data, in its float
layout, is RESHAPEd to N = prod(s), K = its extent on the gathered axis, C = prod(t); constant
indices become an int32 [N, W] tensor (the same W = prod(n) picks for every n, checked
against K at compile time: GATHER REQUIREs 0 <= k < K); the result is RESHAPEd to the output.
Gathering moves values without arithmetic, so the output keeps the data's grid.

Computed indices (token ids: an integer model input, int32 in the integer graph,
lowering/integer_inputs.py) are RESHAPEd to [1, W] and TILEd to [N, W]. As in the float graph
(layout.gather takes indices in [0, K); torch's nn.Embedding has no other), an index outside
[0, K) violates GATHER's REQUIRE, which the reference and the kernels refuse naming the
operator and the index. A constant data tensor (an nn.Embedding table) is quantized
per tensor over its whole range [min, max] on the activation grid, so every row any id can
pick is represented; the result keeps that grid.
"""
from __future__ import annotations

import math

import numpy as np

from ... import ir
from ..lowering.float_side import Lowered, identity
from ..lowering.integer_inputs import INDEX_DTYPE
from ..params import params_from_range, quantize
from ..rules import rule
from ..target import TargetKind
from .context import TosaContext


@rule(TargetKind.TOSA, "layout.gather")
def lower_gather(ctx: TosaContext, op: ir.Op) -> None:
    data_name, index_name = op.inputs[:2]
    computed = not ctx.f.is_constant(index_name)
    if ctx.f.is_constant(data_name) and not computed:
        raise ctx.f.unsupported("both data and indices are constants (the result is a constant: fold it)")
    shape = ctx.f.float_shape(data_name)
    rank = len(shape)
    axis = int(op.attrs.get("axis", 0))
    if not -rank <= axis < rank:
        raise ctx.f.unsupported(f"axis {axis} is outside [-{rank}, {rank})")
    axis %= rank
    extent = shape[axis]
    n, c = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
    where, out = ctx.f.where(), op.outputs[0]
    if ctx.f.is_constant(data_name):
        x = _embedding_table(ctx, data_name, ctx.f.constant(data_name))
    else:
        x = ctx.to_float_layout(ctx.f.value(data_name), f"{data_name}.float")
    values = ctx.emit("RESHAPE", [x.name], {"new_shape": (n, extent, c)}, hint=f"{out}.values",
                      label=where, quant=x.quant)
    picks = (_computed_indices(ctx, index_name, n, out) if computed
             else _constant_indices(ctx, index_name, n, extent, axis, data_name, out))
    gathered = ctx.emit("GATHER", [values, picks], {}, hint=f"{out}.rows", label=where, quant=x.quant)
    out_shape = ctx.f.float_shape(out)
    result = ctx.emit("RESHAPE", [gathered], {"new_shape": tuple(out_shape)}, hint=out, label=where,
                      quant=x.quant, exact=True)
    ctx.f.bind(out, Lowered(result, x.quant, identity(len(out_shape))))


def _constant_indices(ctx: TosaContext, index_name: str, n: int, extent: int, axis: int, data_name: str,
                      out: str) -> str:
    """[N, W] int32 constant: the same W picks for every n, checked against K here."""
    index = np.asarray(ctx.f.graph.tensor(index_name).data)
    if index.dtype.kind not in "iu" and not np.array_equal(index, np.floor(index)):
        raise ctx.f.unsupported(f"indices {index_name!r} are not integers")
    index = np.where(index < 0, index + extent, index).astype(np.int64)
    if index.size == 0:
        raise ctx.f.unsupported(f"indices {index_name!r} are empty (the result has no elements)")
    if (index.min() < 0 or index.max() >= extent):
        raise ctx.f.unsupported(f"indices {index.reshape(-1)[:8].tolist()} are outside [0, {extent}) "
                                f"on axis {axis} of {data_name!r}")
    w = index.size
    return ctx.constant_tensor(f"{out}.indices", np.tile(index.reshape(1, -1), (n, 1)).reshape(n, w),
                               ir.DType.I32)


def _computed_indices(ctx: TosaContext, index_name: str, n: int, out: str) -> str:
    """[N, W] int32 from run-time indices."""
    idx = ctx.f.value(index_name)
    if ctx.f.builder.tensor(idx.name).dtype is not INDEX_DTYPE:
        raise ctx.f.unsupported(f"indices {index_name!r} are computed from quantized values; only integer "
                                "model inputs (token ids) index at run time",
                                hint="feed the ids as an integer model input")
    where = ctx.f.where()
    flat = ctx.to_float_layout(idx, f"{index_name}.float")
    w = math.prod(ctx.f.float_shape(index_name))
    k = ctx.emit("RESHAPE", [flat.name], {"new_shape": (1, w)}, hint=f"{out}.ids", label=where)
    if n > 1:
        k = ctx.emit("TILE", [k], {"multiples": (n, 1)}, hint=f"{out}.ids_tiled", label=where)
    return k


def _embedding_table(ctx: TosaContext, name: str, table: np.ndarray) -> Lowered:
    """A constant gathered by computed indices, on the activation grid over its whole range."""
    table = np.asarray(table, dtype=np.float64)
    quant = params_from_range(table.min(), table.max(), ctx.config.activation_scheme(),
                              source="derived", what=name)
    data = quantize(table, quant, what=name)
    return Lowered(ctx.constant_tensor(f"{name}.q", data, ctx.act_dtype, quant=quant), quant,
                   identity(table.ndim))
