"""Integer accumulation with the spec's REQUIRE on every partial sum (spec 3.3.1 apply_add).

The convolution-like operators accumulate `acc = apply_add<out_t>(acc, value * weight)`
in a fixed loop order; the result is unpredictable if any partial sum leaves out_t.
Checking every partial sum of a large convolution is expensive, so `checked_dot`
first uses a bound: every partial sum is at most sum(|value|*|weight|) in magnitude,
so when that (or the cheaper K * max|value| * max|weight|) fits, no partial sum can
overflow. Only the output elements whose bound does not fit get the exact in-order
check. Operands are int64 (|value|, |weight| <= 2^16, K < 2^31: products and sums exact).
"""
from __future__ import annotations

import numpy as np

from ..errors import UnpredictableError
from .arith import INT32_MAX, INT32_MIN, INT48_MAX, INT48_MIN

ACC_BOUNDS = {"int32": (INT32_MIN, INT32_MAX), "int48": (INT48_MIN, INT48_MAX)}


def acc_bounds(out_t: str) -> tuple[int, int]:
    return ACC_BOUNDS[out_t]


def checked_dot(values: np.ndarray, weights: np.ndarray, lo: int, hi: int,
                where=lambda row, col: f"row {row}, column {col}") -> np.ndarray:
    """values [M, K] @ weights [K, OC] in int64, requiring every running sum over K
    (in index order, starting at 0) to stay in [lo, hi]. `where(row, col)` names an
    output element in the error message."""
    values = np.asarray(values, dtype=np.int64)
    weights = np.asarray(weights, dtype=np.int64)
    acc = values @ weights
    k = values.shape[1]
    if k == 0 or values.size == 0 or weights.size == 0:
        return acc
    limit = min(hi, -lo)
    if k * int(np.abs(values).max()) * int(np.abs(weights).max()) <= limit:
        return acc
    bound = np.abs(values) @ np.abs(weights)
    rows, cols = np.nonzero(bound > limit)
    if rows.size:
        # exact: the partial sums of the flagged elements, in the spec's loop order
        for start in range(0, rows.size, 4096):
            r, c = rows[start:start + 4096], cols[start:start + 4096]
            partial = np.cumsum(values[r] * weights[:, c].T, axis=1)
            bad = np.nonzero(((partial < lo) | (partial > hi)).any(axis=1))[0]
            if bad.size:
                i = int(bad[0])
                raise UnpredictableError(
                    f"accumulator overflow at output element {where(int(r[i]), int(c[i]))}: a partial sum "
                    f"leaves [{lo}, {hi}] (REQUIRE(c >= minimum<out_t> && c <= maximum<out_t>) "
                    "in apply_add)")
    return acc


def add_bias(acc: np.ndarray, bias: np.ndarray, lo: int, hi: int, where) -> np.ndarray:
    """acc = apply_add<out_t>(acc, bias[oc]) for every output element (last axis = oc)."""
    total = acc + np.asarray(bias, dtype=np.int64)
    bad = (total < lo) | (total > hi)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise UnpredictableError(f"adding the bias overflows the accumulator at output element "
                                 f"{where(idx)} (REQUIRE in apply_add)")
    return total


def store(acc: np.ndarray, out_t: str) -> np.ndarray:
    """The accumulator as an out_t array (int48_t held in int64)."""
    return acc.astype(np.int64 if out_t == "int48" else np.dtype(out_t))
