"""`qsim.kernels.run`: one TOSA operator on numpy arrays, validated by qsim.tosa (ERROR_IF), then
computed by the compiled kernel (backend="kernels", the default) or the numpy reference
(backend="reference"); both give the same bits. Operators the registry lists as ON_REFERENCE,
and the floating-point modes, run the reference on either backend. See docs/tosa.md.
"""
from __future__ import annotations

import numpy as np

from ..errors import UsageError
from .backend import BACKENDS
from ..tosa.run import execute_call, prepare
from .extensions import extension
from .registry import kernel_for



def run(op: str, inputs: list, attrs: dict | None = None, backend: str = "kernels") -> list[np.ndarray]:
    """Like qsim.tosa.run (same arguments and results), on the chosen backend."""
    if backend not in BACKENDS:
        raise UsageError(f"{op}: unknown backend {backend!r}", hint="use 'kernels' or 'reference'")
    call, arrays = prepare(op, inputs, attrs)
    return execute_call(call, arrays, implementation(call, backend))


def implementation(call, backend: str):
    """What computes a validated call on `backend`: its kernel for an integer (Base Inference)
    mode on backend="kernels" when it has one, else the reference. On backend="kernels" a
    missing or broken build fails every call, those run on the reference included: never a
    silent switch (KernelsUnavailableError)."""
    if backend == "kernels":
        extension("_tosa_ops")          # a dict lookup once loaded
    if backend == "kernels" and call.mode.profile == "BI":
        kernel = kernel_for(call.opdef.name)
        if kernel is not None:
            return kernel
    return call.opdef.ref
