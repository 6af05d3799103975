"""Integer models in SkriptND text: widths, and each dialect's way back to qsim's IR form.

SkriptND's `int` has no width: an integer tensor's type travels in its @quantize entry
(bits, signed; stdlib/tosa.sknd's convention). `width_quant` is the one rule for the entry
of a tensor that has no QuantInfo of its own: none for int32/int64 (the widths a SkriptND
`int` reads back as by default), else a width-only entry (scale 1, zero point 0, symmetric).

An integer dialect may hold its operators in the text in another form than in qsim's IR
(TOSA: tensor attributes as trailing @variable inputs). The dialect registers its converter
from the text form (`register_text_form`) when it is imported, together with its op kinds'
verifiers; composition applies the converter of every dialect a graph uses
(`to_ir_form`), so a loaded graph is in the form its verifiers and runners expect. The
front end itself knows no dialect.
"""
from __future__ import annotations

from typing import Callable

from .. import ir

_FROM_TEXT: dict[str, Callable[[ir.Graph], ir.Graph]] = {}


def width_quant(dtype: ir.DType) -> ir.QuantInfo | None:
    """The @quantize entry recording the width of an integer tensor without a QuantInfo."""
    if not dtype.is_integer or dtype in (ir.DType.I32, ir.DType.I64):
        return None
    return ir.QuantInfo(scale=1.0, zero_point=0, bits=dtype.bits, signed=dtype.signed,
                        symmetric=True, source="derived")


def register_text_form(dialect: str, from_text: Callable[[ir.Graph], ir.Graph]) -> None:
    """`from_text(graph)` turns the SkriptND text form of `dialect`'s ops into the IR form."""
    _FROM_TEXT[dialect] = from_text


def to_ir_form(graph: ir.Graph) -> ir.Graph:
    """`graph` with the ops of every registered dialect it uses in their IR form."""
    dialects = {op.kind.dialect for op in graph.ops}
    for dialect in sorted(dialects & set(_FROM_TEXT)):
        graph = _FROM_TEXT[dialect](graph)
    return graph
