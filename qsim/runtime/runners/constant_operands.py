"""MATMUL's B operand when it is made from constants only, packed once per graph.

TOSA weights are attributes, and the kernels pack each weight array once (kernels/cache.py);
MATMUL's B is an operand, which the kernels pack on every call unless the array is read-only
(a frozen array is a constant by the same contract as a weight attribute, docs/kernels.md).
A lowering gives MATMUL a constant B through ops of constants (RESHAPE, TILE of a constant
tensor), so the array B arrives as a new object on every run. Here the executor recognises such
a B from the graph (a constant tensor, a CONST op, or a TOSA op without subgraphs or run-time
attributes whose inputs are all made from constants) and hands the kernel one read-only copy of
it, made at the op's first run and kept as long as the graph: the same values on every run (the
graph and its constants do not change: docs/runtime.md), so the same bits, and the kernel's
packing (cache.packed_for) is made once per graph instead of once per call.
"""
from __future__ import annotations

import weakref

import numpy as np

from ... import ir
from ...skriptnd.compose import dynattr

# graph -> {id(op): the frozen B, or None when B is not made from constants}; the graph holds
# its ops, so an id stays that op's while the graph's entry lives
_FROZEN: "weakref.WeakKeyDictionary[ir.Graph, dict[int, np.ndarray | None]]" = weakref.WeakKeyDictionary()


def made_from_constants(graph: ir.Graph, name: str) -> bool:
    """True when tensor `name` of `graph` has the same value on every run: a constant, a
    CONST op's output, or the output of a TOSA op (no subgraphs, no run-time attributes) whose
    inputs all are."""
    pending, seen = [name], set()
    while pending:
        current = pending.pop()
        if current in seen or graph.tensor(current).is_constant:
            continue
        seen.add(current)
        producer = graph.producer(current)
        if producer is None or producer.kind.dialect != "tosa" or producer.subgraphs or \
                any(dynattr.has_runtime(v) for v in producer.attrs.values()):
            return False
        inputs = [n for n in producer.inputs if n]
        if not inputs and producer.kind.short_name != "CONST":
            return False
        pending += inputs
    return True


def with_constant_b(op: ir.Op, graph: ir.Graph, inputs: list) -> list:
    """MATMUL `op`'s inputs, B replaced by the graph's frozen copy when B is made from constants."""
    per_graph = _FROZEN.get(graph)
    if per_graph is None:
        per_graph = _FROZEN.setdefault(graph, {})
    key = id(op)
    if key not in per_graph:
        frozen = None
        if len(op.inputs) > 1 and op.inputs[1] and made_from_constants(graph, op.inputs[1]):
            frozen = np.array(inputs[1], copy=True, order="C")
            frozen.flags.writeable = False
        per_graph[key] = frozen
    frozen = per_graph[key]
    return inputs if frozen is None else [inputs[0], frozen, *inputs[2:]]
