"""Lowering rules for resizing (TOSA 0.30 RESIZE, 2.12.1) of the H and W axes of NCHW tensors.

RESIZE samples output row oy of an axis at input position pos = oy·stride + offset, in units
of 2^-shift (shift 1..11), with OH = idiv((IH - 1)·2^shift - offset, stride) + 1 + border.

- image.linear_resize → RESIZE BILINEAR: the float operator (NNEF 2.0 4.5) reads position
  r = o·scale + offset_f (scale = in/out, or (in - 1)/(out - 1) for ALIGNED; offset_f =
  scale/2 - 1/2 for SYMMETRIC, else 0), clamping both taps to the input. When scale and
  offset_f are multiples of 2^-shift for some shift <= 11 (every power-of-two ratio, the
  usual ×2 upsampling with any coordinate transform but ALIGNED), stride = scale·2^shift and
  offset = offset_f·2^shift give the float positions exactly (the smallest such shift is
  used); TOSA clamps i0 = max(i, 0), i1 = min(i + 1, IH - 1) as the float operator does.
  Otherwise shift 11 and the nearest stride/offset: output o then samples within
  (o/2 + 1/2)·2^-11 input rows of the float position (stated; a test bounds the effect).
  The int32 (int48 for int16) result is Σ w·q with weights summing to 2^(2·shift); the
  weights are a convex combination, so the output keeps the input's grid and the RESCALE
  by 2^(-2·shift) (zero points 0: Σ w·zp = zp·2^(2·shift) passes through) rounds the exact
  interpolation of the codes once.
- image.nearest_upsample / image.nearest_resize by power-of-two factors → RESIZE NEAREST
  (each input row repeated f times; see lower_nearest_resize).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ... import ir
from ...numerics import RESIZE_ROUNDING, nnef_round, trunc_div
from ..lowering.float_side import NHWC_FROM_NCHW, Lowered
from ..rules import rule
from ..target import TargetKind
from .tflite import rules_pool as tflite_pool
from .tflite.arith import is_tflite
from .context import TosaContext

MAX_SHIFT = 11


def _hw_sizes(ctx: TosaContext, op: ir.Op) -> tuple[tuple[int, ...], tuple[int, ...]]:
    in_shape = ctx.f.float_shape(op.inputs[0])
    out_shape = ctx.f.float_shape(op.outputs[0])
    if len(in_shape) != 4 or tuple(in_shape[:2]) != tuple(out_shape[:2]):
        raise ctx.f.unsupported("only resizing H and W of an NCHW tensor is lowered (TOSA RESIZE)")
    return in_shape, out_shape


def _float_geometry(transform: str, in_size: int, out_size: int) -> tuple[Fraction, Fraction]:
    """(scale, offset) of the float operator's source position r = o·scale + offset."""
    if in_size == out_size:
        return Fraction(1), Fraction(0)
    if transform != "ALIGNED":
        scale = Fraction(in_size, out_size)
    else:
        scale = Fraction(0) if out_size <= 1 else Fraction(in_size - 1, out_size - 1)
    offset = scale / 2 - Fraction(1, 2) if transform == "SYMMETRIC" else Fraction(0)
    return scale, offset


def _shift_for(geometry) -> tuple[int, bool]:
    """(shift, exact): the least shift making every scale and offset a whole number of
    2^-shift units, else (MAX_SHIFT, False)."""
    for shift in range(1, MAX_SHIFT + 1):
        unit = 1 << shift
        if all((v * unit).denominator == 1 for pair in geometry for v in pair):
            return shift, True
    return MAX_SHIFT, False


