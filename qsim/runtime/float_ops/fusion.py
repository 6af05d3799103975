"""Conv followed by relu / relu6 / clamp to constants, run as one step of the executor (and,
for integer graphs, a conv-like TOSA op with the RESCALE and CLAMP after it: ../int_fusion.py).

MobileNet- and EfficientNet-style models clamp every convolution's output; run apart, the clamp
reads the conv's whole output back from memory (a third of EfficientNet-Lite0's time outside
the GEMMs). `execution_order(graph)` gives the graph's ops with each such pair replaced by one
nn.conv op that has both output tensors and the bounds as attribute THEN_BOUND; nn.conv then
applies the bounds to each tile or plane while it is in the registers or the cache
(float_gemm.h, float_conv.h).

Nothing else changes: both tensors are still computed and stored (calibration reads each), the
bounded values are numpy's maximum/minimum of the float32 conv output, as the clamp op would
have computed them, and the conv's errors are its own. A pair is fused only when:
- the second op is math.clamp with constant scalar float32 bounds lo <= hi, or nn.relu without
  alpha (max: the upper bound), reading the conv's only output as its first input;
- both output tensors are declared float32 and have the same shape;
- neither op has runtime-dependent attributes (2.6.1) or a model-defined body.
"""
from __future__ import annotations

import dataclasses
import weakref

import numpy as np

from ... import ir
from ..int_fusion import THEN_RESCALE, chain_at, fusable
from .bounds import THEN_BOUND

_plans: "weakref.WeakKeyDictionary[ir.Graph, tuple[ir.Op, ...]]" = weakref.WeakKeyDictionary()


def execution_order(graph: ir.Graph) -> tuple[ir.Op, ...]:
    """graph.ops with fusable conv + bound pairs, and integer conv + RESCALE (+ CLAMP) chains,
    as one op each (cached per graph: graphs are immutable)."""
    plan = _plans.get(graph)
    if plan is None:
        plan = _plan(graph)
        _plans[graph] = plan
    return plan


def _plan(graph: ir.Graph) -> tuple[ir.Op, ...]:
    ops, out, i = graph.ops, [], 0
    while i < len(ops):
        fused = chain_at(graph, ops, i)
        if fused is not None:
            out.append(fused)
            i += sum(op is not None for op in fused.attrs[THEN_RESCALE])
            continue
        bound = _bound_after(graph, ops[i], ops[i + 1]) if i + 1 < len(ops) else None
        if bound is None:
            out.append(ops[i])
            i += 1
            continue
        conv, second = ops[i], ops[i + 1]
        out.append(dataclasses.replace(conv, outputs=conv.outputs + second.outputs,
                                       attrs={**conv.attrs, THEN_BOUND: bound}))
        i += 2
    return tuple(out)


def _bound_after(graph: ir.Graph, conv: ir.Op, second: ir.Op):
    """(lo, hi) when `second` bounds the output of `conv` and the pair may be fused, else None."""
    if conv.kind.name != "nn.conv" or len(conv.outputs) != 1 or not fusable(conv) or not fusable(second):
        return None
    if not second.inputs or second.inputs[0] != conv.outputs[0] or len(second.outputs) != 1:
        return None
    a, b = graph.tensor(conv.outputs[0]), graph.tensor(second.outputs[0])
    if a.dtype.numpy != np.float32 or b.dtype.numpy != np.float32 or a.shape != b.shape or not a.is_static:
        return None
    if second.kind.name == "nn.relu" and len(second.inputs) == 1:
        alpha, top = second.attrs.get("alpha"), second.attrs.get("max")
        if alpha is not None or (top is not None and not float(top) > 0.0):
            return None
        return (0.0, None if top is None else float(np.float32(top)))
    if second.kind.name == "math.clamp" and len(second.inputs) == 3:
        if any(second.attrs.get(k) is not None for k in ("val_align", "min_align", "max_align")):
            return None
        bounds = [graph.tensor(n) for n in second.inputs[1:]]
        if not all(t.is_constant and t.data.size == 1 and t.data.dtype == np.float32 and t.rank <= a.rank
                   for t in bounds):
            return None
        lo, hi = (float(t.data.reshape(())) for t in bounds)
        return (lo, hi) if lo <= hi else None       # NaN bounds or lo > hi: the op's own rule
    return None
