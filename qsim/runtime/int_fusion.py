"""An integer conv-like TOSA op, the RESCALE of its int32 output and the CLAMP after that, run as
one step of the executor.

The lowering's layer pattern is CONV2D / DEPTHWISE_CONV2D / FULLY_CONNECTED / MATMUL (int32
accumulators) -> RESCALE to int8 -> CLAMP. Run apart, the int32 accumulators of a layer go to
memory as a whole tensor (four times the int8 activations) only to be read back by the RESCALE.
`chain_at(graph, ops, i)` recognizes such a chain at ops[i]; execution_order (float_ops/
fusion.py) then puts one op in its place: the first op with every output of the chain and the
original ops as attribute THEN_RESCALE.

What the step computes (runners/tosa.py):
- with RESCALE_ONLY (the plan sets it when no one reads the accumulators or the RESCALE's output
  before the CLAMP, and they are not kept or streamed: runtime/plan.py `unmade`), the kernels
  backend runs one kernel call (kernels/registry.py RESCALING) that RESCALEs (and CLAMPs) each
  block of accumulators right after making it, in the cache, and returns None for the
  intermediate outputs; when that kernel does not handle the case (16-bit modes, an unproven
  accumulator bound, int48 output, a failed REQUIRE) and on the reference backend, the ops run
  apart and the intermediates are dropped;
- without it, the ops run apart and every output is returned, as if unfused.
Either way the values are the ops' own, bit for bit (the fused kernel runs the RESCALE kernel's
own code on the same int32 values), and the errors are theirs.

A chain is fused only when the ops are adjacent in the graph's order, none has a model-defined
body, subgraphs or runtime-dependent attributes, each later op reads the previous op's only
output as its only input, and the first op's output is declared int32.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .. import ir
from ..skriptnd.compose import dynattr

# The attribute by which execution_order hands the runner the chain it replaced:
# (first op, RESCALE op, CLAMP op or None). Not a name a model can spell (':' is no identifier
# character in SkriptND or NNEF).
THEN_RESCALE = "qsim:then_rescale"
# With THEN_RESCALE: only the chain's last output is read or kept; the others are not made.
RESCALE_ONLY = "qsim:rescale_only"

# TOSA operators whose int32 accumulators a kernel can RESCALE block by block
# (kernels/registry.py RESCALING; tests/runtime/test_int_fusion.py holds the two equal)
RESCALING_OPS = frozenset(("CONV2D", "TRANSPOSE_CONV2D", "FULLY_CONNECTED", "MATMUL", "DEPTHWISE_CONV2D"))


def fusable(op: ir.Op) -> bool:
    """An op the executor may merge with its neighbours: no model-defined body, no subgraphs,
    no attribute that depends on run-time extents (2.6.1)."""
    return op.definition is None and not op.subgraphs and \
        not any(dynattr.has_runtime(v) for v in op.attrs.values())


def _tosa(op: ir.Op, name: str) -> bool:
    return op.kind.dialect == "tosa" and op.kind.short_name == name


def _reads_only(op: ir.Op, prev: ir.Op) -> bool:
    return len(op.inputs) == 1 and op.inputs[0] == prev.outputs[0] and len(op.outputs) == 1 and fusable(op)


def chain_at(graph: ir.Graph, ops, i: int) -> ir.Op | None:
    """The fused op of the conv-like op + RESCALE (+ CLAMP) chain starting at ops[i], or None."""
    first = ops[i]
    if first.kind.dialect != "tosa" or first.kind.short_name not in RESCALING_OPS or \
            len(first.outputs) != 1 or not fusable(first) or i + 1 >= len(ops):
        return None
    rescale = ops[i + 1]
    if not _tosa(rescale, "RESCALE") or not _reads_only(rescale, first):
        return None
    if graph.tensor(first.outputs[0]).dtype.numpy != np.int32:
        return None
    clamp = ops[i + 2] if i + 2 < len(ops) else None
    if clamp is not None and not (_tosa(clamp, "CLAMP") and _reads_only(clamp, rescale)):
        clamp = None
    chain = (first, rescale) + ((clamp,) if clamp is not None else ())
    return dataclasses.replace(first, outputs=tuple(n for op in chain for n in op.outputs),
                               attrs={**first.attrs, THEN_RESCALE: (first, rescale, clamp)})
