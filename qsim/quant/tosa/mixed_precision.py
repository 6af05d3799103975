"""A per-layer precision plan (params.PrecisionPlan) in the TOSA lowering.

A MAC layer's precision is its operator's TOSA mode (spec 2.3 "Supported Data Types"): INT8
reads int8 activations into an int32 accumulator, INT16X8 int16 ones into int48. What every
activation tensor is then follows from the readers that need it:

- a tensor is as wide as the widest mode among its readers (a non-MAC reader, ADD, pooling,
  reshape..., works at the width of its own output), so the producer of a 16x8 layer's input
  writes int16: that, and not the layer's own arithmetic, is where the extra bits are won;
- a tensor nobody reads (a graph output) has the width its producer would pass on: the MAC
  layer's mode, or after any other operator the widest of that operator's inputs, so a 16x8
  classifier layer followed by pooling and reshapes delivers int16 outputs;

A reader narrower than the tensor gets it through one TOSA RESCALE onto the tensor's grid at
the reader's width (calibrated for that width; int16 -> int8 and, where a producer writes
narrower than a reader, int8 -> int16; both are spec modes of RESCALE), made once per
(tensor, width) and shared. The layer's accumulator RESCALE writes its output width directly
(int32 -> int16 and int48 -> int8 are RESCALE modes too). Every tensor's parameters are the
ones calibrated for its own width, so a uniform plan lowers exactly as `--precision` does.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ... import ir
from ..lowering.float_side import Lowered
from ..params import Precision, PrecisionPlan

MAC_KINDS = ("nn.conv", "nn.deconv", "nn.linear", "linalg.matmul")
_WIDTH = {Precision.INT8: 0, Precision.INT16X8: 1}


def wider(a: Precision, b: Precision) -> Precision:
    return a if _WIDTH[a] >= _WIDTH[b] else b


def mac_layers(graph: ir.Graph) -> list[str]:
    """The layers a plan names, in graph order: each MAC op's first output (whose first input
    is computed, not a constant: a constant-by-constant product is folded before lowering)."""
    return [op.outputs[0] for op in graph.ops if op.kind.name in MAC_KINDS]


@dataclass(frozen=True)
class OpPrecisions:
    """The lowering's widths: `tensors` by float tensor name, and per op (by id) the mode its
    inputs are read at (`reads`) and the width it writes (`writes`)."""
    tensors: dict[str, Precision]
    reads: dict[int, Precision] = field(default_factory=dict)
    writes: dict[int, Precision] = field(default_factory=dict)


def op_precisions(graph: ir.Graph, plan: PrecisionPlan) -> OpPrecisions:
    """The widths of every tensor and op of `graph` under `plan` (module doc)."""
    # forward: the width a tensor nobody reads takes, its producer's mode after a MAC layer,
    # else the widest of the producer's computed inputs (graph inputs: the plan's default)
    produced: dict[str, Precision] = {}
    for op in graph.ops:
        if op.kind.name in MAC_KINDS:
            width = plan.of(op.outputs[0])
        else:
            widths = [produced.get(n, plan.default) for n in op.inputs
                      if n and not graph.tensor(n).is_constant]
            width = max(widths, key=_WIDTH.__getitem__, default=plan.default)
        produced.update((name, width) for name in op.outputs)
    need: dict[str, Precision] = {}
    reads: dict[int, Precision] = {}
    writes: dict[int, Precision] = {}
    for op in reversed(graph.ops):
        mac = op.kind.name in MAC_KINDS
        mode = plan.of(op.outputs[0]) if mac else None
        out = None
        for name in op.outputs:
            p = need.get(name, produced[name])
            out = p if out is None else wider(out, p)
        for name in op.outputs:          # an op writes all its outputs at one width
            need[name] = out
        reads[id(op)] = mode if mac else out
        writes[id(op)] = out
        for name in op.inputs:
            if name and not graph.tensor(name).is_constant:
                need[name] = wider(need[name], reads[id(op)]) if name in need else reads[id(op)]
    return OpPrecisions(need, reads, writes)


class PlanSwitch:
    """Sets the TOSA context's widths for each float op and hands the op's rule its computed
    inputs at the op's read width (module doc); restores the shared values after the rule."""

    def __init__(self, ctx, plan: PrecisionPlan, by_precision: dict[Precision, dict[str, ir.QuantInfo]]):
        self.ctx = ctx
        self.widths = op_precisions(ctx.f.graph, plan)
        self.by_precision = by_precision
        self.converted: dict[tuple[str, Precision], Lowered] = {}
        self.swapped: list[tuple[str, Lowered, ir.QuantInfo | None]] = []

    def qparams(self) -> dict[str, ir.QuantInfo]:
        """Every calibrated tensor's parameters at its own width (annotated ones are the same
        at both)."""
        merged = dict(self.by_precision[Precision.INT8])
        for name, p in self.widths.tensors.items():
            if name in self.by_precision[p]:
                merged[name] = self.by_precision[p][name]
        return merged

    def input_precision(self, name: str) -> Precision:
        return self.widths.tensors.get(name, Precision.INT8)

    def enter(self, op: ir.Op) -> None:
        ctx, f = self.ctx, self.ctx.f
        read = self.widths.reads.get(id(op), ctx.config.precision)
        ctx.precision_in = read
        ctx.precision_out = self.widths.writes.get(id(op), read)
        want = read.activation_dtype
        for name in dict.fromkeys(n for n in op.inputs if n in f.values):
            v = f.values[name]
            if f.builder.tensor(v.name).dtype not in (ir.DType.I8, ir.DType.I16) \
                    or f.builder.tensor(v.name).dtype is want or name not in self.by_precision[read]:
                continue
            key = (name, read)
            if key not in self.converted:
                quant = self.by_precision[read][name]
                out = ctx.rescale(v.name, scale=float(v.quant.scales()[0]) / float(quant.scales()[0]),
                                  input_zp=int(v.quant.zero_points()[0]),
                                  output_zp=int(quant.zero_points()[0]), out_dtype=want,
                                  hint=f"{name}.{want.name.lower()}", quant=quant)
                self.converted[key] = Lowered(out, quant, v.perm)
            self.swapped.append((name, v, f.qparams.get(name)))
            f.values[name] = self.converted[key]
            f.qparams[name] = self.converted[key].quant

    def leave(self) -> None:
        f = self.ctx.f
        for name, value, quant in reversed(self.swapped):
            if f.values.get(name) is self.converted.get((name, self.ctx.precision_in)):
                f.values[name] = value
            if quant is not None:
                f.qparams[name] = quant
        self.swapped.clear()
        self.ctx.precision_in = self.ctx.precision_out = self.ctx.config.precision
