"""@quantize entries (NNEF 2.0 draft 2.14, 4.6) → ir.QuantInfo(source="annotation").

An entry binds a quantization operator with attributes to a tensor. The two standard operators
map to QuantInfo as their @lower formulas define them (stdlib/quant.sknd):
- `quant.zero_point_linear_quantize{zero_point, scale, bits, signed, symmetric, channel_axis}`:
  real = scale * (q - zero_point), per channel along `channel_axis` when the packs vary.
- `quant.min_max_linear_quantize{min, max, bits, signed, symmetric, channel_axis}`: the formula
  q = round((x - min) / (max - min) * r) - p, i.e. scale = (max - min) / r and
  zero_point = round(-min / scale) - p with r = 2^bits - 1 - [signed && symmetric] and
  p = signed ? 2^(bits-1) - [symmetric] : 0.
The entry's attributes are evaluated and checked by instantiating the operator on the tensor
(its asserts run), so a wrong entry fails with the operator's own message.
"""
from __future__ import annotations

import math

import numpy as np

from ... import ir
from ...errors import UnsupportedError
from ...numerics import nnef_round
from .. import ast
from ..evaluate import Evaluator
from .instance import instantiate
from ..values import TensorValue, Uniform, error, is_pack, show


def quant_info(entry: ast.QuantEntry, module: str, op: ast.OperatorDef, tensor: ir.Tensor, frame) -> ir.QuantInfo:
    qual = f"{module}.{op.name}"
    where = f"@quantize entry for '{entry.tensor}' ({qual}) at {entry.loc}"
    if len(op.inputs) != 1 or len(op.outputs) != 1:
        raise error(f"{where}: a quantization operator must have exactly one input and one output (2.14)",
                    entry.loc)
    ev = Evaluator(frame.env, frame.where)
    values = {a.name: ev.eval(a.value) for a in entry.attrs}
    locs = {a.name: a.loc for a in entry.attrs}
    # the entry says what real numbers the tensor's values stand for, so the operator is checked
    # on a real tensor of the same shape, also for integer tensors (stdlib/tosa.sknd: integer
    # widths and scales of quantized models travel in @quantize entries)
    shape = tuple(d if d is not None else 1 for d in tensor.shape)
    if not any(is_pack(v) for v in values.values()) and "channel_axis" not in values:
        # a per-tensor entry applies to a tensor of any rank: the default channel_axis = 1 of the
        # pack lengths `s[channel_axis]` needs rank 2, so lower ranks get unit extents appended
        shape = shape + (1,) * max(0, 2 - len(shape))
    probe = TensorValue(tensor.name, "real", shape)
    inst = instantiate(op, qual, values, locs, [probe], entry.generics, entry.loc, where)
    a = inst.attrs
    if op.name == "zero_point_linear_quantize":
        scale, zero = a["scale"], a["zero_point"]
        bits, signed, symmetric, axis = a["bits"], a["signed"], a["symmetric"], a["channel_axis"]
    elif op.name == "min_max_linear_quantize":
        bits, signed, symmetric, axis = a["bits"], a["signed"], a["symmetric"], a["channel_axis"]
        r = 2 ** bits - 1 - int(signed and symmetric)
        p = (2 ** (bits - 1) - int(symmetric)) if signed else 0
        lo, hi = np.asarray(a["min"], dtype=np.float64), np.asarray(a["max"], dtype=np.float64)
        sc = (hi - lo) / r
        if np.any(sc <= 0):
            raise error(f"{where}: max must be greater than min, got min={show(a['min'])}, max={show(a['max'])}",
                        entry.loc)
        zp = nnef_round(-lo / sc).astype(np.int64) - p
        scale = tuple(float(s) for s in sc) if sc.ndim else float(sc)
        zero = tuple(int(z) for z in zp) if zp.ndim else int(zp)
        if is_pack(a["min"]) and isinstance(a["min"], Uniform) and isinstance(a["max"], Uniform):
            scale, zero = scale[0] if scale else 1.0, zero[0] if zero else 0
    else:
        raise UnsupportedError(f"{where}: qsim maps quant.zero_point_linear_quantize and "
                               f"quant.min_max_linear_quantize to quantization parameters, not '{qual}'",
                               location=entry.loc)
    per_channel = is_pack(scale) and not isinstance(scale, Uniform) and len(set(scale)) > 1 or (
        is_pack(zero) and not isinstance(zero, Uniform) and len(set(zero)) > 1)
    if per_channel:
        scale_v = np.asarray(scale, dtype=np.float64)
        zero_v = np.asarray(zero if is_pack(zero) else (zero,) * len(scale_v), dtype=np.int64)
        return ir.QuantInfo(scale_v, zero_v, axis=int(axis) % max(len(tensor.shape), 1), bits=int(bits),
                            signed=bool(signed), symmetric=bool(symmetric), source="annotation")
    s = scale[0] if is_pack(scale) else scale
    z = zero[0] if is_pack(zero) else zero
    if not math.isfinite(float(s)):
        raise error(f"{where}: scale is not finite", entry.loc)
    return ir.QuantInfo(float(s), int(z), axis=None, bits=int(bits), signed=bool(signed),
                        symmetric=bool(symmetric), source="annotation")
