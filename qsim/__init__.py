"""qsim: bit-exact integer quantization and NPU simulation of NNEF models."""
from __future__ import annotations

__version__ = "0.1.0"
