"""Values of the @lower interpreter beyond the compile-time ones (NNEF 2.0 2.4, 2.12): indices
of a tensor access (guarded, remapped, whole ranges), a tensor pack indexed at run time, and the
interpreter's located error. Scalars, packs and null are the evaluator's (values.py); run-time
values are numpy arrays (lower/access.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import ast as A
from ...errors import SemanticError


class LowerError(SemanticError):
    pass


def fail(node: A.Node | None, message: str, hint: str | None = None):
    raise LowerError(message, location=getattr(node, "loc", None), hint=hint)


@dataclass(frozen=True)
class GuardIdx:
    """A guarded (low/high None) or remapped index of a tensor access."""
    value: Any
    low: Any = None
    high: Any = None
    remap: bool = False


@dataclass(frozen=True)
class FullRange:
    """`:` as a tensor index: the whole extent, as a pack (packed assignment, 2.12)."""
    begin: Any = None
    end: Any = None
    step: Any = None


@dataclass(frozen=True)
class StackedPack:
    """A tensor pack indexed by a run-time value (`xs[y[i..]]`): stacked, item index first."""
    array: np.ndarray
    item: Any


def pack_positions(ix, extent: int):
    """The positions a packed index covers in a dimension of `extent`: a `:` range or a pack."""
    return range(extent)[slice(ix.begin, ix.end, ix.step)] if isinstance(ix, FullRange) else ix


def resolve_guard(ix, extent: int):
    """(index, valid): the index a guarded or remapped index stands for in a dimension of
    `extent`, and where a guard holds (None: everywhere; a plain index passes through)."""
    if not isinstance(ix, GuardIdx):
        return ix, None
    v = ix.value
    if ix.remap:
        return np.where(np.less(v, 0), ix.low, np.where(np.greater_equal(v, extent), ix.high, v)), None
    return v, (np.asarray(v) >= 0) & (np.asarray(v) < extent)


def scalar(v):
    """numpy 0-d results back to Python scalars (compile-time values stay Python)."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray) and v.ndim == 0:
        return v.item()
    return v
