"""Spec 2.5 elementwise binary operators, with broadcasting (1.8.4, 3.2.4 apply_broadcast).

numpy broadcasting equals apply_broadcast once the shapes pass its ERROR_IFs (same rank,
each input dimension equal to the output's or 1), which `broadcast_shape` checks first.
"""
from __future__ import annotations

import numpy as np

from ...errors import UnpredictableError
from ...numerics import trunc_div
from ..arith import INT32_MAX, INT32_MIN, apply_add, apply_clip, apply_lookup, apply_sub
from ..signature import (BOOL, F32, I8, I16, I32, Arg, Attr, AttrKind, Call, OperatorDef, define,
                        modes)


def broadcast_shape(call: Call, names=("input1", "input2")) -> tuple[int, ...]:
    """The output shape of a broadcasting operator (spec 1.8.4, 3.2.4 ERROR_IFs)."""
    shapes = call.shapes
    rank = len(shapes[0])
    for name, s in zip(names, shapes):
        call.error_if(len(s) != rank, "rank(out_shape) != rank(in_shape)",
                      f"{name} of shape {list(s)} vs {names[0]} of shape {list(shapes[0])}")
    out = tuple(max(dims) for dims in zip(*shapes)) if rank else ()
    for name, s in zip(names, shapes):
        for i, (d, o) in enumerate(zip(s, out)):
            call.error_if(d != o and d != 1, "out_shape[i] != in_shape[i] && in_shape[i] != 1",
                          f"{name} of shape {list(s)}, dimension {i} against broadcast shape {list(out)}")
    return out


