"""The keep mask of an integer softmax whose attention mask is made at run time (a padding mask
model input; lowering/runtime_mask.py): the float graph's layout ops that turn the mask input
into the additive -inf/0 mask, replayed on the input itself (an integer 0/1 mask first becomes
bool: NOT(EQUAL(c, 0))).

TOSA 0.30 moves bool tensors with RESHAPE, TILE and TRANSPOSE (2.10: every data layout operator
takes Boolean), and LOGICAL_NOT flips them, so the keep tensor is exact: position kept in the
integer softmax iff the float mask adds 0 there. The float select (or (1 - c) * F) is not computed.
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ..lowering.float_side import Lowered, identity
from ..lowering.runtime_mask import RuntimeMask
from ..lowering.softmax_mask import runtime_mask_heads
from ..rules import pattern_rule
from ..target import TargetKind
from .context import TosaContext


@pattern_rule(TargetKind.TOSA)
def skip_runtime_mask(ctx: TosaContext, op: ir.Op) -> bool:
    """The ops that make a run-time mask (the select or cast/sub/mul and the layout ops that shape
    it) compute nothing in the integer graph: the masked softmaxes reading it rebuild the mask
    (runtime_keep). Registered before the element-wise chain pattern (tosa/target.py imports this
    module first), which would take the select for a chain of its bool input."""
    chain = runtime_mask_heads(ctx.f.graph).get(id(op))
    if chain is None:
        return False
    ctx.f.fused.update(id(o) for o in chain)
    return True


def runtime_keep(ctx: TosaContext, mask: RuntimeMask, perm: tuple[int, ...], rank: int, hint: str) -> str:
    """The bool keep tensor in the scores' integer layout `perm` (rank `rank`, extent 1 where the
    mask broadcasts over the scores)."""
    where = ctx.f.where()
    v = ctx.to_float_layout(ctx.f.value(mask.cond), f"{hint}.cond")
    cur = v.name
    cond_type = ctx.f.builder.tensor(cur).dtype
    if cond_type is not ir.DType.BOOL:      # an integer 0/1 mask: true where nonzero
        zero = ctx.constant_tensor(f"{hint}.zero", np.zeros((1,) * len(ctx.f.builder.tensor(cur).shape)), cond_type)
        cur = ctx.emit("LOGICAL_NOT", [ctx.emit("EQUAL", [cur, zero], {}, hint=f"{hint}.is0", label=where)], {},
                       hint=f"{hint}.nonzero", label=where)
    for k, op in enumerate(mask.layout_ops):
        out_shape = tuple(ctx.f.float_shape(op.outputs[0]))
        in_shape = tuple(ctx.f.builder.tensor(cur).shape)
        step = f"{hint}.{k}"
        if op.kind.name == "layout.transpose":
            perms = tuple(int(p) for p in op.attrs["perm"])
            cur = ctx.emit("TRANSPOSE", [cur], {"perms": perms}, hint=step, label=where)
        elif op.kind.name == "layout.broadcast":
            if len(in_shape) != len(out_shape):
                cur = ctx.emit("RESHAPE", [cur], {"new_shape": (1,) * (len(out_shape) - len(in_shape)) + in_shape},
                               hint=f"{step}.rank", label=where)
                in_shape = tuple(ctx.f.builder.tensor(cur).shape)
            multiples = tuple(o // i for o, i in zip(out_shape, in_shape))
            cur = ctx.emit("TILE", [cur], {"multiples": multiples}, hint=step, label=where)
        else:
            cur = ctx.emit("RESHAPE", [cur], {"new_shape": out_shape}, hint=step, label=where)
    shape = tuple(ctx.f.builder.tensor(cur).shape)
    if len(shape) < rank:        # the addition aligns the mask on the right (numpy broadcasting)
        cur = ctx.emit("RESHAPE", [cur], {"new_shape": (1,) * (rank - len(shape)) + shape},
                       hint=f"{hint}.aligned", label=where)
    if not mask.keep_when:
        cur = ctx.emit("LOGICAL_NOT", [cur], {}, hint=f"{hint}.not", label=where)
    return ctx.transpose_to(Lowered(cur, None, identity(rank)), perm, f"{hint}.t").name
