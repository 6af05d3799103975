"""Which function computes a validated TOSA call on a backend: the compiled kernel
(backend="kernels") or the numpy reference (backend="reference"), the same bits. Operators the
registry lists as ON_REFERENCE, and the floating-point modes, run the reference on either backend.
qsim.kernels registers backend="kernels" of qsim.tosa.run (the public one-operator call,
docs/tosa.md) with it; the executor's TOSA runner asks `implementation` directly.
"""
from __future__ import annotations

from .extensions import extension
from .registry import kernel_for


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

