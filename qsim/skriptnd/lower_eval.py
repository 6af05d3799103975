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

from . import ast as A
from ..errors import SemanticError
from ..numerics import ceil_div, erf, floor_div, floor_mod, nnef_round


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


def is_runtime(v) -> bool:
    return isinstance(v, np.ndarray)


def is_int(v) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, (int, np.integer)):
        return True
    return isinstance(v, np.ndarray) and v.dtype.kind in "iu"


def is_real(v) -> bool:
    return isinstance(v, (float, np.floating)) or (isinstance(v, np.ndarray) and v.dtype.kind == "f")


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


def _div(a, b):
    if is_int(a) and is_int(b):
        return floor_div(a, b)
    return np.true_divide(a, b) if is_runtime(a) or is_runtime(b) else a / b


def _ceil_div(a, b):
    if is_int(a) and is_int(b):
        return ceil_div(a, b)
    # 2.4 defines '\\' for ints; on reals it is the quotient rounded up, as the compile-time
    # evaluator has it (chapter 4's layout.range counts `int((last - first) \\ stride)`)
    return np.ceil(_div(a, b))


def _logic(np_fn, py_fn):
    def f(a, b):
        if is_runtime(a) or is_runtime(b):
            return np_fn(a, b)
        return py_fn(bool(a), bool(b))
    return f


def _minmax(np_fn, py_fn):
    def f(a, b):
        if is_runtime(a) or is_runtime(b):
            return np_fn(a, b)
        return py_fn(a, b)
    return f


def _pow(a, b):
    if is_runtime(a) or is_runtime(b):
        return np.power(np.asarray(a, dtype=np.float64) if is_real(a) or is_real(b) else a, b)
    return a ** b


BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _div, "\\": _ceil_div,
    "%": floor_mod,
    "**": _pow,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": lambda a, b: np.equal(a, b) if is_runtime(a) or is_runtime(b) else a == b,
    "!=": lambda a, b: np.not_equal(a, b) if is_runtime(a) or is_runtime(b) else a != b,
    "is": lambda a, b: a == b,
    "&&": _logic(np.logical_and, lambda a, b: a and b),
    "||": _logic(np.logical_or, lambda a, b: a or b),
    "^": _logic(np.logical_xor, lambda a, b: a != b),
    "=>": _logic(lambda a, b: np.logical_or(np.logical_not(a), b), lambda a, b: (not a) or b),
    "<?": _minmax(np.minimum, min), ">?": _minmax(np.maximum, max),
}
LIFTED = {op: _both(f) for op, f in BINARY.items()}


def _frac(x):
    return x - np.floor(x)


BUILTINS = {
    "sqrt": np.sqrt, "exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "round": nnef_round, "floor": np.floor, "ceil": np.ceil, "frac": _frac, "abs": np.abs,
    "sign": np.sign, "erf": erf,
}


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
    if type_name == "real":
        return v.astype(np.float64) if is_runtime(v) else float(v)
    if type_name == "int":
        if is_runtime(v):
            return np.trunc(v).astype(np.int64) if v.dtype.kind == "f" else v.astype(np.int64)
        return int(v)
    if type_name == "bool":
        return v.astype(bool) if is_runtime(v) else bool(v)
    if type_name == "str":
        return str(v)
    raise LowerError(f"cannot cast to {type_name!r}")


DEFAULTS = {"int": 0, "real": 0.0, "bool": False, "str": ""}
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
