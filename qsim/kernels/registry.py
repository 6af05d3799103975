"""What backend="kernels" runs for each TOSA operator: KERNELS (compiled) or ON_REFERENCE.

`KERNELS[op](inputs, attrs) -> list[np.ndarray]`: inputs in the spec's Input order, attrs by
the spec's attribute names (weight, bias, multiplier, shift, table as numpy arrays; pad,
stride, dilation, kernel as int tuples; zero points as ints; out_t a numpy dtype name or
"int48"). qsim.tosa.run validates first (ERROR_IF) and then calls these. When a kernel cannot
prove that no accumulator overflows (TOSA REQUIRE), it hands the call to the reference, which
evaluates the spec's exact order and raises.

ON_REFERENCE names the operators that have no compiled kernel by design; the kernels backend
runs the numpy reference for them. Every TOSA operator is in exactly one of the two tables
(tests/kernels/test_registry.py). Importing this module loads the compiled extension: a
missing or broken build raises KernelsUnavailableError here (qsim.kernels.extensions).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .. import tosa
from . import elementwise_ops, gemm_ops, unary_ops, window_ops
from .gemm_ops import NeedsReference

Kernel = Callable[[list, dict], list]


def _or_reference(op: str, fn: Kernel) -> Kernel:
    def run(inputs: list, attrs: dict) -> list[np.ndarray]:
        try:
            return fn(inputs, attrs)
        except NeedsReference:
            return tosa.run(op, inputs, attrs, backend="reference")  # validates again: a direct call may be invalid
    run.__name__ = f"kernel_{op.lower()}"
    run.__doc__ = fn.__doc__
    return run


KERNELS: dict[str, Kernel] = {op: _or_reference(op, fn) for op, fn in {
    "CONV2D": gemm_ops.conv2d,
    "CONV3D": gemm_ops.conv3d,
    "TRANSPOSE_CONV2D": gemm_ops.transpose_conv2d,
    "FULLY_CONNECTED": gemm_ops.fully_connected,
    "MATMUL": gemm_ops.matmul,
    "DEPTHWISE_CONV2D": window_ops.depthwise_conv2d,
    "AVG_POOL2D": window_ops.avg_pool2d,
    "MAX_POOL2D": window_ops.max_pool2d,
    "RESCALE": unary_ops.rescale,
    "TABLE": unary_ops.table,
    "CLAMP": unary_ops.clamp,
    "ADD": elementwise_ops.add,
    "SUB": elementwise_ops.sub,
    "MAXIMUM": elementwise_ops.maximum,
    "MINIMUM": elementwise_ops.minimum,
    "MUL": elementwise_ops.mul,
    "REDUCE_SUM": elementwise_ops.reduce_sum,
    "REDUCE_MAX": elementwise_ops.reduce_max,
    "REDUCE_MIN": elementwise_ops.reduce_min,
}.items()}


# The kernels that also compute a RESCALE (and the CLAMP after it) of their int32 accumulators
# block by block, so the accumulators never go to memory as a whole tensor (the executor's
# integer fusion, runtime/int_fusion.py; CONV3D's rank-5 output is no RESCALE input):
# fn(inputs, attrs, then_rescale=(RESCALE attributes, CLAMP (min_val, max_val) or None))
# returns the RESCALE's (or CLAMP's) output.
RESCALING: dict[str, Kernel] = {
    "CONV2D": gemm_ops.conv2d,
    "TRANSPOSE_CONV2D": gemm_ops.transpose_conv2d,
    "FULLY_CONNECTED": gemm_ops.fully_connected,
    "MATMUL": gemm_ops.matmul,
    "DEPTHWISE_CONV2D": window_ops.depthwise_conv2d,
}


def rescaled(op: str, inputs: list, attrs: dict, rescale_attrs: dict, clamp) -> np.ndarray | None:
    """The output of RESCALE (attributes `rescale_attrs`) of TOSA operator `op`'s output, then of
    CLAMP to `clamp` = (min_val, max_val) when given, computed in one kernel call; every call
    already validated. None when the kernel does not fuse this case (16-bit modes, an unproven
    accumulator bound, int48 output, a failed REQUIRE): the caller then runs the ops apart,
    which gives the same values or raises the spec's error."""
    try:
        out, = RESCALING[op](inputs, attrs, then_rescale=(rescale_attrs, clamp))
    except NeedsReference:
        return None
    return out


# Operators without a compiled kernel by design, with the reason. The reference is already
# vectorized numpy (or the operator has no integer arithmetic worth compiling).
ON_REFERENCE: dict[str, str] = {
    **dict.fromkeys(("CONCAT", "CONST", "IDENTITY", "PAD", "RESHAPE", "REVERSE", "SLICE", "TILE",
                     "TRANSPOSE", "GATHER", "SCATTER", "SELECT"),
                    "data movement: numpy indexing, no arithmetic"),
    **dict.fromkeys(("ABS", "NEGATE", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_NOT",
                     "BITWISE_OR", "BITWISE_XOR", "LOGICAL_AND", "LOGICAL_NOT", "LOGICAL_OR",
                     "LOGICAL_XOR", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "CLZ", "INTDIV",
                     "EQUAL", "GREATER", "GREATER_EQUAL", "REDUCE_ALL", "REDUCE_ANY", "ARGMAX",
                     "CAST", "RESIZE"),
                    "one vectorized numpy expression per element; a kernel would not be faster"),
    **dict.fromkeys(("COND_IF", "WHILE_LOOP"), "control flow: runs its body graphs on the same backend"),
    **dict.fromkeys(("CEIL", "EXP", "FLOOR", "LOG", "POW", "RECIPROCAL", "REDUCE_PRODUCT", "RSQRT",
                     "SIGMOID", "TANH"), "floating-point only (MI profile): no integer mode"),
}


def kernel_for(op: str) -> Kernel | None:
    """The compiled kernel of TOSA operator `op` (spec name), or None when it runs on the
    reference by design (ON_REFERENCE). An operator in neither table is a qsim bug."""
    kernel = KERNELS.get(op)
    if kernel is None and op not in ON_REFERENCE:
        raise LookupError(f"TOSA operator {op} is neither in KERNELS nor in ON_REFERENCE "
                          "(qsim/kernels/registry.py): decide how the kernels backend runs it")
    return kernel
