"""Building a TOSA integer ir.Graph op by op, validated as it grows.

Every `emit` binds the operator with the TOSA validation of qsim.tosa (ERROR_IF
checks and shape inference), so a lowering rule that produces an invalid op
fails at the rule, naming the float op it was lowering, not later in verify().
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import ir
from ..errors import InvalidGraphError, UnsupportedError
from ..tosa.run import operator as tosa_operator
from ..tosa.signature import storage_name
from ..tosa.validate import bind, output_types


class GraphBuilder:
    def __init__(self) -> None:
        self.tensors: dict[str, ir.Tensor] = {}
        self.ops: list[ir.Op] = []
        self._used: set[str] = set()
        self._reserved: set[str] = set()

    def reserve(self, names) -> None:
        """Names that `fresh` must not hand out (they are claimed exactly, e.g. the float
        graph's tensor names, so integer tensors keep the names of the values they hold)."""
        self._reserved.update(names)

    def fresh(self, hint: str, exact: bool = False) -> str:
        """A tensor name not used yet: `hint`, else `hint_2`, `hint_3`, ...

        With exact=True, `hint` itself (a reserved name) is claimed or it is an error.
        """
        if exact:
            if hint in self._used:
                raise ValueError(f"tensor name {hint!r} is already used")
            self._used.add(hint)
            return hint
        name, k = hint, 1
        while name in self._used or name in self._reserved:
            k += 1
            name = f"{hint}_{k}"
        self._used.add(name)
        return name

    def add_tensor(self, hint: str, dtype: ir.DType, shape: Sequence[int], *,
                   data: np.ndarray | None = None, quant: ir.QuantInfo | None = None,
                   exact: bool = False) -> str:
        name = self.fresh(hint, exact)
        self.tensors[name] = ir.Tensor(name, dtype, tuple(int(d) for d in shape), data=data, quant=quant)
        return name

    def set_quant(self, name: str, quant: ir.QuantInfo | None) -> None:
        t = self.tensors[name]
        self.tensors[name] = ir.Tensor(t.name, t.dtype, t.shape, t.data, quant, t.max_shape)

    def rename(self, old: str, hint: str) -> str:
        """Gives tensor `old` a fresh name from `hint` (ops updated); frees `old` for reuse."""
        new = self.fresh(hint)
        t = self.tensors.pop(old)
        self.tensors[new] = ir.Tensor(new, t.dtype, t.shape, t.data, t.quant, t.max_shape)
        sub = lambda names: tuple(new if n == old else n for n in names)  # noqa: E731
        self.ops = [ir.Op(op.kind, sub(op.inputs), sub(op.outputs), op.attrs, op.subgraphs, op.name)
                    for op in self.ops]
        self._used.discard(old)
        return new

    def tensor(self, name: str) -> ir.Tensor:
        return self.tensors[name]

    def emit(self, op: str, inputs: Sequence[str], attrs: dict[str, Any], *, hint: str,
             label: str, out_dtype: ir.DType | None = None,
             quant: ir.QuantInfo | None = None, exact: bool = False) -> str:
        """Appends TOSA operator `op` reading `inputs`; returns its (single) output tensor name.

        `out_dtype` is needed where the inputs do not imply the output type (RESCALE, CAST).
        """
        opdef = tosa_operator(op)
        ins = [self.tensors[n] for n in inputs]
        attrs = dict(attrs)
        if out_dtype is not None and op in ("RESCALE", "CAST"):
            attrs["out_t"] = storage_name(out_dtype)
        try:
            call = bind(opdef, [t.dtype for t in ins], [tuple(t.shape) for t in ins], attrs,
                        f"tosa.{op} {label!r}", out_type=out_dtype)
        except InvalidGraphError as err:
            raise UnsupportedError(f"lowering {label!r} produced an invalid {op}: {err.message}",
                                   hint="this is a qsim lowering limitation for this layer's "
                                        "attributes; please report it") from None
        (shape,), (dtype,) = call.out_shapes, output_types(call)
        if quant is None and dtype is not ir.DType.I32 and ins and ins[0].dtype is dtype:
            quant = ins[0].quant   # data movement (SLICE, TRANSPOSE, ...) keeps the grid
        out = self.add_tensor(hint, dtype, shape, quant=quant, exact=exact)
        stored = {k: v for k, v in attrs.items() if k != "out_t"}
        if op in ("RESCALE", "CAST"):
            stored["out_t"] = storage_name(dtype)
        self.ops.append(ir.Op(ir.OpKind.get(f"tosa.{op}"), tuple(inputs), (out,), stored, name=label))
        return out

    def build(self, name: str, inputs: Sequence[str], outputs: Sequence[str]) -> ir.Graph:
        used = set(inputs) | set(outputs)
        for op in self.ops:
            used.update(op.inputs)
            used.update(op.outputs)
        tensors = {n: t for n, t in self.tensors.items() if n in used}
        return ir.Graph(name, tuple(inputs), tuple(outputs), tuple(self.ops), tensors).verify()
