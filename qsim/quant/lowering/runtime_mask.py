"""Attention masks made at run time from a model input, found in the float graph (the forms
softmax_mask.py's masked softmax takes besides constant masks):

    layout ops(select(c, F, 0)) | layout ops(select(c, 0, F))
        c a computed bool tensor: torch's src_key_padding_mask export (Where(mask, -inf, 0),
        then Reshape/Expand to [N, heads, 1, S]); kept where c is False (True with (c, 0, F))
    layout ops(mul(sub(1, layout ops(cast(layout ops(c)))), F)) (either operand order of the mul)
        c an integer or bool tensor of 0/1 values (an attention_mask input, 1: a real token):
        the (1 - mask) * finfo.min form of BERT-style exports; kept where c != 0

with F a constant <= MASK_LIMIT (every element) and the layout ops reshapes, squeezes,
unsqueezes, broadcasts and transposes. The mask M is what softmax_mask.py adds to the scores; the
integer softmax rebuilds the keep tensor from c by the same layout ops (tosa/runtime_mask.py), so
the -inf/0 tensors (`RuntimeMask.chain`'s outputs) are neither calibrated nor computed. For the
arithmetic form the float model and the integer one agree where c holds 0 and 1 (the mask's
definition); other values mean nothing to either.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import ir

MASK_LIMIT = -1e4

# operators that move a run-time mask's values into the scores' shape
MASK_LAYOUT_OPS = ("layout.reshape", "layout.squeeze", "layout.unsqueeze", "layout.flatten",
                   "layout.unflatten", "layout.broadcast", "layout.transpose")


@dataclass(frozen=True)
class RuntimeMask:
    cond: str                       # the computed tensor c (bool, or integer 0/1)
    keep_when: bool                 # a position is kept where c is true (nonzero) if True, false if False
    chain: tuple[ir.Op, ...]        # every op from c to M, in graph order

    @property
    def tensors(self) -> set[str]:
        return {n for op in self.chain for n in op.outputs}

    @property
    def layout_ops(self) -> tuple[ir.Op, ...]:
        """The chain's layout ops, in order: what the keep tensor replays."""
        return tuple(op for op in self.chain if op.kind.name in MASK_LAYOUT_OPS)


def constant(graph: ir.Graph, name: str) -> np.ndarray | None:
    t = graph.tensor(name)
    return None if t.data is None else np.asarray(t.data)


def is_fill(data: np.ndarray | None) -> bool:
    return data is not None and data.dtype.kind == "f" and data.size > 0 and bool(np.all(data <= MASK_LIMIT))


def _through(graph: ir.Graph, name: str, kinds: tuple[str, ...], chain: list) -> tuple[str, ir.Op | None]:
    """Walks back from `name` over producers of `kinds` (appending them to `chain`); returns the
    first tensor not made by one and its producer."""
    while True:
        op = graph.producer(name)
        if op is None or op.kind.name not in kinds:
            return name, op
        chain.append(op)
        name = op.inputs[0]


def _same_shape(graph: ir.Graph, op: ir.Op, operand: str) -> bool:
    return tuple(graph.tensor(operand).shape) == tuple(graph.tensor(op.outputs[0]).shape)


def runtime_mask(graph: ir.Graph, name: str) -> RuntimeMask | None:
    """The additive mask `name` in one of the module doc's forms, or None."""
    chain: list[ir.Op] = []
    _, op = _through(graph, name, MASK_LAYOUT_OPS, chain)
    if op is None:
        return None
    if op.kind.name == "math.select":
        c, a, b = op.inputs[:3]
        if constant(graph, c) is not None or graph.tensor(c).dtype is not ir.DType.BOOL:
            return None
        when_true, when_false = constant(graph, a), constant(graph, b)
        if is_fill(when_true) and when_false is not None and not np.any(when_false):
            keep_when = False
        elif is_fill(when_false) and when_true is not None and not np.any(when_true):
            keep_when = True
        else:
            return None
        return RuntimeMask(c, keep_when, (op, *reversed(chain)))
    if op.kind.name != "math.mul" or op.attrs.get("lhs_align") is not None or op.attrs.get("rhs_align") is not None:
        return None
    fills = [i for i in op.inputs[:2] if is_fill(constant(graph, i))]
    if len(fills) != 1:
        return None
    ones = next(i for i in op.inputs[:2] if i != fills[0])
    if not _same_shape(graph, op, ones):
        return None
    chain.append(op)
    _, sub = _through(graph, ones, MASK_LAYOUT_OPS, chain)
    if sub is None or sub.kind.name != "math.sub" or not _same_shape(graph, sub, sub.inputs[1]):
        return None
    one = constant(graph, sub.inputs[0])
    if one is None or one.size == 0 or not np.all(one == 1):
        return None
    chain.append(sub)
    c, _ = _through(graph, sub.inputs[1], (*MASK_LAYOUT_OPS, "layout.cast"), chain)
    t = graph.tensor(c)
    if t.data is not None or not (t.dtype.is_integer or t.dtype is ir.DType.BOOL):
        return None
    return RuntimeMask(c, True, tuple(reversed(chain)))
