"""TOSA TABLE contents for quantized unary functions (TOSA 0.30 1.9.5 and 2.5.17).

int8: a 256-entry int8 table, entry k = output for input value k - 128 ("an 8-bit table
can be derived by applying the reference function to each of the possible 256 input
values", 1.9.5):
    table[q + 128] = clamp(round(f((q - zp_in) * s_in) / s_out) + zp_out, -128, 127).
int16: a 513-entry int16 table built with qsim.tosa.arith.generate_lookup_table. The
input is read as 9.7 fixed point: entry i (i = -256..256) is the output at input value
v = 128 * i (v = 32768 for i = 256 is the extrapolation end of the last segment):
    reference(i) = round(f((128 * i - zp_in) * s_in) / s_out) + zp_out,
in output LSBs. TABLE returns the interpolated 16.7 value; a RESCALE by 2^-7
(16-bit multiplier 1<<14, shift 21, the example of 2.5.17) gives the int16 output.

Error: int8 entries are within 1/2 output LSB of f wherever f is inside the output
range. int16 outputs are within 1 LSB (1/2 for the entries, 1/2 for the RESCALE) plus
the error of linear interpolation of f between the 513 grid points.
`round` is NNEF's floor(x + 0.5), as in the rest of qsim.quant.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...errors import UnsupportedError
from ...ir import QuantInfo
from ...numerics import erf, nnef_round
from ...tosa import arith
from .scale import FixedPointScale, ScaleWidth, fixed_point_scale

FloatFunction = Callable[[np.ndarray], np.ndarray]
INT16_TABLE_OUTPUT_SCALE = 2.0 ** -7      # 16.7 → int16 (2.5.17)
_LARGE = 2.0 ** 40                        # finite stand-in for overflowing values before rounding



def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))          # no overflow for large |x|


class UnaryFunction(enum.Enum):
    """Unary functions qsim lowers to TABLE; value = NNEF 2.0 operator (hard-swish has none)."""
    SIGMOID = "nn.sigmoid"
    TANH = "math.tanh"
    EXP = "math.exp"
    GELU = "nn.gelu"
    SILU = "nn.silu"
    ELU = "nn.elu"
    SOFTPLUS = "nn.softplus"
    SELU = "nn.selu"
    ERF = "nn.erf"
    THRESHOLDED_RELU = "nn.thresholded_relu"
    LOG = "math.log"
    LOG2 = "math.log2"
    SQRT = "math.sqrt"
    RSQRT = "math.rsqrt"
    RCP = "math.rcp"
    SQR = "math.sqr"
    RSQR = "math.rsqr"
    SIN = "math.sin"
    COS = "math.cos"
    SINH = "math.sinh"
    COSH = "math.cosh"
    ATAN = "math.atan"
    ASINH = "math.asinh"
    ABS = "math.abs"
    NEG = "math.neg"
    HARD_SWISH = "hard_swish"

    @property
    def monotone(self) -> bool:
        """Non-decreasing on the whole real line (ELU for alpha >= 0)."""
        return self in (UnaryFunction.SIGMOID, UnaryFunction.TANH, UnaryFunction.EXP,
                        UnaryFunction.ELU, UnaryFunction.SOFTPLUS)

    def reference(self, **attributes) -> FloatFunction:
        """The float64 function, with the NNEF operator's attributes (elu alpha, gelu
        approximate = None | 'TANH' | 'SIGMOID', 4.4.3)."""
        f = UnaryFunction
        allowed = {f.ELU: {"alpha"}, f.GELU: {"approximate"}, f.SELU: {"alpha", "lambda"},
                   f.THRESHOLDED_RELU: {"theta"}}.get(self, set())
        unknown = set(attributes) - allowed
        if unknown:
            raise UnsupportedError(f"{self.value}: unknown attribute(s) {sorted(unknown)} for a "
                                   "TABLE lowering")
        if self is f.SIGMOID:
            return _sigmoid
        if self is f.TANH:
            return np.tanh
        if self is f.EXP:
            return np.exp
        if self is f.SILU:
            return lambda x: x * _sigmoid(x)
        if self is f.SOFTPLUS:
            return lambda x: np.logaddexp(0.0, x)
        if self is f.HARD_SWISH:
            return lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0
        # Functions with a restricted domain saturate outside it: log/sqrt/rsqrt read
        # max(x, 0) (log 0 = -inf and 1/sqrt(0) = +inf clip to the output rails), as an
        # integer pipeline has no NaN to give.
        simple = {f.LOG: lambda x: np.log(np.maximum(x, 0.0)),
                  f.LOG2: lambda x: np.log2(np.maximum(x, 0.0)),
                  f.SQRT: lambda x: np.sqrt(np.maximum(x, 0.0)),
                  f.RSQRT: lambda x: 1.0 / np.sqrt(np.maximum(x, 0.0)),
                  f.RCP: lambda x: 1.0 / x, f.SQR: np.square, f.RSQR: lambda x: 1.0 / np.square(x),
                  f.SIN: np.sin, f.COS: np.cos, f.SINH: np.sinh, f.COSH: np.cosh,
                  f.ATAN: np.arctan, f.ASINH: np.arcsinh, f.ABS: np.abs, f.NEG: np.negative,
                  f.ERF: erf}
        if self in simple:
            return simple[self]
        if self is f.THRESHOLDED_RELU:
            theta = float(attributes.get("theta", 0.0))
            return lambda x: np.where(x > theta, x, 0.0)
        if self is f.SELU:
            alpha = float(attributes.get("alpha", 1.67326319))
            lam = float(attributes.get("lambda", 1.05070102))
            return lambda x: lam * np.where(x < 0.0, alpha * np.expm1(np.minimum(x, 0.0)), x)
        if self is f.ELU:
            alpha = float(attributes.get("alpha", 1.0))
            return lambda x: np.where(x < 0.0, alpha * np.expm1(np.minimum(x, 0.0)), x)
        approximate = attributes.get("approximate")
        if approximate is None:
            return lambda x: 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
        if approximate == "TANH":
            k = math.sqrt(2.0 / math.pi)
            return lambda x: 0.5 * x * (1.0 + np.tanh(k * (x + 0.044715 * x ** 3)))
        if approximate == "SIGMOID":
            return lambda x: x * _sigmoid(1.702 * x)
        raise UnsupportedError(f"nn.gelu: approximate={approximate!r} is not one of "
                               "'TANH', 'SIGMOID'")


TABLE_ATTRIBUTES = ("alpha", "approximate", "lambda", "theta")


def operator_function(kind: str, attrs: dict) -> FloatFunction:
    """The float64 function of NNEF unary operator `kind` (a UnaryFunction value) with the
    attributes of its op (those a TABLE reads; absent or None ones take their defaults)."""
    given = {k: v for k, v in attrs.items() if k in TABLE_ATTRIBUTES and v is not None}
    return UnaryFunction(kind).reference(**given)


@dataclass(frozen=True)
class Int8Table:
    """TABLE attribute for int8 input and output (TABLE_SIZE 256)."""
    table: np.ndarray                    # int8[256]

    def lookup(self, values) -> np.ndarray:
        """TOSA TABLE for in_t = int8: table[value + 128]."""
        return self.table[np.asarray(values, dtype=np.int64) + 128]


@dataclass(frozen=True)
class Int16Table:
    """TABLE attribute for int16 input (TABLE_SIZE 513) and the RESCALE that follows it."""
    table: np.ndarray                    # int16[513]
    output_rescale: FixedPointScale      # int32 (16.7) → int16: 2^-7 with a 16-bit multiplier

    def lookup(self, values, context: str = "TABLE") -> np.ndarray:
        """TOSA TABLE for in_t = int16: the 16.7 interpolated int32 value."""
        return arith.apply_lookup(self.table, values, context)

    def evaluate(self, values, context: str = "TABLE") -> np.ndarray:
        """TABLE then RESCALE (output_zp 0) to int16, as the lowering emits them."""
        scaled = self.output_rescale.apply(self.lookup(values, context), context=context)
        return arith.apply_clip(scaled, -32768, 32767).astype(np.int16)


def _per_tensor(quant: QuantInfo, role: str, what: str) -> tuple[float, int]:
    if quant.per_channel:
        raise UnsupportedError(f"{what}: a TABLE needs per-tensor {role} quantization, "
                               f"got per-channel along axis {quant.axis}")
    return float(quant.scales()[0]), int(quant.zero_points()[0])


def _resolve(function, attributes) -> FloatFunction:
    if isinstance(function, UnaryFunction):
        return function.reference(**attributes)
    if attributes:
        raise UnsupportedError("attributes are only taken with a UnaryFunction")
    return function


def _output_levels(f: FloatFunction, x: np.ndarray, s_out: float, zp_out: int,
                   what: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        y = np.asarray(f(x), dtype=np.float64)
    if np.any(np.isnan(y)):
        raise UnsupportedError(f"{what}: the function is undefined (NaN) on part of the "
                               "input range", hint="check the input scale and zero point")
    return nnef_round(np.clip(y / s_out, -_LARGE, _LARGE)) + zp_out


def table_int8(function: UnaryFunction | FloatFunction, input_quant: QuantInfo,
               output_quant: QuantInfo, what: str = "TABLE", **attributes) -> Int8Table:
    """256-entry table: int8 input quantized by input_quant → int8 output by output_quant."""
    f = _resolve(function, attributes)
    s_in, zp_in = _per_tensor(input_quant, "input", what)
    s_out, zp_out = _per_tensor(output_quant, "output", what)
    q = np.arange(-128, 128, dtype=np.int64)
    levels = _output_levels(f, (q - zp_in) * s_in, s_out, zp_out, what)
    return Int8Table(np.clip(levels, -128, 127).astype(np.int8))


def table_int16(function: UnaryFunction | FloatFunction, input_quant: QuantInfo,
                output_quant: QuantInfo, what: str = "TABLE", **attributes) -> Int16Table:
    """513-entry interpolated table for int16 input, plus the RESCALE to int16 output."""
    f = _resolve(function, attributes)
    s_in, zp_in = _per_tensor(input_quant, "input", what)
    s_out, zp_out = _per_tensor(output_quant, "output", what)
    grid = np.arange(-256, 257, dtype=np.int64)
    levels = _output_levels(f, (128 * grid - zp_in) * s_in, s_out, zp_out, what)
    by_index = dict(zip(grid.tolist(), levels.astype(np.int64).tolist()))
    table = arith.generate_lookup_table(lambda i: by_index[i])
    slope = np.diff(table.astype(np.int64))
    if np.any((slope > 32767) | (slope < -32768)):
        k = int(np.argmax(np.abs(slope)))
        raise UnsupportedError(
            f"{what}: the function changes by {int(slope[k])} output steps between table "
            f"entries {k} and {k + 1}, beyond the int16 slope apply_lookup allows (1.9.5)",
            hint="use a coarser output scale or a smaller input range")
    return Int16Table(table, fixed_point_scale(INT16_TABLE_OUTPUT_SCALE, ScaleWidth.SCALE16,
                                               what=f"{what} output"))


def make_table(function: UnaryFunction | FloatFunction, input_quant: QuantInfo,
               output_quant: QuantInfo, what: str = "TABLE",
               **attributes) -> Int8Table | Int16Table:
    """The table for the input's width: 8 bits → Int8Table, 16 bits → Int16Table."""
    if input_quant.bits == 8 and input_quant.signed and output_quant.bits == 8:
        return table_int8(function, input_quant, output_quant, what, **attributes)
    if input_quant.bits == 16 and input_quant.signed and output_quant.bits == 16:
        return table_int16(function, input_quant, output_quant, what, **attributes)
    raise UnsupportedError(
        f"{what}: TABLE supports int8 → int8 and int16 → int16 (TOSA 2.5.17), got "
        f"{'' if input_quant.signed else 'u'}int{input_quant.bits} → "
        f"{'' if output_quant.signed else 'u'}int{output_quant.bits}")
