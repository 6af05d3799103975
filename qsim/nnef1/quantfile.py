"""graph.quant (NNEF 1.0 5.3, 7.1) and quantized tensor files → ir.QuantInfo.

Each line names an exported tensor identifier and a quantization operation with named,
compile-time arguments and no tensor argument:

    "conv1": linear_quantize(min = 0.0, max = 1.0, bits = 8);

Understood operations: `linear_quantize(min, max, bits)` (4.9.5), and the later 1.0.x
revisions' `min_max_linear_quantize(min, max, bits, signed, symmetric)` and
`zero_point_linear_quantize(zero_point, scale, bits, signed, symmetric)` that converters
write. The min/max forms map to real = scale * (q - zero_point) with scale = (max - min) / r
and zero_point = round(-p - min / scale) (r levels, p the signed offset as in NNEF 2.0 4.6);
the zero point is exact when min is a multiple of the scale, as quantizers choose it.
`logarithmic_quantize` has no (scale, zero point) form: it is reported as unsupported.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..errors import Location, QsimError, SemanticError, UnsupportedError
from ..ir import QuantInfo
from ..numerics import nnef_round
from . import ast
from .parser import parse_quant

_SIGNATURES = {
    "linear_quantize": {"min": "scalar", "max": "scalar", "bits": "integer"},
    "min_max_linear_quantize": {"min": "scalar", "max": "scalar", "bits": "integer", "signed": "logical",
                                "symmetric": "logical"},
    "zero_point_linear_quantize": {"zero_point": "integer", "scale": "scalar", "bits": "integer",
                                   "signed": "logical", "symmetric": "logical"},
    "logarithmic_quantize": {"max": "scalar", "bits": "integer"},
}
_OPTIONAL = {"signed": False, "symmetric": False}


# Decisions (docs/nnef1.md): a scale must be a normal float32 (qsim computes the float model in
# float32, and a scale of 0, a denormal or inf there cannot be requantized), and a zero point
# must fit 32 signed bits (the widest zero point an integer operator takes).
SCALE_RANGE = (float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max))
ZERO_POINT_RANGE = (-2 ** 31, 2 ** 31 - 1)


def min_max_quant(lo: float, hi: float, bits: int, signed: bool, symmetric: bool, source: str,
                  location: Location | None = None, error: type[QsimError] = SemanticError) -> QuantInfo:
    """QuantInfo equivalent to min_max_linear_quantize (and linear_quantize, unsigned).

    Raises `error` at `location` when the range gives no usable scale or zero point."""
    if signed and symmetric and bits < 2:
        raise error(f"signed symmetric quantization needs at least 2 bits, got {bits}", location=location)
    r = 2 ** bits - 1 - int(signed and symmetric)
    p = 2 ** (bits - 1) - int(symmetric) if signed else 0
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise error(f"range [{lo}, {hi}] is not finite", location=location)
    scale = (hi - lo) / r if hi > lo else 1.0
    check_scale(scale, f"range [{lo}, {hi}] over {r} levels gives", location, error)
    zero_point = int(nnef_round(-p - lo / scale))
    if not ZERO_POINT_RANGE[0] <= zero_point <= ZERO_POINT_RANGE[1]:
        raise error(f"range [{lo}, {hi}] gives zero point {zero_point}, outside 32 signed bits",
                    location=location, hint="the range lies too far from 0 for its width; widen it to include 0")
    return QuantInfo(scale=scale, zero_point=zero_point, bits=bits, signed=signed, symmetric=symmetric,
                     source=source)


def check_scale(scale: float, what: str, location: Location | None, error: type[QsimError]) -> None:
    if not SCALE_RANGE[0] <= scale <= SCALE_RANGE[1]:   # also refuses NaN
        raise error(f"{what} scale {scale!r}, outside the normal float32 range "
                    f"[{SCALE_RANGE[0]:.7g}, {SCALE_RANGE[1]:.7g}]", location=location,
                    hint="a scale of 0, a denormal or an infinity cannot be computed with; "
                         "check min, max and bits")


def read_quant_file(text: str, filename: str, exported: Callable[[str], bool]) -> dict[str, QuantInfo]:
    """Parses graph.quant; `exported(name)` tells whether an identifier names a graph tensor."""
    result: dict[str, QuantInfo] = {}
    for entry in parse_quant(text, filename):
        if entry.tensor in result:
            raise SemanticError(f"tensor '{entry.tensor}' has two quantization lines", location=entry.loc)
        if not exported(entry.tensor):
            raise SemanticError(f"'{entry.tensor}' is not a tensor identifier of the graph", location=entry.loc,
                                hint="graph.quant names exported identifiers (left-hand sides in "
                                     "graph.nnef), not variable labels (5.3)")
        result[entry.tensor] = quant_of(entry.invocation, entry.tensor, entry.loc)
    return result


def quant_of(inv: ast.Invocation, tensor: str, loc: Location) -> QuantInfo:
    signature = _SIGNATURES.get(inv.op)
    if signature is None:
        raise SemanticError(f"'{tensor}': unknown quantization operation '{inv.op}'", location=loc,
                            hint="use " + ", ".join(_SIGNATURES))
    args = {}
    for arg in inv.args:
        if arg.name is None:
            raise SemanticError(f"'{tensor}': {inv.op} has a positional argument", location=arg.loc,
                                hint="the tensor is named before the colon; other arguments are "
                                     "named (5.3)")
        if arg.name not in signature:
            raise SemanticError(f"'{tensor}': {inv.op} has no parameter '{arg.name}'", location=arg.loc,
                                hint="parameters: " + ", ".join(signature))
        args[arg.name] = _literal(arg.value, signature[arg.name], tensor, inv.op, arg.name)
    for name in signature:
        if name not in args:
            if name in _OPTIONAL:
                args[name] = _OPTIONAL[name]
                continue
            raise SemanticError(f"'{tensor}': {inv.op} needs argument '{name}'", location=loc)
    if args["bits"] <= 0 or args["bits"] > 32:
        raise SemanticError(f"'{tensor}': bits is {args['bits']}, expected 1..32", location=loc)
    if inv.op == "logarithmic_quantize":
        raise UnsupportedError(f"'{tensor}': logarithmic quantization has no scale/zero-point form",
                               location=loc, hint="qsim quantizes linearly; drop the line or use "
                                                  "linear_quantize")
    if inv.op == "zero_point_linear_quantize":
        if args["scale"] <= 0:
            raise SemanticError(f"'{tensor}': scale is {args['scale']}, expected > 0", location=loc)
        check_scale(args["scale"], f"'{tensor}':", loc, SemanticError)
        lo, hi = _integer_range(args["bits"], args["signed"])
        if not lo <= args["zero_point"] <= hi:
            raise SemanticError(f"'{tensor}': zero point {args['zero_point']} does not fit "
                                f"{'signed' if args['signed'] else 'unsigned'} {args['bits']} bits "
                                f"[{lo}, {hi}]", location=loc,
                                hint="the zero point is a quantized value, so it lies in the quantized range")
        return QuantInfo(scale=args["scale"], zero_point=args["zero_point"], bits=args["bits"],
                         signed=args["signed"], symmetric=args["symmetric"], source="graph.quant")
    if not args["max"] > args["min"]:
        raise SemanticError(f"'{tensor}': range [{args['min']}, {args['max']}] is empty", location=loc,
                            hint="max must be greater than min")
    # linear_quantize (4.9.5) has no signed/symmetric parameters: it is unsigned, asymmetric
    try:
        return min_max_quant(args["min"], args["max"], args["bits"], args.get("signed", False),
                             args.get("symmetric", False), "graph.quant", loc)
    except SemanticError as err:
        raise SemanticError(f"'{tensor}': {err.message}", location=loc, hint=err.hint) from None


def _integer_range(bits: int, signed: bool) -> tuple[int, int]:
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def _literal(e: ast.Expr, kind: str, tensor: str, op: str, name: str):
    negate = False
    while isinstance(e, ast.Unary) and e.op in "+-":
        negate ^= e.op == "-"
        e = e.operand
    if not isinstance(e, ast.Literal):
        raise SemanticError(f"'{tensor}': argument '{name}' of {op} is not a literal", location=e.loc,
                            hint="graph.quant arguments are compile-time literals (5.3)")
    v = e.value
    ok = {"scalar": isinstance(v, (int, float)) and not isinstance(v, bool),
          "integer": isinstance(v, int) and not isinstance(v, bool),
          "logical": isinstance(v, bool)}[kind]
    if not ok or (negate and kind == "logical"):
        raise SemanticError(f"'{tensor}': argument '{name}' of {op} is {v!r}, expected {kind}", location=e.loc)
    v = -v if negate else v
    return float(v) if kind == "scalar" else v
