"""ir verifiers for 'tosa.NAME' op kinds: the same validation as `qsim.tosa.run`, on ir tensors.

TOSA 0.30 tensors have static shapes (spec 1.8.1), so a TOSA op reading or writing a
tensor with a dynamic extent is an invalid graph here.
"""
from __future__ import annotations

from ..errors import InvalidGraphError
from ..ir import Graph, Op, register_op_kind
from .signature import OPERATORS, OperatorDef, spec_type_name
from .validate import bind, output_types


def op_label(op: Op) -> str:
    return f"tosa.{op.kind.short_name} {op.label!r}"


def bind_op(opdef: OperatorDef, op: Op, graph: Graph):
    """Validates `op` of `graph` against `opdef`; returns the Call (mode, normalized attrs)."""
    label = op_label(op)
    tensors = [graph.tensor(n) for n in op.inputs]
    for t in tensors:
        if not t.is_static:
            raise InvalidGraphError(f"{label}: input {t.name!r} has a dynamic shape {list(t.shape)}",
                                    hint="TOSA 0.30 tensors have static shapes (spec 1.8.1)")
    attrs = dict(op.attrs)
    attrs.update(op.subgraphs)
    out_type = None
    if opdef.outputs and not opdef.outputs[0].variadic and op.outputs:
        out_type = graph.tensor(op.outputs[0]).dtype
    return bind(opdef, [t.dtype for t in tensors], [tuple(t.shape) for t in tensors], attrs, label,
                out_type=out_type)


def register_kind(opdef: OperatorDef) -> None:
    def verifier(op: Op, graph: Graph) -> None:
        call = bind_op(opdef, op, graph)
        label = op_label(op)
        if len(op.outputs) != len(call.out_shapes):
            raise InvalidGraphError(f"{label}: has {len(op.outputs)} output(s), {opdef.name} produces "
                                    f"{len(call.out_shapes)}")
        for name, shape, dt in zip(op.outputs, call.out_shapes, output_types(call)):
            t = graph.tensor(name)
            if t.dtype is not dt:
                raise InvalidGraphError(f"{label}: output {name!r} is declared {spec_type_name(t.dtype)}, "
                                        f"mode '{call.mode.name}' gives {spec_type_name(dt)}")
            if tuple(t.shape) != tuple(shape):
                raise InvalidGraphError(f"{label}: output {name!r} is declared with shape {list(t.shape)}, "
                                        f"the operator gives {list(shape)} (spec {opdef.section})",
                                        hint="fix the output tensor's shape or the operator's attributes")

    register_op_kind(f"tosa.{opdef.name}", verifier, doc=f"TOSA 0.30 {opdef.name} (spec {opdef.section})")


def register_kinds() -> None:
    """Registers every defined operator as the ir kind 'tosa.NAME' with its verifier."""
    for opdef in OPERATORS.values():
        register_kind(opdef)
