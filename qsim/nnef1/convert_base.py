"""What every NNEF 1.0 conversion family (convert.py, convert_nn.py, convert_index.py) builds
on: the registry, filled by the families' @conversion as they are imported (compose.py imports
each family, then reads CONVERSIONS and COMPOUND_KEPT), and the helpers several families share.
This module imports no family, so no family imports another through it. The conventions
(broadcasting, padding, border, [1,C] parameters) are described in convert.py.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .builder import TensorValue
from .convert_context import ConvertContext

Conversion = Callable[[ConvertContext, dict], list]
CONVERSIONS: dict[str, Conversion] = {}
COMPOUND_KEPT: set[str] = set()


def conversion(*names: str, compound: bool = False):
    def wrap(fn: Conversion) -> Conversion:
        for name in names:
            CONVERSIONS[name] = fn
            if compound:
                COMPOUND_KEPT.add(name)
        return fn
    return wrap


def broadcast_shape(ctx: ConvertContext, *shapes: tuple) -> tuple:
    """1.0 broadcasting (4.2.2): ranks padded on the right with singletons, extents equal or 1."""
    rank = max(len(s) for s in shapes)
    padded = [tuple(s) + (1,) * (rank - len(s)) for s in shapes]
    out = []
    for axis in range(rank):
        extents = {p[axis] for p in padded} - {1}
        if len(extents) > 1:
            ctx.fail("argument shapes " + " and ".join(str(list(s)) for s in shapes)
                     + f" do not broadcast (dimension {axis})",
                     hint="extents must be equal or 1 in each dimension (4.2.2)")
        out.append(extents.pop() if extents else 1)
    return tuple(out)


def _expand(ctx: ConvertContext, a: dict) -> list:
    """Falls back to the fragment's body (the case has no direct 2.0 operator)."""
    frag = ctx.composer.fragments[ctx.op]
    return [ctx.composer.expand(frag, a, ctx.generic, ctx.loc, ctx.hint)]


def channel_vector(ctx: ConvertContext, value: TensorValue | None, channels: int, what: str):
    """A per-channel parameter as a [C] vector (2.0) from a 1.0 [1,C] / [C] / singleton tensor."""
    if value is None:
        return None
    shape = value.shape
    if tuple(shape) == (channels,):
        return value
    tensor = ctx.builder.tensors[ctx.builder.origin.get(value.name, value.name)]
    singleton = all(d == 1 for d in shape)
    per_channel = len(shape) >= 2 and shape[1] == channels and all(d == 1 for i, d in enumerate(shape) if i != 1)
    if not (singleton or per_channel):
        ctx.fail(f"'{what}' has shape {list(shape)}, expected [1,{channels}] or a singleton",
                 hint=f"the channel dimension of '{what}' must match the {channels} channels")
    if tensor.data is not None:
        data = np.broadcast_to(tensor.data.reshape(-1), (channels,)).copy()
        name = ctx.builder.fresh(f"{value.name}.vector")
        return ctx.builder.add_tensor(name, value.item, (channels,), data=data)
    if singleton:
        return ctx.emit("layout.broadcast", [_reshape(ctx, value, [1])], {"axes": (0,), "shape": (channels,)},
                        [(value.item, (channels,))])[0]
    return _reshape(ctx, value, [channels])


def _reshape(ctx: ConvertContext, x: TensorValue, shape: list) -> TensorValue:
    return ctx.emit("layout.reshape", [x], {"axis": 0, "rank": x.rank, "shape": tuple(shape)},
                    [(x.item, tuple(shape))])[0]


# 1.0 border modes (4.3) → layout.pad methods (2.0)
_BORDER_METHODS = {"replicate": "REPLICATE", "reflect": "REFLECT", "reflect-even": "SYMMETRIC"}


def _is_zero_literal(ctx: ConvertContext, value: TensorValue) -> bool:
    tensor = ctx.builder.tensors.get(ctx.builder.origin.get(value.name, value.name))
    return (tensor is not None and tensor.data is not None and tensor.data.size == 1
            and value.name.endswith(".const") and float(tensor.data.reshape(-1)[0]) == 0.0)


def _axes(ctx: ConvertContext, x: TensorValue, axes: list) -> list:
    if len(set(axes)) != len(axes) or any(not 0 <= ax < x.rank for ax in axes):
        ctx.fail(f"'axes' {axes} must be unique and in [0, {x.rank})")
    return list(axes)