@rule(TargetKind.TOSA, "image.linear_resize")
def lower_linear_resize(ctx: TosaContext, op: ir.Op) -> None:
    in_shape, out_shape = _hw_sizes(ctx, op)
    transform = op.attrs.get("coordinate_transform", "SYMMETRIC")
    geometry = [_float_geometry(transform, in_shape[a], out_shape[a]) for a in (2, 3)]
    shift, _exact = _shift_for(geometry)
    unit = 1 << shift
    stride = tuple(max(1, round(scale * unit)) for scale, _ in geometry)
    offset = tuple(round(off * unit) for _, off in geometry)
    # OH = idiv((IH - 1) * unit - offset, stride) + 1 + border must be the float size
    border = tuple(out_shape[2 + k] - (trunc_div((in_shape[2 + k] - 1) * unit - offset[k], stride[k]) + 1)
                   for k in range(2))
    x = ctx.transpose_to(ctx.f.value(op.inputs[0]), NHWC_FROM_NCHW, f"{op.inputs[0]}.nhwc")
    acc = ctx.emit("RESIZE", [x.name], {
        "output_size": (out_shape[2], out_shape[3]), "stride": stride, "offset": offset,
        "border": border, "shift": shift, "mode": "BILINEAR"}, hint=f"{op.outputs[0]}.acc",
        label=ctx.f.where())
    if is_tflite(x.quant):
        # TFLite divides by 2^(2 shift) once, rounding half away from zero (tflite/rules_pool.py)
        out = tflite_pool.divide_by_pot_half_away(ctx, acc, 2 * shift, op.outputs[0], x.quant)
    else:
        out = ctx.rescale(acc, scale=Fraction(1, unit * unit), input_zp=0, output_zp=0,
                          out_dtype=ctx.act_dtype, hint=op.outputs[0], quant=x.quant, exact=True)
    ctx.f.bind(op.outputs[0], Lowered(out, x.quant, NHWC_FROM_NCHW))


def _nearest_source_rows(op: ir.Op, axis_pos: int, in_size: int, out_size: int) -> np.ndarray:
    """For image.nearest_resize (4.5): the input row each output row reads on one axis,
    by the operator's own formula (coordinate transform, rounding, clamp to the last row)."""
    transform = op.attrs.get("coordinate_transform", "SYMMETRIC")
    rounding = op.attrs.get("rounding_method", "ROUND_PREFER_FLOOR")
    if transform != "ALIGNED":
        scale = in_size / out_size
    else:
        scale = 0.0 if out_size <= 1 else (in_size - 1) / (out_size - 1)
    offset = 0.5 * scale - 0.5 if transform == "SYMMETRIC" else 0.0
    x = np.arange(out_size, dtype=np.float64) * scale + offset
    r = RESIZE_ROUNDING.get(rounding, nnef_round)(x)
    return np.minimum(r.astype(np.int64), in_size - 1)


