"""layout.gather (output[s.., n.., t..] = data[s.., index[n..], t..]) → TOSA GATHER (2.11.1).

GATHER reads values [N, K, C] with indices [N, W] into [N, W, C]: the data, in its float
layout, is RESHAPEd to N = prod(s), K = its extent on the gathered axis, C = prod(t); constant
indices become an int32 [N, W] tensor (the same W = prod(n) picks for every n, checked
against K at compile time: GATHER REQUIREs 0 <= k < K); the result is RESHAPEd to the output.
Gathering moves values without arithmetic, so the output keeps the data's grid.

A gather with computed indices (token ids of an embedding lookup) needs integer graph inputs,
which the quantization pipeline does not take yet: it is refused with that reason.
"""
from __future__ import annotations

import math

import numpy as np

from .. import ir
from .float_side import Lowered, identity
from .rules import rule
from .target import TargetKind
from .tosa_context import TosaContext


@rule(TargetKind.TOSA, "layout.gather")
def lower_gather(ctx: TosaContext, op: ir.Op) -> None:
    data_name, index_name = op.inputs[:2]
    if not ctx.f.is_constant(index_name):
        raise ctx.f.unsupported(f"indices {index_name!r} are computed at run time; qsim quantizes "
                                "float inputs only, so only constant indices are lowered",
                                hint="index with constants (the importer folds shape arithmetic), "
                                     "or feed the gathered rows as the model input")
    if ctx.f.is_constant(data_name):
        raise ctx.f.unsupported("both data and indices are constants (the result is a constant: fold it)")
    shape = ctx.f.float_shape(data_name)
    rank = len(shape)
    axis = int(op.attrs.get("axis", 0))
    if not -rank <= axis < rank:
        raise ctx.f.unsupported(f"axis {axis} is outside [-{rank}, {rank})")
    axis %= rank
    extent = shape[axis]
    index = np.asarray(ctx.f.graph.tensor(index_name).data)
    if index.dtype.kind not in "iu" and not np.array_equal(index, np.floor(index)):
        raise ctx.f.unsupported(f"indices {index_name!r} are not integers")
    index = np.where(index < 0, index + extent, index).astype(np.int64)
    if index.size == 0:
        raise ctx.f.unsupported(f"indices {index_name!r} are empty (the result has no elements)")
    if (index.min() < 0 or index.max() >= extent):
        raise ctx.f.unsupported(f"indices {index.reshape(-1)[:8].tolist()} are outside [0, {extent}) "
                                f"on axis {axis} of {data_name!r}")
    n, c, w = math.prod(shape[:axis]), math.prod(shape[axis + 1:]), index.size
    x = ctx.to_float_layout(ctx.f.value(data_name), f"{data_name}.float")
    where, out = ctx.f.where(), op.outputs[0]
    values = ctx.emit("RESHAPE", [x.name], {"new_shape": (n, extent, c)}, hint=f"{out}.values",
                      label=where, quant=x.quant)
    picks = ctx.constant_tensor(f"{out}.indices", np.tile(index.reshape(1, -1), (n, 1)).reshape(n, w),
                                ir.DType.I32)
    gathered = ctx.emit("GATHER", [values, picks], {}, hint=f"{out}.rows", label=where, quant=x.quant)
    out_shape = ctx.f.float_shape(out)
    result = ctx.emit("RESHAPE", [gathered], {"new_shape": tuple(out_shape)}, hint=out, label=where,
                      quant=x.quant, exact=True)
    ctx.f.bind(out, Lowered(result, x.quant, identity(len(out_shape))))
