"""What a self check is, and the element-by-element comparison every check ends in."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import MismatchError


@dataclass(frozen=True)
class SelfCheck:
    name: str
    run: Callable[[np.random.Generator], int]   # returns the number of elements compared


def assert_equal_arrays(what: str, expected: np.ndarray, actual: np.ndarray) -> int:
    """Raises MismatchError naming the first differing index; returns the element count."""
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    if expected.shape != actual.shape:
        raise MismatchError(f"{what}: shape {list(actual.shape)} != expected {list(expected.shape)}")
    diff = np.argwhere(expected != actual)
    if diff.size:
        idx = tuple(int(i) for i in diff[0])
        raise MismatchError(f"{what}: element {list(idx)} is {actual[idx]} but the reference gives "
                            f"{expected[idx]} ({len(diff)} of {expected.size} elements differ)")
    return int(expected.size)
