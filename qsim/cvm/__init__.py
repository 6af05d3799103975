"""CVM integer operators with precision semantics (cvm-formalization; docs/cvm.md).

Importing this package defines every operator (qsim.cvm.OPS) and registers the ir op
kinds "cvm.<name>" with their verifier. The executor (qsim.runtime, a later stage) runs
"cvm" ops through `runner`.
"""
from __future__ import annotations

from . import broadcast, elemwise, nms, nn, reduce, transform  # noqa: F401  (define the operators)
from . import kernels as _kernels  # noqa: F401  (attaches the Cython kernels to conv2d / dense)
from . import sknd_form as _sknd_form  # noqa: F401  (registers the text form with the front end)
from .graph import register_kinds, runner, tensor_precision, verify_op
from .opdef import OPS, lookup
from .precision import alpha, magnitude_bits, required_precision
from .run import CvmResult, infer, run, run_with_precision

register_kinds()

__all__ = ["OPS", "CvmResult", "alpha", "infer", "lookup", "magnitude_bits", "required_precision",
           "run", "run_with_precision", "runner", "tensor_precision", "verify_op"]
