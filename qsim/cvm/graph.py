"""CVM operators inside ir.Graphs: the OpKind verifier, tensor precisions, the executor runner.

A CVM tensor's precision lives in `Tensor.quant.bits` (QuantInfo; CVM scales are
powers of two, but only `bits` matters here). A tensor without QuantInfo has an
undefined precision (CVM's -1), which is inferred: constants from their data, op
outputs from their operator's rule, i8 graph inputs as 8; an i32 graph input without
a declared precision has none, and ops reading it are checked for shapes only.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..errors import InvalidGraphError, UsageError
from ..ir import DType, Graph, Op, register_op_kind
from .opdef import OPS, Checker, OpDef
from .precision import MAX_PRECISION, check_data, check_precision_value, precision_of
from .run import run_with_precision

CVM_DTYPES = (DType.I8, DType.I32)

_CACHE: "weakref.WeakKeyDictionary[Graph, dict[str, int | None]]" = weakref.WeakKeyDictionary()


def declared_precision(graph: Graph, name: str) -> int | None:
    t = graph.tensor(name)
    if t.quant is None:
        return None
    return check_precision_value(f"graph {graph.name!r}", f"tensor {name!r}", t.quant.bits)


def tensor_precision(graph: Graph, name: str) -> int | None:
    """Declared precision, else inferred (see module doc); None when it cannot be known."""
    cache = _CACHE.setdefault(graph, {})
    if name in cache:
        return cache[name]
    p = declared_precision(graph, name)
    t = graph.tensor(name)
    if p is None:
        if t.is_constant:
            p = precision_of(t.data)
        else:
            op = graph.producer(name)
            if op is not None and op.kind.dialect == "cvm":
                outs = _op_output_precisions(op, graph)
                p = None if outs is None else outs[op.outputs.index(name)]
            elif t.dtype is DType.I8:
                p = 8
    cache[name] = p
    return p


def _inputs_of(opdef: OpDef, op: Op):
    """(spec names, tensor names or None for omitted optional inputs)."""
    if opdef.variadic:
        return [f"{opdef.inputs[0]}{i}" for i in range(len(op.inputs))], list(op.inputs)
    names = list(opdef.inputs)
    tensors = [n if n else None for n in op.inputs] + [None] * (len(names) - len(op.inputs))
    return names, tensors


def _checked(op: Op, graph: Graph):
    opdef = OPS[op.kind.short_name]
    names, tensors = _inputs_of(opdef, op)
    where = f"{op.kind.name} {op.label!r}"
    required = [n for n in names if n not in opdef.optional]
    if len(op.inputs) > len(names) or any(t is None for n, t in zip(names, tensors) if n in required):
        raise InvalidGraphError(f"{where}: takes inputs {', '.join(opdef.inputs)}"
                                f"{' (any number)' if opdef.variadic else ''}; got {list(op.inputs)}")
    labels = {n: t for n, t in zip(names, tensors) if t}
    chk = Checker(opdef.name, names, labels)
    chk.op = where
    shapes = []
    for n, t in zip(names, tensors):
        if t is None:
            shapes.append(None)
            continue
        ten = graph.tensor(t)
        if ten.dtype not in CVM_DTYPES:
            raise InvalidGraphError(f"{where}: input {n} (tensor {t!r}) is {ten.dtype}; CVM tensors are i8 or i32")
        if not ten.is_static or any(d <= 0 for d in ten.shape):
            raise InvalidGraphError(f"{where}: input {n} (tensor {t!r}) has shape {list(ten.shape)}; "
                                    "CVM needs static, positive extents")
        shapes.append(tuple(ten.shape))
    try:
        attrs = opdef.normalize_attrs(op.attrs)
    except UsageError as e:   # re-raised with the op's label: the graph is what is wrong
        raise InvalidGraphError(f"{where}: {e.message.split(': ', 1)[-1]}", hint=e.hint) from None
    out_shapes = opdef.infer(chk, shapes, attrs)
    attrs.update(chk.values)
    return opdef, chk, names, tensors, shapes, attrs, out_shapes


def _op_output_precisions(op: Op, graph: Graph):
    opdef, chk, names, tensors, shapes, attrs, _ = _checked(op, graph)
    precs = [None if t is None else tensor_precision(graph, t) for t in tensors]
    if any(p is None for n, p, t in zip(names, precs, tensors) if t is not None):
        return None
    return opdef.precision(chk, precs, shapes, attrs)


def verify_op(op: Op, graph: Graph) -> None:
    """ir verifier of every cvm.* kind: shapes, dtypes, attributes, precisions."""
    opdef, chk, names, tensors, shapes, attrs, out_shapes = _checked(op, graph)
    where = chk.op
    if len(op.outputs) != len(opdef.outputs):
        raise InvalidGraphError(f"{where}: has outputs {', '.join(opdef.outputs)}; got {list(op.outputs)}")
    for n, t in zip(names, tensors):
        if t is None:
            continue
        ten = graph.tensor(t)
        dp = declared_precision(graph, t)
        if ten.is_constant and dp is not None:
            check_data(where, f"input {n} (constant {t!r})", ten.data, dp)
    outs = _op_output_precisions(op, graph)
    for i, (name, shape) in enumerate(zip(op.outputs, out_shapes)):
        ten = graph.tensor(name)
        if ten.dtype not in CVM_DTYPES:
            raise InvalidGraphError(f"{where}: output {opdef.outputs[i]} (tensor {name!r}) is {ten.dtype}; "
                                    "CVM tensors are i8 or i32")
        if ten.is_static and tuple(ten.shape) != tuple(shape):
            raise InvalidGraphError(f"{where}: output {opdef.outputs[i]} (tensor {name!r}) is declared "
                                    f"{list(ten.shape)} but the operator produces {list(shape)}")
        if outs is None:
            continue
        p = outs[i]
        if p > MAX_PRECISION:
            raise InvalidGraphError(f"{where}: output {opdef.outputs[i]} (tensor {name!r}) needs precision "
                                    f"{p} > 32", hint="lower the input precisions (cvm_right_shift) first")
        dp = declared_precision(graph, name)
        if dp is not None and dp < p:
            raise InvalidGraphError(f"{where}: output {opdef.outputs[i]} (tensor {name!r}) is declared "
                                    f"precision {dp}, but the operator's rule gives {p}",
                                    hint=f"declare precision {p} (QuantInfo.bits) or more")
        if ten.dtype is DType.I8 and p > 8:
            raise InvalidGraphError(f"{where}: output {opdef.outputs[i]} (tensor {name!r}) is i8 but has "
                                    f"precision {p} > 8", hint="declare it i32")


def register_kinds() -> None:
    """Registers the ir OpKind "cvm.<name>" of every defined operator (and alias), with its
    verifier (idempotent)."""
    for name, opdef in OPS.items():
        register_op_kind(f"cvm.{name}", verify_op, doc=opdef.doc)


def runner(op: Op, inputs: list, backend: str, graph: Graph) -> list[np.ndarray]:
    """Executor entry for the "cvm" dialect (qsim.runtime.runners registers it).

    Input precisions are the graph's (declared, or inferred as in tensor_precision;
    None falls back to the data's tightest precision), so data breaking a declared
    precision is a DataError naming the tensor, index and value. Outputs are stored in
    their declared dtype (i8 or i32).
    """
    opdef = OPS[op.kind.short_name]
    names, tensors = _inputs_of(opdef, op)
    ins = [None if v is None else np.asarray(v) for v in inputs]
    precs = [None if t is None else tensor_precision(graph, t) for t in tensors]
    if not opdef.variadic:
        while ins and ins[-1] is None:      # omitted trailing optional input (bias)
            ins.pop()
            precs.pop()
    where = f"{op.kind.name} {op.label!r}"
    res = run_with_precision(op.kind.short_name, ins, dict(op.attrs), backend=backend, precisions=precs,
                             where=where, labels={n: t for n, t in zip(names, tensors) if t})
    outs = []
    for spec, name, y, p in zip(opdef.outputs, op.outputs, res.outputs, res.precisions):
        dt = graph.tensor(name).dtype
        if dt is DType.I8 and p > 8:
            raise InvalidGraphError(f"{where}: output {spec} (tensor {name!r}) is i8 but has precision {p} > 8",
                                    hint="declare it i32")
        outs.append(y.astype(dt.numpy, copy=False))
    return outs
