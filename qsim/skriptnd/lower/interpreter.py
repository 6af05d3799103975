"""The @lower interpreter: executes a primitive operator from its formulas (NNEF 2.0 2.12).

`run_lower(op, inputs, attrs)` binds the invocation (bind.py), then runs each lowering
statement vectorized: every loop index symbol becomes one axis of a broadcast index grid,
the right-hand side is evaluated once over the whole grid, and the result is written with
numpy fancy indexing (`=`, `:=`) or an unbuffered ufunc (`ufunc.at` for `+= *= &= |= <?= >?=`,
so repeated target elements accumulate correctly).

Index symbols stay Python loops only where the semantics are sequential:
- symbols that select an item of a tensor pack (`xs[k][...]`) or bound a later symbol
  (`zi < z[ni]`): the pack is heterogeneous, so each item is a separate grid;
- for an update `:=` that reads its own output (argmax-style scans), the symbols absent from
  the left-hand side are iterated in loop order, the rest stay vectorized;
- `unroll..(k -> n)` repeats the statement per value.

Guards: `|i|` on either side skips the whole assignment where the index is out of range,
`|i <> lo : hi|` remaps it. Data-dependent outputs (`k|bound` extents, 2.12) take the running
count of grid points (in loop order) where the condition holds.

Real tensors are computed in float64 here: this is the reference the fast paths are held to.
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Iterator

import numpy as np

from ...limits import check_tensor_size
from .. import ast as A
from .bind import Binding, bind
from ..evaluate import Evaluator
from .access import Lowering
from .values import FullRange, GuardIdx, LowerError, fail, pack_positions, resolve_guard

UFUNC = {"+=": np.add, "*=": np.multiply, "&=": np.logical_and, "|=": np.logical_or,
         "<?=": np.minimum, ">?=": np.maximum}
ASSIGN_OPS = ("=", ":=") + tuple(UFUNC)


def identity(op: str, dtype) -> Any:
    """Implicit initialization of an accumulation (2.12): the null element of its operator."""
    if op in ("<?=", ">?="):
        big = np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).max
        return big if op == "<?=" else -big
    return {"+=": 0, "*=": 1, "&=": True, "|=": False}[op]


def names_in(node) -> set[str]:
    """All identifiers a (sub)tree mentions."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, A.Name):
            out.add(n.name)
        if isinstance(n, (list, tuple)):
            stack.extend(n)
        elif dataclasses.is_dataclass(n):
            stack.extend(getattr(n, f.name) for f in dataclasses.fields(n) if f.name != "loc")
    return out


