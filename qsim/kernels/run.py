"""Deprecated: `qsim.kernels.run.run` is `qsim.tosa.run` (the same arguments, backend= included).

Kept so that code written against the old name keeps working; it warns once on import.
"""
import warnings

from ..tosa.run import run  # noqa: F401
from .dispatch import implementation  # noqa: F401

warnings.warn("qsim.kernels.run is deprecated: call qsim.tosa.run(op, inputs, attrs, backend=...)",
              DeprecationWarning, stacklevel=2)
