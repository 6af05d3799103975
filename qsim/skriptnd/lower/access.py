"""What a @lower formula adds to the one expression evaluator (evaluate.py): tensors as data
(NNEF 2.0 draft 2.4 "Tensor access", 2.12).

In @lower, names resolve to run-time values as well as compile-time ones: tensors are numpy
arrays, tensor packs lists of arrays, and index symbols int64 grids that broadcast over the
formula's loop indices (each symbol owns one grid axis), so a formula is evaluated for all index
combinations at once. `Lowering` is the evaluator's parameter for that use: it resolves the
generic type names of the invocation (2.13), performs tensor accesses (`x[i, j]`, `xs[k][i]`)
and collects the validity masks of guarded indices met while one statement is evaluated.

Tensor access gathers with broadcast index arrays; a guarded index `|i|` adds to the
statement's validity mask (the whole assignment is skipped where any guard fails), a remapped
one `|i <> lo : hi|` substitutes the fallback index. Unguarded indices are clipped for the
gather so that an untaken branch of a run-time select cannot fault; a valid formula never relies
on that.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import ast as A
from .values import FullRange, GuardIdx, StackedPack, fail, pack_positions, resolve_guard, scalar


class Lowering:
    """The @lower side of an evaluation: `dtypes` maps @dtype names to concrete types; `valid`
    collects the masks of guarded indices (interpreter.py resets it per statement)."""

    def __init__(self, dtypes: dict[str, str] | None = None):
        self.dtypes = dtypes if dtypes is not None else {}
        self.valid: list[np.ndarray] = []

    def guard(self, ev, e: A.Guard):
        v = ev.eval(e.index)
        lo = ev.eval(e.low) if e.low is not None else None
        hi = ev.eval(e.high) if e.high is not None else None
        remap = e.low is not None
        if isinstance(v, tuple):
            n = len(v)
            los = lo if isinstance(lo, tuple) else (lo,) * n
            his = hi if isinstance(hi, tuple) else (hi,) * n
            return tuple(GuardIdx(x, low, high, remap) for x, low, high in zip(v, los, his))
        return GuardIdx(v, lo, hi, remap)

    def index_list(self, ev, items) -> list:
        """The indices of a tensor access: expanded packs, `:` ranges and guarded indices."""
        out = []
        for ix in items:
            if isinstance(ix, A.Expand):
                out.extend(ev.expand_item(ix) or ())
            elif isinstance(ix, A.Range):
                b, en, st = (ev.eval(x) if x is not None else None for x in (ix.begin, ix.end, ix.step))
                for v, node in zip((b, en, st), (ix.begin, ix.end, ix.step)):
                    if v is not None and (isinstance(v, (bool, np.bool_))
                                          or not isinstance(v, (int, np.integer))):
                        fail(node, "slice bounds in a tensor access must be ints known before the "
                                   "formula runs, not index symbols")
                out.append(FullRange(b, en, st))
            else:
                out.append(ev.eval(ix))
        return out

    def access(self, ev, e: A.TensorAccess):
        target = ev.eval(e.target)
        if target is None:
            return None
        index = self.index_list(ev, e.indices)
        if isinstance(target, list):        # a whole tensor pack: one access per item
            return tuple(self.gather(t, index, e) for t in target)
        if isinstance(target, StackedPack):
            return self.gather(target.array, [target.item] + index, e)
        if not isinstance(target, np.ndarray):
            fail(e, "tensor access needs a tensor")
        return self.gather(target, index, e)

    def subscript(self, ev, e: A.Subscript, target):
        """`x[i]` on a tensor (rank 1: the spec's own 2.12 examples omit the ',' of `x[i,]`) or
        an item of a tensor pack `xs[k]` (by a run-time index: the pack stacked)."""
        if isinstance(target, np.ndarray):
            return self.access(ev, A.TensorAccess(e.loc, e.target, (e.index,)))
        index = ev.eval(e.index)
        if index is None:
            return None
        if isinstance(index, np.ndarray):
            return StackedPack(np.stack(target), index)
        if isinstance(index, tuple):
            return [target[i] for i in index]
        return target[index]

    def gather(self, t: np.ndarray, index: list, node) -> Any:
        if len(index) != t.ndim:
            fail(node, f"tensor access with {len(index)} indices into a tensor of rank {t.ndim}")
        for d, ix in enumerate(index):            # a packed dimension makes the result a pack
            if isinstance(ix, (FullRange, tuple)):
                return tuple(self.gather(t, index[:d] + [p] + index[d + 1:], node)
                             for p in pack_positions(ix, t.shape[d]))
        idx = []
        for d, ix in enumerate(index):
            ext = t.shape[d]
            ix, ok = resolve_guard(ix, ext)
            if ok is not None:
                self.valid.append(ok)
            if ix is None:
                return None
            idx.append(np.clip(np.asarray(ix, dtype=np.int64), 0, max(ext - 1, 0)))
        if t.size == 0:
            fail(node, "access into an empty tensor")
        return scalar(t[tuple(idx)]) if all(np.ndim(i) == 0 for i in idx) else t[tuple(idx)]
