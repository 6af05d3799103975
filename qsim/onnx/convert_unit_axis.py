"""ONNX → NNEF 2.0: the 1-D window operators (Conv1d, ConvTranspose1d, MaxPool1d, AvgPool1d of
keyword-spotting and signal networks) as the 2-D ones with a unit height axis.

The integer lowering and the NPU map 2-D windows (TOSA 0.30 has CONV2D, not CONV1D), so a
[N, C, L] input is reshaped to [N, C, 1, L], the [O, I, k] weights to [O, I, 1, k], the node
runs as its 2-D converter (convert_nn.py) with the window attributes given a unit first entry,
and the [N, C', 1, L'] result is reshaped back. The arithmetic is the same sums in the same
order (a 1 x k window over a unit axis), so the float result equals the 1-D one and onnxruntime's
within float32 rounding. BatchNorm1d on [N, C, L] or [N, C] is lifted the same way ([N, C, 1, L],
[N, C, 1, 1]): the integer lowering of a batch norm it cannot fold into a convolution is a 1x1
depthwise convolution on NCHW.

This module registers its converters over convert_nn's for the same op types (the loader
imports it after convert_nn); inputs of another rank go to convert_nn's converters unchanged.
"""
from __future__ import annotations

import dataclasses

from . import convert_nn  # noqa: F401  (its window converters register first: wrapped below)
from .builder import NodeContext, Value, constant_value
from .convert_base import CONVERTERS, converter
from .convert_layout import reshape_to

_LIFTED = ("Conv", "ConvTranspose", "MaxPool", "AveragePool", "BatchNormalization")
_TWO_D = {op: CONVERTERS[op] for op in _LIFTED}     # convert_nn's converters (imported first)


def _lifted_attrs(attrs: dict) -> dict:
    """The 2-D attributes of a 1-D node: the unit axis has kernel 1, stride 1, dilation 1, no
    padding and no output padding; output_shape keeps its last (length) entry after a 1."""
    out = dict(attrs)
    for name, unit in (("kernel_shape", 1), ("strides", 1), ("dilations", 1), ("output_padding", 0)):
        if attrs.get(name) is not None and len(attrs[name]) == 1:
            out[name] = [unit, *attrs[name]]
    pads = attrs.get("pads")
    if pads is not None and len(pads) == 2:
        out["pads"] = [0, pads[0], 0, pads[1]]
    if attrs.get("output_shape") is not None:
        out["output_shape"] = [1, *list(attrs["output_shape"])[-1:]]
    return out


def _unit_axis(ctx: NodeContext, value: Value) -> Value:
    """[N, C, L] as [N, C, 1, L] ([N, C] as [N, C, 1, 1]): a constant (weights) reshaped at import,
    a tensor by an op."""
    shape = (*value.shape[:2], 1, value.shape[2]) if value.rank == 3 else (*value.shape, 1, 1)
    if value.is_constant:
        name = ctx.builder.fresh(f"{value.name}.2d")
        ctx.builder.reserved.add(name)
        return constant_value(name, value.data.reshape(shape))
    return reshape_to(ctx, value, shape, final=False)


@converter(*_LIFTED)
def _window_1d(ctx: NodeContext) -> list:
    x = ctx.inputs[0] if ctx.inputs else None
    ranks = (2, 3) if ctx.op_type == "BatchNormalization" else (3,)
    if x is None or x.rank not in ranks:
        return _TWO_D[ctx.op_type](ctx)
    inputs = list(ctx.inputs)
    inputs[0] = _unit_axis(ctx, x)
    if ctx.op_type in ("Conv", "ConvTranspose"):
        w = ctx.input(1, "W")
        if w.rank != 3:
            ctx.fail(f"input {list(x.shape)} and weights {list(w.shape)} must have equal rank of at least 3")
        inputs[1] = _unit_axis(ctx, w)
    inner = ctx.builder.fresh(f"{ctx.output_names[0] or ctx.label}.2d")
    lifted = dataclasses.replace(ctx, attrs=_lifted_attrs(ctx.attrs), inputs=inputs,
                                 output_names=[inner, *ctx.output_names[1:]])
    y = _TWO_D[ctx.op_type](lifted)[0]
    return [reshape_to(ctx, y, (*y.shape[:2], y.shape[3])[:x.rank], final=True)]
