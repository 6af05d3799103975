"""qsim: bit-exact integer quantization and NPU simulation of NNEF models."""
from __future__ import annotations

from . import _checkout
_checkout.map_sibling_folders()  # before anything imports qsim.hw or qsim.stdlib

from . import cvm, tosa  # noqa: F401  (the integer dialects register their text forms: qsim.load
#                          gives a quantized model's ops in the IR form their runners take)
from .loader import load  # qsim.load(path) -> ir.Graph
from .version import __version__

__all__ = ["load", "__version__"]
