"""ADD, SUB, MAXIMUM, MINIMUM, MUL (with broadcasting) and REDUCE_SUM/MAX/MIN on the C kernels
of kernels/qelem.h.

Inputs arrive validated by qsim.tosa (same rank, each dimension equal to the output's or 1:
spec 1.8.4). Broadcasting becomes element strides (0 along a broadcast dimension), and
dimensions that are contiguous in the output and in both inputs are merged, so the common
cases (same shape, scalar-like operand, per-channel vector) run as one long inner loop. When a
kernel reports a REQUIRE failure (a result outside int32) the call goes to the reference,
which evaluates it in the spec's terms and raises the spec's message.
"""
from __future__ import annotations

import numpy as np

from .cache import PerAttrs
from .extensions import extension
from .gemm_ops import NeedsReference
from .cpu_features import current_isa

_tosa_ops = extension("_tosa_ops")   # raises KernelsUnavailableError when missing or broken

_OPS = {"ADD": 0, "SUB": 1, "MAXIMUM": 2, "MINIMUM": 3, "MUL": 4}
_REDUCE_KINDS = {"REDUCE_SUM": 0, "REDUCE_MAX": 1, "REDUCE_MIN": 2}


def _c_order(x: np.ndarray) -> np.ndarray:
    """C-contiguous x of the same shape (np.ascontiguousarray turns rank 0 into rank 1)."""
    return x if x.flags.c_contiguous else np.ascontiguousarray(x).reshape(x.shape)


def _element_strides(shape: tuple, out_shape: tuple) -> list[int]:
    """C-order element strides of an array of `shape` read at output indices (0: broadcast)."""
    strides, step = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = step if shape[d] == out_shape[d] else 0
        step *= shape[d]
    return strides


def _collapse(out_shape: tuple, sa: list[int], sb: list[int]):
    """Drops extent-1 dimensions and merges neighbours that are contiguous for both inputs."""
    dims = [(n, a, b) for n, a, b in zip(out_shape, sa, sb) if n != 1] or [(1, 0, 0)]
    merged = [dims[-1]]
    for n, a, b in reversed(dims[:-1]):
        n_in, a_in, b_in = merged[0]
        if a == a_in * n_in and b == b_in * n_in:
            merged[0] = (n * n_in, a_in, b_in)
        else:
            merged.insert(0, (n, a, b))
    return [np.array(v, dtype=np.int64) for v in zip(*merged)]


# per binary op's attribute mapping and operand shapes: the output shape and the collapsed
# strides, worked out once per op (docs/runtime.md, per-call costs); None: more dimensions than
# the kernel takes (the reference runs it)
_binary_plans = PerAttrs(1024)


def _binary_plan(a_shape: tuple, b_shape: tuple):
    out_shape = tuple(max(p, q) for p, q in zip(a_shape, b_shape))
    shape, sa, sb = _collapse(out_shape, _element_strides(a_shape, out_shape), _element_strides(b_shape, out_shape))
    for v in (shape, sa, sb):         # shared by the op's calls: the kernel only reads them
        v.flags.writeable = False
    return out_shape, (None if shape.size > _tosa_ops.EW_RANK else (shape, sa, sb))


def _binary(op: str):
    code = _OPS[op]

    def kernel(inputs, attrs):
        a, b = (_c_order(x) for x in inputs)
        if a.dtype.kind != "i":
            raise NeedsReference          # not an integer mode of these kernels
        out_shape, strides = _binary_plans.get(attrs, (a.shape, b.shape), lambda: _binary_plan(a.shape, b.shape))
        out = np.empty(out_shape, dtype=np.int32)
        if out.size == 0:
            return [out]
        if strides is None:
            raise NeedsReference
        shift = int(attrs.get("shift", 0)) if op == "MUL" else 0
        if _tosa_ops.elementwise(current_isa().code, code, a, b, out, *strides, shift):
            raise NeedsReference          # REQUIRE failed: the reference raises its message
        return [out]
    kernel.__name__ = op.lower()
    kernel.__doc__ = f"TOSA {op} with broadcasting on qelem.h."
    return kernel


def _reduction(op: str):
    kind = _REDUCE_KINDS[op]

    def kernel(inputs, attrs):
        x = _c_order(inputs[0])
        if x.dtype.kind != "i":
            raise NeedsReference
        axis = int(attrs["axis"])
        out_shape = tuple(1 if d == axis else n for d, n in enumerate(x.shape))
        out = np.empty(out_shape, dtype=x.dtype)
        if x.size == 0:
            raise NeedsReference          # the reference defines the empty cases
        outer = int(np.prod(x.shape[:axis], dtype=np.int64))
        inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
        if _tosa_ops.reduce(current_isa().code, kind, x, outer, x.shape[axis], inner, out):
            raise NeedsReference
        return [out]
    kernel.__name__ = op.lower()
    kernel.__doc__ = f"TOSA {op} along one axis on qelem.h."
    return kernel


add, sub, maximum, minimum, mul = (_binary(op)
                                   for op in ("ADD", "SUB", "MAXIMUM", "MINIMUM", "MUL"))
reduce_sum, reduce_max, reduce_min = (_reduction(op)
                                      for op in ("REDUCE_SUM", "REDUCE_MAX", "REDUCE_MIN"))
