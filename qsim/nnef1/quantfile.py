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

from ..errors import Location, SemanticError, UnsupportedError
from ..ir import QuantInfo
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


def min_max_quant(lo: float, hi: float, bits: int, signed: bool, symmetric: bool, source: str) -> QuantInfo:
    """QuantInfo equivalent to min_max_linear_quantize (and linear_quantize, unsigned)."""
    r = 2 ** bits - 1 - int(signed and symmetric)
    p = 2 ** (bits - 1) - int(symmetric) if signed else 0
    scale = (hi - lo) / r if hi > lo else 1.0
    zero_point = int(math.floor(-p - lo / scale + 0.5))
    return QuantInfo(scale=scale, zero_point=zero_point, bits=bits, signed=signed, symmetric=symmetric,
                     source=source)


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
        return QuantInfo(scale=args["scale"], zero_point=args["zero_point"], bits=args["bits"],
                         signed=args["signed"], symmetric=args["symmetric"], source="graph.quant")
    if not args["max"] > args["min"]:
        raise SemanticError(f"'{tensor}': range [{args['min']}, {args['max']}] is empty", location=loc,
                            hint="max must be greater than min")
    # linear_quantize (4.9.5) has no signed/symmetric parameters: it is unsigned, asymmetric
    return min_max_quant(args["min"], args["max"], args["bits"], args.get("signed", False),
                         args.get("symmetric", False), "graph.quant")


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
