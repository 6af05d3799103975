"""Which TOSA operators the NPU runs as one layer, shared by the planner (program.py), the golden
vectors (golden_vectors.py) and the cocotb export: a layer operator (layers.LAYER_OPS) with the
RESCALE that alone reads its result and the CLAMP that alone reads the RESCALE's, as the
requantization unit runs them."""
from __future__ import annotations

from ..ir import Graph, Op
from .layers import LAYER_OPS


def reader_counts(graph: Graph) -> dict[str, int]:
    """How many readers each tensor has: the ops that take it, plus 1 for a graph output (read by
    the caller). Absent optional inputs (empty names) are not counted."""
    count = {name: 1 for name in graph.outputs}
    for op in graph.ops:
        for name in op.inputs:
            if name:
                count[name] = count.get(name, 0) + 1
    return count


def group_ops(graph: Graph) -> list[list[Op]]:
    """Ops grouped into layers, in graph order: a layer operator absorbs a RESCALE reading only
    its result, and that RESCALE a CLAMP reading only the RESCALE's result (what the NPU fuses);
    every other op is a group of its own."""
    readers = reader_counts(graph)
    groups, i, ops = [], 0, list(graph.ops)
    while i < len(ops):
        group = [ops[i]]
        if ops[i].kind.short_name in LAYER_OPS:
            for follower in ("RESCALE", "CLAMP"):
                j = i + len(group)
                prev = group[-1]
                if (j < len(ops) and ops[j].kind.short_name == follower and ops[j].inputs[:1] == prev.outputs
                        and readers.get(prev.outputs[0], 0) == 1):
                    group.append(ops[j])
                else:
                    break
        groups.append(group)
        i += len(group)
    return groups
