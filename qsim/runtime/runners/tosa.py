"""TOSA 0.30 operators on a backend: "reference" (qsim.tosa, the numpy oracle) or "kernels"
(qsim.kernels, the same bits compiled). `run_tosa` runs one operator by name on arrays;
`run_tosa_op` is the executor's runner of graph ops: each validated against the graph, then
computed; COND_IF and WHILE_LOOP (2.16) run their graphs with the executor and the same backend.
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ...errors import UsageError
from ...tosa import OPERATORS
from ...tosa.control_flow import cond_if, while_loop
from ...tosa.run import bind_call, operator
from ...tosa.run import compute as compute_reference
from ...tosa.verify import bind_op


def compute_kernels(call, arrays: list[np.ndarray]) -> list[np.ndarray]:
    from ...kernels.registry import compute  # deferred: loads the .so kernels; the reference needs no build
    return compute(call, arrays)


COMPUTE = {"kernels": compute_kernels, "reference": compute_reference}


def run_tosa(op: str, inputs: list, attrs: dict | None = None, backend: str = "kernels") -> list[np.ndarray]:
    """qsim.tosa.run's call (same arguments, validation and results) on `backend`."""
    if backend not in COMPUTE:
        raise UsageError(f"{operator(op).name}: unknown backend {backend!r}",
                         hint="use 'kernels' or 'reference'")
    return COMPUTE[backend](*bind_call(op, inputs, attrs))


def run_tosa_op(op: ir.Op, inputs: list, context) -> list[np.ndarray]:
    graph = context.graph
    opdef = OPERATORS[op.kind.short_name]
    call = bind_op(opdef, op, graph)

    def sub(g: ir.Graph, args: list[np.ndarray]) -> list[np.ndarray]:
        return context.run_subgraph(g, dict(zip(g.inputs, args)))

    if opdef.name == "COND_IF":
        return cond_if(inputs, call.attrs, sub)
    if opdef.name == "WHILE_LOOP":
        return while_loop(inputs, call.attrs, sub)
    outs = COMPUTE[context.backend](call, inputs)
    # i48 tensors are stored int64; every other output already has its storage dtype
    return [o.astype(graph.tensor(n).dtype.numpy, copy=False) for o, n in zip(outs, op.outputs)]
