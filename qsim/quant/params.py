"""Choosing quantization parameters: schemes, range → (scale, zero point), quantize/dequantize.

Semantics follow NNEF 2.0 4.6 `zero_point_linear_quantize` (also what `@quantize`
annotations say): with r = signed ? 2^(bits-1) - 1 : 2^bits - 1 and
m = !signed ? 0 : symmetric ? -r : -r - 1,
    q = clamp(zero_point + round(x / scale), m, r),   x' = (q - zero_point) * scale.
`round` is NNEF's round, floor(x + 0.5) (NNEF 1.0 4.2.1; ties go up, as in apply_scale).

Defaults (issue 4, current practice):
- int8 weights: symmetric, per output channel, range -127..127, zero point 0;
- int8 activations: asymmetric, per tensor, -128..127, zero point chosen so real 0 is
  exactly representable (the range is widened to include 0, then the zero point is the
  rounded -min/scale; the scale is not changed);
- int32 bias: scale input_scale * weight_scale (per channel with the weights), zero point 0;
- 16x8 mode: int16 activations symmetric (zero point 0, as TOSA requires for int16
  operands), int8 weights, int48 accumulators.
A range of zero width (a tensor that is all zeros) gets scale 1.0: any scale represents
it exactly, and 1.0 keeps the RESCALE ratios of its neighbours inside 2^-32 .. 2^12.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from ..errors import DataError, UnsupportedError
from ..ir import DType, QuantInfo, Tensor
from ..numerics import nnef_round


class Precision(enum.Enum):
    """Integer widths of a quantized graph."""
    INT8 = "int8"        # int8 activations and weights, int32 accumulators
    INT16X8 = "16x8"     # int16 activations, int8 weights, int48 accumulators

    @property
    def activation_dtype(self) -> DType:
        return DType.I8 if self is Precision.INT8 else DType.I16

    @property
    def accumulator_dtype(self) -> DType:
        return DType.I32 if self is Precision.INT8 else DType.I48


class Granularity(enum.Enum):
    PER_CHANNEL = "per-channel"
    PER_TENSOR = "per-tensor"


class Rounding(enum.Enum):
    """RESCALE rounding (TOSA 0.30 RESCALE double_round)."""
    SINGLE = "single"
    DOUBLE = "double"   # TFLite's rounding


class WeightRounding(enum.StrEnum):
    """How float weights round to integers. A str enum: it is written into quantization.json
    as its value and compared with it."""
    NEAREST = "nearest"
    ADAPTIVE = "adaptive"   # per weight floor or ceiling, least layer-output error (rounding/adaptive.py)


@dataclass(frozen=True)
class QuantScheme:
    """What integer grid a tensor is mapped to (the attributes of zero_point_linear_quantize)."""
    bits: int = 8
    signed: bool = True
    symmetric: bool = False
    channel_axis: int | None = None     # None: per tensor

    def __post_init__(self):
        if not 2 <= self.bits <= 32:
            raise UnsupportedError(f"{self.bits}-bit quantization is not supported (2..32 bits)")
        if self.symmetric and not self.signed:
            raise UnsupportedError("a symmetric scheme must be signed (zero point 0 in the middle)")

    @property
    def qmax(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    @property
    def qmin(self) -> int:
        if not self.signed:
            return 0
        return -self.qmax if self.symmetric else -self.qmax - 1

    @property
    def dtype(self) -> DType:
        table = {(4, True): DType.I4, (8, True): DType.I8, (8, False): DType.U8,
                 (16, True): DType.I16, (16, False): DType.U16, (32, True): DType.I32}
        if self.bits == 4 and not self.symmetric:
            raise UnsupportedError("int4 is symmetric in TOSA (-7..7): use a symmetric scheme")
        try:
            return table[(self.bits, self.signed)]
        except KeyError:
            raise UnsupportedError(f"no integer type holds {self.bits}-bit "
                                   f"{'signed' if self.signed else 'unsigned'} values") from None


@dataclass(frozen=True)
class QuantConfig:
    """The per-run choices of `qsim quantize` that fix every calibrated tensor's scheme."""
    precision: Precision = Precision.INT8
    weight_granularity: Granularity = Granularity.PER_CHANNEL
    double_round: bool = False          # RESCALE rounding (True reproduces TFLite)

    def activation_scheme(self) -> QuantScheme:
        if self.precision is Precision.INT8:
            return QuantScheme(bits=8, signed=True, symmetric=False)
        return QuantScheme(bits=16, signed=True, symmetric=True)

    def weight_scheme(self, output_channel_axis: int = 0) -> QuantScheme:
        axis = output_channel_axis if self.weight_granularity is Granularity.PER_CHANNEL else None
        return QuantScheme(bits=8, signed=True, symmetric=True, channel_axis=axis)


