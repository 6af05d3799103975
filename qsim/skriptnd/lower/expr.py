"""The expression walker of the @lower interpreter: AST expression → value (see values.py)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import ast as A
from .values import LIFTED, FullRange, GuardIdx, LowerError, StackedPack, _scalar, cast, fail, fold, lift1
from ..semantics import BUILTINS, is_runtime
from ..values import DEFAULTS


class Evaluator:
    """Evaluates expressions in `env` (names → values). `dtypes` maps @dtype names to
    concrete types. `valid` collects the masks of guarded indices met while evaluating one
    statement (see interpreter.py)."""

    def __init__(self, env: dict[str, Any], dtypes: dict[str, str] | None = None):
        self.env = env
        self.dtypes = dtypes if dtypes is not None else {}
        self.valid: list[np.ndarray] = []

    # -- entry ---------------------------------------------------------------------------------
    def eval(self, e: A.Expr) -> Any:
        method = getattr(self, "_" + type(e).__name__, None)
        if method is None:
            fail(e, f"{type(e).__name__} expressions are not allowed here")
        return method(e)

    def type_name(self, name: str, node=None) -> str:
        if name in DEFAULTS:
            return name
        if name in self.dtypes:
            return self.dtypes[name]
        fail(node, f"unknown type {name!r}", hint="declare generic types in @dtype")

    # -- literals and names --------------------------------------------------------------------
    def _IntLit(self, e):
        return e.value

    def _RealLit(self, e):
        return e.value

    def _BoolLit(self, e):
        return e.value

    def _StrLit(self, e):
        return "".join(p if isinstance(p, str) else _fmt(self.eval(p)) for p in e.parts)

    def _Name(self, e):
        try:
            return self.env[e.name]
        except KeyError:
            fail(e, f"unknown identifier {e.name!r}")

    def _Member(self, e):
        v = self.eval(e.target)
        if e.member == "shape" and isinstance(v, np.ndarray):
            return tuple(int(d) for d in v.shape)
        if e.member == "rank" and isinstance(v, np.ndarray):
            return v.ndim
        if e.member == "size" and isinstance(v, (list, tuple)):
            return len(v)
        fail(e, f"'.{e.member}' is not defined here",
             hint=".shape/.rank apply to non-packed tensors, .size to packs")

    def _Omitted(self, e):
        return None

    # -- lists and packs -----------------------------------------------------------------------
    def _ListExpr(self, e):
        out: list = []
        for item in e.items:
            if isinstance(item, A.Range):
                b, en, st = (self.eval(x) if x is not None else None for x in (item.begin, item.end, item.step))
                if b is None or en is None:
                    fail(item, "a range item needs a begin and an end")
                out.extend(range(b, en, 1 if st is None else st))
            elif isinstance(item, A.Expand):
                v = self.expand(item)
                if v is None:
                    return None
                out.extend(v)
            else:
                v = self.eval(item)
                if v is None:
                    return None          # a null item makes the list null (2.4.1)
                out.append(v)
        return tuple(out)

    def expand(self, item: A.Expand) -> tuple:
        if isinstance(item.operand, A.Tuple):          # zip [(a, b)..]
            packs = [self.eval(x) for x in item.operand.items]
            if any(not isinstance(p, tuple) for p in packs) or len({len(p) for p in packs}) > 1:
                fail(item, "a zip needs packs of equal length")
            return tuple(v for group in zip(*packs) for v in group)
        v = self.eval(item.operand)
        if item.count is not None:
            n = self.eval(item.count)
            if n is None or v is None:
                return None
            n = int(n)
            if isinstance(v, tuple):
                return v * n
            return (v,) * n
        if v is None:
            return ()
        if not isinstance(v, tuple):
            fail(item, "only packs can be expanded with '..'",
                 hint="repeat a single item with a count: [x ..(n)]")
        return v

    def _Expand(self, e):
        return self.expand(e)

    def _Tuple(self, e):
        fail(e, "a tuple is only allowed expanded inside a list, as a zip [(a, b)..]")

    def _Subscript(self, e):
        target = self.eval(e.target)
        if isinstance(target, np.ndarray):
            # `x[i]` on a rank-1 tensor: the spec's own 2.12 examples omit the ',' of `x[i,]`
            return self._TensorAccess(A.TensorAccess(e.loc, e.target, (e.index,)))
        if isinstance(e.index, A.Range):
            if target is None:
                return None
            b, en, st = (self.eval(x) if x is not None else None for x in (e.index.begin, e.index.end, e.index.step))
            if isinstance(target, (list, tuple, str)):
                return target[slice(b, en, st)]
            fail(e, "slicing needs a pack or a string")
        index = self.eval(e.index)
        return subscript(target, index, e)

    def _Substitute(self, e):
        base = self.eval(e.target)
        index = self.eval(e.index)
        value = self.eval(e.value)
        if base is None or index is None or value is None:
            return None
        out = list(base)
        if isinstance(index, tuple):
            vals = value if isinstance(value, tuple) else (value,) * len(index)
            if len(vals) != len(index):
                fail(e, f"substitution of {len(index)} items with {len(vals)} values")
            for i, v in zip(index, vals):
                out[i] = v
        else:
            out[index] = value
        return tuple(out)

    # -- operators -----------------------------------------------------------------------------
    def _Unary(self, e):
        v = self.eval(e.operand)
        if e.op == "?":
            return v is not None
        if e.op == "!":
            return lift1(lambda x: np.logical_not(x) if is_runtime(x) else not x, v)
        if e.op == "-":
            return lift1(lambda x: -x, v)
        return v

    def _Binary(self, e):
        a = self.eval(e.left)
        if e.op in ("&&", "||") and not is_runtime(a) and not isinstance(a, tuple) and a is not None:
            # compile-time short circuit keeps the other side from being evaluated in vain
            if e.op == "&&" and not a:
                return False
            if e.op == "||" and a:
                return True
        b = self.eval(e.right)
        if e.op == "in":
            if a is None or b is None:
                return None
            if isinstance(a, tuple):
                return tuple(x in b for x in a)
            return a in b
        try:
            return _scalar_tree(LIFTED[e.op](a, b))
        except LowerError as err:
            fail(e, err.message)
        except (TypeError, ZeroDivisionError) as err:
            fail(e, f"cannot evaluate '{e.op}' on {_describe(a)} and {_describe(b)}: {err}")

    def _Coalesce(self, e):
        a = self.eval(e.left)
        return self.eval(e.right) if a is None else a

    def _Select(self, e):
        c = self.eval(e.cond)
        if c is None:
            return None
        if isinstance(c, tuple):
            t = self.eval(e.then)
            o = self.eval(e.otherwise) if e.otherwise is not None else None
            n = len(c)
            tt = t if isinstance(t, tuple) else (t,) * n
            oo = o if isinstance(o, tuple) else (o,) * n
            return tuple(_pick(ci, ti, oi) for ci, ti, oi in zip(c, tt, oo))
        if is_runtime(c):
            t = self.eval(e.then)
            o = self.eval(e.otherwise) if e.otherwise is not None else None
            return _pick(c, t, o)
        if c:
            return self.eval(e.then)
        return self.eval(e.otherwise) if e.otherwise is not None else None

    def _Fold(self, e):
        return fold(e.op, self.eval(e.operand), e.cumulative, e)

    def _Cast(self, e):
        t = self.type_name(e.type_name, e)
        if e.operand is None:
            return DEFAULTS[t]
        return cast(t, self.eval(e.operand))

    def _Call(self, e):
        if e.name in BUILTINS and len(e.args) == 1:      # e.g. erf, missing from 2.4's list
            return lift1(BUILTINS[e.name], self.eval(e.args[0]))
        t = self.type_name(e.name, e)
        if not e.args:
            return DEFAULTS[t]
        if len(e.args) != 1:
            fail(e, f"a cast to {e.name} takes one argument")
        return cast(t, self.eval(e.args[0]))

    def _Builtin(self, e):
        fn = BUILTINS.get(e.func)
        if fn is None:
            fail(e, f"unknown built-in function {e.func!r}")
        return lift1(fn, self.eval(e.operand))

    # -- tensor access -------------------------------------------------------------------------
    def _Guard(self, e):
        v = self.eval(e.index)
        lo = self.eval(e.low) if e.low is not None else None
        hi = self.eval(e.high) if e.high is not None else None
        remap = e.low is not None
        if isinstance(v, tuple):
            n = len(v)
            los = lo if isinstance(lo, tuple) else (lo,) * n
            his = hi if isinstance(hi, tuple) else (hi,) * n
            return tuple(GuardIdx(x, l, h, remap) for x, l, h in zip(v, los, his))
        return GuardIdx(v, lo, hi, remap)

    def index_list(self, items) -> list:
        out = []
        for ix in items:
            if isinstance(ix, A.Expand):
                out.extend(self.expand(ix))
            elif isinstance(ix, A.Range):
                b, en, st = (self.eval(x) if x is not None else None for x in (ix.begin, ix.end, ix.step))
                for v, node in zip((b, en, st), (ix.begin, ix.end, ix.step)):
                    if v is not None and (isinstance(v, (bool, np.bool_))
                                          or not isinstance(v, (int, np.integer))):
                        fail(node, "slice bounds in a tensor access must be ints known before the "
                                   "formula runs, not index symbols")
                out.append(FullRange(b, en, st))
            else:
                out.append(self.eval(ix))
        return out

    def _TensorAccess(self, e):
        target = self.eval(e.target)
        if target is None:
            return None
        index = self.index_list(e.indices)
        if isinstance(target, list):        # a whole tensor pack: one access per item
            return tuple(self.gather(t, index, e) for t in target)
        if isinstance(target, StackedPack):
            return self.gather(target.array, [target.item] + index, e)
        if not isinstance(target, np.ndarray):
            fail(e, "tensor access needs a tensor")
        return self.gather(target, index, e)

    def gather(self, t: np.ndarray, index: list, node) -> Any:
        if len(index) != t.ndim:
            fail(node, f"tensor access with {len(index)} indices into a tensor of rank {t.ndim}")
        for d, ix in enumerate(index):            # a packed dimension makes the result a pack
            if isinstance(ix, (FullRange, tuple)):
                items = range(t.shape[d])[slice(ix.begin, ix.end, ix.step)] if isinstance(ix, FullRange) else ix
                return tuple(self.gather(t, index[:d] + [p] + index[d + 1:], node) for p in items)
        idx = []
        for d, ix in enumerate(index):
            ext = t.shape[d]
            if isinstance(ix, GuardIdx):
                v = ix.value
                if ix.remap:
                    v = np.where(np.less(v, 0), ix.low, np.where(np.greater_equal(v, ext), ix.high, v))
                else:
                    ok = (np.asarray(v) >= 0) & (np.asarray(v) < ext)
                    self.valid.append(ok)
                ix = v
            if ix is None:
                return None
            idx.append(np.clip(np.asarray(ix, dtype=np.int64), 0, max(ext - 1, 0)))
        if t.size == 0:
            fail(node, "access into an empty tensor")
        return _scalar(t[tuple(idx)]) if all(np.ndim(i) == 0 for i in idx) else t[tuple(idx)]


def subscript(target, index, node=None):
    if target is None or index is None:
        return None
    if isinstance(target, list):                 # tensor pack
        if is_runtime(index):
            return StackedPack(np.stack(target), index)
        if isinstance(index, tuple):
            return [target[i] for i in index]
        return target[index]
    if isinstance(target, str):
        return target[index]
    if not isinstance(target, tuple):
        fail(node, "only packs and strings can be indexed with [ ]",
             hint="tensor access needs a ',' for rank 1: x[i,]")
    if is_runtime(index):
        return np.asarray(target)[index]
    if isinstance(index, tuple):
        if index and all(isinstance(i, (bool, np.bool_)) for i in index):
            if len(index) != len(target):
                fail(node, f"mask of length {len(index)} for a pack of length {len(target)}")
            return tuple(v for v, m in zip(target, index) if m)
        return tuple(target[i] for i in index)
    try:
        return target[index]
    except IndexError:
        fail(node, f"index {index} out of range for a pack of length {len(target)}")


def _pick(c, t, o):
    if c is None:
        return None
    if is_runtime(c):
        if t is None or o is None:
            fail(None, "a run-time select needs both branches")
        if isinstance(t, GuardIdx) or isinstance(o, GuardIdx):
            fail(None, "guarded indices cannot be selected at run time")
        return np.where(c, t, o)
    return t if c else o


def _scalar_tree(v):
    if isinstance(v, tuple):
        return tuple(_scalar_tree(x) for x in v)
    return _scalar(v)


def _describe(v) -> str:
    if isinstance(v, tuple):
        return f"a pack of {len(v)}"
    if isinstance(v, np.ndarray):
        return f"a {v.dtype} index grid"
    return repr(v)


def _fmt(v) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return str(v)
