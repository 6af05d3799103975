"""Float (numpy) implementations of the SkriptND standard operators (NNEF 2.0 chapter 4).

One module per stdlib module (stdlib/<name>.sknd): math, layout, nn, image, algo (linalg and
quant operators live with the family they share code with); base.py holds the registry
`OPS` (qualified name -> `impl(inputs, attrs) -> list[np.ndarray]`) and shared helpers.
Importing this package registers every operator.
"""
from __future__ import annotations

from . import algo, image, layout, math, nn  # noqa: F401  (each family registers its operators)
from .base import OPS, run_op

__all__ = ["OPS", "run_op"]
