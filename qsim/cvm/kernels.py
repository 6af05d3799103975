"""Attaches the Cython kernels (qsim.kernels._cvm_conv) to conv2d and dense.

These two are the CVM operators with a compiled kernel (KERNEL_OPS); every other CVM operator
runs its numpy reference on both backends by design. The kernels run the TOSA GEMM
(kernels/qgemm.h) on the ISA path chosen in qsim.kernels.cpu_features and take int8 operands: qsim.cvm
checks precision <= 8 first, so the narrowing is exact. The extension is loaded at the first
kernels-backend call: a missing or broken build raises KernelsUnavailableError
(qsim.kernels.extensions), never a silent fallback to the reference.
"""
from __future__ import annotations

import dataclasses

from ..kernels.cpu_features import current_isa
from ..kernels.extensions import extension
from .opdef import OPS


def _cvm_conv():
    return extension("_cvm_conv")


def _bias(inputs):
    return inputs[2] if len(inputs) > 2 else None


def conv2d_kernel(inputs, attrs):
    (ph, pw), (sh, sw), (dh, dw) = attrs["padding"], attrs["stride"], attrs["dilation"]
    return [_cvm_conv().conv2d(current_isa().code, inputs[0], inputs[1], _bias(inputs), ph, pw, sh, sw, dh, dw, attrs["groups"])]


def dense_kernel(inputs, attrs):
    return [_cvm_conv().dense(current_isa().code, inputs[0], inputs[1], _bias(inputs))]


KERNEL_OPS = {"conv2d": conv2d_kernel, "dense": dense_kernel}

for _name, _fn in KERNEL_OPS.items():
    OPS[_name] = dataclasses.replace(OPS[_name], kernel=_fn)
