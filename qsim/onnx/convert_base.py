"""What every ONNX operator family (convert.py, convert_nn.py, convert_layout.py,
convert_constant.py) builds on: the registry of converters and folders, filled by the
families' @converter / @folder as they are imported (loader.py imports each family, then
reads CONVERTERS and FOLDERS), and the emission helpers several families share.

A converter `fn(ctx) -> list[Value]` emits standard operators for one node; a folder
`fn(ctx, arrays) -> list[array]` computes a node of constant inputs with numpy (convert.py's
doc). This module imports no family, so no family imports another through it.
"""
from __future__ import annotations

from typing import Callable

from .. import ir
from .builder import NodeContext, Value
from .protobuf import dtype_of

Converter = Callable[[NodeContext], list]
Folder = Callable[[NodeContext, list], list]
CONVERTERS: dict[str, Converter] = {}
FOLDERS: dict[str, Folder] = {}


def converter(*op_types: str):
    def wrap(fn: Converter) -> Converter:
        for name in op_types:
            CONVERTERS[name] = fn
        return fn
    return wrap


def folder(*op_types: str):
    def wrap(fn: Folder) -> Folder:
        for name in op_types:
            FOLDERS[name] = fn
        return fn
    return wrap


def broadcast_shape(ctx: NodeContext, *shapes) -> tuple[int, ...]:
    """Multidirectional (numpy) broadcasting of ONNX: ranks aligned on the right."""
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        extents = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0} - {1}
        if len(extents) > 1:
            ctx.fail("input shapes " + " and ".join(str(list(s)) for s in shapes) + " do not broadcast",
                     hint="extents must be equal or 1, aligned on the right")
        out.append(extents.pop() if extents else 1)
    return tuple(out)


NO_ALIGN = {"lhs_align": None, "rhs_align": None}


def binary(ctx: NodeContext, kind: str, x: Value, y: Value, final: bool = False, dtype=None) -> Value:
    shape = broadcast_shape(ctx, x.shape, y.shape)
    return ctx.emit1(kind, [x, y], dict(NO_ALIGN), dtype or x.dtype, shape, final)


def unary(ctx: NodeContext, kind: str, x: Value, attrs: dict | None = None, final: bool = False) -> Value:
    return ctx.emit1(kind, [x], attrs or {}, x.dtype, x.shape, final)


def as_dtype(ctx: NodeContext, code: int, what: str) -> ir.DType:
    return dtype_of(code, f"{ctx.where}: {what}", ctx.builder.location)
