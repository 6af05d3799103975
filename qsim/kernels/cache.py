"""Caches for the kernels: packed weights keyed by array identity, index tables by geometry.

TOSA Base Inference weights are attributes, i.e. constants: the kernels pack each weight array
once per ISA and reuse the packed form while that array object lives. The key is the array's
identity, held through a weak reference so a freed array's id cannot alias a new one. The
contract (docs/kernels.md): an attribute array must not be modified in place after it has been
used; call clear_packed_cache() if you must.
"""
from __future__ import annotations

import weakref
from typing import Callable, TypeVar

import numpy as np

T = TypeVar("T")

_packed: dict[tuple, tuple[weakref.ref, object]] = {}


def packed_for(array: np.ndarray, variant: tuple, build: Callable[[], T]) -> T:
    """build() once per (array object, variant); later calls return the stored result."""
    key = (id(array), variant)
    hit = _packed.get(key)
    if hit is not None and hit[0]() is array:
        return hit[1]  # type: ignore[return-value]
    value = build()
    try:
        ref = weakref.ref(array, lambda _r, k=key: _packed.pop(k, None))
    except TypeError:       # not weak-referenceable: do not cache
        return value
    _packed[key] = (ref, value)
    return value


def clear_packed_cache() -> None:
    _packed.clear()
