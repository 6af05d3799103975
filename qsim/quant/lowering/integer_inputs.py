"""Integer model inputs (token ids of an embedding lookup, ONNX int64/int32 inputs): they are
not quantized. The integer graph takes them as int32, TOSA 0.30's index type (GATHER indices
are int32, 2.11.1), with the identity parameters INTEGER_INPUT (scale 1, zero point 0), so
every place that reads an input's parameters (the model folder, `qsim run`/`simulate`) reads
the values as they are. int64 arrays are narrowed to int32 only when every value fits;
otherwise a DataError names the input and the first value that does not.

Bool model inputs (an attention's padding mask) stay bool in the integer graph, with the
identity parameters MASK_INPUT (`as_integer_input` takes bool arrays, or integers 0 and 1).
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ...errors import DataError

INTEGER_INPUT = ir.QuantInfo(scale=1.0, zero_point=0, bits=32, signed=True, symmetric=True, source="derived")
# a bool input's parameters: the identity (True is 1), so that every reader of input parameters
# (the model folder's @quantize, qsim run) finds some; the values are never quantized
MASK_INPUT = ir.QuantInfo(scale=1.0, zero_point=0, bits=8, signed=False, symmetric=True, source="derived")
INDEX_DTYPE = ir.DType.I32
INTEGER_INPUT_DTYPES = (ir.DType.I64, ir.DType.I32)


def is_integer_input(dtype: ir.DType) -> bool:
    return dtype in INTEGER_INPUT_DTYPES


def narrow_integers(value: np.ndarray, dtype: ir.DType, what: str) -> np.ndarray:
    """`value` (an integer array) as `dtype`, every value checked to fit first."""
    value = np.asarray(value)
    if value.dtype.kind not in "iu":
        raise DataError(f"input {what!r} holds integers (indices), the array is {value.dtype}",
                        hint="store the ids as an integer array (int64 or int32)")
    info = np.iinfo(dtype.numpy)
    bad = np.argwhere((value < info.min) | (value > info.max))
    if bad.size:
        at = tuple(int(i) for i in bad[0])
        raise DataError(f"input {what!r}: value {int(value[at])} at index {list(at)} does not fit "
                        f"{np.dtype(dtype.numpy).name} (TOSA's GATHER index type)",
                        hint=f"ids must lie in [{info.min}, {info.max}]; check the data")
    return value.astype(dtype.numpy)


def as_integer_input(value: np.ndarray, dtype: ir.DType, what: str) -> np.ndarray | None:
    """An integer-graph input that is not quantized: int ids narrowed to `dtype`, a bool mask
    as bool; None for an input that is quantized (any other dtype)."""
    if dtype is INDEX_DTYPE:
        return narrow_integers(value, dtype, what)
    if dtype is not ir.DType.BOOL:
        return None
    value = np.asarray(value)
    if value.dtype.kind != "b" and not (value.dtype.kind in "iu" and np.isin(value, (0, 1)).all()):
        raise DataError(f"input {what!r} is a bool mask, the array is {value.dtype}",
                        hint="store the mask as a bool array (True/False, or integers 0 and 1)")
    return value.astype(bool)
