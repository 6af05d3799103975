"""The float ir.Graph under construction while a TFLite subgraph is imported, and the
per-operator context the converters (convert_*.py) work with.

Layout: TFLite holds 4-D activations NHWC; qsim's standard operators (and their TOSA
lowering) take NCHW. Every 4-D tensor an operator computes is held NCHW here (`Value.nchw`),
so convolutions, pools and channel-wise operators read it directly; an operator whose
meaning depends on the element order (RESHAPE, a 4-D GATHER) reads it back as NHWC through
a layout.transpose, and graph inputs and outputs keep TFLite's NHWC layout (one transpose
each), so qsim's and LiteRT's tensors compare element for element.

Quantization: a quantized TFLite tensor becomes a float tensor annotated with its
parameters (ir.QuantInfo, source "annotation"), as a QDQ ONNX model does (qsim/onnx/qdq.py);
a constant holds (q - zero_point) * scale in float32, which requantizing on the annotation
gives back exactly (|q - zp| < 2^24). Tensors the import adds (transposes) carry the
annotation of the tensor whose values they move.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .. import ir
from ..errors import InvalidGraphError, Location, UnsupportedError
from ..limits import check_tensor_size
from .model import ModelDef, OperatorDef, QuantParams, TensorDef
from . import schema as S

F32 = ir.DType.F32
NHWC_TO_NCHW = (0, 3, 1, 2)
NCHW_TO_NHWC = (0, 2, 3, 1)
# exactness bound of (q - zp) * scale in float32: integers below 2^24 survive the round trip
EXACT_INTEGER_BITS = 24


@dataclass(frozen=True)
class Value:
    """What a TFLite tensor stands for in the graph: an ir tensor (`name`), with `nchw` set
    when a 4-D tensor is held in NCHW order; `shape` is always TFLite's (NHWC) shape;
    `data` is set for constants (TFLite order, raw stored values)."""
    name: str
    shape: tuple[int, ...]
    nchw: bool = False
    quant: ir.QuantInfo | None = None
    data: np.ndarray | None = field(default=None, compare=False, repr=False)
    index: int | None = None       # the TFLite tensor of a constant

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def held_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[i] for i in NHWC_TO_NCHW) if self.nchw else self.shape


def quant_info(q: QuantParams | None, type_code: int, axis_map=None) -> ir.QuantInfo | None:
    """The ir.QuantInfo of TFLite parameters (int8/int16/uint8/int32 tensors), else None."""
    if q is None or type_code not in (S.INT8, S.INT16, S.UINT8, S.INT32):
        return None
    bits = {S.INT8: 8, S.INT16: 16, S.UINT8: 8, S.INT32: 32}[type_code]
    signed = type_code != S.UINT8
    if q.axis is None:
        return ir.QuantInfo(float(q.scale[0]), int(q.zero_point[0]), None, bits, signed, False, "tflite")
    axis = q.axis if axis_map is None else axis_map(q.axis)
    return ir.QuantInfo(q.scale.astype(np.float64), q.zero_point.copy(), axis, bits, signed, False, "tflite")


@dataclass
class Builder:
    model: ModelDef
    tensors: dict[str, ir.Tensor] = field(default_factory=dict)
    ops: list[ir.Op] = field(default_factory=list)
    values: dict[int, Value] = field(default_factory=dict)

    @property
    def location(self) -> Location:
        return self.model.location

    def fresh(self, hint: str) -> str:
        taken = self.tensors
        if hint not in taken and hint not in self.reserved:
            return hint
        n = 1
        while f"{hint}_{n}" in taken or f"{hint}_{n}" in self.reserved:
            n += 1
        return f"{hint}_{n}"

    @property
    def reserved(self) -> set[str]:
        names = getattr(self, "_reserved", None)
        if names is None:
            names = self._reserved = {t.name for t in self.model.tensors}
        return names

    def add(self, name: str, shape: Sequence[int], quant: ir.QuantInfo | None, data=None,
            dtype: ir.DType = F32) -> str:
        data = None if data is None else np.ascontiguousarray(data, dtype=dtype.numpy).reshape(tuple(shape))
        self.tensors[name] = ir.Tensor(name, dtype, tuple(int(d) for d in shape), data=data, quant=quant)
        return name

    def emit(self, kind: str, inputs: Sequence[str], output: str, attrs: dict[str, Any], label: str) -> None:
        op_kind = ir.register_op_kind(kind, doc="NNEF 2.0 standard operator")
        self.ops.append(ir.Op(op_kind, tuple(inputs), (output,), dict(attrs), name=label))

    def finish(self, inputs: Sequence[str], outputs: Sequence[str]) -> ir.Graph:
        used = set(inputs) | set(outputs)
        for op in self.ops:
            used.update(n for n in op.inputs if n)
            used.update(op.outputs)
        tensors = {n: t for n, t in self.tensors.items() if n in used}
        return ir.Graph("main", tuple(inputs), tuple(outputs), tuple(self.ops), tensors)


@dataclass
class OpContext:
    """One TFLite operator being converted."""
    builder: Builder
    op: OperatorDef

    @property
    def where(self) -> str:
        outs = [self.builder.model.tensors[i].name for i in self.op.outputs]
        return (f"operator {self.op.index} {self.op.builtin} (version {self.op.version})"
                + (f" -> '{outs[0]}'" if outs else ""))

    def fail(self, message: str, hint: str | None = None, unsupported: bool = False):
        kind = UnsupportedError if unsupported else InvalidGraphError
        raise kind(f"{self.where}: {message}", location=self.builder.location, hint=hint)

    # ---- operands

    def tensor_def(self, index: int) -> TensorDef:
        return self.builder.model.tensors[index]

    def input_count(self) -> int:
        return sum(1 for i in self.op.inputs if i >= 0)

    def input(self, k: int, what: str) -> Value:
        if k >= len(self.op.inputs) or self.op.inputs[k] < 0:
            self.fail(f"input {k} ({what}) is missing")
        return self.value(self.op.inputs[k], what)

    def optional(self, k: int, what: str) -> Value | None:
        if k >= len(self.op.inputs) or self.op.inputs[k] < 0:
            return None
        return self.value(self.op.inputs[k], what)

    def value(self, index: int, what: str) -> Value:
        v = self.builder.values.get(index)
        if v is not None:
            return v
        t = self.tensor_def(index)
        if t.data is None:
            self.fail(f"input {what} ({t.describe()}) is computed by no earlier operator",
                      hint="the operators must be stored in execution order, as TFLite's converter writes them")
        v = Value(t.name, t.shape, False, quant_info(t.quant, t.type_code), t.data, index)
        self.builder.values[index] = v
        return v

    def constant(self, k: int, what: str) -> np.ndarray:
        v = self.input(k, what)
        if v.data is None:
            self.fail(f"input {k} ({what}) is computed at run time; qsim needs it when importing",
                      unsupported=True)
        return v.data

    def ints(self, k: int, what: str) -> list[int]:
        data = self.constant(k, what)
        if data.dtype.kind not in "iu":
            self.fail(f"input {what} holds {data.dtype} values, expected integers")
        return [int(v) for v in data.reshape(-1)]

    def out_def(self, k: int = 0) -> TensorDef:
        if k >= len(self.op.outputs):
            self.fail(f"output {k} is missing")
        return self.tensor_def(self.op.outputs[k])

    def option(self, slot: int, flags, default):
        table = self.op.options
        return default if table is None else table.scalar(slot, flags, default)

    def option_ints(self, slot: int, what: str) -> list[int] | None:
        table = self.op.options
        data = None if table is None else table.array(slot, "i4", f"{self.where} {what}")
        return None if data is None else [int(v) for v in data]

    # ---- float values of operands

    def float_constant(self, v: Value, axis_map=None) -> tuple[np.ndarray, ir.QuantInfo | None]:
        """A constant's real values (dequantized when quantized) and its annotation."""
        t = self.builder.model.tensors[v.index]
        if t.quant is None or t.type_code == S.FLOAT32:
            if v.data.dtype.kind == "f":
                return v.data.astype(np.float32), None
            return v.data.astype(np.float32), None
        q = t.quant
        axis = q.axis
        shape = [1] * v.data.ndim
        if axis is not None:
            shape[axis] = -1
        centered = v.data.astype(np.int64) - q.zero_point.reshape(shape)
        if np.abs(centered).max(initial=0) >= 1 << EXACT_INTEGER_BITS:
            self.fail(f"constant '{t.name}' holds integers of {EXACT_INTEGER_BITS} bits or more, which "
                      "float32 does not carry exactly", unsupported=True)
        with np.errstate(over="ignore"):
            real = (centered.astype(np.float64) * q.scale.astype(np.float64).reshape(shape)).astype(np.float32)
        if not np.all(np.isfinite(real)):
            self.fail(f"constant '{t.name}' dequantizes beyond float32 (scale {float(q.scale.max()):.3g})",
                      hint="the tensor's quantization scale is not a real model's; export the model again")
        return real, quant_info(q, t.type_code, axis_map)

    def add_constant(self, hint: str, array: np.ndarray, quant: ir.QuantInfo | None) -> str:
        b = self.builder
        name = b.fresh(hint)
        check_tensor_size(array.shape, 4, f"constant '{name}' of {self.where}", b.location)
        return b.add(name, array.shape, quant, array)

    # ---- layout

    def nchw(self, v: Value) -> str:
        """The ir name holding `v` in NCHW order (4-D) or as is (other ranks)."""
        if v.rank != 4 or v.nchw:
            return v.name if v.data is None else self._constant_in(v, NHWC_TO_NCHW if v.rank == 4 else None)
        return self._transposed(v, NHWC_TO_NCHW, f"{v.name}.nchw")

    def nhwc(self, v: Value) -> str:
        """The ir name holding `v` in TFLite's order."""
        if v.data is not None:
            return self._constant_in(v, None)
        if not v.nchw:
            return v.name
        return self._transposed(v, NCHW_TO_NHWC, f"{v.name}.nhwc")

    def _constant_in(self, v: Value, perm) -> str:
        real, quant = self.float_constant(v)
        if perm is not None:
            real = real.transpose(perm)
            if quant is not None and quant.axis is not None:
                quant = ir.QuantInfo(quant.scale, quant.zero_point, perm.index(quant.axis), quant.bits,
                                     quant.signed, quant.symmetric, quant.source)
        return self.add_constant(f"{v.name}.value", real, quant)

    def _transposed(self, v: Value, perm, hint: str) -> str:
        b = self.builder
        src_shape = v.held_shape
        name = b.add(b.fresh(hint), tuple(src_shape[p] for p in perm), v.quant)
        b.emit("layout.transpose", [v.name], name, {"axis": 0, "perm": tuple(perm)}, self.label)
        return name

    @property
    def label(self) -> str:
        return f"{self.op.builtin}_{self.op.index}"

    # ---- results

    def result(self, kind: str, inputs: Sequence[str], attrs: dict[str, Any], k: int = 0,
               nchw: bool | None = None, name: str | None = None) -> Value:
        """Emits `kind` computing output k (held NCHW when 4-D unless `nchw` says otherwise)."""
        t = self.out_def(k)
        held_nchw = t.rank == 4 if nchw is None else nchw
        if held_nchw and t.rank != 4:
            self.fail(f"output {t.describe()} is not 4-D like the operator's input",
                      hint="the output's shape must be the one the operator computes")
        shape = tuple(t.shape[i] for i in NHWC_TO_NCHW) if held_nchw else t.shape
        b = self.builder
        out_name = name or (t.name if t.name not in b.tensors else b.fresh(t.name))
        check_tensor_size(shape, 4, f"output '{t.name}' of {self.where}", b.location)
        b.add(out_name, shape, quant_info(t.quant, t.type_code))
        b.emit(kind, inputs, out_name, attrs, self.label)
        value = Value(out_name, t.shape, held_nchw, quant_info(t.quant, t.type_code))
        b.values[t.index] = value
        return value

    def intermediate(self, kind: str, inputs: Sequence[str], attrs: dict[str, Any], shape, hint: str,
                     quant: ir.QuantInfo | None) -> str:
        b = self.builder
        name = b.add(b.fresh(hint), shape, quant)
        b.emit(kind, inputs, name, attrs, self.label)
        return name

    def out_quant(self, k: int = 0) -> ir.QuantInfo | None:
        t = self.out_def(k)
        return quant_info(t.quant, t.type_code)

    def held_out_shape(self, nchw: bool | None = None, k: int = 0) -> tuple[int, ...]:
        t = self.out_def(k)
        held = t.rank == 4 if nchw is None else nchw
        if held and t.rank != 4:
            self.fail(f"output {t.describe()} is not 4-D like the operator's input")
        return tuple(t.shape[i] for i in NHWC_TO_NCHW) if held else t.shape

    def scalar(self, value: float) -> str:
        return self.add_constant(f"{self.label}.const", np.asarray(value, np.float32), None)

    def fail_if_activation(self, act: int, where: str) -> None:
        if act:
            self.fail(f"fused activation {S.ACTIVATIONS.get(act, act)} on {where}", unsupported=True)

    def alias(self, k: int, value: Value) -> None:
        """Output k is the input `value` unchanged (same real values and parameters)."""
        self.builder.values[self.out_def(k).index] = value


