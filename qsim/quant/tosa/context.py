"""The TOSA 0.30 integer side of a lowering: what the TOSA rules (rules_*.py) call.

A `TosaContext` owns the shared float-side bookkeeping (`f`, float_side.FloatSide) and adds
TOSA's integer arithmetic: validated emission of TOSA operators, RESCALE by real ratios
(scale.fixed_point_scale), layouts (NNEF is NCHW, TOSA wants NHWC: layouts change lazily,
with one TRANSPOSE where an operator needs another layout; constants are converted at
compile time), and the run's QuantConfig (precision, weight granularity, double rounding).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .tflite.arith import activation_range, is_tflite
from ... import ir
from ...errors import InvalidGraphError, UnsupportedError
from ...tosa.run import operator as tosa_operator
from ...tosa.signature import storage_name
from ...tosa.validate import bind, output_types
from ..lowering.integer_inputs import INDEX_DTYPE, INTEGER_INPUT, MASK_INPUT, is_integer_input
from ..lowering.float_side import FloatSide, Lowered, compose_perm, identity
from ..params import Precision, QuantConfig, params_from_range, quantize
from .scale import ScaleWidth, fixed_point_scale
from .tables import Int8Table, Int16Table


class TosaContext:
    def __init__(self, f: FloatSide, config: QuantConfig,
                 channel_means: dict[str, np.ndarray] | None = None, input_moments=None):
        self.f = f
        self.config = config
        self.channel_means: dict[str, np.ndarray] = channel_means or {}   # bias correction
        self.input_moments = input_moments    # rounding.InputMoments: adaptive weight rounding
        # the widths of the op being lowered: the mode its inputs are read at, and the width
        # it writes (both config.precision, except under a per-layer plan: mixed_precision.py)
        self.precision_in = self.precision_out = config.precision
        self.plan_switch = None               # mixed_precision.PlanSwitch under a plan

    # -- types of this op ---------------------------------------------------------------
    @property
    def precision(self) -> Precision:
        """The width the current op writes."""
        return self.precision_out

    @property
    def act_dtype(self) -> ir.DType:
        """The activation type the current op writes."""
        return self.precision_out.activation_dtype

    @property
    def input_dtype(self) -> ir.DType:
        """The activation type the current op reads (its TOSA mode's in_t)."""
        return self.precision_in.activation_dtype

    @property
    def acc_dtype(self) -> ir.DType:
        return self.precision_in.accumulator_dtype

    @property
    def scale_width(self) -> ScaleWidth:
        # int48 accumulators can only be scaled with 16-bit multipliers (TOSA 1.9.2)
        return ScaleWidth.SCALE16 if self.precision_in is Precision.INT16X8 else ScaleWidth.SCALE32

    def enter_op(self, op: ir.Op) -> None:
        """Called before op's rule: under a plan, the op's widths and inputs (mixed_precision.py)."""
        if self.plan_switch is not None:
            self.plan_switch.enter(op)

    def leave_op(self) -> None:
        if self.plan_switch is not None:
            self.plan_switch.leave()

    # -- emission ---------------------------------------------------------------------------
    def emit(self, op: str, inputs: Sequence[str], attrs: dict[str, Any], *, hint: str,
             label: str, out_dtype: ir.DType | None = None,
             quant: ir.QuantInfo | None = None, exact: bool = False) -> str:
        """Appends TOSA operator `op` reading `inputs`; returns its (single) output tensor name.

        The operator is bound with qsim.tosa's validation (ERROR_IF checks and shape
        inference). `out_dtype` is needed where the inputs do not imply the output type
        (RESCALE, CAST).
        """
        b = self.f.builder
        opdef = tosa_operator(op)
        ins = [b.tensor(n) for n in inputs]
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
        out = b.add_tensor(hint, dtype, shape, quant=quant, exact=exact)
        stored = {k: v for k, v in attrs.items() if k != "out_t"}
        if op in ("RESCALE", "CAST"):
            stored["out_t"] = storage_name(dtype)
        b.append(ir.Op(ir.OpKind.get(f"tosa.{op}"), tuple(inputs), (out,), stored, name=label))
        return out

    # -- layouts ----------------------------------------------------------------------------
    def transpose_to(self, v: Lowered, target: tuple[int, ...], hint: str,
                     exact: bool = False) -> Lowered:
        """`v` with its integer tensor in layout `target` (one TRANSPOSE if it differs)."""
        if v.perm == target:
            return v
        perms = compose_perm(v.perm, target)
        out = self.emit("TRANSPOSE", [v.name], {"perms": perms}, hint=hint, label=self.f.where(),
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
        shape = self.f.builder.tensor(v.name).shape
        moved = [v.perm[i] for i in range(rank) if shape[i] != 1]
        if moved == sorted(moved):
            float_shape = [0] * rank
            for i, p in enumerate(v.perm):
                float_shape[p] = shape[i]
            out = self.emit("RESHAPE", [v.name], {"new_shape": tuple(float_shape)}, hint=hint,
                            label=self.f.where(), quant=v.quant, exact=exact)
            return Lowered(out, v.quant, identity(rank))
        return self.transpose_to(v, identity(rank), hint, exact)

    # -- requantization ---------------------------------------------------------------------
    def rescale(self, src: str, *, scale, input_zp: int, output_zp: int, out_dtype: ir.DType,
                hint: str, quant: ir.QuantInfo | None = None, exact: bool = False,
                per_channel: bool = False, single_round: bool = False) -> str:
        """RESCALE by `scale` (a real number, or per-channel reals on the last axis);
        `single_round` forces double_round off (a TFLite kernel that rounds once)."""
        in_dtype = self.f.builder.tensor(src).dtype
        width = ScaleWidth.SCALE16 if in_dtype is ir.DType.I48 else ScaleWidth.SCALE32
        fp = fixed_point_scale(scale, width, what=f"{self.f.where()} RESCALE")
        return self.emit("RESCALE", [src], {
            "input_zp": int(input_zp), "output_zp": int(output_zp),
            "multiplier": fp.multiplier.astype(np.int32 if width.scale32 else np.int16),
            "shift": fp.shift.astype(np.int8),
            "scale32": width.scale32,
            # a tensor of a .tflite model is rescaled as TFLite does (twice), whatever the run's option
            "double_round": bool((self.config.double_round or is_tflite(quant)) and width.scale32
                                 and not single_round),
            "per_channel": per_channel,
        }, hint=hint, label=self.f.where(), out_dtype=out_dtype, quant=quant, exact=exact)

    def table(self, x: str, table: Int8Table | Int16Table, *, hint: str, quant: ir.QuantInfo,
              exact: bool = True) -> str:
        """TABLE of int8 `x` (one op), or of int16 `x` followed by the RESCALE of its 16.7
        result to int16 (tables.py): the output on `quant`'s grid."""
        if isinstance(table, Int8Table):
            return self.emit("TABLE", [x], {"table": table.table}, hint=hint, label=self.f.where(),
                             quant=quant, exact=exact)
        looked = self.emit("TABLE", [x], {"table": table.table}, hint=f"{hint}.16_7",
                           label=self.f.where())
        fp = table.output_rescale
        return self.emit("RESCALE", [looked], {
            "input_zp": 0, "output_zp": 0, "multiplier": fp.multiplier.astype(np.int16),
            "shift": fp.shift.astype(np.int8), "scale32": False, "double_round": False,
            "per_channel": False}, hint=hint, label=self.f.where(), out_dtype=ir.DType.I16,
            quant=quant, exact=exact)

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
        if is_tflite(quant):     # TFLite rounds the bounds to nearest (tflite/arith.py)
            return activation_range(quant, lo, hi, dt.min, dt.max)
        s, zp = float(quant.scales()[0]), int(quant.zero_points()[0])
        qlo = dt.min if lo is None else max(dt.min, min(dt.max, int(np.ceil(lo / s - 1e-9)) + zp))
        qhi = dt.max if hi is None else min(dt.max, max(dt.min, int(np.floor(hi / s + 1e-9)) + zp))
        return qlo, qhi

    # -- constants and inputs ---------------------------------------------------------------
    def constant_tensor(self, hint: str, values: np.ndarray, dtype: ir.DType,
                        quant: ir.QuantInfo | None = None) -> str:
        """A constant integer tensor (for operators that take tensors as inputs).

        Held as tensor data rather than a CONST op: the model folder stores constants as
        @variable tensors, so the graph reads back exactly as it was written.
        """
        # (np.ascontiguousarray would make a rank-0 array rank 1)
        data = np.ascontiguousarray(values, dtype=dtype.numpy).reshape(np.shape(values))
        return self.f.builder.add_tensor(hint, dtype, data.shape, data=data, quant=quant)

    def quantize_input(self, name: str) -> None:
        """A float graph input becomes an integer graph input (quantized outside the graph);
        an integer one (token ids) stays integer, as int32 (lowering/integer_inputs.py)."""
        shape = self.f.float_shape(name)
        if self.f.graph.tensor(name).dtype is ir.DType.BOOL:      # a mask: bool as it is
            out = self.f.builder.add_tensor(name, ir.DType.BOOL, shape, quant=MASK_INPUT, exact=True)
            self.f.bind(name, Lowered(out, MASK_INPUT, identity(len(shape))))
            return
        if is_integer_input(self.f.graph.tensor(name).dtype):
            out = self.f.builder.add_tensor(name, INDEX_DTYPE, shape, quant=INTEGER_INPUT, exact=True)
            self.f.bind(name, Lowered(out, INTEGER_INPUT, identity(len(shape))))
            return
        quant = self.f.activation_quant(name)
        dtype = (self.act_dtype if self.plan_switch is None
                 else self.plan_switch.input_precision(name).activation_dtype)
        out = self.f.builder.add_tensor(name, dtype, shape, quant=quant, exact=True)
        self.f.bind(name, Lowered(out, quant, identity(len(shape))))

    def quantize_weights(self, weights: np.ndarray, channel_axis: int,
                         annotation: ir.QuantInfo | None = None, what: str = "weights",
                         zero_point_ok: bool = False):
        """int8 weights: on the @quantize/graph.quant `annotation` if given (honoured exactly),
        else on the run's weight scheme (symmetric, per output channel by default).

        Returns (int8 array in the float layout, QuantInfo: per-channel along `channel_axis`
        or per tensor).
        """
        if annotation is not None:
            quant = annotation
            if quant.per_channel and quant.axis != channel_axis:
                raise self.f.unsupported(f"{what} are annotated per channel along axis {quant.axis}; "
                                         f"the output channels are axis {channel_axis}")
            if quant.bits > 8 or not quant.signed:
                raise self.f.unsupported(f"{what} are annotated as {quant.bits}-bit "
                                         f"{'signed' if quant.signed else 'unsigned'}; TOSA "
                                         "convolutions take signed int8 weights")
            if np.any(quant.zero_points() != 0) and not (zero_point_ok and not quant.per_channel):
                # the rules give TOSA weight_zp 0: other zero points would be silently ignored
                raise self.f.unsupported(f"{what} are annotated with zero point "
                                         f"{quant.zero_points().tolist()}; qsim lowers symmetric "
                                         "weights (zero point 0)",
                                         hint="quantize the weights symmetrically (onnxruntime: "
                                              "weight_type=QInt8, the default)")
        else:
            scheme = self.config.weight_scheme(channel_axis)
            if scheme.channel_axis is None:
                lo, hi = weights.min(), weights.max()
            else:
                moved = np.moveaxis(weights, channel_axis, 0).reshape(weights.shape[channel_axis], -1)
                lo, hi = moved.min(axis=1), moved.max(axis=1)
            quant = params_from_range(lo, hi, scheme, source="calibration", what=what)
        q = quantize(weights, quant, what=what)
        return q.astype(np.int8), quant
