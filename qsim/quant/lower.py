"""Lowering a float ir.Graph (NNEF operators) to a TOSA 0.30 integer ir.Graph.

Inputs: the float graph, a QuantInfo for every float activation tensor (from
@quantize annotations or calibration), and the run's QuantConfig. Output: an
integer graph of `tosa.*` ops only, verified, whose tensors keep the names of
the float values they hold (so dumps of the two executions line up by name).

Invariants of the lowering:
- Every float activation tensor that survives gets a `Lowered` value: its
  integer tensor, its QuantInfo (per tensor), and `perm`, the layout of the
  integer tensor relative to the float one (int == np.transpose(float, perm)).
  NNEF is NCHW, TOSA wants NHWC: layouts change lazily, with one TRANSPOSE
  where an operator needs another layout, and constants are converted at
  compile time.
- An operator that cannot be lowered is an UnsupportedError naming it and its
  location; there is never a float fallback.
Rules live in lower_*.py modules, one `@rule("dialect.op")` function per kind.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import ir
from ..errors import UnsupportedError
from .builder import GraphBuilder
from .params import Precision, QuantConfig, quantize
from .scale import ScaleWidth, fixed_point_scale


@dataclass(frozen=True)
class Lowered:
    """The integer counterpart of one float tensor."""
    name: str
    quant: ir.QuantInfo
    perm: tuple[int, ...]


Rule = Callable[["LoweringContext", ir.Op], None]
RULES: dict[str, Rule] = {}


def rule(*kinds: str):
    """Registers a lowering rule for float op kinds (qualified names, e.g. "nn.conv")."""
    def register(fn: Rule) -> Rule:
        for kind in kinds:
            if kind in RULES:
                raise ValueError(f"two lowering rules for {kind}")
            RULES[kind] = fn
        return fn
    return register


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
class LoweredModel:
    graph: ir.Graph                       # the integer graph
    input_quant: dict[str, ir.QuantInfo]  # how float inputs are quantized to the graph inputs
    output_quant: dict[str, ir.QuantInfo]
    tensor_map: dict[str, Lowered]        # float tensor name -> its integer counterpart


class LoweringContext:
    def __init__(self, graph: ir.Graph, qparams: dict[str, ir.QuantInfo], config: QuantConfig):
        self.graph = graph
        self.qparams = qparams
        self.config = config
        self.channel_means: dict[str, np.ndarray] = {}   # float activation -> mean per channel
        self.input_moments = None             # rounding.InputMoments: adaptive weight rounding
        self.b = GraphBuilder()
        self.b.reserve(graph.tensors)
        self.values: dict[str, Lowered] = {}
        self.fused: set[int] = set()          # ids of float ops folded into an earlier rule
        self.op: ir.Op | None = None          # the float op being lowered (for messages)

    # -- types of this run --------------------------------------------------------------
    @property
    def act_dtype(self) -> ir.DType:
        return self.config.precision.activation_dtype

    @property
    def acc_dtype(self) -> ir.DType:
        return self.config.precision.accumulator_dtype

    @property
    def scale_width(self) -> ScaleWidth:
        # int48 accumulators can only be scaled with 16-bit multipliers (TOSA 1.9.2)
        return ScaleWidth.SCALE16 if self.config.precision is Precision.INT16X8 else ScaleWidth.SCALE32

    # -- messages --------------------------------------------------------------------------
    def where(self, op: ir.Op | None = None) -> str:
        op = op or self.op
        return f"{op.kind.name} {op.label!r}" if op is not None else "graph"

    def unsupported(self, what: str, hint: str | None = None) -> UnsupportedError:
        return UnsupportedError(f"cannot lower {self.where()}: {what}",
                                hint=hint or "qsim lowers only what TOSA 0.30 can express exactly; "
                                             "change the model or file an issue")

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
                raise self.unsupported(f"constant input {name!r} is used where a computed tensor "
                                       "is expected") from None
            raise self.unsupported(f"input {name!r} has not been lowered") from None

    def bind(self, float_name: str, value: Lowered) -> Lowered:
        self.values[float_name] = value
        return value

    def rename(self, old: str, hint: str) -> str:
        """Renames integer tensor `old` everywhere (graph and lowered values)."""
        new = self.b.rename(old, hint)
        for key, v in self.values.items():
            if v.name == old:
                self.values[key] = Lowered(new, v.quant, v.perm)
        return new

    def transpose_to(self, v: Lowered, target: tuple[int, ...], hint: str,
                     exact: bool = False) -> Lowered:
        """`v` with its integer tensor in layout `target` (one TRANSPOSE if it differs)."""
        if v.perm == target:
            return v
        perms = compose_perm(v.perm, target)
        out = self.b.emit("TRANSPOSE", [v.name], {"perms": perms}, hint=hint, label=self.where(),
                          quant=v.quant, exact=exact)
        return Lowered(out, v.quant, target)

    def to_float_layout(self, v: Lowered, hint: str, exact: bool = False) -> Lowered:
        """`v` in the float tensor's own dimension order.

        No TRANSPOSE is needed when the permutation only moves extents of size 1:
        the elements are then in the same order in memory, and a RESHAPE suffices.
        """
        rank = len(v.perm)
        if v.perm == identity(rank):
            return v
        shape = self.b.tensor(v.name).shape
        moved = [v.perm[i] for i in range(rank) if shape[i] != 1]
        if moved == sorted(moved):
            float_shape = [0] * rank
            for i, p in enumerate(v.perm):
                float_shape[p] = shape[i]
            out = self.b.emit("RESHAPE", [v.name], {"new_shape": tuple(float_shape)}, hint=hint,
                              label=self.where(), quant=v.quant, exact=exact)
            return Lowered(out, v.quant, identity(rank))
        return self.transpose_to(v, identity(rank), hint, exact)

    def rescale(self, src: str, *, scale, input_zp: int, output_zp: int, out_dtype: ir.DType,
                hint: str, quant: ir.QuantInfo | None = None, exact: bool = False,
                per_channel: bool = False) -> str:
        """RESCALE by `scale` (a real number, or per-channel reals on the last axis)."""
        in_dtype = self.b.tensor(src).dtype
        width = ScaleWidth.SCALE16 if in_dtype is ir.DType.I48 else ScaleWidth.SCALE32
        fp = fixed_point_scale(scale, width, what=f"{self.where()} RESCALE")
        return self.b.emit("RESCALE", [src], {
            "input_zp": int(input_zp), "output_zp": int(output_zp),
            "multiplier": fp.multiplier.astype(np.int32 if width.scale32 else np.int16),
            "shift": fp.shift.astype(np.int8),
            "scale32": width.scale32,
            "double_round": bool(self.config.double_round and width.scale32),
            "per_channel": per_channel,
        }, hint=hint, label=self.where(), out_dtype=out_dtype, quant=quant, exact=exact)

    def requantize(self, v: Lowered, quant: ir.QuantInfo, hint: str, exact: bool = False) -> Lowered:
        """`v` re-expressed on `quant`'s grid (no op when the parameters are equal)."""
        same = (float(v.quant.scales()[0]) == float(quant.scales()[0])
                and int(v.quant.zero_points()[0]) == int(quant.zero_points()[0]))
        if same and not exact:
            return v
        out = self.rescale(v.name, scale=float(v.quant.scales()[0]) / float(quant.scales()[0]),
                           input_zp=int(v.quant.zero_points()[0]),
                           output_zp=int(quant.zero_points()[0]), out_dtype=self.act_dtype,
                           hint=hint, quant=quant, exact=exact)
        return Lowered(out, quant, v.perm)

    def to_int32(self, v: Lowered, scale_ratio: float, hint: str) -> str:
        """int32 tensor of (q - zero_point) * scale_ratio: a common domain for elementwise ops."""
        return self.rescale(v.name, scale=scale_ratio, input_zp=int(v.quant.zero_points()[0]),
                            output_zp=0, out_dtype=ir.DType.I32, hint=hint)

    def clamp_range(self, quant: ir.QuantInfo, lo: float | None, hi: float | None) -> tuple[int, int]:
        """Integer bounds of the real interval [lo, hi] on `quant`'s grid, within the type."""
        dt = self.act_dtype
        s, zp = float(quant.scales()[0]), int(quant.zero_points()[0])
        qlo = dt.min if lo is None else max(dt.min, min(dt.max, int(np.ceil(lo / s - 1e-9)) + zp))
        qhi = dt.max if hi is None else min(dt.max, max(dt.min, int(np.floor(hi / s + 1e-9)) + zp))
        return qlo, qhi

    def constant_tensor(self, hint: str, values: np.ndarray, dtype: ir.DType,
                        quant: ir.QuantInfo | None = None) -> str:
        """A constant integer tensor (for operators that take tensors as inputs).

        Held as tensor data rather than a CONST op: the model folder stores constants as
        @variable tensors, so the graph reads back exactly as it was written.
        """
        # (np.ascontiguousarray would make a rank-0 array rank 1)
        data = np.ascontiguousarray(values, dtype=dtype.numpy).reshape(np.shape(values))
        return self.b.add_tensor(hint, dtype, data.shape, data=data, quant=quant)

    def quantize_input(self, name: str) -> None:
        """A float graph input becomes an integer graph input (quantized outside the graph)."""
        quant = self.activation_quant(name)
        shape = self.float_shape(name)
        out = self.b.add_tensor(name, self.act_dtype, shape, quant=quant, exact=True)
        self.bind(name, Lowered(out, quant, identity(len(shape))))


