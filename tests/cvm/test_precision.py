"""Precision semantics: alpha, cvm_precision's formula, declared/inferred input precisions."""
import numpy as np
import pytest

from qsim.cvm import alpha, infer, magnitude_bits, required_precision, run, run_with_precision
from qsim.errors import DataError, InvalidGraphError, UsageError


def test_alpha_is_symmetric_range_bound():
    # "data that precision is 8 means all value is larger than -128 and less than 128"
    assert alpha(8) == 127
    assert alpha(1) == 0
    assert alpha(2) == 1
    assert alpha(32) == 2**31 - 1


def test_magnitude_bits_hand_values():
    # ceil(log2(|x| + 1)) for x != 0, 1 for x = 0
    x = np.array([0, 1, -1, 2, 3, 4, -4, 7, 8, 127, -128, 255, 2**31 - 1, -2**31], dtype=np.int64)
    assert magnitude_bits(x).tolist() == [1, 1, 1, 2, 2, 3, 3, 3, 4, 7, 8, 8, 31, 32]


def test_required_precision_is_smallest_fitting():
    for m in range(0, 300):
        p = required_precision(m)
        assert m <= alpha(p)
        assert p == 1 or m > alpha(p - 1)


def test_inferred_precision_is_tightest():
    x = np.array([3, -7, 0], dtype=np.int32)
    res = run_with_precision("abs", [x])
    assert res.precisions == [4]          # |7| <= alpha(4) = 7
    assert res.outputs[0].tolist() == [3, 7, 0]
    assert res.outputs[0].dtype == np.int32


def test_declared_precision_violation_names_input_index_and_value():
    x = np.array([[1, 2, 3], [4, 128, -5]], dtype=np.int32)
    with pytest.raises(DataError) as e:
        run("relu", [x], precisions=[8])
    msg = str(e.value)
    assert "cvm.relu" in msg and "input X" in msg and "128" in msg and "[1, 1]" in msg
    assert "precision 8" in msg and "[-127, 127]" in msg


def test_minus_128_is_not_an_int8_precision_value():
    x = np.array([-128, 0], dtype=np.int8)
    with pytest.raises(DataError, match=r"-128 at index \[0\]"):
        run("relu", [x], precisions=[8])
    assert run_with_precision("relu", [x]).precisions == [9]


def test_int32_min_has_no_precision():
    x = np.array([0, -2**31], dtype=np.int32)
    with pytest.raises(DataError, match="no CVM precision"):
        run("relu", [x])


@pytest.mark.parametrize("p", [0, 33, -1, 2.5, True])
def test_declared_precision_out_of_range(p):
    with pytest.raises(InvalidGraphError, match=r"\(0, 32\]|not an integer"):
        run("relu", [np.zeros(3, np.int32)], precisions=[p])


def test_output_precision_above_32_is_an_error():
    a = np.array([1], dtype=np.int32)
    with pytest.raises(InvalidGraphError, match="precision 33"):
        run("broadcast_mul", [a, a], precisions=[17, 16])
    with pytest.raises(InvalidGraphError, match="precision 33"):
        run("elemwise_add", [a, a], precisions=[32, 3])


def test_bad_calls_are_usage_errors():
    x = np.zeros(3, np.int32)
    with pytest.raises(UsageError, match="unknown CVM operator"):
        run("softmax", [x])
    with pytest.raises(UsageError, match="dtype float32"):
        run("relu", [x.astype(np.float32)])
    with pytest.raises(UsageError, match="dtype int16"):
        run("relu", [x.astype(np.int16)])
    with pytest.raises(UsageError, match="unknown attribute"):
        run("relu", [x], {"alpha": 1})
    with pytest.raises(UsageError, match="'precision' is required"):
        run("cvm_clip", [x])
    with pytest.raises(UsageError, match="backend"):
        run("relu", [x], backend="gpu")
    with pytest.raises(UsageError, match="input B is missing"):
        run("elemwise_add", [x])
    with pytest.raises(UsageError, match="not a numpy array"):
        run("relu", [[1, 2]])
    with pytest.raises(UsageError, match="positive extents"):
        run("relu", [np.zeros((2, 0), np.int32)])


def test_static_infer_gives_shapes_and_precisions():
    shapes, precs = infer("conv2d", [(1, 3, 8, 8), (4, 3, 3, 3), (4,)], {"padding": 1}, [8, 8, 20])
    assert shapes == [(1, 4, 8, 8)]
    assert precs == [max(8 + 8 + (27).bit_length(), 20) + 1]
    shapes, precs = infer("sum", [(2, 3)])
    assert shapes == [(1,)] and precs is None
