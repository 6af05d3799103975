"""KERNELS: TOSA operator name -> fast kernel, with the reference's call form.

`KERNELS[op](inputs, attrs) -> list[np.ndarray]`: inputs in the spec's Input order, attrs by
the spec's attribute names (weight, bias, multiplier, shift, table as numpy arrays; pad,
stride, dilation, kernel as int tuples; zero points as ints; out_t a numpy dtype name or
"int48"). qsim.tosa.run validates first (ERROR_IF) and then calls these; operators missing here
run on the reference. When a kernel cannot prove that no accumulator overflows (TOSA REQUIRE),
it hands the call to the reference, which evaluates the spec's exact order and raises.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import elementwise_ops, gemm_ops, simple_ops
from .gemm_ops import NeedsReference

Kernel = Callable[[list, dict], list]


def _or_reference(op: str, fn: Kernel) -> Kernel:
    def run(inputs: list, attrs: dict) -> list[np.ndarray]:
        try:
            return fn(inputs, attrs)
        except NeedsReference:
            from .. import tosa
            return tosa.run(op, inputs, attrs, backend="reference")
    run.__name__ = f"kernel_{op.lower()}"
    run.__doc__ = fn.__doc__
    return run


KERNELS: dict[str, Kernel] = {op: _or_reference(op, fn) for op, fn in {
    "CONV2D": gemm_ops.conv2d,
    "CONV3D": gemm_ops.conv3d,
    "TRANSPOSE_CONV2D": gemm_ops.transpose_conv2d,
    "FULLY_CONNECTED": gemm_ops.fully_connected,
    "MATMUL": gemm_ops.matmul,
    "DEPTHWISE_CONV2D": simple_ops.depthwise_conv2d,
    "AVG_POOL2D": simple_ops.avg_pool2d,
    "MAX_POOL2D": simple_ops.max_pool2d,
    "RESCALE": simple_ops.rescale,
    "TABLE": simple_ops.table,
    "CLAMP": simple_ops.clamp,
    "ADD": elementwise_ops.add,
    "SUB": elementwise_ops.sub,
    "MAXIMUM": elementwise_ops.maximum,
    "MINIMUM": elementwise_ops.minimum,
    "MUL": elementwise_ops.mul,
    "REDUCE_SUM": elementwise_ops.reduce_sum,
    "REDUCE_MAX": elementwise_ops.reduce_max,
    "REDUCE_MIN": elementwise_ops.reduce_min,
}.items()}
