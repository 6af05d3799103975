"""The formalization's "Test Parameter" sweeps and a seeded pool of test data."""
from __future__ import annotations

import itertools

import numpy as np

# X.shape: (i, j, l, r), i={1}, j={1, 14, ..., 92}, l={1, 18, ..., 86}, r={1, 24, ..., 93}
J = (1, 14, 27, 40, 53, 66, 79, 92)
L = (1, 18, 35, 52, 69, 86)
R = (1, 24, 47, 70, 93)
SHAPES = [(1, j, l, r) for j, l, r in itertools.product(J, L, R)]          # 240 shapes

# reduce sweeps: j={1, 34, 67}, l={1, 58}, r={1, 64}
REDUCE_SHAPES = [(1, j, l, r) for j, l, r in itertools.product((1, 34, 67), (1, 58), (1, 64))]

_POOL_SIZE = 92 * 86 * 93 + 4099
_POOL = np.random.default_rng(20261122).integers(-127, 128, _POOL_SIZE, dtype=np.int64).astype(np.int32)


def data(shape, offset: int = 0, scale: int = 1) -> np.ndarray:
    """Deterministic int32 data in [-127, 127] * scale of `shape` (a view-free copy)."""
    n = int(np.prod(shape))
    start = offset % 4096
    x = _POOL[start:start + n].reshape(shape)
    return x * np.int32(scale) if scale != 1 else x.copy()
