"""Binding actual shapes to declared input shapes (NNEF 2.0 draft 2.6, 2.6.1, 2.6.2).

- `binding_order(op)` computes the definition's input binding order of 2.6.2, rejecting
  definitions where an input's shape cannot be bound unambiguously.
- `ShapeBinder.bind_input(...)` binds one actual input (tensor, pack of tensors or null) to its
  declared type: extents and pack lengths written as affine expressions of a not yet known symbol
  are deduced (`a * x + b`, solved from two evaluations and verified), others are evaluated and
  checked (agreement among inputs). Failures say which input, which dimension and where the
  conflicting value came from.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UnsupportedError
from . import ast
from .evaluate import Evaluator, free_names
from .values import Dyn, TensorValue, error, is_pack, show, type_of

_ORDER_CACHE: dict[int, tuple] = {}


def declared_symbols(t: ast.TypeSpec) -> set[str]:
    """Symbols an input type can declare: names in extents, pack lengths and the rank capture."""
    names: set[str] = set()
    if t.rank_capture:
        names.add(t.rank_capture)
    for item in t.shape or ():
        names |= free_names(item.extent)
        if item.pack is not None and item.pack.length is not None:
            names |= free_names(item.pack.length)
    if t.pack is not None and t.pack.length is not None:
        names |= free_names(t.pack.length)
    return names


def _unknown_packs(t: ast.TypeSpec, known: set[str]) -> int:
    """Number of packed shape items whose length is not determined by known symbols."""
    count = 0
    if t.rank_capture:
        known = known | {t.rank_capture}      # `^(r)` is bound first, from the actual rank
    for item in t.shape or ():
        if item.pack is None:
            continue
        length = item.pack.length
        if length is None:
            # `z..` after z is bound (by another input) has the length already bound to it
            names = free_names(item.extent)
            if not names or not names <= known:
                count += 1
        elif not free_names(length) <= known:
            count += 1
    return count


def binding_order(op: ast.OperatorDef, where: str) -> tuple[ast.ParamDecl, ...]:
    """Inputs in binding order (2.6.2); raises for definitions that cannot be bound."""
    cached = _ORDER_CACHE.get(id(op))
    if cached is not None and cached[0] is op:
        return cached[1]
    known = {a.name for a in op.attribs
             if not a.type.optional and a.type.pack is None
             and (a.default is None or not free_names(a.default))}
    known |= {d.name for d in op.dtypes}
    pending = [i for i in op.inputs if not i.type.optional]
    order: list[ast.ParamDecl] = []
    progress = True
    while pending and progress:
        progress = False
        for decl in list(pending):
            if _unknown_packs(decl.type, known) <= 1:
                order.append(decl)
                pending.remove(decl)
                known |= declared_symbols(decl.type)
                progress = True
                break       # restart from the first remaining input (2.6.2: "looping over ...")
    optional = [i for i in op.inputs if i.type.optional]
    for decl in pending + optional:
        if _unknown_packs(decl.type, known) > 1:
            names = [_item_text(it) for it in decl.type.shape or () if it.pack is not None
                     and (it.pack.length is None or not free_names(it.pack.length) <= known)]
            raise error(f"{where}: the shape of input '{decl.name}' cannot be bound unambiguously: "
                        f"{len(names)} packed extents of unknown length ({', '.join(names)})", decl.loc,
                        hint="fix the length of all but one of them with an int attribute or by another "
                             "input's shape (2.6.2); lengths of packed or optional attributes do not count")
    order.extend(optional)
    result = tuple(order)
    _ORDER_CACHE[id(op)] = (op, result)
    return result


def _item_text(item: ast.ShapeItem) -> str:
    e = item.extent
    return e.name if isinstance(e, ast.Name) else "extent"


@dataclass
class Bound:
    value: Any
    origin: str


class ShapeBinder:
    """Holds the symbols bound so far in one invocation and where each came from."""

    def __init__(self, env: dict, where: str, call_loc=None):
        self.env = env
        self.where = where
        self.call_loc = call_loc      # errors point at the invocation; the declaration is named
        self.origin: dict[str, str] = {}

    def _at(self, decl_loc):
        return self.call_loc or decl_loc

    # -- symbols
    def known(self, e: ast.Expr) -> bool:
        return free_names(e) <= self.env.keys()

    def eval(self, e: ast.Expr):
        return Evaluator(self.env, self.where).eval(e)

    def bind(self, name: str, value, origin: str, loc):
        if name in self.env:
            self.check_equal(name, self.env[name], value, origin, loc)
            return
        self.env[name] = value
        self.origin[name] = origin

    def check_equal(self, what: str, expected, actual, origin: str, loc):
        if isinstance(expected, Dyn) or isinstance(actual, Dyn):
            return          # a run-time check (2.6.1)
        if is_pack(expected) and is_pack(actual):
            if len(expected) == len(actual) and all(
                    isinstance(a, Dyn) or isinstance(b, Dyn) or a == b for a, b in zip(expected, actual)):
                return
        elif expected == actual and type_of(expected) == type_of(actual):
            return
        first = self.origin.get(what)
        source = f" (from {first})" if first else ""
        raise error(f"{self.where}: {what} is {show(expected)}{source} but {show(actual)} from {origin}", self._at(loc), hint="the shapes of the arguments must agree as the operator declares them")

    def solve(self, e: ast.Expr, target, origin: str, loc):
        """Binds the single unknown symbol of affine `e` so that e == target, or checks e == target."""
        if self.known(e):
            value = self.eval(e)
            self.check_equal(_describe(e), value, target, origin, loc)
            return
        if isinstance(e, ast.Name):
            self.bind(e.name, target, origin, loc)
            return
        unknown = sorted(free_names(e) - self.env.keys())
        if len(unknown) != 1:
            raise error(f"{self.where}: cannot deduce {', '.join(unknown)} from one extent "
                        f"({origin})", self._at(loc), hint="an extent may use one not yet known symbol, affinely")
        sym = unknown[0]
        if isinstance(target, Dyn):
            self.bind(sym, Dyn(f"{sym}", None, None), origin, loc)
            return
        if is_pack(target):
            values = []
            for t in target:
                values.append(self._solve_scalar(e, sym, t, origin, loc))
            self.bind(sym, tuple(values), origin, loc)
            return
        self.bind(sym, self._solve_scalar(e, sym, target, origin, loc), origin, loc)

    def _solve_scalar(self, e, sym, target, origin, loc):
        def at(x):
            env = dict(self.env)
            env[sym] = x
            return Evaluator(env, self.where).eval(e)
        try:
            f0, f1 = at(0), at(1)
        except Exception:       # noqa: BLE001 - a non-affine form fails below with a clear message
            f0 = f1 = None
        if type_of(f0) != "int" or type_of(f1) != "int" or f1 == f0:
            raise error(f"{self.where}: cannot deduce '{sym}' from {origin}: the extent expression is not "
                        f"affine in '{sym}'", self._at(loc), hint="write it as a * x + b with constant a != 0 and b")
        a, b = f1 - f0, f0
        if (target - b) % a != 0:
            raise error(f"{self.where}: {origin} is {target}, which no integer '{sym}' gives", self._at(loc))
        x = (target - b) // a
        if at(x) != target:
            raise error(f"{self.where}: cannot deduce '{sym}' from {origin}: the extent expression is not "
                        f"affine in '{sym}'", self._at(loc))
        return x

    def _pack_length_error(self, label: str, item: ast.ShapeItem, n: int, rank: int, loc):
        """A rank-relative pack length out of range, e.g. `s..(axis < 0 ? axis + rank : axis)`
        with an axis beyond the input's rank: named with the attributes it comes from."""
        names = sorted(free_names(item.pack.length) & self.env.keys())
        values = ", ".join(f"{k} = {show(self.env[k])}" for k in names)
        return error(f"{self.where}: {label} of rank {rank} cannot be split as declared: a packed "
                     f"extent would have {n} dimensions" + (f" (from {values})" if values else ""),
                     self._at(loc),
                     hint="an axis attribute must be between -rank (inclusive) and rank (exclusive) "
                          "of the input it refers to")

    # -- inputs
    def bind_input(self, decl: ast.ParamDecl, value, where_input: str):
        t = decl.type
        loc = decl.loc
        if value is None:
            if not t.optional:
                raise error(f"{self.where}: input '{decl.name}' is not optional but no tensor was given", self._at(loc), hint="pass a tensor for it")
            for name in declared_symbols(t):
                self.env.setdefault(name, None)
            return
        if t.pack is not None:
            if not is_pack(value):
                raise error(f"{self.where}: input '{decl.name}' is a pack of tensors; pass a list such as [a, b]", self._at(loc))
            if t.pack.length is not None:
                self.solve(t.pack.length, len(value), f"the length of pack input '{decl.name}'", loc)
            tensors = value
        else:
            if is_pack(value):
                raise error(f"{self.where}: input '{decl.name}' is a single tensor, got a pack of {len(value)}", self._at(loc))
            tensors = (value,)
        for tv in tensors:
            if not isinstance(tv, TensorValue):
                raise error(f"{self.where}: input '{decl.name}' needs a tensor, got {show(tv)}", self._at(loc))
        if t.shape is None:
            return
        per_item: dict[int, list] = {}
        for k, tv in enumerate(tensors):
            self._bind_shape(decl, tv, per_item, k if t.pack is not None else None)
        for index, items in per_item.items():
            extent = t.shape[index].extent
            self.solve(extent, tuple(items), f"the per-item extents of input '{decl.name}'", loc)

    def _bind_shape(self, decl, tv: TensorValue, per_item: dict, pack_index):
        t = decl.type
        shape = tuple(tv.shape)
        label = f"input '{decl.name}'" + (f"[{pack_index}]" if pack_index is not None else "")
        if t.rank_capture:
            self.bind(t.rank_capture, len(shape), f"the rank of {label}", decl.loc)
        # lengths of the shape items: 1, 0 (a null optional extent), a known pack length, or unknown
        lengths: list = []
        unknown = []
        conditional: dict[int, bool] = {}   # `c..(flag)`: a single extent c, present when flag holds
        for idx, item in enumerate(t.shape):
            if item.pack is None:
                if not isinstance(item.extent, ast.Omitted) and self.known(item.extent) \
                        and self.eval(item.extent) is None:
                    lengths.append(0)
                else:
                    lengths.append(1)
            elif item.pack.length is not None and self.known(item.pack.length):
                n = self.eval(item.pack.length)
                if isinstance(n, Dyn):
                    # a rank is a compile-time number (2.6.1 makes extents dynamic, never ranks)
                    raise UnsupportedError(
                        f"{self.where}: the rank of a packed extent of {label} would be the run-time extent "
                        f"{n}", location=self._at(decl.loc),
                        hint="the operator takes this many dimensions from another input's extent: give "
                             "that input a static extent there")
                if isinstance(n, bool):
                    conditional[idx] = n
                    n = int(n)
                if isinstance(n, int) and not 0 <= n <= len(shape):
                    raise self._pack_length_error(label, item, n, len(shape), decl.loc)
                lengths.append(n if n is not None else 0)
            elif item.pack.length is None and self.known(item.extent) and is_pack(self.eval(item.extent)):
                lengths.append(len(self.eval(item.extent)))
            else:
                lengths.append(None)
                unknown.append(idx)
        fixed = sum(n for n in lengths if n is not None)
        if len(unknown) > 1:
            raise error(f"{self.where}: the shape of {label} cannot be split among {len(unknown)} packed "
                        "extents of unknown length", self._at(decl.loc))
        if unknown:
            rest = len(shape) - fixed
            if rest < 0:
                raise error(f"{self.where}: {label} has rank {len(shape)} but its declaration needs at least "
                            f"{fixed} dimensions", self._at(decl.loc), hint=f"its shape is {show(shape)}")
            lengths[unknown[0]] = rest
            item = t.shape[unknown[0]]
            if item.pack.length is not None:
                self.solve(item.pack.length, rest, f"the rank of a packed extent of {label}", decl.loc)
        elif fixed != len(shape):
            raise error(f"{self.where}: {label} has rank {len(shape)}, the operator declares rank {fixed}", self._at(decl.loc), hint=f"its shape is {show(shape)}")
        pos = 0
        for idx, (item, n) in enumerate(zip(t.shape, lengths)):
            dims = shape[pos:pos + n]
            pos += n
            if n == 0 and item.pack is None:
                continue
            if item.bound is not None:
                ub = self.eval(item.bound)
                for d in dims:
                    if not isinstance(d, Dyn) and isinstance(ub, int) and d > ub:
                        raise error(f"{self.where}: {label} has extent {d} above its upper bound {ub}", self._at(decl.loc))
            if isinstance(item.extent, ast.Omitted):
                continue
            origin = f"dimension {pos - n} of {label}" if n == 1 else f"dimensions {pos - n}..{pos - 1} of {label}"
            if item.per_item:
                per_item.setdefault(idx, []).append(dims[0])
                continue
            if item.pack is not None and self.known(item.extent) and not is_pack(self.eval(item.extent)):
                # a known single extent with a count is repeated (2.4 `[a..(5)]`; chapter 4 writes
                # `1 ..(squeeze ? 1 : 0)`): every dimension must equal it
                for d in dims:
                    self.solve(item.extent, d, origin, decl.loc)
            elif idx in conditional:
                # a bool repetition count repeats one extent 0 or 1 times (2.4 `a..(n)`; chapter 4
                # writes `c..(ncx)` for a channel extent before or after the spatial ones)
                if conditional[idx]:
                    self.solve(item.extent, dims[0], origin, decl.loc)
            elif item.pack is None:
                self.solve(item.extent, dims[0], origin, decl.loc)
            else:
                self.solve(item.extent, tuple(dims), origin, decl.loc)


def _describe(e: ast.Expr) -> str:
    if isinstance(e, ast.Name):
        return f"'{e.name}'"
    return "the extent"
