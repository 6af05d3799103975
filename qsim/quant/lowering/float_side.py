"""The float side of a lowering, shared by every target (TOSA 0.30, CVM).

Lowering a float ir.Graph (NNEF operators) to an integer ir.Graph walks the float ops in
order and applies each one's rule for the target (qsim/quant/rules.py). Whatever the target, a rule
needs the same bookkeeping, held here by one `FloatSide` object that the target's context
owns (composition: the targets do not subclass it):

- the float graph and its queries (static shapes, constant data, consumers);
- the calibrated QuantInfo of every float activation;
- `values`: the integer counterpart (`Lowered`) of every float tensor lowered so far;
- `fused`: the float ops a rule folded into an earlier one (skipped by the walk);
- `op`: the float op being lowered (for messages);
- `builder`: the integer graph under construction (names, tensors, ops).

Invariants: every float activation tensor that survives gets a `Lowered` value: its
integer tensor, its QuantInfo (per tensor), and `perm`, the layout of the integer tensor
relative to the float one (int == np.transpose(float, perm)). An operator that cannot be
lowered is an UnsupportedError naming it and its location; there is never a float fallback.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import ir
from ...errors import UnsupportedError
from .graph_builder import IntegerGraphBuilder


@dataclass(frozen=True)
class Lowered:
    """The integer counterpart of one float tensor."""
    name: str
    quant: ir.QuantInfo
    perm: tuple[int, ...]


@dataclass(frozen=True)
class LoweredModel:
    """A quantized model: the integer graph and how it stands for the float one."""
    graph: ir.Graph                       # the integer graph
    # by integer graph input/output name (as a loaded folder has them; tensor_map gives the
    # integer name of a float one): how float inputs are quantized to the graph inputs, and
    # what the integer outputs mean
    input_quant: dict[str, ir.QuantInfo]
    output_quant: dict[str, ir.QuantInfo]
    tensor_map: dict[str, Lowered]        # float tensor name -> its integer counterpart


def identity(rank: int) -> tuple[int, ...]:
    return tuple(range(rank))


def compose_perm(current: tuple[int, ...], target: tuple[int, ...]) -> tuple[int, ...]:
    """The TRANSPOSE perms taking an integer tensor in layout `current` to layout `target`.

    int = transpose(f, current); want transpose(f, target) = transpose(int, q), so
    current[q[i]] = target[i].
    """
    return tuple(current.index(t) for t in target)


NHWC_FROM_NCHW = (0, 2, 3, 1)


@dataclass(frozen=True)
class Wording:
    """How a target words an operator it cannot lower: "cannot lower <op><onto>: <what>"."""
    onto: str            # "" (TOSA) or " to CVM"
    default_hint: str


class FloatSide:
    def __init__(self, graph: ir.Graph, qparams: dict[str, ir.QuantInfo], wording: Wording):
        self.graph = graph
        self.qparams = qparams
        self.wording = wording
        self.builder = IntegerGraphBuilder()
        self.builder.reserve(graph.tensors)
        self.values: dict[str, Lowered] = {}
        self.fused: set[int] = set()          # ids of float ops folded into an earlier rule
        self.op: ir.Op | None = None          # the float op being lowered (for messages)

    # -- messages --------------------------------------------------------------------------
    def where(self, op: ir.Op | None = None) -> str:
        op = op or self.op
        return f"{op.kind.name} {op.label!r}" if op is not None else "graph"

    def unsupported(self, what: str, hint: str | None = None) -> UnsupportedError:
        return UnsupportedError(f"cannot lower {self.where()}{self.wording.onto}: {what}",
                                hint=hint or self.wording.default_hint)

    # -- float graph queries -------------------------------------------------------------
    def float_shape(self, name: str) -> tuple[int, ...]:
        t = self.graph.tensor(name)
        if not t.is_static:
            raise self.unsupported(f"tensor {name!r} has a dynamic shape {list(t.shape)}",
                                   hint="TOSA 0.30 needs static shapes; give the model fixed input shapes")
        return tuple(int(d) for d in t.shape)

    def constant(self, name: str) -> np.ndarray | None:
        """Float data of a constant/variable input, None for an omitted optional input."""
        if name == "":
            return None
        t = self.graph.tensor(name)
        if t.data is None:
            raise self.unsupported(f"input {name!r} must be a constant (a @variable or @constant "
                                   "tensor), it is computed at run time")
        return np.asarray(t.data, dtype=np.float64)

    def is_constant(self, name: str) -> bool:
        return name != "" and self.graph.tensor(name).data is not None

    def consumers(self, name: str) -> list[ir.Op]:
        return self.graph.consumers(name)

    def only_consumer(self, name: str) -> ir.Op | None:
        users = self.consumers(name)
        if len(users) == 1 and name not in self.graph.outputs:
            return users[0]
        return None

    def activation_quant(self, name: str) -> ir.QuantInfo:
        try:
            q = self.qparams[name]
        except KeyError:
            raise self.unsupported(f"tensor {name!r} has no quantization parameters",
                                   hint="calibrate with data that reaches this tensor, or "
                                        "annotate it with @quantize") from None
        if q.per_channel:
            raise self.unsupported(f"activation {name!r} is quantized per channel; TOSA "
                                   "activations are per tensor")
        return q

    # -- integer values ------------------------------------------------------------------
    def value(self, name: str) -> Lowered:
        try:
            return self.values[name]
        except KeyError:
            if self.is_constant(name):
                raise self.unsupported(
                    f"constant input {name!r} is used where a computed tensor is expected",
                    hint="the pipeline folds operators that read only constants; this one mixes a "
                         "constant with computed inputs in a place its lowering takes computed "
                         "data only: fold the constant into the model's weights (or make it "
                         "an operator attribute), or file an issue with the model") from None
            raise self.unsupported(f"input {name!r} has not been lowered") from None

    def bind(self, float_name: str, value: Lowered) -> Lowered:
        self.values[float_name] = value
        return value

    def rename(self, old: str, hint: str) -> str:
        """Renames integer tensor `old` everywhere (graph and lowered values)."""
        new = self.builder.rename(old, hint)
        for key, v in self.values.items():
            if v.name == old:
                self.values[key] = Lowered(new, v.quant, v.perm)
        return new

    def model(self, name: str, outputs: list[str]) -> LoweredModel:
        """The finished LoweredModel: the built graph named `name` with integer `outputs`."""
        graph = self.graph
        int_graph = self.builder.build(name, [self.values[n].name for n in graph.inputs], outputs)
        return LoweredModel(int_graph,
                            {self.values[n].name: self.values[n].quant for n in graph.inputs},
                            {self.values[n].name: self.values[n].quant for n in graph.outputs},
                            dict(self.values))
