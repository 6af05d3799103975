"""Folding constant sub-graphs of a float graph before it is quantized (every target).

Front ends may leave operators whose inputs are all constants: nnef-tools' NNEF 1.0 writes a
conv bias as `unsqueeze(variable)`, a filter as `copy(variable)` or a `transpose` of one, and
SkriptND models may compute weights from @variable tensors. The float executor runs them
like any op, but a lowering rule reads weights as constant data, and an integer target has
nothing to compute constants with. So the pipeline computes such ops once with the float
executor, makes their outputs constant tensors and removes the ops (a pass: the input graph
is not changed). Constants are computed in float32, exactly as `qsim run` computes them.

Not folded: ops with control-flow bodies, ops with no inputs (their own constants), and
ops whose results are graph outputs (a graph output stays computed).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .. import ir
from ..limits import check_tensor_size
from ..runtime.executor import execute


def _foldable(graph: ir.Graph, op: ir.Op, constant: set[str]) -> bool:
    inputs = [n for n in op.inputs if n]
    return (bool(inputs) and not op.subgraphs and all(n in constant for n in inputs)
            and not any(n in graph.outputs for n in op.outputs)
            and all(graph.tensor(n).is_static for n in op.outputs))


def fold_constant_ops(graph: ir.Graph) -> ir.Graph:
    """`graph` with every op that reads only constants computed (module doc); the same
    graph object when there is none."""
    constant = {n for n, t in graph.tensors.items() if t.data is not None}
    tensors = dict(graph.tensors)
    kept = []
    folded = False
    for op in graph.ops:
        if not _foldable(graph, op, constant):
            kept.append(op)
            continue
        for name in op.outputs:
            t = graph.tensor(name)
            check_tensor_size(t.shape, t.dtype.numpy.itemsize, f"constant {name!r} computed by "
                              f"{op.kind.name} {op.label!r}")
        inputs = [n for n in op.inputs if n]
        piece = ir.Graph(f"{graph.name}.fold", (), tuple(op.outputs), (op,),
                         {n: tensors[n] for n in [*inputs, *op.outputs]})
        values = execute(piece, {})
        for name in op.outputs:
            t = tensors[name]
            data = np.asarray(values[name], dtype=t.dtype.numpy).reshape(t.shape)
            tensors[name] = dataclasses.replace(t, data=data)
            constant.add(name)
        folded = True
    if not folded:
        return graph
    used = set(graph.inputs) | set(graph.outputs) | {n for op in kept for n in (*op.inputs, *op.outputs)}
    return dataclasses.replace(graph, ops=tuple(kept),
                               tensors={n: t for n, t in tensors.items() if n in used}).verify()
