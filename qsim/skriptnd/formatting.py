"""SkriptND text for values the writer emits: identifiers, literals that read back exactly, and
@quantize entries (NNEF 2.0 draft 2.4, 2.14, stdlib/quant.sknd)."""
from __future__ import annotations

import math
import re

import numpy as np

from .. import ir
from ..errors import InvalidGraphError, UnsupportedError

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# words the grammar reserves in some position (skriptnd.lark terminals): never used as names
RESERVED = frozenset("""operator graph public optional yield if then elif else with for while do
    unroll is in true false inf pi int real bool str type arith num import version extension
    null""".split())

def is_identifier(name: str) -> bool:
    return bool(_IDENT.match(name)) and name not in RESERVED


def format_real(x: float) -> str:
    """A real literal that reads back as exactly `x` (repr is the shortest round-trip form)."""
    x = float(x)
    if math.isnan(x):
        return "(inf - inf)"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    text = repr(x)
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text


def format_string(s: str) -> str:
    """A SkriptND string literal: braces are format fields, so they are escaped (2.4)."""
    out = s.replace("\\", "\\\\").replace('"', '\\"').replace("{", "\\{").replace("}", "\\}")
    return '"' + out.replace("\n", "\\n").replace("\t", "\\t") + '"'


def format_value(v, where: str) -> str:
    """An attribute value as a SkriptND expression."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return format_real(v)
    if isinstance(v, str):
        return format_string(v)
    if isinstance(v, (tuple, list)):
        if any(isinstance(x, (tuple, list, np.ndarray)) for x in v):
            raise UnsupportedError(f"{where}: nested list {v!r}; SkriptND packs are one-dimensional "
                                   "(2.3), lists do not nest",
                                   hint="flatten it, as stdlib/tosa.sknd does for PAD's padding")
        return "[" + ", ".join(format_value(x, where) for x in v) + "]"
    if isinstance(v, np.ndarray):
        raise UnsupportedError(f"{where}: attribute value is a tensor (numpy array of shape "
                               f"{list(v.shape)}); SkriptND attributes are compile-time values",
                               hint="TOSA graphs: write qsim.tosa.sknd_form.to_sknd_form(graph), "
                                    "which turns tensor attributes into @variable inputs")
    raise UnsupportedError(f"{where}: attribute value {v!r} ({type(v).__name__}) has no SkriptND form")


def quant_entry(q: ir.QuantInfo, t: ir.Tensor) -> str:
    """`quant.zero_point_linear_quantize{...}` for a QuantInfo (stdlib/quant.sknd, 4.6)."""
    where = f"tensor {t.name!r}: QuantInfo"
    attrs = []
    if q.per_channel:
        scales = [format_real(s) for s in q.scales()]
        zeros = q.zero_points()
        if zeros.size == 1:
            zeros = np.repeat(zeros, len(scales))
        attrs.append(f"zero_point = [{', '.join(str(int(z)) for z in zeros)}]")
        attrs.append(f"scale = [{', '.join(scales)}]")
    else:
        scale = np.asarray(q.scale, dtype=np.float64).reshape(-1)
        zero = np.asarray(q.zero_point).reshape(-1)
        if scale.size != 1 or zero.size != 1:
            raise InvalidGraphError(f"{where} has {scale.size} scales but no channel axis")
        attrs.append(f"zero_point = {int(zero[0])}")
        attrs.append(f"scale = {format_real(scale[0])}")
    attrs.append(f"bits = {int(q.bits)}")
    if not q.signed:
        attrs.append("signed = false")
    if q.symmetric:
        attrs.append("symmetric = true")
    # per-tensor entries leave channel_axis out: they then apply to tensors of any rank
    # (qsim.skriptnd.compose.quantize pads the probe shape)
    if q.per_channel and q.axis != 1:
        attrs.append(f"channel_axis = {int(q.axis)}")
    return "quant.zero_point_linear_quantize{" + ", ".join(attrs) + "}"
