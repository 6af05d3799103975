"""A TOSA integer graph lowered at batch 1, rebuilt for a batch of n samples without lowering
again: evaluation runs n samples at a time with exactly the batch-1 graph's weights, scales and
tables (adaptive rounding is not repeated), and each sample gets the batch-1 bits."""
from __future__ import annotations

import dataclasses

from .. import ir
from ..errors import QsimError


# Integer operators whose attributes name the batch-1 shapes: RESHAPE's new_shape is its output
# shape (every other TOSA shape attribute is checked, not rewritten, by the graph's verifier)
_SHAPE_ATTRIBUTE = {"tosa.RESHAPE": "new_shape"}


def rebatched_graph(small: ir.Graph, size: int) -> ir.Graph | None:
    """`small` (a TOSA integer graph at batch 1) at batch `size`: every non-constant tensor's
    leading extent 1 -> size, RESHAPE's new_shape with it; the operators, their constant
    tensor attributes (weights, biases, tables) and the constant tensors are `small`'s own
    objects. None when that is not the same model on `size` samples: a non-constant tensor
    without leading extent 1, a non-TOSA operator, control flow (sub-graphs), an operator on
    axis 0 (CONCAT, REDUCE_*, REVERSE, ARGMAX: they mix or move samples) or a shape the
    operators do not give (the verifier recomputes every output shape, so a TRANSPOSE or SLICE
    moving the batch axis fails it). The surviving operators each treat the samples of axis 0
    apart, so every sample gets exactly the batch-1 bits."""
    tensors = {}
    for name, t in small.tensors.items():
        if t.is_constant:
            tensors[name] = t
        elif not t.is_static or not t.shape or t.shape[0] != 1:
            return None
        else:
            tensors[name] = dataclasses.replace(t, shape=(size,) + tuple(t.shape[1:]))
    ops = []
    for op in small.ops:
        if op.kind.dialect != "tosa" or op.subgraphs or op.attrs.get("axis") == 0:
            return None
        key = _SHAPE_ATTRIBUTE.get(op.kind.name)
        if key is not None:
            if tuple(op.attrs[key]) != tuple(small.tensors[op.outputs[0]].shape):
                return None
            op = dataclasses.replace(op, attrs=dict(op.attrs, **{key: tensors[op.outputs[0]].shape}))
        ops.append(op)
    try:
        return ir.Graph(small.name, small.inputs, small.outputs, tuple(ops), tensors).verify()
    except QsimError:
        return None