def lowering_rules() -> dict[str, Rule]:
    """Every operator kind the lowering handles (the rule modules register on import)."""
    from . import lower_elementwise, lower_layout, lower_linear, lower_softmax  # noqa: F401
    return dict(RULES)


def apply_rules(ctx: LoweringContext, rules: dict, target: str) -> None:
    """Quantizes the graph inputs, then lowers each float op (in graph order) by its rule;
    ops a rule folded into an earlier one are skipped. `target` names the operator set in
    the error for an op without a rule ("integer", "CVM")."""
    graph = ctx.graph
    for name in graph.inputs:
        ctx.quantize_input(name)
    for op in graph.ops:
        if id(op) in ctx.fused:
            continue
        fn = rules.get(op.kind.name)
        if fn is None:
            defined = op.definition is not None     # the model's own operator: where it is defined
            raise UnsupportedError(
                f"cannot lower {op.kind.name} {op.label!r}: no {target} lowering for {op.kind.name}"
                + (f" (operator '{op.definition.name}' is defined by the model)" if defined else ""),
                location=op.definition.loc if defined else None,
                hint=("define it with a @compose block of standard operators; " if defined else "")
                     + ("control flow is lowered only once composed away: write a loop of "
                        "compile-time count with 'unroll' instead of 'do'; " if op.subgraphs else "")
                     + "operators with a rule: " + ", ".join(sorted(rules)))
        ctx.op = op
        fn(ctx, op)
        for out in op.outputs:
            if out not in ctx.values and out in graph.outputs:
                raise ctx.unsupported(f"output {out!r} was not produced")
    ctx.op = None


