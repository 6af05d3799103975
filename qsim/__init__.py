"""qsim: bit-exact integer quantization and NPU simulation of NNEF models."""
from __future__ import annotations

from .loader import load  # qsim.load(path) -> ir.Graph
from .version import __version__

__all__ = ["load", "__version__"]
