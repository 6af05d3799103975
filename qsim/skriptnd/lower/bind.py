"""Binding one operator invocation for the @lower interpreter (NNEF 2.0 2.5, 2.6, 2.9, 2.13).

The binding is composition's (compose/instance.py `instantiate`, binding.py): the invocation is
instantiated on probes of its input arrays (their element types and shapes), which runs the
evaluation sequence of 2.6.2 (generic types, attributes, inputs in the definition's binding
order, deferred defaults, uniform packs) and @using/@assert interleaved as 2.9 prescribes. What
is the interpreter's own: the environment its formulas run in holds the input arrays themselves
(reals as float64, ints as int64: the reference precision), the @constant tensors, and the
output shapes with data-dependent extents (`k|bound`, 2.12) left open.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import ast as A
from ...errors import SemanticError
from ..compose.instance import instantiate
from ..evaluate import Evaluator
from ..values import Dyn, TensorValue, TypeValue
from .access import Lowering

REAL, INT, BOOL = np.float64, np.int64, np.bool_
NUMPY = {"real": REAL, "int": INT, "bool": BOOL}
_KIND = {"f": "real", "i": "int", "u": "int", "b": "bool"}


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
    """An attribute value as a compile-time value: lists as packs, numpy scalars as Python's."""
    if isinstance(v, np.ndarray) and v.ndim == 0:
        return v.item()
    if isinstance(v, (list, tuple, np.ndarray)):
        return tuple(_norm(x) for x in (v.tolist() if isinstance(v, np.ndarray) else v))
    if isinstance(v, np.generic):
        return v.item()
    return v


def _probe(name: str, array: np.ndarray) -> TensorValue:
    kind = _KIND.get(array.dtype.kind)
    if kind is None:
        raise SemanticError(f"input '{name}' is a {array.dtype} array; @lower computes on real, int "
                            "and bool tensors")
    return TensorValue(name, kind, tuple(int(d) for d in array.shape))


def _probes(decl: A.ParamDecl, value):
    """The instantiation's view of an actual input: a TensorValue per array (a pack: a tuple)."""
    if value is None:
        return None, None
    if decl.type.pack is not None:
        if not isinstance(value, (list, tuple)):
            raise SemanticError(f"input '{decl.name}' is a pack; give a list of tensors",
                                location=decl.loc)
        arrays = [np.asarray(v) for v in value]
        return tuple(_probe(f"{decl.name}[{k}]", a) for k, a in enumerate(arrays)), arrays
    array = np.asarray(value)
    return _probe(decl.name, array), array


def bind(op: A.OperatorDef, inputs: list, attrs: dict, generics: dict | None = None) -> Binding:
    """Binds an invocation of `op` with `inputs` (declaration order; None = omitted)."""
    where = f"operator '{op.name}'"
    if len(inputs) > len(op.inputs):
        raise SemanticError(f"{where}: {len(inputs)} inputs given, it declares {len(op.inputs)}",
                            location=op.loc)
    inputs = list(inputs) + [None] * (len(op.inputs) - len(inputs))
    probes, arrays = zip(*(_probes(d, v) for d, v in zip(op.inputs, inputs))) if inputs else ((), ())
    given = generics or {}
    leading = [d.name for d in op.dtypes[:len(given)]]
    if set(given) != set(leading):
        raise SemanticError(f"{where}: generic types are given in declaration order "
                            f"({', '.join(d.name for d in op.dtypes)})", location=op.loc)
    inst = instantiate(op, op.name, {k: _norm(v) for k, v in attrs.items()}, {}, list(probes),
                       tuple(given[n] for n in leading), op.loc, where)
    # the symbols of data-dependent output extents stay unbound until the formulas count them
    env = {k: v for k, v in inst.env.items() if not isinstance(v, Dyn)}
    dtypes = {d.name: env[d.name].name for d in op.dtypes if isinstance(env.get(d.name), TypeValue)}
    for decl, array in zip(op.inputs, arrays):
        numpy_type = NUMPY.get(dtypes.get(decl.type.base, decl.type.base))
        if array is None or numpy_type is None:
            env[decl.name] = array
        else:           # the reference precision: reals in float64, ints in int64
            env[decl.name] = [a.astype(numpy_type) for a in array] if isinstance(array, list) \
                else array.astype(numpy_type)
    _bind_constants(op, env, dtypes)
    return Binding(op, env, dtypes, [_output_spec(o, dtypes) for o in inst.outputs])


def _output_spec(out, dtypes) -> OutputSpec:
    """An instantiated output: shapes with data-dependent extents (Dyn) left open as None."""
    dynamic, shapes = {}, []
    for k, shape in enumerate(out.shapes):
        dims = []
        for axis, d in enumerate(shape):
            if isinstance(d, Dyn):
                symbol = d.key if "." not in d.key else None     # `~|ub` has no symbol
                dynamic[symbol] = (k, axis, d.hi)
                dims.append(None)
            else:
                dims.append(int(d))
        shapes.append(tuple(dims))
    return OutputSpec(out.decl.name, NUMPY[out.dtype], shapes, out.packed, dynamic)


def _bind_constants(op: A.OperatorDef, env: dict, dtypes: dict) -> None:
    """@constant tensors (2.7): uniform, listed row-major, or per element over index symbols."""
    lowering = Lowering(dtypes)
    for c in op.constants:
        ev = Evaluator(env, lowering=lowering)
        shape = tuple(int(d) for d in _shape(c, ev))
        dtype = NUMPY[dtypes.get(c.type.base, c.type.base)]
        if c.bounds:
            limits = [ev.eval(b.limit) for b in c.bounds]
            axes = sum(len(v) if isinstance(v, tuple) else 1 for v in limits)
            grid, pos = {}, 0
            for b, lim in zip(c.bounds, limits):
                arrs = []
                for n in (lim if isinstance(lim, tuple) else (lim,)):
                    shp = [1] * axes
                    shp[pos] = n
                    arrs.append(np.arange(n).reshape(shp))
                    pos += 1
                grid[b.index] = tuple(arrs) if isinstance(lim, tuple) else arrs[0]
            value = Evaluator({**env, **grid}, lowering=lowering).eval(c.default)
            value = np.broadcast_to(np.asarray(value, dtype=dtype), shape)
        else:
            value = np.asarray(ev.eval(c.default), dtype=dtype)
            value = value.reshape(shape) if value.ndim else np.full(shape, value, dtype=dtype)
        env[c.name] = np.ascontiguousarray(value)


def _shape(c: A.ParamDecl, ev: Evaluator) -> list:
    dims = []
    for item in c.type.shape or ():
        v = ev.eval(item.extent)
        if v is None:
            continue                                  # null extents are omitted (2.6)
        if item.pack is not None and item.pack.length is not None and not isinstance(v, tuple):
            n = ev.eval(item.pack.length)
            v = (v,) * int(n)
        dims.extend(v if isinstance(v, tuple) else (v,))
    return dims