def lower_graph(graph: ir.Graph, qparams: dict[str, ir.QuantInfo],
                config: QuantConfig = QuantConfig(),
                channel_means: dict[str, np.ndarray] | None = None,
                input_moments=None) -> LoweredModel:
    """Lowers `graph` (float, NNEF operators) to a verified TOSA integer graph.
    `channel_means` (from calibrate) turns on bias correction of the weight rounding;
    `input_moments` (rounding.InputMoments from calibrate) turns on adaptive rounding."""
    ctx = LoweringContext(graph, qparams, config)
    ctx.channel_means = channel_means or {}
    ctx.input_moments = input_moments
    apply_rules(ctx, lowering_rules(), "integer")
    outputs = []
    for name in graph.outputs:
        # A graph output is delivered in the float tensor's own layout under its own name.
        if name in ctx.b.tensors and ctx.value(name).perm != identity(len(ctx.value(name).perm)):
            ctx.rename(name, f"{name}.int_layout")
        v = ctx.value(name)
        if v.perm != identity(len(v.perm)):
            v = ctx.to_float_layout(v, hint=name, exact=True)
        elif v.name != name:
            if name in ctx.b.tensors:
                ctx.rename(name, f"{name}.int")
            v = Lowered(ctx.b.emit("IDENTITY", [v.name], {}, hint=name, label=name, quant=v.quant,
                                   exact=True), v.quant, v.perm)
        ctx.bind(name, v)
        outputs.append(v.name)
    int_graph = ctx.b.build(f"{graph.name}_int", [ctx.values[n].name for n in graph.inputs], outputs)
    return LoweredModel(int_graph,
                        {n: ctx.values[n].quant for n in graph.inputs},
                        {n: ctx.values[n].quant for n in graph.outputs},
                        dict(ctx.values))


def quantize_weights(ctx: LoweringContext, weights: np.ndarray, channel_axis: int,
                     annotation: ir.QuantInfo | None = None, what: str = "weights"):
    """int8 weights: on the @quantize/graph.quant `annotation` if given (honoured exactly),
    else on the run's weight scheme (symmetric, per output channel by default).

    Returns (int8 array in the float layout, QuantInfo: per-channel along `channel_axis`
    or per tensor).
    """
    from .params import params_from_range
    if annotation is not None:
        quant = annotation
        if quant.per_channel and quant.axis != channel_axis:
            raise ctx.unsupported(f"{what} are annotated per channel along axis {quant.axis}; "
                                  f"the output channels are axis {channel_axis}")
        if quant.bits > 8 or not quant.signed:
            raise ctx.unsupported(f"{what} are annotated as {quant.bits}-bit "
                                  f"{'signed' if quant.signed else 'unsigned'}; TOSA convolutions "
                                  "take signed int8 weights")
    else:
        scheme = ctx.config.weight_scheme(channel_axis)
        if scheme.channel_axis is None:
            lo, hi = weights.min(), weights.max()
        else:
            moved = np.moveaxis(weights, channel_axis, 0).reshape(weights.shape[channel_axis], -1)
            lo, hi = moved.min(axis=1), moved.max(axis=1)
        quant = params_from_range(lo, hi, scheme, source="calibration", what=what)
    q = quantize(weights, quant, what=what)
    return q.astype(np.int8), quant
