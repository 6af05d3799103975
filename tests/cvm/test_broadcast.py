"""Broadcast operators: example, index formula oracle, every sweep shape pair, division."""
import itertools

import numpy as np
import pytest

from qsim.cvm import infer, run, run_with_precision
from qsim.errors import InvalidGraphError

from .sweep import SHAPES, data

OPS = ("broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div", "broadcast_max")


def test_formalization_example():
    x = np.ones((2, 3), np.int32)
    y = np.array([[0], [1]], np.int32)
    assert run("broadcast_add", [x, y])[0].tolist() == [[1, 1, 1], [2, 2, 2]]


def test_division_truncates_toward_zero_and_zero_divisor_gives_zero():
    a = np.array([7, -7, 7, -7, 6, -6, 5, 0, -5], np.int32)
    b = np.array([2, 2, -2, -2, 3, 3, 0, 0, 127], np.int32)
    assert run("broadcast_div", [a, b])[0].tolist() == [3, -3, -3, 3, 2, -2, 0, 0, 0]


def test_precision_rules():
    a, b = np.array([100], np.int32), np.array([-3], np.int32)
    precs = {op: run_with_precision(op, [a, b], precisions=[8, 3]).precisions[0] for op in OPS}
    assert precs == {"broadcast_add": 9, "broadcast_sub": 9, "broadcast_mul": 11,
                     "broadcast_div": 8, "broadcast_max": 8}


def test_incompatible_shapes_error():
    with pytest.raises(InvalidGraphError, match=r"aligned dimension 1 is 3 vs 4") as e:
        run("broadcast_add", [np.zeros((2, 3), np.int32), np.zeros((4,), np.int32)])
    assert "input A" in str(e.value) and "input B" in str(e.value)


def _oracle(op, a, b):
    """The formalization's index formula: a_i = min(d_i, SA_i - 1), b_i likewise."""
    k = max(a.ndim, b.ndim)
    sa = (1,) * (k - a.ndim) + a.shape
    sb = (1,) * (k - b.ndim) + b.shape
    out = tuple(max(p, q) for p, q in zip(sa, sb))
    ia = np.ix_(*[np.minimum(np.arange(d), s - 1) for d, s in zip(out, sa)])
    ib = np.ix_(*[np.minimum(np.arange(d), s - 1) for d, s in zip(out, sb)])
    x = a.reshape(sa)[ia].astype(np.int64)
    y = b.reshape(sb)[ib].astype(np.int64)
    if op == "broadcast_add":
        return x + y
    if op == "broadcast_sub":
        return x - y
    if op == "broadcast_mul":
        return x * y
    if op == "broadcast_max":
        return np.where(x >= y, x, y)
    # |x|, |y| <= 127: the float quotient is exact enough for trunc
    return np.where(y == 0, 0, np.fix(x / np.where(y == 0, 1, y))).astype(np.int64)


@pytest.mark.parametrize("op", OPS)
def test_sweep_all_shape_pairs_shapes(op):
    """Every (X.shape, Y.shape) pair of the sweep (57,600): output shape or a clear error."""
    for sa, sb in itertools.product(SHAPES, SHAPES):
        try:
            expect = np.broadcast_shapes(sa, sb)
        except ValueError:
            expect = None
        if expect is None:
            with pytest.raises(InvalidGraphError, match="do not broadcast"):
                infer(op, [sa, sb])
        else:
            assert infer(op, [sa, sb])[0] == [expect]


@pytest.mark.parametrize("op", OPS)
def test_sweep_values_same_shape(op):
    for k, shape in enumerate(SHAPES):
        a, b = data(shape, k), data(shape, k + 11)
        np.testing.assert_array_equal(run(op, [a, b])[0], _oracle(op, a, b), err_msg=f"{op} {shape}")


@pytest.mark.parametrize("op", OPS)
def test_sweep_values_broadcasting_pairs(op):
    """Pairs where Y keeps X's extent or has 1 on each axis (every mask, both operand orders),
    on the sweep's shapes with j, l, r up to their third listed value (cost bound)."""
    small = [s for s in SHAPES if s[1] <= 27 and s[2] <= 35 and s[3] <= 47]
    for k, shape in enumerate(small):
        for mask in itertools.product((0, 1), repeat=3):
            other = (1,) + tuple(1 if m else d for m, d in zip(mask, shape[1:]))
            a, b = data(shape, k), data(other, k + 5)
            np.testing.assert_array_equal(run(op, [a, b])[0], _oracle(op, a, b))
            np.testing.assert_array_equal(run(op, [b, a])[0], _oracle(op, b, a))
    # rank extension: a 1-D operand against the full sweep's largest shape
    a, b = data((1, 92, 86, 93)), data((93,), 3)
    np.testing.assert_array_equal(run(op, [a, b])[0], _oracle(op, a, b))
