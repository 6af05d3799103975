"""The ir.Graph under construction while an ONNX graph is imported, and the per-node context
the converters work with.

ONNX tensor names map to `Value`s: a computed tensor of the graph (name, dtype, static shape)
or a constant (numpy data, folded at import). A constant becomes a tensor of the graph only
when an emitted op reads it (`Builder.materialize`), so shape arithmetic that folds away
leaves nothing behind.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .. import ir
from ..errors import InvalidGraphError, Location, UnsupportedError
from ..limits import check_tensor_size

F32, I64, BOOL = ir.DType.F32, ir.DType.I64, ir.DType.BOOL


@dataclass(frozen=True)
class Value:
    """What an ONNX tensor name stands for: `data` set for a constant."""
    name: str
    dtype: ir.DType
    shape: tuple[int, ...]
    data: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_constant(self) -> bool:
        return self.data is not None


def constant_value(name: str, array: Any) -> Value:
    array = np.asarray(array)
    return Value(name, ir.DType.from_numpy(array.dtype), tuple(int(d) for d in array.shape), array)


@dataclass
class Builder:
    location: Location
    tensors: dict[str, ir.Tensor] = field(default_factory=dict)
    ops: list[ir.Op] = field(default_factory=list)
    reserved: set[str] = field(default_factory=set)     # every ONNX tensor name of the model

    def fresh(self, hint: str) -> str:
        """A tensor name used by no ONNX tensor and no tensor made so far."""
        if hint not in self.tensors and hint not in self.reserved:
            return hint
        n = 1
        while f"{hint}_{n}" in self.tensors or f"{hint}_{n}" in self.reserved:
            n += 1
        return f"{hint}_{n}"

    def add(self, name: str, dtype: ir.DType, shape: Sequence[int], data: np.ndarray | None = None) -> Value:
        shape = tuple(int(d) for d in shape)
        if data is not None:
            data = np.ascontiguousarray(data, dtype=dtype.numpy).reshape(shape)
        self.tensors[name] = ir.Tensor(name, dtype, shape, data=data)
        return Value(name, dtype, shape, None)

    def materialize(self, value: Value) -> Value:
        """The graph tensor holding `value` (a constant becomes a constant tensor once)."""
        if not value.is_constant:
            return value
        existing = self.tensors.get(value.name)
        if existing is not None and existing.data is value.data:
            return Value(value.name, value.dtype, value.shape)
        name = value.name if existing is None else self.fresh(value.name)
        if existing is None and value.name in self.reserved:
            self.reserved.discard(value.name)   # the constant's own ONNX name
        return self.add(name, value.dtype, value.shape, value.data)

    def finish(self, name: str, inputs: Sequence[str], outputs: Sequence[str]) -> ir.Graph:
        used = set(inputs) | set(outputs)
        for op in self.ops:
            used.update(n for n in op.inputs if n)
            used.update(op.outputs)
        tensors = {n: t for n, t in self.tensors.items() if n in used}
        return ir.Graph(name, tuple(inputs), tuple(outputs), tuple(self.ops), tensors)


@dataclass
class NodeContext:
    """One ONNX node being converted: its attributes, input values and output names."""
    builder: Builder
    op_type: str
    label: str              # the node's name, or op_type + index when it has none
    domain: str
    opset: int              # the model's opset of the node's domain
    since: int              # the version of the operator's definition that applies (onnx.defs)
    attrs: dict[str, Any]
    inputs: list[Value | None]
    output_names: list[str]
    model: Any = None       # protobuf.ModelFile (tensor attributes)

    @property
    def where(self) -> str:
        domain = self.domain or "ai.onnx"
        return f"node '{self.label}' ({self.op_type}, domain {domain}, opset {self.opset})"

    def fail(self, message: str, hint: str | None = None, unsupported: bool = False):
        kind = UnsupportedError if unsupported else InvalidGraphError
        raise kind(f"{self.where}: {message}", location=self.builder.location, hint=hint)

    # ---- inputs and attributes

    def input(self, index: int, what: str) -> Value:
        """A required input."""
        value = self.inputs[index] if index < len(self.inputs) else None
        if value is None:
            self.fail(f"input {index} ('{what}') is missing", hint=f"{self.op_type} needs its '{what}' input")
        return value

    def optional(self, index: int) -> Value | None:
        return self.inputs[index] if index < len(self.inputs) else None

    def constant(self, index: int, what: str, required: bool = True) -> np.ndarray | None:
        """The data of an input that must be known at import (shape, axes, pads, ...)."""
        value = self.input(index, what) if required else self.optional(index)
        if value is None:
            return None
        if not value.is_constant:
            self.fail(f"input '{what}' is computed at run time; qsim needs it at import",
                      hint="qsim folds constant sub-graphs (Shape, Gather, Concat, ...) but not data-"
                           "dependent shapes; fix the input shapes or simplify the model", unsupported=True)
        return value.data

    def ints(self, index: int, what: str, required: bool = True) -> list[int] | None:
        data = self.constant(index, what, required)
        if data is None:
            return None
        if data.dtype.kind not in "iu":
            self.fail(f"input '{what}' holds {data.dtype} values, expected integers")
        return [int(v) for v in data.reshape(-1)]

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def axis(self, axis: int, rank: int, what: str = "axis") -> int:
        if not -rank <= axis < max(rank, 1):
            self.fail(f"'{what}' {axis} is outside [-{rank}, {rank})")
        return axis + rank if axis < 0 else axis

    def axes(self, axes: Sequence[int], rank: int, what: str = "axes") -> tuple[int, ...]:
        out = tuple(self.axis(int(a), rank, what) for a in axes)
        if len(set(out)) != len(out):
            self.fail(f"'{what}' {list(axes)} repeats an axis")
        return out

    def float_input(self, value: Value, what: str) -> Value:
        if value.dtype is not F32:
            self.fail(f"input '{what}' is {value.dtype}; qsim executes {self.op_type} on float32",
                      hint="convert the model to float32", unsupported=True)
        return value

    # ---- emitting

    def emit(self, kind: str, inputs: Sequence[Value | None], attrs: dict[str, Any],
             outputs: Sequence[tuple[ir.DType, Sequence[int]]], names: Sequence[str] | None = None) -> list[Value]:
        """Appends an op of the standard operator `kind`; outputs are (dtype, shape), named
        `names` (the node's ONNX output names) or fresh names derived from the first output."""
        b = self.builder
        op_kind = ir.register_op_kind(kind, doc="NNEF 2.0 standard operator")
        in_names = []
        for value in inputs:
            if value is None:
                in_names.append("")
                continue
            if value.is_constant and value.data.size == 0:
                self.fail(f"input '{value.name}' is empty (shape {list(value.shape)}); qsim graphs "
                          "hold no empty tensors", unsupported=True,
                          hint="an empty slice may only feed Concat (which drops it) or shape arithmetic")
            if value.dtype in (ir.DType.F16, ir.DType.F64):
                self.fail(f"an input is {value.dtype}; qsim executes float32 models",
                          hint="convert the model to float32", unsupported=True)
            in_names.append(b.materialize(value).name)
        results = []
        hint = self.output_names[0] if self.output_names and self.output_names[0] else self.label
        for i, (dtype, shape) in enumerate(outputs):
            shape = tuple(int(d) for d in shape)
            name = names[i] if names is not None else b.fresh(f"{hint}.{kind.rsplit('.', 1)[-1]}")
            check_tensor_size(shape, dtype.numpy.itemsize, f"output '{name}' of {self.where}", b.location)
            results.append(b.add(name, dtype, shape))
        b.ops.append(ir.Op(op_kind, tuple(in_names), tuple(r.name for r in results), dict(attrs),
                           name=self.label))
        return results

    def emit1(self, kind: str, inputs: Sequence[Value | None], attrs: dict[str, Any], dtype: ir.DType,
              shape: Sequence[int], final: bool = False) -> Value:
        """One-output `emit`; `final` names the result after the node's first ONNX output."""
        names = [self.output_names[0]] if final else None
        return self.emit(kind, inputs, attrs, [(dtype, shape)], names)[0]

    def scalar(self, value: float, dtype: ir.DType = F32) -> Value:
        """A rank-0 constant (materialized when an op reads it)."""
        b = self.builder
        name = b.fresh(f"{self.output_names[0] if self.output_names else self.label}.const")
        b.reserved.add(name)
        return Value(name, dtype, (), np.asarray(value, dtype=dtype.numpy))