def _tosa_nearest_rows(out_size: int, stride: int, offset: int, shift: int, in_size: int):
    """The input row RESIZE NEAREST reads for each output row (2.12.1), None where its
    REQUIRE(i0 <= i1) fails."""
    unit = 1 << shift
    pos = np.arange(out_size, dtype=np.int64) * stride + offset
    i = pos >> shift
    d = pos - (i << shift)
    i0, i1 = np.maximum(i, 0), np.minimum(i + 1, in_size - 1)
    if np.any(i0 > i1):
        return None
    return np.where(d >= unit // 2, i1, i0)


def _nearest_geometry(rows: np.ndarray, in_size: int, out_size: int) -> tuple[int, int] | None:
    """(stride, offset) at shift MAX_SHIFT with which RESIZE NEAREST reads exactly `rows`,
    else None. Output o reads floor((o·stride + offset)/unit + 1/2) clamped to the input, so
    row r (not clamped) needs r·unit - unit/2 <= o·stride + offset < (r + 1)·unit - unit/2;
    a row clamped at 0 or at the last row bounds one side only. Strides next to unit·in/out
    and unit·(in - 1)/(out - 1) (ALIGNED) are tried; a candidate is checked on every row."""
    unit = 1 << MAX_SHIFT
    o = np.arange(out_size, dtype=np.int64)
    scales = [Fraction(in_size, out_size)] + ([Fraction(in_size - 1, out_size - 1)] if out_size > 1 else [])
    strides = dict.fromkeys(round(scale * unit) + k for scale in scales for k in (0, -1, 1))
    for stride in strides:
        if not 0 < stride < 16 * unit:
            continue
        lower = rows * unit - unit // 2 - o * stride
        upper = (rows + 1) * unit - unit // 2 - o * stride - 1
        lo = int(lower[rows > 0].max()) if np.any(rows > 0) else -(16 * unit) + 1
        hi = int(upper[rows < in_size - 1].min()) if np.any(rows < in_size - 1) else 16 * unit - 1
        for offset in (lo, hi):
            if -(16 * unit) < offset < 16 * unit and -32768 <= offset <= 32767:
                got = _tosa_nearest_rows(out_size, stride, offset, MAX_SHIFT, in_size)
                if got is not None and np.array_equal(got, rows):
                    return stride, offset
    return None


@rule(TargetKind.TOSA, "image.nearest_upsample", "image.nearest_resize")
def lower_nearest_resize(ctx: TosaContext, op: ir.Op) -> None:
    """Nearest-neighbour resizing of H and W → RESIZE NEAREST (shift 11).

    TOSA 2.12.1 (integer): with unit = 1 << shift, output row oy reads input row
    floor((oy * stride + offset + unit / 2) / unit), clamped. For a power-of-two factor f,
    stride = unit / f and offset = -unit / 2 make that floor(oy / f): row i repeated f times,
    which is what nearest_upsample computes. Other sizes (×3, 6 → 4, ...): the stride and
    offset that read exactly the rows the float operator reads (its coordinate transform and
    rounding method, `_nearest_source_rows`), found and checked on every output row
    (`_nearest_geometry`); none found is an error."""
    in_shape, out_shape = _hw_sizes(ctx, op)
    shift = MAX_SHIFT
    unit = 1 << shift
    stride, offset = [], []
    for axis in (2, 3):
        i, o = in_shape[axis], out_shape[axis]
        if op.kind.name == "image.nearest_resize":
            rows = _nearest_source_rows(op, axis, i, o)
        else:
            rows = np.arange(o) // max(o // i, 1)
        f = o // i
        legacy = (unit // f, -unit // 2) if o % i == 0 and not f & (f - 1) and f <= 1 << 10 else None
        if legacy is not None and np.array_equal(_tosa_nearest_rows(o, *legacy, shift, i), rows):
            geometry = legacy
        else:
            geometry = _nearest_geometry(rows, i, o)
        if geometry is None:
            raise ctx.f.unsupported(f"axis {axis}: no RESIZE NEAREST stride/offset (shift {shift}) reads "
                                    f"the input rows this {i} -> {o} resize reads")
        stride.append(geometry[0])
        offset.append(geometry[1])
    x = ctx.transpose_to(ctx.f.value(op.inputs[0]), NHWC_FROM_NCHW, f"{op.inputs[0]}.nhwc")
    if tuple(in_shape) == tuple(out_shape):
        ctx.f.bind(op.outputs[0], x)
        return
    # OH = idiv((IH - 1) * unit - offset, stride) + 1 + border must be the float size
    border = tuple(out_shape[2 + k] - (trunc_div((in_shape[2 + k] - 1) * unit - offset[k], stride[k]) + 1)
                   for k in range(2))
    out = ctx.emit("RESIZE", [x.name], {
        "output_size": (out_shape[2], out_shape[3]), "stride": tuple(stride), "offset": tuple(offset),
        "border": border, "shift": shift, "mode": "NEAREST"}, hint=op.outputs[0],
        label=ctx.f.where(), quant=x.quant, exact=True)
    ctx.f.bind(op.outputs[0], Lowered(out, x.quant, NHWC_FROM_NCHW))
