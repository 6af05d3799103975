"""What SkriptND's expression operators, built-in functions and casts compute (NNEF 2.0 draft 2.4),
for the one evaluator (evaluate.py, operators.py) in both its uses: composing and @lower formulas.

Each function takes two compile-time values (Python int/float/bool/str) or numpy arrays (the
@lower interpreter's run-time index grids and tensor values, or a compile-time per-element grid)
and returns a Python value for Python operands, an array otherwise. Packs and null are lifted
over by the callers (operators.py), and so are the checks: ill-typed operands and zero divisors
are refused before these are called, with the expression's location, and so are ints past the
bit limit and undefined results of compile-time values; run-time data computes as numpy does.

Numeric formulas (rounding, integer division, erf) are qsim.numerics'.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from ..numerics import ceil_div, erf, floor_div, floor_mod, nnef_round


def is_runtime(v: Any) -> bool:
    """A numpy array: a run-time grid or tensor value (compile-time values are Python)."""
    return isinstance(v, np.ndarray)


def is_int(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, (int, np.integer)):
        return True
    return isinstance(v, np.ndarray) and v.dtype.kind in "iu"


def is_real(v: Any) -> bool:
    return isinstance(v, (float, np.floating)) or (isinstance(v, np.ndarray) and v.dtype.kind == "f")


def divide(a, b):
    """`/`: rounds downwards on ints, real division otherwise (2.4)."""
    if is_int(a) and is_int(b):
        return floor_div(a, b)
    return np.true_divide(a, b) if is_runtime(a) or is_runtime(b) else a / b


def divide_up(a, b):
    """`\\`: rounds upwards on ints (2.4). 2.4 defines it for ints only, but chapter 4's
    layout.range (T: num) counts `int((last - first) \\ stride)`: on reals it is the quotient
    rounded up."""
    if is_int(a) and is_int(b):
        return ceil_div(a, b)
    q = divide(a, b)
    return np.ceil(q) if is_runtime(q) else float(np.ceil(q))


def _either_runtime(np_fn: Callable, py_fn: Callable) -> Callable:
    def f(a, b):
        return np_fn(a, b) if is_runtime(a) or is_runtime(b) else py_fn(a, b)
    return f


def _logical(np_fn: Callable, py_fn: Callable) -> Callable:
    def f(a, b):
        return np_fn(a, b) if is_runtime(a) or is_runtime(b) else py_fn(bool(a), bool(b))
    return f


def power(a, b):
    """`**`; on run-time grids a real operand makes the power real (float64)."""
    if is_runtime(a) or is_runtime(b):
        return np.power(np.asarray(a, dtype=np.float64) if is_real(a) or is_real(b) else a, b)
    return a ** b


# The binary operators of 2.4 on two values (not packs, not null).
BINARY: dict[str, Callable] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": divide, "\\": divide_up,
    "%": floor_mod, "**": power,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": _either_runtime(np.equal, operator.eq), "!=": _either_runtime(np.not_equal, operator.ne),
    "&&": _logical(np.logical_and, lambda a, b: a and b),
    "||": _logical(np.logical_or, lambda a, b: a or b),
    "^": _logical(np.logical_xor, operator.ne),
    "=>": _logical(lambda a, b: np.logical_or(np.logical_not(a), b), lambda a, b: (not a) or b),
    "<?": _either_runtime(np.minimum, min), ">?": _either_runtime(np.maximum, max),
}


def _frac(x):
    return x - np.floor(x)


# Built-in functions of 2.4 with real arguments and results, plus `erf`, which the standard
# nn.gelu / nn.erf use although 2.4's list lacks it.
REAL_FUNCTIONS: dict[str, Callable] = {
    "sqrt": np.sqrt, "exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "round": nnef_round, "floor": np.floor, "ceil": np.ceil, "frac": _frac, "erf": erf,
}
# ... and those of int or real arguments, with results of the argument's type.
BUILTINS: dict[str, Callable] = {**REAL_FUNCTIONS, "abs": np.abs, "sign": np.sign}


_NUMPY_TYPES = {"int": np.int64, "real": np.float64, "bool": np.bool_}
_PYTHON_TYPES = {"int": int, "real": float, "bool": bool}


def cast_value(type_name: str, v):
    """`int(v)`, `real(v)`, `bool(v)` (2.4 Casting): int truncates toward zero. Run-time values
    become int64, float64 or bool arrays."""
    if is_runtime(v):
        if type_name == "int" and v.dtype.kind == "f":
            return np.trunc(v).astype(np.int64)
        return v.astype(_NUMPY_TYPES[type_name])
    return _PYTHON_TYPES[type_name](v)
