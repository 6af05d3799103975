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
    """Forgets every packed weight and every PerAttrs entry (what was worked out from attribute
    arrays), after an attribute array was changed in place against the contract."""
    _packed.clear()
    for cache in _per_attrs:
        cache.clear()


_per_attrs: list["PerAttrs"] = []


class PerAttrs:
    """What an op works out from its attribute mapping (and a key: input shapes, dtypes, ISA),
    found again by the mapping's identity: id(attrs) -> (attrs, key, value). The mapping is held,
    so its id cannot name another one while the entry lives. Relies on an op's attribute mapping
    never being changed in place: passes make new ops with new mappings, and a bound TOSA call's
    normalized attributes (tosa.validate) are made once and only read (docs/runtime.md, per-call
    costs). At most `kept` entries (then all cleared), so mappings of finished calls are not held
    for long."""

    def __init__(self, kept: int = 4096):
        self.kept = kept
        self._entries: dict[int, tuple] = {}
        _per_attrs.append(self)       # module-level caches only: clear_packed_cache clears them

    def get(self, attrs, key, make: Callable[[], T]) -> T:
        hit = self._entries.get(id(attrs))
        if hit is not None and hit[0] is attrs and hit[1] == key:
            return hit[2]
        value = make()
        if len(self._entries) >= self.kept:
            self._entries.clear()
        self._entries[id(attrs)] = (attrs, key, value)
        return value

    def clear(self) -> None:
        self._entries.clear()
