"""Float (numpy) implementations of the SkriptND standard operators (NNEF 2.0 chapter 4).

One module per stdlib module (stdlib/<name>.sknd): math, layout, nn, image, algo (linalg and
quant operators live with the family they share code with), nn in three (nn: linear and
convolutions, nn_pool: pooling, nn_norm: activations, normalizations, softmax, LSTM); base.py holds the registry
`OPS` (qualified name -> `impl(inputs, attrs) -> list[np.ndarray]`) and shared helpers.
Importing this package registers every operator and keeps freed memory for the next
inference (memory.py: glibc would otherwise hand each inference's activations back to the
kernel and fault them in again).
"""
from __future__ import annotations

from . import algo, image, layout, math, nn, nn_norm, nn_pool  # noqa: F401  (each family registers its operators)
from .base import OPS, run_op
from .memory import keep_freed_memory

keep_freed_memory()

__all__ = ["OPS", "run_op"]
