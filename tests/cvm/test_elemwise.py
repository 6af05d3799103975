"""Elementwise operators: formulas, the formalization's sweeps, attribute checks."""
import numpy as np
import pytest

from qsim.cvm import alpha, run, run_with_precision
from qsim.errors import InvalidGraphError

from .sweep import SHAPES, data


def test_cvm_right_shift_hand_values():
    # T = floor((floor(X / 2^(s-1)) + 1) / 2): round half up (toward +inf) of X / 2^s
    x = np.array([-9, -8, -7, -6, -5, -3, -2, -1, 0, 1, 2, 3, 5, 6, 7, 9], dtype=np.int32)
    y = run("cvm_right_shift", [x], {"precision": 8, "shift_bit": 2})[0]
    # X/4: -2.25 -2 -1.75 -1.5 -1.25 -.75 -.5 -.25 0 .25 .5 .75 1.25 1.5 1.75 2.25
    assert y.tolist() == [-2, -2, -2, -1, -1, -1, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_cvm_right_shift_clips_to_precision():
    x = np.array([1000, -1000, 40, -40], dtype=np.int32)
    res = run_with_precision("cvm_right_shift", [x], {"precision": 4, "shift_bit": 3})
    assert res.outputs[0].tolist() == [7, -7, 5, -5]
    assert res.precisions == [4]


def test_cvm_right_shift_by_32_of_extreme_values():
    x = np.array([2**31 - 1, -(2**31 - 1)], dtype=np.int32)
    y = run("cvm_right_shift", [x], {"precision": 32, "shift_bit": 32})[0]
    # (2^31-1)/2^32 ~ 0.49999 -> 0; -(2^31-1)/2^32 ~ -0.49999 -> 0
    assert y.tolist() == [0, 0]
    y = run("cvm_right_shift", [x], {"precision": 32, "shift_bit": 31})[0]
    assert y.tolist() == [1, -1]     # +-0.99999... rounds to +-1


def test_cvm_left_shift_hand_values_and_precision_rule():
    x = np.array([-3, -1, 0, 1, 3], dtype=np.int32)
    assert run("cvm_left_shift", [x], {"precision": 4, "shift_bit": 1})[0].tolist() == [-6, -2, 0, 2, 6]
    assert run("cvm_left_shift", [x], {"precision": 3, "shift_bit": 2})[0].tolist() == [-3, -3, 0, 3, 3]
    with pytest.raises(InvalidGraphError, match="precision 30 and shift_bit is 3"):
        run("cvm_left_shift", [x], {"precision": 8, "shift_bit": 3}, precisions=[30])


def test_cvm_precision_formula_and_its_precision():
    x = np.array([0, 1, -1, 5, -8, 100, -127], dtype=np.int32)
    res = run_with_precision("cvm_precision", [x])
    assert res.outputs[0].tolist() == [1, 1, 1, 3, 4, 7, 7]
    assert res.precisions == [4]          # input precision 8 -> values <= 7


def test_clip_hand_values_and_exact_precision():
    x = np.array([-100, -19, -18, 0, 9, 10, 11, 100], dtype=np.int32)
    res = run_with_precision("clip", [x], {"a_min": -19, "a_max": 10})
    assert res.outputs[0].tolist() == [-19, -19, -18, 0, 9, 10, 10, 10]
    assert res.precisions == [6]          # |-19| <= 31
    # a narrow input keeps its precision: [-7, 7] clipped to [-19, 10] stays in [-7, 7]
    assert run_with_precision("clip", [np.array([7, -7], np.int32)], {"a_min": -19, "a_max": 10}).precisions == [4]
    # a_min above the input range lifts everything: clip([-1, 1], 50, 60) = 50
    res = run_with_precision("clip", [np.array([1, -1], np.int32)], {"a_min": 50, "a_max": 60})
    assert res.outputs[0].tolist() == [50, 50] and res.precisions == [7]


@pytest.mark.parametrize("attrs, text", [
    ({"a_min": 5, "a_max": 4}, "greater than 'a_max'"),
    ({"a_min": -2**31, "a_max": 4}, r"outside \[-2147483647, 2147483648\)"),
    ({"a_min": 0, "a_max": 1.5}, "not an integer"),
])
def test_clip_attribute_errors(attrs, text):
    with pytest.raises(InvalidGraphError, match=text):
        run("clip", [np.zeros(2, np.int32)], attrs)


@pytest.mark.parametrize("op, attrs, text", [
    ("cvm_clip", {"precision": 0}, r"'precision' = 0 is outside \[1, 33\)"),
    ("cvm_clip", {"precision": 33}, r"'precision' = 33 is outside \[1, 33\)"),
    ("cvm_right_shift", {"precision": 8, "shift_bit": 0}, r"'shift_bit' = 0 is outside \[1, 33\)"),
    ("cvm_right_shift", {"precision": 8, "shift_bit": 33}, r"'shift_bit' = 33 is outside \[1, 33\)"),
    ("cvm_left_shift", {"precision": 40, "shift_bit": 1}, r"'precision' = 40 is outside \[1, 33\)"),
    ("cvm_left_shift", {"precision": 8, "shift_bit": -1}, r"'shift_bit' = -1 is outside \[1, 33\)"),
])
def test_precision_and_shift_ranges(op, attrs, text):
    with pytest.raises(InvalidGraphError, match=text) as e:
        run(op, [np.zeros(2, np.int32)], attrs)
    assert f"cvm.{op}" in str(e.value)


def test_elemwise_shape_mismatch():
    with pytest.raises(InvalidGraphError, match=r"shape \[2, 3\] but input B has shape \[3, 2\]"):
        run("elemwise_add", [np.zeros((2, 3), np.int32), np.zeros((3, 2), np.int32)])


# ---- the formalization's sweeps ---------------------------------------------------------
def _sweep_unary(op, attrs, expect):
    for k, shape in enumerate(SHAPES):
        x = data(shape, k)
        res = run_with_precision(op, [x], attrs)
        (y,) = res.outputs
        assert y.shape == shape and y.dtype == np.int32
        np.testing.assert_array_equal(y, expect(x.astype(np.int64)), err_msg=f"{op} {shape}")


def test_sweep_relu():
    _sweep_unary("relu", {}, lambda x: (x > 0) * x)


def test_sweep_abs():
    _sweep_unary("abs", {}, lambda x: x * np.sign(x))


def test_sweep_clip():
    _sweep_unary("clip", {"a_max": 10, "a_min": -19}, lambda x: np.minimum(np.maximum(x, -19), 10))


def test_sweep_cvm_clip():
    # the sweep also lists a_max/a_min, which cvm_clip does not have (copied from clip): precision 2
    _sweep_unary("cvm_clip", {"precision": 2}, lambda x: np.sign(x))


def test_sweep_cvm_right_shift():
    # precision 2, shift 2: floor((floor(x/2) + 1)/2) clipped to [-1, 1]
    _sweep_unary("cvm_right_shift", {"precision": 2, "shift_bit": 2},
                 lambda x: np.clip(((x // 2) + 1) // 2, -1, 1))


def test_sweep_cvm_left_shift():
    _sweep_unary("cvm_left_shift", {"precision": 2, "shift_bit": 2}, lambda x: np.clip(x * 4, -1, 1))


@pytest.mark.parametrize("op, sign", [("elemwise_add", 1), ("elemwise_sub", -1)])
def test_sweep_elemwise_binary(op, sign):
    for k, shape in enumerate(SHAPES):
        a, b = data(shape, k), data(shape, k + 7)
        res = run_with_precision(op, [a, b])
        np.testing.assert_array_equal(res.outputs[0], a.astype(np.int64) + sign * b.astype(np.int64))
        assert res.precisions == [9]


def test_negative_and_abs_keep_precision():
    x = np.array([-127, 127, 0, 5], np.int32)
    assert run_with_precision("negative", [x]).outputs[0].tolist() == [127, -127, 0, -5]
    assert run_with_precision("negative", [x]).precisions == [8]
    assert run_with_precision("abs", [x], precisions=[8]).precisions == [8]


def test_right_shift_equals_round_half_up_property(rng):
    x = rng.integers(-(2**31 - 1), 2**31, 20000).astype(np.int32)
    for s in (1, 2, 7, 16, 31, 32):
        y = run("cvm_right_shift", [x], {"precision": 32, "shift_bit": s})[0].astype(np.int64)
        exact = [(2 * int(v) + (1 << s)) // (1 << (s + 1)) for v in x[:500]]   # floor(v/2^s + 1/2)
        assert y[:500].tolist() == exact
        assert np.all(np.abs(y) <= alpha(32))
