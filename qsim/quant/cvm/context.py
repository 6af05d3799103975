"""The CVM integer side of a lowering (`cvm.*` ops only): what the CVM rules call.

The TOSA lowering (tosa/context.py) and this one share the float side (float_side.FloatSide:
shapes, constants, fusion bookkeeping; float_patterns: batch-norm folding, fused
activations); what differs is the integer arithmetic, which here is the CVM formalization's:

- every tensor's scale is a power of two, 2^e (QuantInfo.scale = 2.0**e, zero point 0,
  symmetric): the real value of integer q is q * 2^e;
- activations have precision p (CvmConfig.precision, default 8: values in
  [-(2^(p-1) - 1), 2^(p-1) - 1]); e is the smallest exponent with
  amax / 2^e <= 2^(p-1) - 1, amax from calibration on a symmetric p-bit grid;
- weights are per tensor at CvmConfig.weight_precision (default 8) with the same rule on
  max |w|; biases are int32 at scale 2^(e_x + e_w), the accumulator's;
- conv2d / dense accumulate in int32 at 2^(e_x + e_w) (CVM's precision rule bounds the
  sum); requantization to the output exponent e_y >= e_x + e_w is cvm_right_shift by
  e_y - e_x - e_w (round half up, then clip to precision p), or cvm_clip when the
  exponents are equal. A calibrated e_y finer than the accumulator is raised to the
  accumulator's exponent: no value the accumulator can hold needs more resolution;
- every tensor's QuantInfo.bits is its CVM precision (the rule of its operator), which is
  what the cvm dialect's runner and verifier read.

Rules live in rules.py; the target (pipeline entry) is target.CvmTarget. An operator without a rule, or with attributes CVM
cannot express, is an UnsupportedError naming it; there is no float fallback.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ... import cvm, ir
from ...cvm.precision import precision_of
from ...errors import InvalidGraphError, QsimError, UnsupportedError
from ...numerics import nnef_round
from ..lowering.float_side import FloatSide, Lowered, Wording, identity
from ..params import QuantScheme

@dataclass(frozen=True)
class CvmConfig:
    """Precisions of a CVM lowering (bits, CVM's meaning: values within +-(2^(p-1) - 1))."""
    precision: int = 8          # activations
    weight_precision: int = 8   # conv / dense weights (conv2d and dense need <= 8)

    def __post_init__(self):
        for what, p in (("activation precision", self.precision),
                        ("weight precision", self.weight_precision)):
            if not isinstance(p, int) or not 2 <= p <= 8:
                raise UnsupportedError(f"CVM {what} {p!r}: must be an int in [2, 8]",
                                       hint="conv2d and dense multiply INT8 operands, so CVM "
                                            "activations and weights have 2 to 8 bits")

    def settings(self) -> dict:
        return {"target": "cvm", "precision": self.precision,
                "weight_precision": self.weight_precision}


class CalibrationScheme:
    """What calibrate() needs of a config: here a symmetric p-bit grid, so an observer's
    scale s gives the range it chose as amax = s * (2^(p-1) - 1)."""

    def __init__(self, precision: int):
        self.precision = precision

    def activation_scheme(self) -> QuantScheme:
        return QuantScheme(bits=self.precision, signed=True, symmetric=True)


def alpha(bits: int) -> int:
    return (1 << (bits - 1)) - 1


def exponent_of(quant: ir.QuantInfo) -> int:
    """e of a power-of-two scale 2^e (an error for any other scale: a qsim bug)."""
    mantissa, e = math.frexp(float(quant.scales()[0]))
    if mantissa != 0.5 or quant.per_channel:
        raise InvalidGraphError(f"CVM scale {quant.scale!r} is not a power of two")
    return e - 1


def power_of_two_quant(e: int, bits: int) -> ir.QuantInfo:
    return ir.QuantInfo(scale=math.ldexp(1.0, e), zero_point=0, axis=None, bits=int(bits),
                        signed=True, symmetric=True, source="derived")


def exponent_for(amax: float, bits: int) -> int:
    """Smallest e with amax / 2^e <= alpha(bits); 0 for an all-zero range (any e is exact)."""
    if not amax > 0.0:
        return 0
    e = math.ceil(math.log2(amax / alpha(bits)))
    # log2 of a ratio can be off by an ulp at exact powers of two: settle with exact checks
    while amax / math.ldexp(1.0, e) > alpha(bits):
        e += 1
    while e > -1074 and amax / math.ldexp(1.0, e - 1) <= alpha(bits):
        e -= 1
    return e


def range_of(quant: ir.QuantInfo) -> float:
    """Largest magnitude a (calibrated or annotated) per-tensor QuantInfo represents."""
    s, zp = float(quant.scales()[0]), int(quant.zero_points()[0])
    scheme = QuantScheme(bits=quant.bits, signed=quant.signed, symmetric=quant.symmetric)
    return max(abs((scheme.qmin - zp) * s), abs((scheme.qmax - zp) * s))


CVM_WORDING = Wording(onto=" to CVM",
                      default_hint="qsim lowers to CVM only what the CVM operators express "
                                   "exactly; change the model or use --target tosa")


class CvmContext:
    """The CVM integer side of a lowering: owns the shared float side (`f`) and emits `cvm.*`
    ops on power-of-two scales.

    `nonneg` holds integer tensors known to be >= 0 (relu outputs): max_pool2d pads with 0,
    which equals NNEF's border only on such tensors.
    """

    def __init__(self, f: FloatSide, config: CvmConfig):
        self.f = f
        self.cvm = config
        self.nonneg: set[str] = set()

    # -- exponents -------------------------------------------------------------------------
    def activation_exponent(self, name: str) -> int:
        """The power-of-two exponent of float activation `name` from its calibrated range."""
        return exponent_for(range_of(self.f.activation_quant(name)), self.cvm.precision)

    def exponent(self, v: Lowered) -> int:
        return exponent_of(v.quant)

    def precision(self, name: str) -> int:
        return int(self.f.builder.tensor(name).quant.bits)

    # -- emission --------------------------------------------------------------------------
    def emit(self, op: str, inputs: Sequence[str], attrs: dict[str, Any], *, hint: str, e: int,
             exact: bool = False, nonneg: bool = False) -> Lowered:
        """Appends `cvm.<op>` reading `inputs`; its output has scale 2^e and the precision of
        the operator's rule (i8 when it is at most 8 bits, else i32)."""
        ins = [self.f.builder.tensor(n) for n in inputs]
        try:
            (shape,), (prec,) = cvm.infer(op, [t.shape for t in ins], attrs,
                                          [int(t.quant.bits) for t in ins])
        except QsimError as err:
            raise UnsupportedError(f"lowering {self.f.where()} to CVM produced an invalid "
                                   f"cvm.{op}: {err.message}",
                                   hint="this layer's values or attributes do not fit CVM's "
                                        "precision rules; please report it") from None
        dtype = ir.DType.I8 if prec <= 8 else ir.DType.I32
        out = self.f.builder.add_tensor(hint, dtype, shape, quant=power_of_two_quant(e, prec), exact=exact)
        self.f.builder.append(ir.Op(ir.OpKind.get(f"cvm.{op}"), tuple(inputs), (out,), dict(attrs),
                                name=self.f.where()))
        if nonneg:
            self.nonneg.add(out)
        return Lowered(out, self.f.builder.tensor(out).quant, identity(len(shape)))

    def constant_int(self, hint: str, values: np.ndarray, e: int,
                     bits: int | None = None) -> Lowered:
        """A constant integer tensor at scale 2^e; precision `bits` or the data's tightest."""
        data = np.asarray(values, dtype=np.int64)
        bits = precision_of(data) if bits is None else bits
        if bits > 32:
            raise self.f.unsupported(f"constant {hint!r} needs {bits} bits, more than INT32",
                                   hint="the layer's input or weight scale is extremely small")
        dtype = ir.DType.I8 if bits <= 8 else ir.DType.I32
        name = self.f.builder.add_tensor(hint, dtype, data.shape, data=data.astype(dtype.numpy),
                                 quant=power_of_two_quant(e, bits))
        return Lowered(name, self.f.builder.tensor(name).quant, identity(data.ndim))

    def quantize_constant(self, hint: str, data: np.ndarray, bits: int) -> Lowered:
        """Float constant → integers on the power-of-two grid covering max |data| at `bits`."""
        e = exponent_for(float(np.max(np.abs(data))) if data.size else 0.0, bits)
        q = np.clip(nnef_round(np.asarray(data, np.float64) / math.ldexp(1.0, e)),
                    -alpha(bits), alpha(bits))
        return self.constant_int(hint, q, e, bits)

    # -- requantization --------------------------------------------------------------------
    def requantize(self, v: Lowered, e: int, bits: int, hint: str, exact: bool = False,
                   force: bool = False) -> Lowered:
        """`v` on the grid 2^e at precision `bits`: cvm_right_shift (coarser grid),
        cvm_left_shift (finer grid; values beyond the precision are clipped), cvm_clip (same
        grid, more bits), or `v` itself when nothing changes and not `force`."""
        d = e - self.exponent(v)
        p = self.precision(v.name)
        keep = v.name in self.nonneg
        if d > 0:
            return self.emit("cvm_right_shift", [v.name], {"precision": bits, "shift_bit": d},
                             hint=hint, e=e, exact=exact, nonneg=keep)
        if d < 0:
            s = -d
            if s > 31:
                raise self.f.unsupported(f"rescaling {v.name!r} by 2^{s} exceeds INT32")
            if p + s > 32:   # CVM: X * 2^s must fit INT32; larger values would be clipped anyway
                v = self.emit("cvm_clip", [v.name], {"precision": 32 - s}, hint=f"{hint}.fit",
                              e=self.exponent(v), nonneg=keep)
            return self.emit("cvm_left_shift", [v.name], {"precision": bits, "shift_bit": s},
                             hint=hint, e=e, exact=exact, nonneg=keep)
        if p > bits or force:
            return self.emit("cvm_clip", [v.name], {"precision": bits}, hint=hint, e=e,
                             exact=exact, nonneg=keep)
        return v

    def to_activation(self, v: Lowered, float_name: str, hint: str, exact: bool = False) -> Lowered:
        """An accumulator-like value onto the activation grid of float tensor `float_name`
        (never finer than `v`'s own grid, see the module doc)."""
        e = max(self.activation_exponent(float_name), self.exponent(v))
        return self.requantize(v, e, self.cvm.precision, hint, exact=exact)

    def quantize_input(self, name: str) -> None:
        e = self.activation_exponent(name)
        shape = self.f.float_shape(name)
        p = self.cvm.precision
        out = self.f.builder.add_tensor(name, ir.DType.I8, shape, quant=power_of_two_quant(e, p), exact=True)
        self.f.bind(name, Lowered(out, self.f.builder.tensor(out).quant, identity(len(shape))))
