"""CVM integer operators with precision semantics (cvm-formalization; docs/cvm.md).

Importing this package defines every operator (qsim.cvm.OPS), registers the ir op
kinds "cvm.<name>" with their verifier, and registers the "cvm" dialect with the
executor (qsim.runtime) when that module is present.
"""
from __future__ import annotations

from . import broadcast, elemwise, nms, nn, reduce, transform  # noqa: F401  (define the operators)
from . import kernels as _kernels  # noqa: F401  (attaches the Cython kernels to conv2d / dense)
from . import sknd_form as _sknd_form  # noqa: F401  (registers the text form with the front end)
from .graph import runner, tensor_precision, verify_op
from .opdef import OPS, lookup
from .precision import alpha, magnitude_bits, required_precision
from .run import CvmResult, infer, run, run_with_precision


def _register_dialect() -> bool:
    try:
        from ..runtime import register_dialect
    except ImportError:
        return False
    register_dialect("cvm", runner, needs_graph=True)
    return True


DIALECT_REGISTERED = _register_dialect()

__all__ = ["OPS", "CvmResult", "alpha", "infer", "lookup", "magnitude_bits", "required_precision",
           "run", "run_with_precision", "runner", "tensor_precision", "verify_op"]
