"""Attaches the Cython kernels (qsim.kernels._cvm_conv) to conv2d and dense.

The kernels take int8 operands: qsim.cvm checks precision <= 8 first, so the
narrowing is exact. If the extension is not built, the operators keep running on
the numpy reference and KERNELS_AVAILABLE is False.
"""
from __future__ import annotations

import dataclasses

from .opdef import OPS

try:
    from ..kernels import _cvm_conv
except ImportError:  # not built (python setup.py build_ext --inplace)
    _cvm_conv = None

KERNELS_AVAILABLE = _cvm_conv is not None


def _bias(inputs):
    return inputs[2] if len(inputs) > 2 else None


def conv2d_kernel(inputs, attrs):
    (ph, pw), (sh, sw), (dh, dw) = attrs["padding"], attrs["stride"], attrs["dilation"]
    return [_cvm_conv.conv2d(inputs[0], inputs[1], _bias(inputs), ph, pw, sh, sw, dh, dw, attrs["groups"])]


def dense_kernel(inputs, attrs):
    return [_cvm_conv.dense(inputs[0], inputs[1], _bias(inputs))]


if KERNELS_AVAILABLE:
    for _name, _fn in (("conv2d", conv2d_kernel), ("dense", dense_kernel)):
        OPS[_name] = dataclasses.replace(OPS[_name], kernel=_fn)
