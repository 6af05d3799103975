"""Building the integer ir.Graph of a lowering op by op (any target: TOSA, CVM).

The builder hands out tensor names (the float graph's names are reserved, so integer
tensors keep the names of the values they hold), holds tensors and ops, and builds the
verified graph. Each target's context appends its own operators, validated as they are
emitted (tosa.context.TosaContext.emit, cvm.context.CvmContext.emit), so a rule that
produces an invalid op fails at the rule, not later in verify().
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from ... import ir
from ...skriptnd.formatting import is_identifier


def is_text_safe(name: str) -> bool:
    """True when the SkriptND writer keeps `name` as it is: an identifier, or a dotted path of
    identifiers (scoped names, 2.10)."""
    return all(is_identifier(part) for part in name.split("."))


def _sanitized(name: str) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", name) or "t"
    if base[0].isdigit():
        base = "t_" + base
    return base if is_identifier(base) else base + "_"


class IntegerGraphBuilder:
    def __init__(self) -> None:
        self.tensors: dict[str, ir.Tensor] = {}
        self.ops: list[ir.Op] = []
        self._used: set[str] = set()
        self._reserved: set[str] = set()
        self._safe: dict[str, str] = {}     # name the text cannot keep -> the name used instead

    def reserve(self, names) -> None:
        """Names that `fresh` must not hand out (they are claimed exactly, e.g. the float
        graph's tensor names, so integer tensors keep the names of the values they hold)."""
        self._reserved.update(names)

    def safe(self, name: str) -> str:
        """The name the integer graph uses for `name`: itself when the SkriptND text keeps it,
        else one fixed identifier per name ('/layer1/Relu_output_0' → '_layer1_Relu_output_0',
        'input.1' → 'input_1'), never a reserved or another name's. Naming the graph this way
        from the start keeps main.sknd and quantization.json's tensor_map in agreement for
        ONNX names."""
        if is_text_safe(name):
            return name
        if name not in self._safe:
            base = _sanitized(name)
            taken = self._used | self._reserved | set(self._safe.values())
            candidate, k = base, 1
            while candidate in taken:
                k += 1
                candidate = f"{base}_{k}"
            self._safe[name] = candidate
        return self._safe[name]

    def fresh(self, hint: str, exact: bool = False) -> str:
        """A tensor name not used yet: `hint`, else `hint_2`, `hint_3`, ...

        With exact=True, `hint` itself (a reserved name) is claimed or it is an error.
        Either way `hint` is first made safe (see `safe`).
        """
        hint = self.safe(hint)
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

    def append(self, op: ir.Op) -> None:
        """Appends `op` (its output tensors added before, with add_tensor)."""
        self.ops.append(op)

    def build(self, name: str, inputs: Sequence[str], outputs: Sequence[str]) -> ir.Graph:
        used = set(inputs) | set(outputs)
        for op in self.ops:
            used.update(op.inputs)
            used.update(op.outputs)
        tensors = {n: t for n, t in self.tensors.items() if n in used}
        return ir.Graph(name, tuple(inputs), tuple(outputs), tuple(self.ops), tensors).verify()
