"""Binding one operator invocation for the @lower interpreter (NNEF 2.0 2.5, 2.6, 2.9).

Given an OperatorDef, attribute values and input arrays, produces the environment its
formulas run in: generic types (2.13), attributes (constant defaults first, then the inputs,
then deferred defaults and uniform packs, 2.6.2 steps 1-4), shape symbols deduced from the
input shapes (affine expressions of one unknown are solved), @using values, @constant
tensors, checked @assert conditions, and the output shapes (with data-dependent extents left
open). This is the interpreter's own binder for executing single operators; whole-graph
composition is the front end's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import ast as A
from ...errors import SemanticError
from ..evaluate import Evaluator
from ..values import show
from .access import Lowering

REAL, INT, BOOL = np.float64, np.int64, np.bool_
NUMPY = {"real": REAL, "int": INT, "bool": BOOL}


@dataclass
class OutputSpec:
    name: str
    dtype: Any
    shapes: list            # one shape per pack item (a single item when not packed)
    packed: bool
    dynamic: dict = field(default_factory=dict)   # symbol → (item, axis, upper bound)


@dataclass
class Binding:
    op: A.OperatorDef
    env: dict
    dtypes: dict
    outputs: list


def _norm(v):
    if isinstance(v, np.ndarray) and v.ndim == 0:
        return v.item()
    if isinstance(v, (list, tuple, np.ndarray)):
        return tuple(_norm(x) for x in (v.tolist() if isinstance(v, np.ndarray) else v))
    if isinstance(v, np.generic):
        return v.item()
    return v


def _kind_of(value) -> str | None:
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, np.ndarray):
        return {"f": "real", "i": "int", "u": "int", "b": "bool"}.get(value.dtype.kind)
    if isinstance(value, tuple):
        value = value[0] if value else None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "real"
    if isinstance(value, str):
        return "str"
    return None


class Binder:
    def __init__(self, op: A.OperatorDef, inputs: list, attrs: dict, generics: dict | None):
        self.op = op
        self.env: dict[str, Any] = {}
        self.dtypes: dict[str, str] = {}
        self.ev = Evaluator(self.env, lowering=Lowering(self.dtypes))
        self.inputs = inputs
        self.attrs = {k: _norm(v) for k, v in attrs.items()}
        self.generics = generics or {}

    def error(self, node, message, hint=None):
        raise SemanticError(f"{self.op.name}: {message}", location=getattr(node, "loc", None), hint=hint)

    # -- types ---------------------------------------------------------------------------------
    def bind_dtypes(self):
        params = list(self.op.inputs) + list(self.op.attribs)
        values = list(self.inputs) + [self.attrs.get(p.name) for p in self.op.attribs]
        for d in self.op.dtypes:
            t = self.generics.get(d.name)
            if t is None:
                for p, v in zip(params, values):
                    if p.type.base == d.name and v is not None:
                        t = _kind_of(v)
                        if t:
                            break
            t = t or d.default
            if t is None:
                self.error(d, f"cannot deduce generic type {d.name}", hint=f"give it as {self.op.name}<real>")
            self.dtypes[d.name] = t

    def numpy_type(self, base: str):
        t = self.dtypes.get(base, base)
        if t not in NUMPY:
            self.error(None, f"no tensor type for {base!r}")
        return NUMPY[t]

    # -- attributes ----------------------------------------------------------------------------
    def try_eval(self, e):
        try:
            return True, self.ev.eval(e)
        except SemanticError:
            return False, None

    def set_attr(self, p: A.ParamDecl, v, final: bool) -> bool:
        pack = p.type.pack
        if pack is not None and v is not None:
            length = pack.length
            if isinstance(v, tuple):
                if isinstance(length, A.Name) and length.name not in self.env:
                    self.env[length.name] = len(v)
                elif length is not None:
                    ok, n = self.try_eval(length)
                    if ok and n is not None and n != len(v):
                        self.error(p, f"attribute '{p.name}' has {len(v)} items, expected {n}")
            else:
                ok, n = self.try_eval(length) if length is not None else (False, None)
                if not ok or n is None:
                    if final:
                        self.error(p, f"attribute '{p.name}' is a single value but its pack length "
                                      "is unknown", hint="give the full list")
                    return False
                v = (v,) * int(n)
        self.env[p.name] = v
        return True

    def bind_attribs(self, final: bool):
        for p in self.op.attribs:
            if final and p.name in self.env:
                continue
            if p.name in self.attrs:
                self.set_attr(p, self.attrs[p.name], final)
            elif p.type.optional and p.default is None:
                self.env[p.name] = None
            elif p.default is not None:
                ok, v = self.try_eval(p.default)
                if ok and (v is not None or final):
                    if v is None:
                        self.error(p, f"attribute '{p.name}' must be given (its default is null here)")
                    self.set_attr(p, v, final)
                elif final:
                    self.ev.eval(p.default)          # raises the located error
            elif final:
                self.error(p, f"attribute '{p.name}' is required")

    # -- inputs --------------------------------------------------------------------------------
    def solve(self, expr, value, node) -> None:
        """Binds the one unknown of an affine extent expression, or checks a known one."""
        if isinstance(expr, A.Name) and expr.name not in self.env:
            self.env[expr.name] = value
            return
        ok, known = self.try_eval(expr)
        if ok:
            if known is not None and value is not None and known != value:
                self.error(node, f"shape mismatch: expected {show(known)} for '{_src(expr)}', got {show(value)}")
            return
        if isinstance(expr, A.Binary) and expr.op in "+-*/" and value is not None:
            lok, lv = self.try_eval(expr.left)
            rok, rv = self.try_eval(expr.right)
            if expr.op == "+" and (lok or rok):
                return self.solve(expr.right, value - lv, node) if lok else self.solve(expr.left, value - rv, node)
            if expr.op == "-" and (lok or rok):
                return self.solve(expr.right, lv - value, node) if lok else self.solve(expr.left, value + rv, node)
            if expr.op == "*" and (lok or rok):
                k = lv if lok else rv
                if k == 0 or value % k:
                    self.error(node, f"extent {value} is not a multiple of {k} ('{_src(expr)}')")
                return self.solve(expr.right if lok else expr.left, value // k, node)
            if expr.op == "/" and rok:
                return self.solve(expr.left, value * rv, node)
        self.ev.eval(expr)                                  # raises: unknown identifier

    def bind_input(self, p: A.ParamDecl, value):
        t = p.type
        if value is None and p.default is not None:
            value = self.ev.eval(p.default)
            shape = self.eval_shape(t.shape or (), p)[0] if t.shape else ()
            value = np.full(shape, value, dtype=self.numpy_type(t.base))
        if value is None:
            if not t.optional:
                self.error(p, f"input '{p.name}' is required")
            self.env[p.name] = None
            # the shape symbols of an omitted optional input are null (2.6.2 step 2)
            names = [item.extent for item in t.shape or ()]
            names += [item.pack.length for item in t.shape or () if item.pack is not None]
            if t.rank_capture:
                names.append(A.Name(p.loc, t.rank_capture))
            for e in names:
                if isinstance(e, A.Name) and e.name not in self.env:
                    self.env[e.name] = None
            return
        items = value if t.pack is not None else [value]
        if t.pack is not None:
            if not isinstance(value, list):
                self.error(p, f"input '{p.name}' is a pack; give a list of tensors")
            if t.pack.length is not None:
                self.solve(t.pack.length, len(value), p)
        arrays = [np.asarray(v) for v in items]
        if t.base in NUMPY or t.base in self.dtypes:
            arrays = [a.astype(self.numpy_type(t.base)) for a in arrays]
        self.env[p.name] = arrays if t.pack is not None else arrays[0]
        if t.rank_capture:
            self.solve(A.Name(p.loc, t.rank_capture), arrays[0].ndim if arrays else 0, p)
        if t.shape is None or not arrays:
            return
        if len({a.ndim for a in arrays}) > 1:
            self.error(p, f"tensors of pack '{p.name}' differ in rank")
        self.match_shape(p, t.shape, [a.shape for a in arrays])

    def item_length(self, item: A.ShapeItem):
        """Number of dims an item covers: int, or ('bool', flag), or None (unknown)."""
        if item.pack is None:
            return 1
        if item.pack.length is None:
            if isinstance(item.extent, A.Name) and isinstance(self.env.get(item.extent.name), tuple):
                return len(self.env[item.extent.name])      # an extent pack bound before
            return None
        ok, n = self.try_eval(item.pack.length)
        if not ok:
            return None
        if isinstance(n, bool):
            return ("bool", n)
        return int(n)

    def match_shape(self, p, spec, shapes):
        ndim = len(shapes[0])
        lengths = [self.item_length(it) for it in spec]
        counts = [(1 if v[1] else 0) if isinstance(v, tuple) else v for v in lengths]
        unknown = [i for i, c in enumerate(counts) if c is None]
        if len(unknown) > 1:
            self.error(p, f"cannot split the shape of '{p.name}': more than one packed extent "
                          "of unknown length")
        known = sum(c for c in counts if c is not None)
        if unknown:
            rest = ndim - known
            if rest < 0:
                self.error(p, f"input '{p.name}' has rank {ndim}, too small for its shape")
            counts[unknown[0]] = rest
            item = spec[unknown[0]]
            if item.pack.length is not None:
                self.solve(item.pack.length, rest, p)
        if sum(counts) != ndim:
            self.error(p, f"input '{p.name}' has rank {ndim}, its declaration needs {sum(counts)}",
                       hint=f"shapes given: {[list(s) for s in shapes]}")
        pos = 0
        for item, n, ln in zip(spec, counts, lengths):
            per = [tuple(s[pos:pos + n]) for s in shapes]
            pos += n
            if isinstance(item.extent, A.Omitted):
                continue
            if item.per_item:
                vals = tuple(x[0] for x in per)
                self.solve(item.extent, vals, p)
                continue
            if any(x != per[0] for x in per[1:]):
                self.error(p, f"tensors of pack '{p.name}' differ in shared extents")
            dims = per[0]
            if isinstance(ln, tuple):                       # conditional item ..(flag)
                if ln[1]:
                    self.solve(item.extent, dims[0], p)
                elif isinstance(item.extent, A.Name) and item.extent.name not in self.env:
                    self.env[item.extent.name] = None
            elif item.pack is not None:
                if isinstance(item.extent, A.Name) and item.extent.name not in self.env:
                    self.env[item.extent.name] = dims
                else:
                    v = self.ev.eval(item.extent)
                    want = v if isinstance(v, tuple) else (v,) * n
                    if tuple(want) != dims:
                        self.error(p, f"input '{p.name}': extents {list(dims)} do not match "
                                      f"'{_src(item.extent)}' = {show(v)}")
            else:
                self.solve(item.extent, dims[0], p)

    # -- outputs, constants, @using, @assert ---------------------------------------------------
    def eval_shape(self, spec, p, n_items: int = 1):
        shapes = [[] for _ in range(n_items)]
        dynamic = {}
        for item in spec:
            if isinstance(item.extent, A.Omitted) or (isinstance(item.extent, A.Name)
                                                      and item.extent.name not in self.env and item.bound is not None):
                bound = self.ev.eval(item.bound) if item.bound is not None else None
                name = item.extent.name if isinstance(item.extent, A.Name) else None
                for k in range(n_items):
                    dynamic[name] = (k, len(shapes[k]), bound)
                    shapes[k].append(None)
                continue
            v = self.ev.eval(item.extent)
            if item.pack is not None and item.pack.length is not None:
                ok, n = self.try_eval(item.pack.length)
                if isinstance(n, bool):
                    if n:
                        for s in shapes:
                            s.append(v)
                    continue
                v = v if isinstance(v, tuple) else (v,) * int(n)
            for k, s in enumerate(shapes):
                x = v[k] if item.per_item else v
                if x is None:
                    continue                                  # null extents are omitted (2.6)
                s.extend(x if isinstance(x, tuple) else (x,))
        return [tuple(int(e) if e is not None else None for e in s) for s in shapes], dynamic

    def bind_outputs(self):
        outs = []
        for p in self.op.outputs:
            n = 1
            if p.type.pack is not None:
                n = self.ev.eval(p.type.pack.length) if p.type.pack.length is not None else None
                if n is None:
                    self.error(p, f"the pack length of output '{p.name}' is unknown")
            shapes, dynamic = self.eval_shape(p.type.shape or (), p, n)
            outs.append(OutputSpec(p.name, self.numpy_type(p.type.base), shapes,
                                   p.type.pack is not None, dynamic))
        return outs

    def bind_inputs(self, pending: list):
        """Binds inputs in an order that lets every extent be deduced (2.6.2): an input whose
        shape needs a symbol not known yet waits, and @using items that became computable
        are evaluated in between."""
        self.usings_done: set[int] = set()
        # omitted optional inputs go last: their symbols become null only if still unbound
        pending.sort(key=lambda item: item[1] is None)
        while pending:
            progress, last = False, None
            for item in list(pending):
                snapshot = dict(self.env)
                try:
                    self.bind_input(*item)
                except SemanticError as err:
                    self.env.clear()
                    self.env.update(snapshot)
                    last = err
                    continue
                pending.remove(item)
                progress = True
            if pending and not progress:
                progress = self.bind_using(partial=True)
            if pending and not progress:
                raise last

    def bind_using(self, partial: bool = False) -> bool:
        done = getattr(self, "usings_done", set())
        progress = False
        for k, u in enumerate(self.op.usings):
            if k in done:
                continue
            if partial:
                ok, value = self.try_eval(u.value)
                if not ok:
                    continue
            else:
                value = self.ev.eval(u.value)
            self.assign_pattern(u.target, value, u)
            done.add(k)
            progress = True
        self.usings_done = done
        return progress

    def assign_pattern(self, pat, value, node):
        if isinstance(pat, A.PatName):
            if pat.pack is not None and pat.pack.length is not None and value is not None:
                self.solve(pat.pack.length, len(value), node)
            self.env[pat.name] = value
        elif isinstance(pat, A.PatList):
            for sub, v in zip(pat.items, value):
                self.assign_pattern(sub, v, node)
        elif isinstance(pat, A.PatZip):
            k = len(pat.names)
            for i, name in enumerate(pat.names):
                self.env[name] = tuple(value[i::k])

    def bind_constants(self):
        for c in self.op.constants:
            shape = self.eval_shape(c.type.shape or (), c)[0][0]
            dtype = self.numpy_type(c.type.base)
            if c.bounds:
                grid = {}
                axes = sum(len(v) if isinstance(v, tuple) else 1
                           for v in (self.ev.eval(b.limit) for b in c.bounds))
                pos = 0
                for b in c.bounds:
                    lim = self.ev.eval(b.limit)
                    lims = lim if isinstance(lim, tuple) else (lim,)
                    arrs = []
                    for n in lims:
                        shp = [1] * axes
                        shp[pos] = n
                        arrs.append(np.arange(n).reshape(shp))
                        pos += 1
                    grid[b.index] = tuple(arrs) if isinstance(lim, tuple) else arrs[0]
                ev = Evaluator({**self.env, **grid}, lowering=Lowering(self.dtypes))
                value = np.broadcast_to(np.asarray(ev.eval(c.default), dtype=dtype), shape)
            else:
                v = self.ev.eval(c.default)
                value = np.asarray(v, dtype=dtype)
                value = value.reshape(shape) if value.ndim else np.full(shape, value, dtype=dtype)
            self.env[c.name] = np.ascontiguousarray(value)

    def check_asserts(self):
        for a in self.op.asserts:
            ok = self.ev.eval(a.cond)
            if ok is None:
                continue
            if isinstance(ok, tuple):
                ok = all(x for x in ok if x is not None)
            if not ok:
                msg = self.ev.eval(a.message) if a.message is not None else f"assertion failed: {a.text}"
                values = ", ".join(f"{arg.label}={show(self.ev.eval(arg.value))}" for arg in a.args)
                self.error(a, msg + (f" ({values})" if values else ""))


def _src(e) -> str:
    if isinstance(e, A.Name):
        return e.name
    if isinstance(e, A.IntLit):
        return str(e.value)
    if isinstance(e, A.Binary):
        return f"{_src(e.left)} {e.op} {_src(e.right)}"
    return type(e).__name__


def bind(op: A.OperatorDef, inputs: list, attrs: dict, generics: dict | None = None) -> Binding:
    """Binds an invocation of `op` with `inputs` (declaration order; None = omitted)."""
    if len(inputs) > len(op.inputs):
        raise SemanticError(f"{op.name}: {len(inputs)} inputs given, it declares {len(op.inputs)}")
    unknown = set(attrs) - {p.name for p in op.attribs}
    if unknown:
        raise SemanticError(f"{op.name}: unknown attribute(s) {', '.join(sorted(unknown))}",
                            hint="attributes are " + ", ".join(p.name for p in op.attribs))
    inputs = list(inputs) + [None] * (len(op.inputs) - len(inputs))
    b = Binder(op, inputs, attrs, generics)
    b.bind_dtypes()
    b.bind_attribs(final=False)
    b.bind_inputs(list(zip(op.inputs, inputs)))
    b.bind_attribs(final=True)
    b.bind_using()
    b.bind_constants()
    b.check_asserts()
    return Binding(op, b.env, b.dtypes, b.bind_outputs())
