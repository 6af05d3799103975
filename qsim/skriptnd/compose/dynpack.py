"""Packs of run-time length (a graph input `xs: real[2]..(s|5)`, `layout.split{count=s}` or
`layout.unstack` along a dynamic extent, with s a dynamic extent of 2.6.1).

A static graph has a fixed number of tensors, so such a pack is held as ONE tensor whose leading
extent is the pack length and whose items are stacked behind it: `xs` is `real[s|5, 2]`. The
operators that consume or produce whole packs are composed into standard layout operators on that
stacked tensor (transpose moves the pack extent, flatten merges it, squeeze/unsqueeze handle the
unit extents of stack{squeeze} / unstack{squeeze=false}), so the graph stays executable and
writable with chapter 4 primitive operators only (emitted directly, as primitives are):

- `layout.concat{axis=a}(xs)`: move the pack extent next to axis a, merge the two (flatten),
- `layout.stack{axis=a}(xs)`: move the pack extent to axis a (squeeze: drop the items' unit axis),
- `layout.unstack{axis=a}(x)` with x.shape[a] dynamic: move axis a to the front,
- `layout.split{axis=a, count=s}(x)` with x.shape[a] the same extent s: items of extent 1.

Any other use of a run-time-length pack is a located UnsupportedError.
"""
from __future__ import annotations

from dataclasses import dataclass

from ... import ir
from ...errors import UnsupportedError
from ..values import Dyn, TensorValue, error, is_pack, same, show


@dataclass(frozen=True)
class DynPack:
    """A pack of `count` tensors of equal shape, stacked along the leading extent of `tensor`."""
    tensor: TensorValue
    count: Dyn

    @property
    def item_shape(self) -> tuple:
        return tuple(self.tensor.shape[1:])

    @property
    def dtype(self) -> str:
        return self.tensor.dtype

    def __str__(self) -> str:
        return f"pack of {self.count} tensors {self.tensor.dtype}[{', '.join(map(str, self.item_shape))}]"


def pack_tensors(value) -> tuple:
    """The graph tensors holding a packed value: its items, or the one stacked tensor."""
    if isinstance(value, DynPack):
        return (value.tensor,)
    return tuple(value)


def product(a, b):
    """a * b for extents (int or Dyn)."""
    if not isinstance(a, Dyn) and not isinstance(b, Dyn):
        return a * b
    key = f"({_key(a)} * {_key(b)})"
    lo = None if _lo(a) is None or _lo(b) is None else _lo(a) * _lo(b)
    hi = None if _hi(a) is None or _hi(b) is None else _hi(a) * _hi(b)
    return Dyn(key, lo, hi)


def _key(v):
    return v.key if isinstance(v, Dyn) else str(v)


def _lo(v):
    return v.lo if isinstance(v, Dyn) else v


def _hi(v):
    return v.hi if isinstance(v, Dyn) else v


HANDLED = ("layout.concat", "layout.stack", "layout.unstack", "layout.split")


def compose(frame, b, qual: str, attrs: dict, args: list, hints: list, label: str, inv):
    """Composes `qual` when it consumes or produces a run-time-length pack; None when it does not
    (the ordinary path then instantiates it)."""
    packs = [a for a in args if isinstance(a, DynPack)]
    where = f"{qual} invoked at {inv.loc}"
    if packs and qual not in ("layout.concat", "layout.stack"):
        raise UnsupportedError(f"{where}: a pack of run-time length ({packs[0]}) can be passed to "
                               "layout.concat and layout.stack only", location=inv.loc,
                               hint="give the pack a compile-time length, as in ..(3)")
    if qual in ("layout.concat", "layout.stack"):
        if not packs:
            return None
        if len(args) != 1:
            raise error(f"{where}: takes one pack of tensors", inv.loc)
        return [_gather(frame, b, qual, attrs, packs[0], hints, label, inv, where)]
    if qual in ("layout.unstack", "layout.split") and len(args) == 1 and isinstance(args[0], TensorValue):
        x = args[0]
        axis = attrs.get("axis")
        if not isinstance(axis, int) or isinstance(axis, bool) or not -len(x.shape) <= axis < len(x.shape):
            return None         # the operator's own assertions report it
        axis %= len(x.shape)
        if qual == "layout.split":
            count = attrs.get("count")
            if not isinstance(count, Dyn):
                return None
            if not same(x.shape[axis], count):
                raise UnsupportedError(f"{where}: a run-time 'count' ({count}) splits only an extent of the "
                                       f"same symbol into items of extent 1; the extent is {show(x.shape[axis])}",
                                       location=inv.loc, hint="split by 'sizes' or a compile-time count")
            sizes = attrs.get("sizes")
            if sizes is not None and any(not isinstance(z, int) or z != 1 for z in sizes):
                raise UnsupportedError(f"{where}: with a run-time 'count' ({count}) the items have extent 1; "
                                       f"'sizes' {show(sizes)} cannot be checked", location=inv.loc,
                                       hint="leave 'sizes' out")
            squeeze = False
        else:
            if not isinstance(x.shape[axis], Dyn):
                return None
            squeeze = attrs.get("squeeze", True) is not False
        return [_scatter(b, frame, x, axis, squeeze, hints, label, inv)]
    return None


