"""Runner of the TOSA 0.30 operators (qsim.tosa): each op validated against the graph, then
computed by the backend (qsim.kernels.run.implementation). COND_IF and WHILE_LOOP (2.16) run their
graphs with the executor and the same backend."""
from __future__ import annotations

import numpy as np

from ... import ir
from ...tosa import OPERATORS
from ...tosa.control_flow import cond_if, while_loop
from ...kernels.run import implementation
from ...tosa.run import execute_call
from ...tosa.verify import bind_op


def run_tosa(op: ir.Op, inputs: list, context) -> list[np.ndarray]:
    graph = context.graph
    opdef = OPERATORS[op.kind.short_name]
    call = bind_op(opdef, op, graph)

    def sub(g: ir.Graph, args: list[np.ndarray]) -> list[np.ndarray]:
        return context.run_subgraph(g, dict(zip(g.inputs, args)))

    if opdef.name == "COND_IF":
        return cond_if(inputs, call.attrs, sub)
    if opdef.name == "WHILE_LOOP":
        return while_loop(inputs, call.attrs, sub)
    outs = execute_call(call, inputs, implementation(call, context.backend))
    # i48 tensors are stored int64; every other output already has its storage dtype
    return [o.astype(graph.tensor(n).dtype.numpy, copy=False) for o, n in zip(outs, op.outputs)]