Converter = Callable[[OpContext], None]
CONVERTERS: dict[str, Converter] = {}


def converter(*builtins: str):
    """Registers fn(ctx) as the converter of the named BuiltinOperators."""
    def wrap(fn: Converter) -> Converter:
        for name in builtins:
            CONVERTERS[name] = fn
        return fn
    return wrap


# fused_activation_function -> (real lower bound, real upper bound) of the clamp it applies
_ACTIVATION_BOUNDS = {1: (0.0, None), 2: (-1.0, 1.0), 3: (0.0, 6.0)}


def fused_activation(ctx: OpContext, kind: str, inputs, attrs, act: int, nchw: bool | None = None) -> Value:
    """Emits `kind` for output 0 followed by its fused activation (a separate nn.relu /
    math.clamp, which qsim's lowering fuses back into the layer's RESCALE + CLAMP)."""
    if act == 0:
        return ctx.result(kind, inputs, attrs, nchw=nchw)
    if act not in _ACTIVATION_BOUNDS:
        ctx.fail(f"fused activation {S.ACTIVATIONS.get(act, act)}", unsupported=True,
                 hint="qsim imports fused NONE, RELU, RELU_N1_TO_1 and RELU6")
    out = ctx.out_def()
    pre = ctx.intermediate(kind, inputs, attrs, ctx.held_out_shape(nchw), f"{out.name}.pre", ctx.out_quant())
    return activation(ctx, pre, *_ACTIVATION_BOUNDS[act], nchw=nchw)


