"""The TOSA integer graph in the form a SkriptND model folder can hold, and back.

Importing qsim.tosa registers `from_sknd_form` with the SkriptND front end
(skriptnd.integer_form), so loading a TOSA model gives the IR form.

In qsim's IR (and qsim.tosa.run), a TOSA op keeps the Base Inference profile's
tensor attributes (weight, bias, multiplier, shift, table) in `Op.attrs` as numpy
arrays. SkriptND attributes cannot be tensors, so stdlib/tosa.sknd declares them as
trailing inputs, bound to @variable tensors, and PAD's [rank, 2] `padding` as a flat
pack. SkriptND's `int` has no width either: a tensor's integer type travels in its
@quantize entry (bits, signed). The two functions here convert between the forms:

- `to_sknd_form(graph)`: array attributes become constant tensors named
  `<op output>.<attribute>`; integer tensors get a QuantInfo carrying their width
  where they have none (skriptnd.integer_form.width_quant: none for int32, the default
  width on the way back).
- `from_sknd_form(graph)`: the inverse; integer tensor widths from their QuantInfo
  (int32 without one), constant inputs moved back into attributes.
For a graph whose int8/int16/int48 tensors all have a QuantInfo (every graph the
lowering builds), from_sknd_form(to_sknd_form(g)) equals g.
"""
from __future__ import annotations

import numpy as np

from .. import ir
from ..errors import InvalidGraphError
from ..skriptnd.integer_form import register_text_form, width_quant
from .signature import OPERATORS, AttrKind
from .validate import contiguous

WIDTHS = {(4, True): ir.DType.I4, (8, True): ir.DType.I8, (8, False): ir.DType.U8,
          (16, True): ir.DType.I16, (16, False): ir.DType.U16, (32, True): ir.DType.I32,
          (48, True): ir.DType.I48}


def _array_attrs(kind: str) -> list[str]:
    """Names of a TOSA op's tensor attributes, in declaration order (stdlib/tosa.sknd order)."""
    opdef = OPERATORS[kind]
    return [a.name for a in opdef.attrs if a.kind is AttrKind.ARRAY]


def _width_dtype(data: np.ndarray, name: str, attr: str, op: ir.Op) -> ir.DType:
    dt = ir.DType.from_numpy(data.dtype)
    if attr == "weight" and op.attrs.get("weight_t") == "int4":
        return ir.DType.I4
    if attr == "bias" and data.dtype == np.int64:
        return ir.DType.I48   # 16x8 mode: int48 bias held in int64
    if dt is ir.DType.I64:
        raise InvalidGraphError(f"{op.kind.name} {op.label!r}: attribute {attr!r} of {name!r} is int64")
    return dt


def to_sknd_form(graph: ir.Graph) -> ir.Graph:
    tensors = dict(graph.tensors)
    ops = []
    for op in graph.ops:
        if op.kind.dialect != "tosa":
            ops.append(op)
            continue
        kind = op.kind.short_name
        attrs = dict(op.attrs)
        inputs = list(op.inputs)
        for attr in _array_attrs(kind):
            if attr not in attrs:
                continue
            data = contiguous(attrs.pop(attr))
            name = f"{op.outputs[0]}.{attr}"
            if name in tensors:
                raise InvalidGraphError(f"tensor name {name!r} is taken; cannot hold the "
                                        f"{attr!r} attribute of {op.label!r}")
            dtype = _width_dtype(data, name, attr, op)
            tensors[name] = ir.Tensor(name, dtype, data.shape, data=data,
                                      quant=width_quant(dtype))
            inputs.append(name)
        attrs.pop("weight_t", None)
        if kind == "PAD" and "padding" in attrs:
            attrs["padding"] = tuple(int(v) for v in np.asarray(attrs["padding"]).reshape(-1))
        ops.append(ir.Op(op.kind, tuple(inputs), op.outputs, attrs, op.subgraphs, op.name))
    for name, t in tensors.items():
        if t.dtype.is_integer and t.dtype is not ir.DType.I32 and t.quant is None:
            tensors[name] = ir.Tensor(t.name, t.dtype, t.shape, t.data, width_quant(t.dtype),
                                      t.max_shape)
    return ir.Graph(graph.name, graph.inputs, graph.outputs, tuple(ops), tensors)


def integer_dtype(t: ir.Tensor) -> ir.DType:
    """The integer type a SkriptND `int` tensor stands for: from its QuantInfo, else int32."""
    if t.quant is None:
        return ir.DType.I32
    try:
        return WIDTHS[(int(t.quant.bits), bool(t.quant.signed))]
    except KeyError:
        raise InvalidGraphError(f"tensor {t.name!r}: {t.quant.bits}-bit "
                                f"{'signed' if t.quant.signed else 'unsigned'} is not a TOSA type",
                                hint="TOSA integer tensors are int4/8/16/32/48 or uint8/16") from None


def from_sknd_form(graph: ir.Graph) -> ir.Graph:
    tensors = {}
    for name, t in graph.tensors.items():
        if t.dtype.is_integer:
            dtype = integer_dtype(t)
            data = t.data
            if data is not None:
                data = contiguous(data, dtype.numpy)     # rank 0 stays rank 0 (a scalar constant)
            t = ir.Tensor(t.name, dtype, t.shape, data, t.quant, t.max_shape)
        tensors[name] = t
    ops = []
    moved: set[str] = set()
    for op in graph.ops:
        if op.kind.dialect != "tosa":
            ops.append(op)
            continue
        kind = op.kind.short_name
        names = _array_attrs(kind)
        opdef = OPERATORS[kind]
        n_spec = len(opdef.inputs)
        inputs = list(op.inputs)
        attrs = dict(op.attrs)
        extra = inputs[n_spec:] if not (opdef.inputs and opdef.inputs[-1].variadic) else []
        if extra:
            inputs = inputs[:n_spec]
        if len(extra) > len(names):
            raise InvalidGraphError(f"{op.kind.name} {op.label!r} has {n_spec + len(extra)} inputs; "
                                    f"{kind} takes {n_spec} plus its tensor attributes {names}")
        for attr, name in zip(names, extra):
            t = tensors[name]
            if t.data is None:
                raise InvalidGraphError(f"{op.kind.name} {op.label!r}: attribute {attr!r} must be a "
                                        f"constant tensor (@variable), {name!r} is computed")
            data = t.data
            if attr == "weight" and t.dtype is ir.DType.I4:
                attrs["weight_t"] = "int4"
            attrs[attr] = data
            moved.add(name)
        if kind == "PAD" and "padding" in attrs:
            attrs["padding"] = np.asarray(attrs["padding"], dtype=np.int32).reshape(-1, 2)
        ops.append(ir.Op(op.kind, tuple(inputs), op.outputs, attrs, op.subgraphs, op.name))
    still_used = {n for op in ops for n in op.inputs} | set(graph.outputs)
    for name in moved - still_used:
        del tensors[name]
    return ir.Graph(graph.name, graph.inputs, graph.outputs, tuple(ops), tensors)


register_text_form("tosa", from_sknd_form)
