"""ONNX → NNEF 2.0: DepthToSpace (PixelShuffle of super-resolution networks) and SpaceToDepth as
the reshape → transpose → reshape they are defined by (ONNX operator documentation), so the
quantizer sees layout operators it already lowers (RESHAPE and TRANSPOSE move values, they
compute nothing: the integer result is the float one on the same grid).

With b the block size, for an input [N, C, H, W]:
- DepthToSpace DCR (depth-column-row, the default): [N, b, b, C/b², H, W] → perm (0, 3, 4, 1, 5, 2)
- DepthToSpace CRD (column-row-depth, torch.nn.PixelShuffle): [N, C/b², b, b, H, W] → perm
  (0, 1, 4, 2, 5, 3)
  both then → [N, C/b², H·b, W·b];
- SpaceToDepth: [N, C, H/b, b, W/b, b] → perm (0, 3, 5, 1, 2, 4) → [N, C·b², H/b, W/b].
"""
from __future__ import annotations

import numpy as np

from .builder import NodeContext, Value
from .convert_base import converter, folder
from .convert_layout import reshape_to


def _plan(ctx: NodeContext, shape: tuple) -> tuple[tuple, tuple, tuple]:
    """(rank-6 shape, permutation, result shape) of the node on an input of `shape`."""
    if len(shape) != 4:
        ctx.fail(f"input {list(shape)} must have rank 4 [N, C, H, W]")
    b = int(ctx.attr("blocksize", 0))
    if b < 1:
        ctx.fail(f"blocksize {b} must be positive")
    n, c, h, w = shape
    if ctx.op_type == "SpaceToDepth":
        if h % b or w % b:
            ctx.fail(f"height {h} and width {w} must be multiples of blocksize {b}")
        return (n, c, h // b, b, w // b, b), (0, 3, 5, 1, 2, 4), (n, c * b * b, h // b, w // b)
    if c % (b * b):
        ctx.fail(f"{c} channels are not a multiple of blocksize² = {b * b}")
    mode = ctx.attr("mode", "DCR")
    out = (n, c // (b * b), h * b, w * b)
    if mode == "DCR":
        return (n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2), out
    if mode == "CRD":
        return (n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3), out
    ctx.fail(f"mode {mode!r} is not DCR or CRD")


@converter("DepthToSpace", "SpaceToDepth")
def _depth_space(ctx: NodeContext) -> list:
    x: Value = ctx.input(0, "input")
    split, perm, out = _plan(ctx, x.shape)
    h = reshape_to(ctx, x, split, final=False)
    moved = tuple(split[p] for p in perm)
    h = ctx.emit1("layout.transpose", [h], {"axis": 0, "perm": perm}, x.dtype, moved)
    return [reshape_to(ctx, h, out, final=True)]


@folder("DepthToSpace", "SpaceToDepth")
def _fold_depth_space(ctx: NodeContext, arrays: list) -> list:
    split, perm, out = _plan(ctx, arrays[0].shape)
    return [np.ascontiguousarray(arrays[0].reshape(split).transpose(perm)).reshape(out)]
