"""The float operator registry and the helpers every family of standard operators shares.

Each operator `<module>.<name>` has one function `impl(inputs, attrs) -> list[np.ndarray]`:
`inputs` in declaration order (None for an omitted optional input, a list for a packed input),
`attrs` the operator's attributes by their spec names. Missing attributes take the spec's
defaults; packed attributes accept a single (uniform) value (2.5).

These are the execution paths for whole graphs. Each is tested against the @lower
interpreter (the spec's own formulas) on small shapes; operators the spec leaves intrinsic
(ROI pools, cubic resampling, top_k, nonmax_suppress) are defined here only.

Numbers: `real` computes in the input's float dtype (f32 models stay f32), `int` results are
int64. Rounding (`round`), integer division and erf are qsim.numerics'.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ...errors import SemanticError, UnsupportedError
from ...limits import check_tensor_size

Impl = Callable[[list, Mapping[str, Any]], list]
OPS: dict[str, Impl] = {}


def register(*names: str):
    """Decorator: registers `fn` as the implementation of the qualified operator names."""
    def wrap(fn: Impl) -> Impl:
        for name in names:
            OPS[name] = fn
        return fn
    return wrap


def run_op(name: str, inputs: Sequence, attrs: Mapping[str, Any]) -> list[np.ndarray]:
    """Executes operator `name` (qualified, e.g. "nn.conv") on numpy inputs. `attrs` may be the
    op's own mapping: implementations read it and never change it."""
    fn = OPS.get(name)
    if fn is None:
        raise UnsupportedError(f"no float implementation of operator {name!r}",
                               hint="qsim executes the chapter 4 standard operators; "
                                    "compose custom operators from them")
    inputs = list(inputs)
    if not _all_real(inputs):
        return fn(inputs, attrs)
    # IEEE 754 defines what overflow, 0/0 and the like give (sigmoid(-1e30) = 1/(1+inf) = 0, exp
    # of 1e30 = inf, sqrt(-1) = nan): those are the operators' float results, bit for bit as
    # without the errstate, and numpy's RuntimeWarnings about them are noise to a user. Integer
    # inputs keep numpy's warnings (a division by zero there has no IEEE value).
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        return fn(inputs, attrs)


def _all_real(inputs: list) -> bool:
    """Whether every array input (packed ones too) holds floats or bools."""
    for value in inputs:
        if isinstance(value, list):
            if not _all_real(value):
                return False
        elif value is not None and np.asarray(value).dtype.kind not in "fb":
            return False
    return True


def fail(op: str, message: str, hint: str = "") -> None:
    raise SemanticError(f"{op}: {message}", hint=hint)


# ---- attribute helpers -------------------------------------------------------------------

def check_alloc(op: str, shape, dtype, what: str = "result") -> None:
    """Before allocating an array whose size comes from the model (attributes, extents):
    refuses it past the tensor limit (qsim.limits), naming the operator."""
    check_tensor_size([int(d) for d in shape], np.dtype(dtype).itemsize, f"{op} {what}")


def pack(value: Any, length: int, op: str = "", name: str = "") -> tuple:
    """A packed attribute as a tuple of `length` items; a single value is uniform (2.5)."""
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        if len(value) != length:
            fail(op, f"attribute '{name}' has {len(value)} items, expected {length}",
                 hint=f"give {length} values or a single one")
        return tuple(value)
    return (value,) * length


def seq(value: Any) -> tuple:
    """A packed attribute of free length as a tuple (a single value is a 1-pack)."""
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


def norm_axes(axes: Any, rank: int, op: str) -> tuple[int, ...]:
    """Axes with negative values corrected; checks range and distinctness."""
    out = []
    for a in seq(axes):
        a = int(a)
        if not -rank <= a < rank:
            fail(op, f"axis {a} out of range for rank {rank}",
                 hint="axes must be between -input.rank (inclusive) and input.rank (exclusive)")
        out.append(a + rank if a < 0 else a)
    if len(set(out)) != len(out):
        fail(op, f"axes {list(seq(axes))} are not distinct")
    return tuple(out)


def norm_axis(axis: Any, rank: int, op: str) -> int:
    return norm_axes((axis,), rank, op)[0]


def real_dtype(*arrays) -> np.dtype:
    """Float dtype of a computation: that of the float inputs (f32 stays f32)."""
    dts = [a.dtype for a in arrays if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    return np.result_type(*dts) if dts else np.dtype(np.float32)

