"""Expression evaluation for the @lower interpreter (NNEF 2.0 2.4, 2.12).

One evaluator serves compile-time values and run-time index grids:
- scalars are Python int/float/bool/str, null is None (2.4.1 null propagation);
- packs are tuples (2.3);
- run-time values inside a lowering are numpy arrays that broadcast over the index grid
  (each loop index symbol owns one grid axis), so a formula is evaluated for all index
  combinations at once instead of per element;
- tensors are numpy arrays, tensor packs lists of arrays.

Tensor access (`x[i, j]`) gathers with broadcast index arrays; guarded indices `|i|` add to
the statement's validity mask (the whole assignment is skipped where any guard fails), remapped
ones `|i <> lo : hi|` substitute the fallback index. Unguarded indices are clipped for the
gather so an untaken branch of a run-time select cannot fault; a valid formula never relies
on that.
"""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import ast as A
from ...errors import SemanticError
from ..semantics import BINARY, cast_value, is_runtime


class LowerError(SemanticError):
    pass


def fail(node: A.Node | None, message: str, hint: str | None = None):
    raise LowerError(message, location=getattr(node, "loc", None), hint=hint)


@dataclass(frozen=True)
class GuardIdx:
    """A guarded (low/high None) or remapped index of a tensor access."""
    value: Any
    low: Any = None
    high: Any = None
    remap: bool = False


@dataclass(frozen=True)
class FullRange:
    """`:` as a tensor index: the whole extent, as a pack (packed assignment, 2.12)."""
    begin: Any = None
    end: Any = None
    step: Any = None


@dataclass(frozen=True)
class StackedPack:
    """A tensor pack indexed by a run-time value (`xs[y[i..]]`): stacked, item index first."""
    array: np.ndarray
    item: Any


def _both(f):
    """Lifts a binary scalar/array function over packs (element-wise) and nulls."""
    def lifted(a, b):
        if a is None or b is None:
            return None
        if isinstance(a, tuple) or isinstance(b, tuple):
            if isinstance(a, tuple) and isinstance(b, tuple) and len(a) != len(b):
                raise LowerError(f"packs of different lengths ({len(a)} and {len(b)}) in a binary operation")
            n = len(a) if isinstance(a, tuple) else len(b)
            aa = a if isinstance(a, tuple) else (a,) * n
            bb = b if isinstance(b, tuple) else (b,) * n
            return tuple(lifted(x, y) for x, y in zip(aa, bb))
        return f(a, b)
    return lifted


# `is` compares compile-time values symbolically (2.4 "The identity operator")
LIFTED = {op: _both(f) for op, f in {**BINARY, "is": operator.eq}.items()}


def _scalar(v):
    """numpy 0-d results back to Python scalars (compile-time values stay Python)."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray) and v.ndim == 0:
        return v.item()
    return v


def lift1(f, v):
    if v is None:
        return None
    if isinstance(v, tuple):
        return tuple(lift1(f, x) for x in v)
    return _scalar(f(v))


def cast(type_name: str, v):
    if v is None:
        return None
    if isinstance(v, tuple):
        return tuple(cast(type_name, x) for x in v)
    if type_name in ("int", "real", "bool"):
        return cast_value(type_name, v)
    if type_name == "str":
        return str(v)
    raise LowerError(f"cannot cast to {type_name!r}")


FOLD_INIT = {"+": 0, "*": 1, "&&": True, "||": False}


def fold(op: str, items: tuple, cumulative: bool, node=None):
    if items is None:
        return None
    if not isinstance(items, tuple):
        fail(node, f"fold '{op} ..' needs a pack")
    if op == ":=":   # uniform value or null
        if items and all(_same(items[0], x) for x in items[1:]):
            return items[0]
        return None
    if op in ("<", "<=", ">", ">="):
        return all(_scalar(BINARY[op](a, b)) for a, b in zip(items, items[1:]))
    if op == "==":
        return all(_same(items[0], x) for x in items[1:])
    if op == "!=":
        return len(set(items)) == len(items)
    f = BINARY[op]
    if cumulative:
        out, acc = [], None
        for x in items:
            acc = x if acc is None else f(acc, x)
            out.append(_scalar(acc))
        return tuple(out)
    if not items:
        if op in ("<?", ">?"):
            fail(node, f"fold '{op} ..' of an empty pack")
        return FOLD_INIT[op]
    return _scalar(functools.reduce(f, items))


def _same(a, b) -> bool:
    if is_runtime(a) or is_runtime(b):
        return False
    return a == b