def _axis(axis, rank, where, inv) -> int:
    """`axis` in -rank..rank-1 (chapter 4's convention), made non-negative."""
    if not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < rank:
        raise error(f"{where}: 'axis' must be between -{rank} (inclusive) and {rank} (exclusive), got "
                    f"{show(axis)}", inv.loc)
    return axis + rank if axis < 0 else axis


def _names(frame, hints, label):
    scope = frame.scope + label + "." if label else frame.scope
    final = hints[0] if hints and isinstance(hints[0], str) else scope + "output"
    return scope, final


def _op(b, kind: str, x: TensorValue, shape: tuple, attrs: dict, name: str, inv) -> TensorValue:
    out = b.tensor(name, x.dtype, shape, loc=inv.loc)
    k = ir.register_op_kind(kind, doc="SkriptND operator")
    b.ops.append(ir.Op(k, (x.name,), (out.name,), attrs, name=out.name))
    return out


def _move(b, x: TensorValue, src: int, dst: int, name: str, inv) -> TensorValue:
    """layout.transpose moving axis `src` of x to position `dst` (when that is no move, math.iden,
    so that the result is a new tensor of the requested name)."""
    order = list(range(len(x.shape)))
    order.insert(dst, order.pop(src))
    shape = tuple(x.shape[i] for i in order)
    if order == sorted(order):
        return _op(b, "math.iden", x, shape, {}, name, inv)
    first = min(i for i, p in enumerate(order) if p != i)
    return _op(b, "layout.transpose", x, shape, {"axis": first, "perm": tuple(order[first:])}, name, inv)


def _gather(frame, b, qual, attrs, pack: DynPack, hints, label, inv, where) -> TensorValue:
    """concat / stack of a run-time-length pack."""
    rank = len(pack.item_shape)
    scope, final = _names(frame, hints, label)
    x = pack.tensor
    if qual == "layout.concat":
        axis = _axis(attrs.get("axis"), rank, where, inv)
        moved = _move(b, x, 0, axis, scope + "pack_moved", inv) if axis else x
        shape = moved.shape[:axis] + (product(moved.shape[axis], moved.shape[axis + 1]),) + moved.shape[axis + 2:]
        return _op(b, "layout.flatten", moved, shape, {"axis": axis, "rank": 2}, final, inv)
    squeeze = bool(attrs.get("squeeze", False))
    axis = _axis(attrs.get("axis"), rank + (0 if squeeze else 1), where, inv)
    if not squeeze:
        return _move(b, x, 0, axis, final, inv)
    if pack.item_shape[axis] != 1:
        raise error(f"{where}: with squeeze the items need extent 1 at 'axis' {axis}; they are "
                    f"{show(pack.item_shape)}", inv.loc)
    moved = _move(b, x, 0, axis, scope + "pack_moved", inv)
    shape = moved.shape[:axis + 1] + moved.shape[axis + 2:]
    return _op(b, "layout.squeeze", moved, shape, {"axes": (axis + 1,)}, final, inv)


def _scatter(b, frame, x: TensorValue, axis: int, squeeze: bool, hints, label, inv) -> DynPack:
    """unstack / split into extent-1 items along a dynamic extent: the items stacked in front."""
    scope, final = _names(frame, hints, label)
    count = x.shape[axis]
    if squeeze:
        return DynPack(_move(b, x, axis, 0, final, inv), count)
    moved = _move(b, x, axis, 0, scope + "pack_moved", inv)
    shape = moved.shape[:axis + 1] + (1,) + moved.shape[axis + 1:]
    return DynPack(_op(b, "layout.unsqueeze", moved, shape, {"axes": (axis + 1,)}, final, inv), count)


def check_length(value, n, what: str, loc):
    """`xs..(n) = ...`: a run-time-length pack matches a written length of the same symbol."""
    if isinstance(value, DynPack):
        if n is not None and not same(n, value.count):
            raise error(f"{what} has a run-time length {value.count}, {show(n)} written", loc)
        return True
    return is_pack(value)
