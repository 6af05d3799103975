"""CVM graphs in SkriptND text and back (registered with skriptnd.integer_form on import).

CVM tensors are int8 or int32 (docs/cvm.md): a SkriptND `int` tensor whose @quantize entry
gives at most 8 signed bits (its CVM precision) is int8, any other int32. The operators
themselves are written as they are held in qsim's IR (no tensor attributes to move).
"""
from __future__ import annotations

import numpy as np

from .. import ir
from ..skriptnd.integer_form import register_text_form


def from_sknd_form(graph: ir.Graph) -> ir.Graph:
    tensors = {}
    for name, t in graph.tensors.items():
        if t.dtype.is_integer:
            q = t.quant
            dtype = ir.DType.I8 if q is not None and q.signed and int(q.bits) <= 8 else ir.DType.I32
            data = None if t.data is None else np.asarray(t.data).astype(dtype.numpy)
            t = ir.Tensor(t.name, dtype, t.shape, data, t.quant, t.max_shape)
        tensors[name] = t
    return ir.Graph(graph.name, graph.inputs, graph.outputs, graph.ops, tensors)


register_text_form("cvm", from_sknd_form)
