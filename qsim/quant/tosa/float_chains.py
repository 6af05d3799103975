"""Chains of element-wise float ops applied to one tensor (a float pattern any target may read).

An element-wise op computes each output element from the same element of its inputs. A chain
is a set of such ops (kinds in ELEMENTWISE) where
- the only computed tensor read from outside the chain is one tensor X; every other input is
  a chain result or a constant holding one value (any shape that does not grow X's);
- every op's result has X's shape;
- the intermediate results are read only inside the chain (not graph outputs, not annotated);
- one float result Y is read outside the chain (or is a graph output).
Then Y = g(X) element by element for one real function g (`ElementwiseChain.function`). A
target that applies any function of one quantized tensor (TOSA TABLE: 256 entries for int8)
lowers the chain as one op that rounds once, instead of one rounding per op: HardSwish and
HardSigmoid as the ONNX importer composes them (mul, add, clamp, mul by x), GELU's erf form
x·0.5·(1 + erf(x/√2)), SiLU x·sigmoid(x), quick-GELU x·sigmoid(1.702x), Mish x·tanh(softplus(x)),
and whatever a front end expands an activation into.

g is evaluated in float64 on the real values of the input codes (the reference functions of
tables.UnaryFunction for the unary operators, NNEF 2.0's definitions for the rest).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ... import ir
from ...numerics import nnef_round
from ..lowering.float_patterns import is_annotated
from ..lowering.float_side import FloatSide
from .tables import UnaryFunction, operator_function

Evaluator = Callable[[ir.Op, list], np.ndarray]


def _unary_function(op: ir.Op, args: list) -> np.ndarray:
    return operator_function(op.kind.name, op.attrs)(args[0])


def _relu(op: ir.Op, args: list) -> np.ndarray:
    # NNEF 2.0 nn.relu: y = max(min(x, max), alpha * x), alpha and max optional
    x = args[0]
    cap, alpha = op.attrs.get("max"), op.attrs.get("alpha")
    capped = x if cap is None else np.minimum(x, float(cap))
    return np.maximum(capped, 0.0 if alpha is None else float(alpha) * x)


def _prelu(op: ir.Op, args: list) -> np.ndarray:
    x, alpha = args
    return np.where(x < 0.0, alpha * x, x)


def _clamp(op: ir.Op, args: list) -> np.ndarray:
    x, lo, hi = args
    return np.minimum(np.maximum(x, lo), hi)


def _binary(fn) -> Evaluator:
    return lambda op, args: fn(args[0], args[1])


ELEMENTWISE: dict[str, Evaluator] = {
    **{u.value: _unary_function for u in UnaryFunction if "." in u.value},
    "nn.relu": _relu, "nn.prelu": _prelu, "math.clamp": _clamp,
    "math.iden": lambda op, args: args[0],
    "math.floor": lambda op, args: np.floor(args[0]),
    "math.ceil": lambda op, args: np.ceil(args[0]),
    "math.round": lambda op, args: nnef_round(args[0]),
    "math.sign": lambda op, args: np.sign(args[0]),
    "math.not": lambda op, args: np.logical_not(args[0]),
    "math.select": lambda op, args: np.where(args[0], args[1], args[2]),
    "math.add": _binary(np.add), "math.sub": _binary(np.subtract),
    "math.mul": _binary(np.multiply), "math.div": _binary(np.divide),
    "math.pow": _binary(np.power), "math.min": _binary(np.minimum), "math.max": _binary(np.maximum),
    "math.lt": _binary(np.less), "math.gt": _binary(np.greater), "math.le": _binary(np.less_equal),
    "math.ge": _binary(np.greater_equal), "math.eq": _binary(np.equal),
    "math.ne": _binary(np.not_equal), "math.and": _binary(np.logical_and),
    "math.or": _binary(np.logical_or), "math.xor": _binary(np.logical_xor),
}


@dataclass(frozen=True)
class ElementwiseChain:
    input: str                     # X, the one computed tensor read from outside
    ops: tuple[ir.Op, ...]         # in graph order
    output: str                    # Y = g(X)
    constants: dict                # constant input name -> its one value (float or bool)

    @property
    def labels(self) -> str:
        """The ops' labels (the user's node names), each once, in graph order."""
        return ", ".join(repr(label) for label in dict.fromkeys(op.label for op in self.ops))

    def function(self) -> Callable[[np.ndarray], np.ndarray]:
        """g: real values of X (a 1-D float64 array) -> real values of Y."""
        def g(x: np.ndarray) -> np.ndarray:
            env = {self.input: np.asarray(x, dtype=np.float64)}
            with np.errstate(all="ignore"):     # rails and NaN are the table builder's to judge
                for op in self.ops:
                    args = [env[n] if n in env else self.constants[n] for n in op.inputs]
                    env[op.outputs[0]] = ELEMENTWISE[op.kind.name](op, args)
            return np.broadcast_to(np.asarray(env[self.output], dtype=np.float64), np.shape(x))
        return g


def _one_value(f: FloatSide, name: str):
    """The single value of constant `name` (all its elements equal), else None."""
    if not f.is_constant(name):
        return None
    data = np.asarray(f.graph.tensor(name).data)
    if data.size == 0:
        return None
    first = data.reshape(-1)[0]
    if not np.all(data == first):
        return None
    return bool(first) if data.dtype == np.bool_ else float(first)


def _joins(f: FloatSide, op: ir.Op, x: str, produced: set[str], shape, constants: dict) -> bool:
    """Whether `op` may join a chain on `x` that has produced `produced` so far."""
    if op.kind.name not in ELEMENTWISE or id(op) in f.fused or len(op.outputs) != 1:
        return False
    if any(n == "" for n in op.inputs) or tuple(f.graph.tensor(op.outputs[0]).shape) != shape:
        return False
    computed = False
    for name in op.inputs:
        if name == x or name in produced:
            computed = True
            continue
        value = _one_value(f, name)
        if value is None:
            return False
        constants[name] = value
    return computed


def elementwise_chain(f: FloatSide, seed: ir.Op) -> ElementwiseChain | None:
    """The largest chain (module doc) containing `seed` whose ops all come at or after `seed`
    in graph order, or None."""
    if seed.kind.name not in ELEMENTWISE or id(seed) in f.fused:
        return None
    computed = [n for n in seed.inputs if n and not f.is_constant(n)]
    if not computed or len(set(computed)) != 1:
        return None
    x = computed[0]
    shape = tuple(f.graph.tensor(x).shape)
    constants: dict = {}
    if not _joins(f, seed, x, set(), shape, constants):
        return None
    position = {id(op): k for k, op in enumerate(f.graph.ops)}
    members = {id(seed): seed}
    produced = set(seed.outputs)
    frontier = [x, *seed.outputs]
    while frontier:
        name = frontier.pop()
        for op in f.consumers(name):
            if id(op) in members or position[id(op)] < position[id(seed)]:
                continue
            if _joins(f, op, x, produced, shape, constants):
                members[id(op)] = op
                produced.update(op.outputs)
                frontier.extend(op.outputs)
    ordered = sorted(members.values(), key=lambda op: position[id(op)])
    # one exit: try the latest result first; the chain is the exit and what it depends on
    for last in reversed(ordered):
        y = last.outputs[0]
        if f.graph.tensor(y).dtype is not ir.DType.F32:
            continue
        chain = _ancestors(last, ordered)
        if seed not in chain:
            continue
        inside = {id(op) for op in chain}
        if all(_internal(f, op.outputs[0], inside) for op in chain if op is not last):
            used = {n for op in chain for n in op.inputs}
            return ElementwiseChain(x, tuple(chain), y, {n: v for n, v in constants.items() if n in used})
    return None


def _ancestors(last: ir.Op, ordered: list[ir.Op]) -> list[ir.Op]:
    """`last` and the ops of `ordered` it depends on, in graph order."""
    needed = set(last.inputs)
    chain = [last]
    for op in reversed(ordered[:ordered.index(last)]):
        if op.outputs[0] in needed:
            chain.append(op)
            needed.update(op.inputs)
    return chain[::-1]


def _internal(f: FloatSide, name: str, inside: set[int]) -> bool:
    """Read only by the chain's ops, not a graph output, not annotated."""
    return (name not in f.graph.outputs and not is_annotated(f, name)
            and all(id(op) in inside for op in f.consumers(name)))