def flat_activation(ctx: OpContext, x: str, shape, act: int) -> str:
    """Fused activation `act` on intermediate `x` (held `shape`, output 0's parameters), as an
    intermediate: for a layer whose result is reshaped afterwards."""
    if act not in _ACTIVATION_BOUNDS:
        ctx.fail(f"fused activation {S.ACTIVATIONS.get(act, act)}", unsupported=True,
                 hint="qsim imports fused NONE, RELU, RELU_N1_TO_1 and RELU6")
    lo, hi = _ACTIVATION_BOUNDS[act]
    hint = f"{ctx.out_def().name}.act"
    if lo == 0.0 and hi is None:
        return ctx.intermediate("nn.relu", [x], {"alpha": None, "max": None}, shape, hint, ctx.out_quant())
    attrs = {"val_align": None, "min_align": None, "max_align": None}
    return ctx.intermediate("math.clamp", [x, ctx.scalar(lo), ctx.scalar(hi)], attrs, shape, hint, ctx.out_quant())


def activation(ctx: OpContext, x: str, lo: float, hi: float | None, nchw: bool | None = None) -> Value:
    if lo == 0.0 and hi is None:
        return ctx.result("nn.relu", [x], {"alpha": None, "max": None}, nchw=nchw)
    attrs = {"val_align": None, "min_align": None, "max_align": None}
    return ctx.result("math.clamp", [x, ctx.scalar(lo), ctx.scalar(hi)], attrs, nchw=nchw)
