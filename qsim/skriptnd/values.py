"""Compile-time values of SkriptND (2.3) as the evaluator and composer hold them.

- scalars: Python `int`, `float` (real), `bool`, `str`; null is `None` (2.4.1).
- packs: `tuple` (unidimensional, 2.3); `Uniform` is a tuple that remembers it was built as a
  uniform value (`[x..(n)]`, a uniform attribute), so `x := ..` finds the value even when empty.
- `Dyn`: an extent (or an expression of extents) only known at run time, with the interval of
  values it can take; `hi` is the static upper bound of 2.6.1.
- `TensorValue`: a tensor in the graph being composed (name, element type, shape).
- numpy arrays: element-wise values of index symbols while evaluating per-element @constant
  initializers (2.7); operators on them act element-wise like on scalars.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import Location, SemanticError, UnsupportedError


class Uniform(tuple):
    """A pack known to hold one value repeated (2.4 Folding, `:=`)."""

    def __new__(cls, value: Any, length: int):
        obj = super().__new__(cls, (value,) * length)
        obj.uniform = value
        return obj

    def __reduce__(self):
        return (Uniform, (self.uniform, len(self)))


@dataclass(frozen=True)
class Dyn:
    """A run-time integer (dynamic extent, 2.6.1, 3.1) with bounds lo <= value <= hi.

    `key` identifies the symbolic expression: `s is s` holds, `s is t` does not (2.4 Identity)."""
    key: str
    lo: int | None = 0
    hi: int | None = None
    kind: str = "int"       # "int" or "bool" (a comparison involving a dynamic value)

    def __str__(self) -> str:
        bound = f"|{self.hi}" if self.hi is not None else ""
        return f"{self.key}{bound}"


@dataclass(frozen=True, eq=False)
class TensorValue:
    """A tensor of the graph under composition; `shape` items are int or Dyn."""
    name: str
    dtype: str                      # 'real' | 'int' | 'bool' | 'str'
    shape: tuple
    data: Any = field(default=None, compare=False, repr=False)   # constant data if known

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(str(d) for d in self.shape)}]"


@dataclass(frozen=True)
class TypeValue:
    """A data type bound to a @dtype name (2.13)."""
    name: str                       # 'int' | 'real' | 'bool' | 'str'


ABSTRACT_TYPES = {"type": ("int", "real", "bool", "str"), "arith": ("int", "real", "bool"),
                  "num": ("int", "real")}
CONCRETE_TYPES = ("int", "real", "bool", "str")
DEFAULTS = {"int": 0, "real": 0.0, "bool": False, "str": ""}


def type_of(value: Any) -> str | None:
    """The SkriptND type name of a non-null scalar (or of a pack's items)."""
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "real"
    if isinstance(value, str):
        return "str"
    if isinstance(value, Dyn):
        return value.kind
    if isinstance(value, TensorValue):
        return value.dtype
    if isinstance(value, np.ndarray):
        return {"b": "bool", "i": "int", "u": "int", "f": "real"}.get(value.dtype.kind)
    if isinstance(value, tuple):
        for item in value:
            t = type_of(item)
            if t is not None:
                return t
    return None


def is_pack(value: Any) -> bool:
    return isinstance(value, tuple)


def uniform_value(value: tuple) -> Any:
    """`x := ..`: the uniform value of a pack, or None (2.4 Folding)."""
    if isinstance(value, Uniform):
        return value.uniform
    if not value:
        return None
    first = value[0]
    for item in value[1:]:
        if not same(item, first):
            return None
    return first


def same(a: Any, b: Any) -> bool:
    """Compile-time identity (2.4 `is`): equal values, the same dynamic symbol, the same tensor."""
    if isinstance(a, Dyn) or isinstance(b, Dyn):
        return isinstance(a, Dyn) and isinstance(b, Dyn) and a.key == b.key
    if isinstance(a, TensorValue) or isinstance(b, TensorValue):
        return a is b or (isinstance(a, TensorValue) and isinstance(b, TensorValue) and a.name == b.name)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type_of(a) != type_of(b):
        return False
    return bool(a == b)


def show(value: Any) -> str:
    """A value as SkriptND would write it (messages, formatted strings)."""
    if value is None:
        return "null"
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)):
        if value == float("inf"):
            return "inf"
        if value == float("-inf"):
            return "-inf"
        text = repr(float(value))
        return text
    if isinstance(value, tuple):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, TypeValue):
        return value.name
    if isinstance(value, np.ndarray):
        return np.array2string(value, threshold=20)
    return str(value)


def error(message: str, loc: Location | None, hint: str | None = None) -> SemanticError:
    return SemanticError(message, location=loc, hint=hint)


def static_bound(extent: Any) -> int | None:
    """A static upper bound of an extent: the int itself, a Dyn's bound (which may be another
    Dyn's, e.g. a nonzero count bounded by the input's volume), or None when unbounded."""
    while isinstance(extent, Dyn):
        extent = extent.hi
    return extent


def require_static(shape: tuple, what: str, loc: Location | None, hint: str | None = None) -> tuple[int, ...]:
    """`shape` as ints where qsim needs every extent at compile time (a tensor it materialises,
    a rank): a located UnsupportedError naming `what` and the dynamic extent otherwise."""
    for k, extent in enumerate(shape):
        if isinstance(extent, Dyn):
            raise UnsupportedError(
                f"{what} needs a static shape, but its extent {k} is the run-time extent {extent} "
                f"(shape {show(tuple(shape))})", location=loc,
                hint=hint or "qsim builds this tensor when it composes the graph, before any run-time "
                             "extent is known: give the graph input a static extent there")
    return tuple(int(d) for d in shape)