def params_from_range(lo, hi, scheme: QuantScheme, source: str = "calibration",
                      what: str = "tensor") -> QuantInfo:
    """Scale and zero point covering [lo, hi] (scalars, or 1-D per channel) on `scheme`'s grid."""
    lo = np.atleast_1d(np.asarray(lo, dtype=np.float64))
    hi = np.atleast_1d(np.asarray(hi, dtype=np.float64))
    if lo.shape != hi.shape or lo.ndim != 1:
        raise UnsupportedError(f"{what}: range bounds must be two equal-length 1-D arrays, "
                               f"got shapes {lo.shape} and {hi.shape}")
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise DataError(f"{what}: the observed range is not finite ({lo.min()} .. {hi.max()})",
                        hint="the calibration data or the float model produce inf/NaN")
    if np.any(lo > hi):
        raise UnsupportedError(f"{what}: range minimum exceeds maximum")
    if scheme.channel_axis is None and lo.size != 1:
        raise UnsupportedError(f"{what}: a per-tensor scheme needs one range, got {lo.size}")
    lo = np.minimum(lo, 0.0)            # real 0 must be on the grid (zero padding, ReLU)
    hi = np.maximum(hi, 0.0)
    if scheme.symmetric:
        scale = np.maximum(-lo, hi) / scheme.qmax
        zero_point = np.zeros(lo.shape, dtype=np.int64)
        scale = np.where(scale > 0, scale, 1.0)
    else:
        width = hi - lo
        scale = np.where(width > 0, width / (scheme.qmax - scheme.qmin), 1.0)
        # lo <= 0 <= hi, so -lo/scale is in [0, qmax - qmin] and the zero point in [qmin, qmax]
        zero_point = (scheme.qmin - nnef_round(lo / scale)).astype(np.int64)
        zero_point = np.clip(zero_point, scheme.qmin, scheme.qmax)
    if scheme.channel_axis is None:
        return QuantInfo(scale=float(scale[0]), zero_point=int(zero_point[0]), axis=None,
                         bits=scheme.bits, signed=scheme.signed, symmetric=scheme.symmetric,
                         source=source)
    return QuantInfo(scale=scale, zero_point=zero_point, axis=scheme.channel_axis,
                     bits=scheme.bits, signed=scheme.signed, symmetric=scheme.symmetric,
                     source=source)


# "tflite": parameters a .tflite model carries; its operators' arithmetic is TFLite's where
# TFLite and qsim's rules differ (quant/tosa/tflite/)
ANNOTATION_SOURCES = ("annotation", "graph.quant", "tflite")


def annotated(t: Tensor) -> bool:
    """Whether the model states `t`'s parameters itself (@quantize, graph.quant, ONNX QDQ):
    calibration keeps them, and the lowering honours them exactly."""
    return t.quant is not None and t.quant.source in ANNOTATION_SOURCES


def scheme_of(quant: QuantInfo) -> QuantScheme:
    return QuantScheme(bits=quant.bits, signed=quant.signed, symmetric=quant.symmetric,
                       channel_axis=quant.axis)


def _broadcast(values: np.ndarray, quant: QuantInfo, rank: int) -> np.ndarray:
    if quant.axis is None:
        return values.reshape(())
    shape = [1] * rank
    shape[quant.axis] = values.size
    return values.reshape(shape)


def quantize(x, quant: QuantInfo, what: str = "tensor") -> np.ndarray:
    """x → integers (int64) per zero_point_linear_quantize; per-channel along quant.axis."""
    x = np.asarray(x, dtype=np.float64)
    scheme = scheme_of(quant)
    if quant.axis is not None and (quant.axis >= x.ndim or x.shape[quant.axis] != quant.scales().size):
        raise UnsupportedError(f"{what}: {quant.scales().size} per-channel scales along axis "
                               f"{quant.axis} do not fit shape {x.shape}")
    scale = _broadcast(quant.scales(), quant, x.ndim)
    zero_point = _broadcast(quant.zero_points(), quant, x.ndim)
    q = zero_point + nnef_round(x / scale).astype(np.int64)
    return np.clip(q, scheme.qmin, scheme.qmax)


def dequantize(q, quant: QuantInfo) -> np.ndarray:
    """(q - zero_point) * scale in float64."""
    q = np.asarray(q, dtype=np.int64)
    scale = _broadcast(quant.scales(), quant, q.ndim)
    zero_point = _broadcast(quant.zero_points(), quant, q.ndim)
    return (q - zero_point).astype(np.float64) * scale


def bias_quant(input_quant: QuantInfo, weight_quant: QuantInfo,
               accumulator: DType = DType.I32) -> QuantInfo:
    """Bias of conv/linear: scale input_scale * weight_scale (1.9.3), zero point 0.

    Per channel (axis 0 of the 1-D bias) when the weights are per channel.
    """
    if input_quant.per_channel:
        raise UnsupportedError("a conv/linear input must be quantized per tensor to fold its "
                               "scale into the bias scale")
    scale = input_quant.scales()[0] * weight_quant.scales()
    bits = 48 if accumulator is DType.I48 else 32
    if weight_quant.per_channel:
        return QuantInfo(scale=scale, zero_point=np.zeros(scale.size, dtype=np.int64), axis=0,
                         bits=bits, signed=True, symmetric=True, source="derived")
    return QuantInfo(scale=float(scale[0]), zero_point=0, axis=None, bits=bits, signed=True,
                     symmetric=True, source="derived")


def quantize_bias(bias, quant: QuantInfo, what: str = "bias") -> np.ndarray:
    """Bias → int64 values on `quant` (from bias_quant); an error if one leaves the type."""
    bias = np.asarray(bias, dtype=np.float64)
    scale = quant.scales() if quant.per_channel else quant.scales()[0]
    q = nnef_round(bias / scale)
    limit = float((1 << (quant.bits - 1)) - 1)
    if np.any(np.abs(q) > limit):
        k = int(np.argmax(np.abs(q)))
        raise UnsupportedError(
            f"{what}: element {k} ({bias.reshape(-1)[k]:.6g}) needs {abs(q.reshape(-1)[k]):.0f} "
            f"steps of input_scale*weight_scale, beyond int{quant.bits}",
            hint="the weight or input scale of this layer is extremely small")
    return q.astype(np.int64)
