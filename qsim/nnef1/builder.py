"""The graph under construction while an NNEF 1.0 document is composed.

Tensors of the document are `TensorValue`s (name, item type, static shape). Ops are collected
in execution order as mutable records; a statement's result is renamed to the identifier it
is assigned to (`alias`), and `finish()` resolves the aliases into a frozen ir.Graph.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .. import ir
from ..errors import Location, SemanticError

# NNEF 1.0 item types → ir dtypes. Integer tensors are i64 as in the float executor.
ITEM_DTYPE = {"scalar": ir.DType.F32, "integer": ir.DType.I64, "logical": ir.DType.BOOL}


@dataclass(frozen=True)
class TensorValue:
    """A tensor in the document: `item` is 'scalar', 'integer' or 'logical'."""
    name: str
    item: str
    shape: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass
class _OpRecord:
    kind: ir.OpKind
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any]
    label: str


@dataclass
class DocumentGraphBuilder:
    """The ir.Graph of one NNEF 1.0 document, built as its statements are composed."""
    tensors: dict[str, ir.Tensor] = field(default_factory=dict)
    ops: list[_OpRecord] = field(default_factory=list)
    alias: dict[str, str] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    origin: dict[str, str] = field(default_factory=dict)   # final name → key in `tensors`
    _counts: dict[str, int] = field(default_factory=dict)

    def fresh(self, hint: str) -> str:
        """A tensor name not used yet, derived from `hint`."""
        if hint not in self.tensors and hint not in self.alias.values():
            self._counts.setdefault(hint, 0)
            return hint
        n = self._counts.get(hint, 0) + 1
        while f"{hint}_{n}" in self.tensors:
            n += 1
        self._counts[hint] = n
        return f"{hint}_{n}"

    def add_tensor(self, name: str, item: str, shape: Sequence[int], data: np.ndarray | None = None,
                   quant: ir.QuantInfo | None = None) -> TensorValue:
        dtype = ITEM_DTYPE[item]
        if data is not None:
            data = np.asarray(data).astype(dtype.numpy, copy=False).reshape(tuple(shape))
        self.tensors[name] = ir.Tensor(name, dtype, tuple(int(d) for d in shape), data=data, quant=quant)
        return TensorValue(name, item, tuple(int(d) for d in shape))

    def constant(self, hint: str, item: str, array: Any) -> TensorValue:
        array = np.asarray(array)
        return self.add_tensor(self.fresh(hint), item, array.shape, data=array)

    def op(self, kind: str, inputs: Sequence[TensorValue | None], attrs: dict[str, Any],
           outputs: Sequence[tuple[str, str, Sequence[int]]], label: str) -> list[TensorValue]:
        """Appends an op of qualified `kind`; outputs are (hint, item, shape)."""
        op_kind = ir.register_op_kind(kind)
        results = []
        for hint, item, shape in outputs:
            results.append(self.add_tensor(self.fresh(hint), item, shape))
        self.ops.append(_OpRecord(op_kind, ["" if t is None else t.name for t in inputs],
                                  [t.name for t in results], dict(attrs), label))
        return results

    def rename(self, value: TensorValue, name: str, loc: Location) -> TensorValue:
        """Gives a tensor produced by the current statement its identifier's name."""
        if name in self.tensors and name != value.name:
            raise SemanticError(f"identifier '{name}' names two tensors", location=loc)
        self.alias[value.name] = name
        self.origin[name] = self.origin.get(value.name, value.name)
        return TensorValue(name, value.item, value.shape)

    def resolve(self, name: str) -> str:
        seen = 0
        while name in self.alias and seen < 1000:
            name = self.alias[name]
            seen += 1
        return name

    def set_quant(self, name: str, quant: ir.QuantInfo) -> None:
        key = self._key(name)
        self.tensors[key] = ir.Tensor(self.tensors[key].name, self.tensors[key].dtype,
                                      self.tensors[key].shape, data=self.tensors[key].data, quant=quant)

    def _key(self, name: str) -> str:
        return self.origin.get(name, name)

    def finish(self, graph_name: str, outputs: Sequence[str]) -> ir.Graph:
        tensors = {}
        for key, t in self.tensors.items():
            name = self.resolve(key)
            tensors[name] = ir.Tensor(name, t.dtype, t.shape, data=t.data, quant=t.quant)
        ops = []
        for rec in self.ops:
            ins = tuple(self.resolve(n) if n else "" for n in rec.inputs)
            outs = tuple(self.resolve(n) for n in rec.outputs)
            ops.append(ir.Op(rec.kind, ins, outs, rec.attrs, name=self.resolve(rec.label)))
        # drop tensors nothing reads or writes (e.g. the index of a max_pool kept whole)
        used = set(self.resolve(n) for n in self.inputs) | set(self.resolve(n) for n in outputs)
        for op in ops:
            used.update(op.inputs)
            used.update(op.outputs)
        tensors = {n: t for n, t in tensors.items() if n in used}
        return ir.Graph(graph_name, tuple(self.resolve(n) for n in self.inputs),
                        tuple(self.resolve(n) for n in outputs), tuple(ops), tensors)
