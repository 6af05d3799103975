"""Runner of the TOSA 0.30 operators (qsim.tosa): each op validated against the graph, then
computed by the backend (qsim.kernels.run.implementation). COND_IF and WHILE_LOOP (2.16) run their
graphs with the executor and the same backend.

An op is validated once per graph and backend, not at every execution: its Call (mode,
normalized attributes, shapes) and what computes it depend only on the op and the tensors the
graph declares, and neither changes (a pass makes a new graph; attribute arrays are not edited
in place once used, docs/kernels.md). An evaluation runs the same graph once per batch, and
binding every op again cost about as much as the smaller kernels."""
from __future__ import annotations

import weakref

import numpy as np

from ... import ir
from ...tosa import OPERATORS
from ...tosa.control_flow import cond_if, while_loop
from ...kernels.extensions import extension
from ...kernels.run import implementation
from ...tosa.run import execute_call
from ...tosa.verify import bind_op

# graph -> {(id(op), backend): (call, fn, output storage dtypes)}; the graph holds its ops, so
# an id stays that op's while the graph's entry lives, and the entry goes with the graph
_BOUND: "weakref.WeakKeyDictionary[ir.Graph, dict]" = weakref.WeakKeyDictionary()


def _bound(opdef, op: ir.Op, graph: ir.Graph, backend: str):
    per_graph = _BOUND.get(graph)
    if per_graph is None:
        per_graph = _BOUND.setdefault(graph, {})
    key = (id(op), backend)
    hit = per_graph.get(key)
    if hit is None:
        call = bind_op(opdef, op, graph)
        # i48 tensors are stored int64; every other output already has its storage dtype
        hit = per_graph[key] = (call, implementation(call, backend),
                                tuple(graph.tensor(n).dtype.numpy for n in op.outputs))
    return hit


def run_tosa(op: ir.Op, inputs: list, context) -> list[np.ndarray]:
    graph = context.graph
    opdef = OPERATORS[op.kind.short_name]
    if opdef.name in ("COND_IF", "WHILE_LOOP"):     # their calls record each run's output types
        call = bind_op(opdef, op, graph)

        def sub(g: ir.Graph, args: list[np.ndarray]) -> list[np.ndarray]:
            return context.run_subgraph(g, dict(zip(g.inputs, args)))

        return (cond_if if opdef.name == "COND_IF" else while_loop)(inputs, call.attrs, sub)
    if context.backend == "kernels":
        extension("_tosa_ops")     # a broken build fails every call, a cached one too (a dict lookup)
    call, fn, storage = _bound(opdef, op, graph, context.backend)
    outs = execute_call(call, inputs, fn)
    return [o.astype(dtype, copy=False) for o, dtype in zip(outs, storage)]
