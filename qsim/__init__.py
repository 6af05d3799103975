"""qsim: bit-exact integer quantization and NPU simulation of NNEF models."""
from __future__ import annotations

__version__ = "0.1.0"

from .loader import load  # noqa: E402  (qsim.load(path) -> ir.Graph)
