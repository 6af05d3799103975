"""Attention masks in front of a softmax, found in the float graph before calibration.

torch writes a causal or padding mask as scores plus a constant of 0 and -inf
(`generate_square_subsequent_mask`, `is_causal=True`, which qsim.onnx folds to a constant), or
as `masked_fill(mask, -inf)` (ONNX Where). exp(-inf) = 0, so a masked position has probability
exactly 0. The masked scores themselves are not a tensor an integer grid can hold (-inf, or
-1e9 / finfo.min that would stretch the grid over nothing), so:

- calibration leaves the masked tensor alone (`masked_tensors`): the scores before the mask
  are calibrated as usual, and nothing reads the masked tensor but the softmax;
- the integer softmax takes the scores and the mask as a boolean constant (tosa/rules_softmax.py:
  the maximum over the kept positions only, and the exp-table values of masked positions
  replaced by 0 with SELECT, so they get probability exactly 0).

Forms recognized, with `s` the scores and the result read only by one nn.softmax:

    math.add(s, M) | math.add(M, s)       M constant, every element 0 or <= MASK_LIMIT
    math.select(c, F, s) | select(c, s, F) c constant bool, F a constant <= MASK_LIMIT
    math.add(s, M) | math.add(M, s)       M computed: layout ops (reshape, broadcast, transpose)
                                          of select(c, F, 0) or select(c, 0, F), c a computed bool
                                          (torch's src_key_padding_mask: a bool model input); the
                                          integer softmax rebuilds the mask from c at run time

A value <= MASK_LIMIT (-1e4; -inf, -1e9 and float32's lowest included) is masked: exp of it
plus any score difference above -1e4 + 104 underflows to exactly 0 in float32 (exp(-104) is
below the smallest float32), so masked positions add nothing to the float softmax either.
Any other non-finite or mask-sized constant feeding a softmax is refused by
`check_softmax_masks`, naming the op.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import ir
from ...errors import UnsupportedError
from .runtime_mask import MASK_LIMIT, RuntimeMask, constant, is_fill, runtime_mask



@dataclass(frozen=True)
class MaskedSoftmax:
    mask_op: ir.Op                  # the math.add / math.select applying the mask
    softmax: ir.Op                  # the nn.softmax reading its result
    scores: str                     # the float scores before the mask
    keep: np.ndarray | None         # bool, the scores' rank (extent 1 where the mask broadcasts)
    runtime: RuntimeMask | None = None      # instead of `keep`: the mask computed at run time

    @property
    def masked(self) -> str:
        return self.mask_op.outputs[0]

    def fully_masked_rows(self, shape: tuple[int, ...], axes: tuple[int, ...]) -> bool:
        """Whether some softmax row (the `axes` of scores of `shape`) may keep no position
        (always possible with a run-time mask: the data decides)."""
        if self.keep is None:
            return True
        keep = np.broadcast_to(self.keep, shape)
        return bool(np.any(~np.any(keep, axis=axes)))


def _plain(op: ir.Op) -> bool:
    return op.attrs.get("lhs_align") is None and op.attrs.get("rhs_align") is None


def _to_rank(keep: np.ndarray, rank: int) -> np.ndarray | None:
    """`keep` right-aligned to `rank` (numpy broadcasting); None when it has more axes."""
    if keep.ndim > rank:
        return None
    return keep.reshape((1,) * (rank - keep.ndim) + keep.shape)


def _softmax_reader(graph: ir.Graph, name: str) -> ir.Op | None:
    users = graph.consumers(name)
    if name in graph.outputs or len(users) != 1 or users[0].kind.name != "nn.softmax":
        return None
    return users[0]


def match_masked_softmax(graph: ir.Graph, op: ir.Op) -> MaskedSoftmax | None:
    """The masked softmax whose mask `op` applies (module doc), or None."""
    kind = op.kind.name
    if kind not in ("math.add", "math.select") or not _plain(op):
        return None
    softmax = _softmax_reader(graph, op.outputs[0])
    if softmax is None:
        return None
    rank = len(graph.tensor(op.outputs[0]).shape)
    if kind == "math.add":
        a, b = op.inputs[:2]
        for scores, mask in ((a, b), (b, a)):
            runtime = runtime_mask(graph, mask) if constant(graph, mask) is None else None
            if runtime is not None and graph.tensor(scores).shape == graph.tensor(op.outputs[0]).shape:
                return MaskedSoftmax(op, softmax, scores, None, runtime)
            data = constant(graph, mask)
            if constant(graph, scores) is not None or data is None or data.dtype.kind != "f":
                continue
            masked = data <= MASK_LIMIT
            if not np.all(masked | (data == 0)) or not masked.any():
                return None         # an additive bias, not a mask
            keep = _to_rank(~masked, rank)
            if keep is None or graph.tensor(scores).shape != graph.tensor(op.outputs[0]).shape:
                return None
            return MaskedSoftmax(op, softmax, scores, keep)
        return None
    cond, when_true, when_false = op.inputs[:3]
    c = constant(graph, cond)
    if c is None or c.dtype != np.bool_:
        return None
    if is_fill(constant(graph, when_true)) and constant(graph, when_false) is None:
        scores, keep = when_false, ~c
    elif is_fill(constant(graph, when_false)) and constant(graph, when_true) is None:
        scores, keep = when_true, c
    else:
        return None
    keep = _to_rank(keep, rank)
    if keep is None or graph.tensor(scores).shape != graph.tensor(op.outputs[0]).shape:
        return None
    return MaskedSoftmax(op, softmax, scores, keep)


def _mask_sized(data: np.ndarray | None) -> bool:
    """A constant that can only be meant as a mask: non-finite or <= MASK_LIMIT somewhere."""
    if data is None or data.dtype.kind != "f" or data.size == 0:
        return False
    return bool(np.any(~np.isfinite(data)) or np.any(data <= MASK_LIMIT))


def check_softmax_masks(graph: ir.Graph) -> list[MaskedSoftmax]:
    """Every masked softmax of `graph`; a softmax whose input is made by an op with a mask-sized
    constant operand (-inf, <= MASK_LIMIT) in a form `match_masked_softmax` does not know is an
    UnsupportedError naming the op (calibration would otherwise stop at the non-finite values)."""
    found = []
    for op in graph.ops:
        if op.kind.name != "nn.softmax":
            continue
        producer = graph.producer(op.inputs[0])
        if producer is None:
            continue
        match = match_masked_softmax(graph, producer)
        if match is not None:
            found.append(match)
            continue
        if any(_mask_sized(constant(graph, i)) for i in producer.inputs if i):
            raise UnsupportedError(
                f"{producer.kind.name} {producer.label!r} applies an attention mask (a constant with -inf or "
                f"values <= {MASK_LIMIT:g}) to the input of softmax {op.label!r} in a form qsim does not "
                "lower", hint="write the mask as scores + M with M holding only 0 and -inf (torch's "
                "generate_square_subsequent_mask, is_causal=True) or as masked_fill(mask, -inf) with a "
                "constant mask, read only by the softmax")
    return found


def masked_tensors(graph: ir.Graph) -> set[str]:
    """The masked scores of every masked softmax and the run-time masks' -inf/0 tensors:
    calibration observes none of them."""
    found = set()
    for m in check_softmax_masks(graph):
        found.add(m.masked)
        if m.runtime is not None:
            found |= m.runtime.tensors
    return found


_HEADS: list = [None, {}]      # the graph runtime_mask_heads last answered for, and its answer


def runtime_mask_heads(graph: ir.Graph) -> dict[int, list[ir.Op]]:
    """The ops of the run-time masks (runtime_mask.py) by the id of each mask's first op, for
    the masks whose every tensor is read only by their own ops and their softmaxes' mask
    additions (the integer softmaxes rebuild the mask from its input, so these ops have nothing
    left to compute); a mask read elsewhere is left to the ordinary rules."""
    if _HEADS[0] is graph:
        return _HEADS[1]
    groups: dict[int, list[ir.Op]] = {}
    adds: dict[int, set[int]] = {}
    for op in graph.ops:
        match = match_masked_softmax(graph, op) if op.kind.name == "math.add" else None
        if match is None or match.runtime is None:
            continue
        head = id(match.runtime.chain[0])
        members = groups.setdefault(head, [])
        members += [o for o in match.runtime.chain if all(o is not m for m in members)]
        adds.setdefault(head, set()).add(id(op))
    heads = {}
    for head, members in groups.items():
        inside = {id(o) for o in members} | adds[head]
        if all(n not in graph.outputs and all(id(u) in inside for u in graph.consumers(n))
               for o in members for n in o.outputs):
            heads[head] = members
    _HEADS[:] = [graph, heads]
    return heads