def subscripts_of_packs(node, packs: set[str]) -> set[str]:
    """Index symbols used to select an item of a tensor pack: `xs[k]`."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, A.Subscript) and isinstance(n.target, A.Name) and n.target.name in packs:
            out |= names_in(n.index)
        if isinstance(n, (list, tuple)):
            stack.extend(n)
        elif dataclasses.is_dataclass(n):
            stack.extend(getattr(n, f.name) for f in dataclasses.fields(n) if f.name != "loc")
    return out


class Interpreter:
    def __init__(self, binding: Binding):
        self.b = binding
        self.env = binding.env
        self.specs = {s.name: s for s in binding.outputs}
        self.initialized: set[str] = set()
        for s in binding.outputs:
            for shape in s.shapes:
                if None not in shape:
                    check_tensor_size(shape, np.dtype(s.dtype).itemsize, f"output '{s.name}'",
                                      binding.op.loc)
            arrays = [np.zeros(shape, dtype=s.dtype) if None not in shape else None for shape in s.shapes]
            self.env[s.name] = arrays if s.packed else arrays[0]

    # -- statements ----------------------------------------------------------------------------
    def run(self) -> list:
        for stmt in self.b.op.lowers:
            if stmt.op not in ASSIGN_OPS:
                fail(stmt, f"unknown assignment operator {stmt.op!r}")
            self.statement(stmt, dict(self.env))
        return [self.env[s.name] for s in self.b.outputs]

    def statement(self, stmt: A.Lowering, env: dict):
        t = stmt.target
        if isinstance(t, A.Subscript) and isinstance(t.target, A.Name) and \
                isinstance(env.get(t.target.name), np.ndarray):
            # `y[i] = ...` on a rank-1 output, as the 2.12 examples write it (no ',')
            stmt = dataclasses.replace(stmt, target=A.TensorAccess(t.loc, t.target, (t.index,)))
        if stmt.unroll is not None:
            n = Evaluator(env, lowering=Lowering(self.b.dtypes)).eval(stmt.unroll.count)
            inner = dataclasses.replace(stmt, unroll=None)
            for v in range(int(n)):
                self.statement(inner, {**env, stmt.unroll.index: v})
            return
        out_name = self.output_name(stmt)
        if stmt.op in UFUNC and out_name not in self.initialized:
            # the identity is the start of the first accumulation only: a second `+=` into the
            # same output (another range of indices, 2.12) adds to what the first one summed
            self.fill(out_name, identity(stmt.op, self.specs[out_name].dtype))
            self.initialized.add(out_name)
        if stmt.op == "=":
            self.initialized.add(out_name)
        elif stmt.op == ":=" and out_name not in self.initialized:
            fail(stmt, f"update ':=' of '{out_name}' needs an initialization with '=' first (2.12)")
        bounds = list(stmt.bounds)
        symbols = {b.index for b in bounds}
        packs = {n for n, v in env.items() if isinstance(v, list)}
        body = (stmt.target, stmt.value, stmt.condition, stmt.locals)
        scalar = subscripts_of_packs(body, packs) & symbols
        for i, b in enumerate(bounds):
            scalar |= names_in(b.limit) & {x.index for x in bounds[:i]}
        for scope in self.scalar_loops(bounds, scalar, env):
            self.vectorized(stmt, scope, [b for b in bounds if b.index not in scalar])

    def scalar_loops(self, bounds, scalar, env) -> Iterator[dict]:
        """Iterates the sequential symbols in loop order (later limits may use earlier ones)."""
        todo = [b for b in bounds if b.index in scalar]
        if not todo:
            yield env
            return
        first, rest = todo[0], [b for b in bounds if b is not todo[0]]
        lim = Evaluator(env, lowering=Lowering(self.b.dtypes)).eval(first.limit)
        values = itertools.product(*[range(n) for n in lim]) if isinstance(lim, tuple) else range(int(lim))
        for v in values:
            yield from self.scalar_loops(rest, scalar - {first.index}, {**env, first.index: v})

    def output_name(self, stmt) -> str:
        t = stmt.target
        if not isinstance(t, A.TensorAccess):
            fail(stmt, "the left-hand side of a lowering must be a tensor access")
        base = t.target.target if isinstance(t.target, A.Subscript) else t.target
        if not isinstance(base, A.Name) or base.name not in self.specs:
            fail(stmt, "the left-hand side of a lowering must access an output tensor")
        return base.name

    def fill(self, name, value):
        v = self.env[name]
        for arr in (v if isinstance(v, list) else [v]):
            if arr is not None:
                arr[...] = value

    # -- one vectorized grid -------------------------------------------------------------------
    def make_grid(self, stmt, env, bounds, fixed):
        """Binds each index symbol to an arange on its own grid axis (`fixed` pins axes)."""
        ev = Evaluator(dict(env), lowering=Lowering(self.b.dtypes))
        limits = [ev.eval(b.limit) for b in bounds]
        extents = [n for lim in limits for n in (lim if isinstance(lim, tuple) else (lim,))]
        if any(e is None for e in extents):
            fail(stmt, "a loop bound is null")
        for e in extents:
            if isinstance(e, (bool, np.bool_)) or not isinstance(e, (int, np.integer)):
                got = (f"a tensor of shape {list(e.shape)}" if isinstance(e, np.ndarray)
                       else type(e).__name__)
                fail(stmt, f"a loop bound must be an int known before the formula runs, got {got}")
        fixed = fixed or {}
        grid_shape = tuple(1 if a in fixed else int(e) for a, e in enumerate(extents))
        # a formula's values are arrays over its whole index grid (float64 at most)
        check_tensor_size(grid_shape, 8, "index grid of the formula", stmt.loc)
        pos = 0
        for b, lim in zip(bounds, limits):
            arrs = []
            for n in (lim if isinstance(lim, tuple) else (lim,)):
                shape = [1] * len(grid_shape)
                shape[pos] = grid_shape[pos]
                values = np.array([fixed[pos]]) if pos in fixed else np.arange(int(n))
                arrs.append(values.reshape(shape))
                pos += 1
            ev.env[b.index] = tuple(arrs) if isinstance(lim, tuple) else arrs[0]
        for loc in stmt.locals:
            ev.env[loc.name] = ev.eval(loc.value)
        return ev, grid_shape

    def reduction_axes(self, ev, stmt, grid_shape) -> list[int]:
        """Grid axes the left-hand side does not depend on (an update reading its own output
        must visit them in loop order)."""
        index = ev.lowering.index_list(ev, stmt.target.indices)
        ev.lowering.valid = []
        leaves = []
        for ix in index:
            for v in (ix if isinstance(ix, tuple) else (ix,)):
                leaves.append(v.value if isinstance(v, GuardIdx) else v)
        return [a for a, n in enumerate(grid_shape) if n > 1 and
                all(not isinstance(v, np.ndarray) or v.ndim == 0 or v.shape[a] == 1 for v in leaves)]

    def vectorized(self, stmt, env, bounds, fixed=None):
        ev, grid_shape = self.make_grid(stmt, env, bounds, fixed)
        out_name = self.output_name(stmt)
        if fixed is None and stmt.op == ":=" and \
                out_name in names_in((stmt.value, stmt.condition, stmt.locals)):
            axes = self.reduction_axes(ev, stmt, grid_shape)
            if axes:
                for combo in itertools.product(*[range(grid_shape[a]) for a in axes]):
                    self.vectorized(stmt, env, bounds, dict(zip(axes, combo)))
                return
        spec = self.specs[out_name]
        mask = np.ones(grid_shape, dtype=bool)
        if stmt.condition is not None:
            cond = ev.eval(stmt.condition)
            if cond is None:
                fail(stmt.condition, "the condition evaluates to null")
            mask = mask & np.asarray(cond, dtype=bool)
        dynamic = [k for k in spec.dynamic if k is not None and k in names_in(stmt.target.indices)
                   and k not in env]
        if dynamic:
            mask = self.combine(mask, ev.lowering.valid, grid_shape)
            ev.lowering.valid = []
            self.allocate_dynamic(spec, dynamic[0], int(mask.sum()))
            ev.env[dynamic[0]] = (np.cumsum(mask.ravel()) - 1).reshape(grid_shape)
            ev.env[out_name] = self.env[out_name]
        if 0 in grid_shape:
            return
        value = ev.eval(stmt.value)
        if value is None:
            fail(stmt.value, "the right-hand side is null; resolve optional values with '??'")
        target = ev.eval(stmt.target.target)
        index = ev.lowering.index_list(ev, stmt.target.indices)
        mask = self.combine(mask, ev.lowering.valid, grid_shape)
        if isinstance(target, list):                  # packed assignment to a whole output pack
            vals = value if isinstance(value, tuple) else (value,) * len(target)
            for arr, v in zip(target, vals):
                self.assign(stmt, arr, index, v, mask, grid_shape)
        else:
            self.assign(stmt, target, index, value, mask, grid_shape)

    @staticmethod
    def combine(mask, valid, grid_shape):
        for v in valid:
            mask = mask & np.broadcast_to(v, grid_shape)
        return np.broadcast_to(mask, grid_shape)

    def allocate_dynamic(self, spec, symbol, count):
        item, axis, bound = spec.dynamic[symbol]
        if bound is not None and count > bound:
            raise LowerError(f"data-dependent extent {symbol}={count} exceeds its bound {bound}")
        shape = list(spec.shapes[item])
        shape[axis] = count
        arr = np.zeros(shape, dtype=spec.dtype)
        if spec.packed:
            self.env[spec.name][item] = arr
        else:
            self.env[spec.name] = arr
        self.env[symbol] = count

    def assign(self, stmt, out, index, value, mask, grid_shape):
        if len(index) != out.ndim:
            fail(stmt.target, f"{len(index)} indices for an output of rank {out.ndim}")
        for d, ix in enumerate(index):          # packed dimension: one atomic assignment per item
            if isinstance(ix, (FullRange, tuple)):
                items = pack_positions(ix, out.shape[d])
                vals = value if isinstance(value, tuple) else (value,) * len(items)
                if len(vals) != len(items):
                    fail(stmt, f"packed assignment of {len(vals)} values to {len(items)} positions")
                for p, v in zip(items, vals):
                    self.assign(stmt, out, index[:d] + [p] + index[d + 1:], v, mask, grid_shape)
                return
        if isinstance(value, tuple):
            fail(stmt, "a pack is assigned to a single element", hint="index the pack or use ':'")
        idx = []
        for d, ix in enumerate(index):
            ix, ok = resolve_guard(ix, out.shape[d])
            if ok is not None:
                mask = mask & np.broadcast_to(ok, grid_shape)
            idx.append(np.broadcast_to(np.asarray(ix, dtype=np.int64), grid_shape))
        sel = tuple(i[mask] for i in idx)
        for d, s in enumerate(sel):
            if s.size and (s.min() < 0 or s.max() >= out.shape[d]):
                fail(stmt.target, f"index out of bounds for dimension {d} of the output "
                                  f"(extent {out.shape[d]}); guard it with |...|")
        vals = np.broadcast_to(np.asarray(value), grid_shape)[mask].astype(out.dtype, copy=False)
        if stmt.op in ("=", ":="):
            if out.ndim == 0:
                if vals.size:
                    out[()] = vals[-1]
            else:
                out[sel] = vals
        else:
            uf = UFUNC[stmt.op]
            if out.ndim == 0:
                if vals.size:
                    out[()] = uf(out[()], uf.reduce(vals))
            else:
                uf.at(out, sel, vals)


def run_lower(op: A.OperatorDef, inputs: list, attrs: dict | None = None,
              generics: dict | None = None) -> list:
    """Executes `op` from its @lower block; returns its outputs (packs as lists)."""
    if not op.lowers:
        raise LowerError(f"operator '{op.name}' has no @lower block",
                         location=op.loc, hint="compound operators are executed by composition")
    return Interpreter(bind(op, inputs, attrs or {}, generics)).run()
