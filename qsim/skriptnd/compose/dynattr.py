"""Attribute values that depend on dynamic extents (2.6.1), evaluated when the graph runs.

`layout.reshape{shape=[h, -1]}` on an input `real[h|100, w|100]`, or `layout.split{sizes=[s \\ 2,
s / 2]}` on `real[s|10]`, compose into ops whose attributes are run-time integers (`Dyn`: known
only by their symbolic text and bounds). The composer replaces each such value by a
`RuntimeExtent`: the expression (the Dyn's text, which is SkriptND syntax) and where each of its
symbols is found, a dimension of a main graph input. Float execution evaluates it from the actual
input shapes before running the op (`resolve`). A Dyn whose symbols are not all dimensions of graph
inputs stays as it is; executing that op is a located UnsupportedError.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ...errors import QsimError, UnsupportedError
from ..evaluate import Evaluator, free_names
from ..parser import parse_expr
from ..values import Dyn


@dataclass(frozen=True)
class RuntimeExtent:
    """An int attribute value known when the graph runs: `text` over `symbols` (name, input, axis)."""
    text: str
    symbols: tuple
    lo: int | None = None
    hi: int | None = None

    def __str__(self) -> str:
        return self.text


def record_symbols(symbols: dict, tensor_name: str, shape: tuple) -> None:
    """Remembers the dynamic extents of a main graph input that a plain symbol names (`h|100`)."""
    for axis, d in enumerate(shape):
        if isinstance(d, Dyn) and d.key.isidentifier() and d.key not in symbols:
            symbols[d.key] = (tensor_name, axis)


def bind(value: Any, symbols: Mapping[str, tuple]) -> Any:
    """`value` (an attribute) with every Dyn whose symbols are graph input extents made evaluable."""
    if isinstance(value, tuple):
        return tuple(bind(v, symbols) for v in value)
    if not isinstance(value, Dyn) or value.kind != "int":
        return value
    try:
        names = free_names(parse_expr(value.key))
    except QsimError:
        return value
    if not names or not names <= symbols.keys():
        return value
    return RuntimeExtent(value.key, tuple((n,) + tuple(symbols[n]) for n in sorted(names)), value.lo, value.hi)


def has_runtime(value: Any) -> bool:
    if isinstance(value, tuple):
        return any(has_runtime(v) for v in value)
    return isinstance(value, (RuntimeExtent, Dyn))


def resolve(value: Any, shapes: Mapping[str, tuple], what: str) -> Any:
    """`value` with run-time extents evaluated from the shapes of graph inputs."""
    if isinstance(value, tuple):
        return tuple(resolve(v, shapes, what) for v in value)
    if isinstance(value, Dyn):
        raise UnsupportedError(f"{what}: an attribute depends on the run-time extent '{value.key}', which "
                               "is not a dimension of a main graph input, so it cannot be evaluated",
                               hint="name the dynamic extent by a symbol of a graph input, as in real[s|10]")
    if not isinstance(value, RuntimeExtent):
        return value
    env = {}
    for name, tensor, axis in value.symbols:
        if tensor not in shapes:
            raise UnsupportedError(f"{what}: the run-time extent '{name}' (dimension {axis} of graph input "
                                   f"'{tensor}') is not known inside this subgraph")
        env[name] = int(shapes[tensor][axis])
    result = Evaluator(env, what).eval(parse_expr(value.text))
    return int(result) if isinstance(result, (int, np.integer)) else result
