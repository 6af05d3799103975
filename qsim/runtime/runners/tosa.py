"""Runner of the TOSA 0.30 operators (qsim.tosa): each op validated against the graph, then
computed by the backend (qsim.kernels.dispatch.implementation). COND_IF and WHILE_LOOP (2.16) run their
graphs with the executor and the same backend.

A conv-like op fused with the RESCALE (+ CLAMP) after it (runtime/int_fusion.py) binds and
validates each of its ops as its own, then runs them in one kernel call or apart (_run_chain).

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
from ...tosa.ops.control_flow import cond_if, while_loop
from ...kernels.extensions import extension
from ...kernels.registry import rescaled
from ...kernels.dispatch import implementation
from ...tosa.run import execute_call
from ...tosa.validate import contiguous
from ...tosa.verify import bind_op
from ..int_fusion import RESCALE_ONLY, THEN_RESCALE
from .constant_operands import with_constant_b

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
    chain = op.attrs.get(THEN_RESCALE)
    if chain is not None:
        return _run_chain([o for o in chain if o is not None], RESCALE_ONLY in op.attrs, inputs, context)
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
    if opdef.name == "MATMUL" and context.backend == "kernels":
        inputs = with_constant_b(op, graph, inputs)     # a constant B: packed once per graph
    outs = execute_call(call, inputs, fn)
    return [o.astype(dtype, copy=False) for o, dtype in zip(outs, storage)]


def _fused(chain: list[ir.Op], graph: ir.Graph):
    """(the conv-like op's Call, the RESCALE's attributes, CLAMP (min_val, max_val) or None, the
    last op's output storage dtype) of a fused chain on the kernels backend: from the ops' bound
    calls, once per graph (kept with them in _BOUND, under the first op's id and "fused")."""
    per_graph = _BOUND.get(graph)
    hit = per_graph.get((id(chain[0]), "fused")) if per_graph is not None else None
    if hit is None:
        bound = [_bound(OPERATORS[o.kind.short_name], o, graph, "kernels") for o in chain]
        calls = [call for call, _, _ in bound]
        clamp = (calls[2].attrs["min_val"], calls[2].attrs["max_val"]) if len(calls) > 2 else None
        hit = _BOUND[graph][(id(chain[0]), "fused")] = (calls[0], calls[1].attrs, clamp, bound[-1][2][0])
    return hit


def _run_chain(chain: list[ir.Op], last_only: bool, inputs: list, context) -> list:
    """The outputs of conv-like op + RESCALE (+ CLAMP) `chain`, each op bound as its own; with
    `last_only`, None for all but the last (not made), which the kernels backend computes in
    one call when its kernel fuses the case (kernels/registry.py rescaled)."""
    if last_only and context.backend == "kernels":
        extension("_tosa_ops")
        call, rescale_attrs, clamp, dtype = _fused(chain, context.graph)
        if call.opdef.name == "MATMUL":
            inputs = with_constant_b(chain[0], context.graph, inputs)
        y = rescaled(call.opdef.name, [contiguous(x) for x in inputs], call.attrs, rescale_attrs, clamp)
        if y is not None:
            return [None] * (len(chain) - 1) + [y.astype(dtype, copy=False)]
    outs, values = [], inputs
    for o in chain:                  # apart: each op as if unfused, with its own errors
        values = run_tosa(o, values, context)
        outs += values
    return [None] * (len(chain) - 1) + outs[-1:] if last_only else outs