def _bounds(dtype: np.dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _wrap(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Two's complement truncation to `dtype` (C conversion of an over-wide result)."""
    return np.asarray(values, dtype=np.int64).astype(dtype)


def _binary(name, section, modes_, ref, attrs=(), check=None, in_var="in_out_t", out_var="in_out_t"):
    def default_check(call):
        return [broadcast_shape(call)]
    return define(OperatorDef(
        name, section,
        inputs=(Arg("input1", in_var), Arg("input2", in_var)), attrs=attrs,
        outputs=(Arg("output", out_var),), modes=modes_,
        check=check or default_check, ref=ref))


def _int32_or_float(inputs, int_fn, float_fn):
    a, b = inputs
    if a.dtype.kind == "f":
        return [float_fn(a, b).astype(np.float32)]
    return [int_fn(a, b)]


INT32_FP32 = modes(("signed 32", I32), ("fp32", F32), names=("in_out_t",))
INT_8_16_32 = modes(("signed 8", I8), ("signed 16", I16), ("signed 32", I32), names=("in_out_t",))
BOOL_ONLY = modes(("Bool", BOOL), names=("in_out_t",))

ADD = _binary("ADD", "2.5.1", INT32_FP32, lambda i, a: _int32_or_float(
    i, lambda x, y: apply_add(x, y, INT32_MIN, INT32_MAX, "ADD").astype(np.int32), np.add))

SUB = _binary("SUB", "2.5.16", INT32_FP32, lambda i, a: _int32_or_float(
    i, lambda x, y: apply_sub(x, y, INT32_MIN, INT32_MAX, "SUB").astype(np.int32), np.subtract))

MAXIMUM = _binary("MAXIMUM", "2.5.12", INT32_FP32, lambda i, a: _int32_or_float(
    i, np.maximum, np.maximum))        # np.maximum propagates NaN as apply_max does

MINIMUM = _binary("MINIMUM", "2.5.13", INT32_FP32, lambda i, a: _int32_or_float(
    i, np.minimum, np.minimum))


def _arithmetic_right_shift(inputs, attrs):
    a, b = inputs
    bits = a.dtype.itemsize * 8
    v1, v2 = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    if not ((v2 >= 0) & (v2 <= bits - 1)).all():
        raise UnpredictableError(f"REQUIRE(0 <= value2 && value2 <= {bits - 1}) fails for in_out_t="
                                 f"int{bits}_t: shift amounts in input2 range over "
                                 f"[{int(v2.min())}, {int(v2.max())}]")
    result = v1 >> v2
    if attrs["round"]:
        # round: add bit (value2 - 1) of value1 when value2 > 0
        result = result + ((v2 > 0) & (((v1 >> np.maximum(v2 - 1, 0)) & 1) != 0))
    lo, hi = _bounds(a.dtype)
    return [apply_clip(result, lo, hi).astype(a.dtype)]


ARITHMETIC_RIGHT_SHIFT = _binary("ARITHMETIC_RIGHT_SHIFT", "2.5.2", INT_8_16_32, _arithmetic_right_shift,
                                 attrs=(Attr("round", AttrKind.BOOL),))

BITWISE_AND = _binary("BITWISE_AND", "2.5.3", INT_8_16_32, lambda i, a: [np.bitwise_and(*i)])
BITWISE_OR = _binary("BITWISE_OR", "2.5.4", INT_8_16_32, lambda i, a: [np.bitwise_or(*i)])
BITWISE_XOR = _binary("BITWISE_XOR", "2.5.5", INT_8_16_32, lambda i, a: [np.bitwise_xor(*i)])


def _intdiv(inputs, attrs):
    a, b = np.broadcast_arrays(inputs[0].astype(np.int64), inputs[1].astype(np.int64))
    if (b == 0).any():
        idx = [int(i) for i in np.argwhere(b == 0)[0]]
        raise UnpredictableError(f"REQUIRE(value2 != 0) fails: input2 is 0 at output index {idx}")
    q = trunc_div(a, b)     # C division (3.3.2 idiv)
    if (q > INT32_MAX).any():
        raise UnpredictableError("REQUIRE((int64_t)value1 / value2 <= maximum<in_out_t>) fails "
                                 "(minimum<int32_t> / -1)")
    return [q.astype(np.int32)]


INTDIV = _binary("INTDIV", "2.5.6", modes(("signed 32", I32), names=("in_out_t",)), _intdiv)

LOGICAL_AND = _binary("LOGICAL_AND", "2.5.7", BOOL_ONLY, lambda i, a: [np.logical_and(*i)])
LOGICAL_OR = _binary("LOGICAL_OR", "2.5.10", BOOL_ONLY, lambda i, a: [np.logical_or(*i)])
LOGICAL_XOR = _binary("LOGICAL_XOR", "2.5.11", BOOL_ONLY, lambda i, a: [np.not_equal(*i)])


def _require_shift_0_31(v2: np.ndarray) -> None:
    if not ((v2 >= 0) & (v2 <= 31)).all():
        raise UnpredictableError(f"REQUIRE(0 <= value2 && value2 <= 31) fails: shift amounts in input2 "
                                 f"range over [{int(v2.min())}, {int(v2.max())}]")


def _logical_left_shift(inputs, attrs):
    a, b = inputs
    v1, v2 = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    _require_shift_0_31(v2)
    # in_out_t result = value1 << value2: the low bits of the shifted value (two's complement)
    return [_wrap(v1 << v2, a.dtype)]


def _logical_right_shift(inputs, attrs):
    a, b = inputs
    bits = a.dtype.itemsize * 8
    v1, v2 = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    _require_shift_0_31(v2)
    unsigned = v1 & ((1 << bits) - 1)                  # (unsigned in_out_t)value1
    return [_wrap(unsigned >> v2, a.dtype)]


LOGICAL_LEFT_SHIFT = _binary("LOGICAL_LEFT_SHIFT", "2.5.8", INT_8_16_32, _logical_left_shift)
LOGICAL_RIGHT_SHIFT = _binary("LOGICAL_RIGHT_SHIFT", "2.5.9", INT_8_16_32, _logical_right_shift)


def _check_mul(call: Call):
    shift = call.attrs["shift"]
    call.error_if(call.type("in_t") is not I32 and shift > 0, "in_t != int32_t && shift > 0",
                  f"shift={shift} with in_t={call.type('in_t').short}")
    call.error_if(not 0 <= shift <= 63, "shift outside uint6_t [0, 63]", f"shift={shift}")
    return [broadcast_shape(call)]


def _mul(inputs, attrs):
    a, b = inputs
    if a.dtype.kind == "f":
        return [np.multiply(a, b).astype(np.float32)]
    product = a.astype(np.int64) * b.astype(np.int64)       # |product| <= 2^62: exact
    shift = attrs["shift"]
    if a.dtype == np.int32 and shift > 0:
        # (product + round) >> shift without the int64 overflow of product + 2^62 at shift 63:
        # floor division, plus one when the dropped bits are at least half (round up ties)
        dropped = product & ((1 << shift) - 1)
        product = (product >> shift) + (dropped >= (1 << (shift - 1)))
        if ((product < INT32_MIN) | (product > INT32_MAX)).any():
            raise UnpredictableError("REQUIRE(product >= minimum<int32_t> && product <= maximum<int32_t>) "
                                     f"fails after the rounding shift by {shift}")
        return [product.astype(np.int32)]
    return [_wrap(product, np.int32)]       # low 32 bits of the result for int32_t


MUL = _binary("MUL", "2.5.14",
              modes(("signed 8", I8, I32), ("signed 16", I16, I32), ("signed 32", I32, I32),
                    ("fp32", F32, F32), names=("in_t", "out_t")),
              _mul, attrs=(Attr("shift", AttrKind.INT),), check=_check_mul, in_var="in_t", out_var="out_t")

POW = _binary("POW", "2.5.15", modes(("fp32", F32), names=("in_out_t",)),
              lambda i, a: [np.power(*i).astype(np.float32)])


# ---------------------------------------------------------------- TABLE

def _check_table(call: Call):
    table = call.attrs["table"]
    call.error_if(table.ndim != 1, "rank(table) != 1", f"table of shape {list(table.shape)}")
    return [call.shapes[0]]


def _table(inputs, attrs):
    x, table = inputs[0], attrs["table"]
    size = 256 if x.dtype == np.int8 else 513
    if table.shape[0] != size:
        raise UnpredictableError(f"REQUIRE(length(table) == TABLE_SIZE) fails: table has "
                                 f"{table.shape[0]} entries, TABLE_SIZE is {size}")
    if x.dtype == np.int8:
        return [table[x.astype(np.int64) + 128].astype(np.int8)]   # result = table[value + 128]
    return [apply_lookup(table, x, context="apply_lookup").astype(np.int32)]


TABLE = define(OperatorDef(
    "TABLE", "2.5.17",
    inputs=(Arg("Input", "in_t"),),
    attrs=(Attr("table", AttrKind.ARRAY, "table_t"),),
    outputs=(Arg("output", "out_t"),),
    modes=modes(("signed 8", I8, I8, I8), ("signed 16", I16, I16, I32),
                names=("in_t", "table_t", "out_t")),
    check=_check_table, ref=_table))
