"""sum / max: the formalization's example, its four cases, the sweep, attribute checks."""
import numpy as np
import pytest

from qsim.cvm import run, run_with_precision
from qsim.errors import InvalidGraphError

from .sweep import REDUCE_SHAPES, data

EXAMPLE = np.array([[[1, 2], [2, 3], [1, 3]],
                    [[1, 4], [4, 3], [5, 2]],
                    [[7, 1], [7, 2], [7, 3]]], dtype=np.int32)


def test_formalization_example():
    assert run("sum", [EXAMPLE], {"axis": (1,)})[0].tolist() == [[4, 8], [10, 9], [21, 6]]
    assert run("sum", [EXAMPLE], {"axis": (1, 2)})[0].tolist() == [12, 19, 27]


def test_case1_exclude_all_axes_is_identity():
    y = run("sum", [EXAMPLE], {"axis": (0, 1, 2), "exclude": True})[0]
    np.testing.assert_array_equal(y, EXAMPLE)
    res = run_with_precision("max", [EXAMPLE], {"axis": (2, 0, -2), "exclude": True, "keepdims": True})
    np.testing.assert_array_equal(res.outputs[0], EXAMPLE)


def test_case2_no_axes_reduces_everything():
    assert run("sum", [EXAMPLE])[0].tolist() == [58]                 # K = 1: shape (1,)
    y = run("sum", [EXAMPLE], {"keepdims": True})[0]
    assert y.shape == (1, 1, 1) and int(y[0, 0, 0]) == 58            # K = N
    assert run("max", [EXAMPLE])[0].tolist() == [7]


def test_case3_and_case4_with_exclude():
    # exclude=true, axis=(1,): R = {0, 2}
    assert run("sum", [EXAMPLE], {"axis": (1,), "exclude": True})[0].tolist() == [16, 21, 21]
    y = run("max", [EXAMPLE], {"axis": (1,), "exclude": True, "keepdims": True})[0]
    assert y.shape == (1, 3, 1) and y.reshape(-1).tolist() == [7, 7, 7]
    y = run("sum", [EXAMPLE], {"axis": (-1,), "keepdims": True})[0]
    assert y.shape == (3, 3, 1) and y[:, :, 0].tolist() == [[3, 5, 4], [5, 7, 7], [8, 9, 10]]


def test_exclude_with_no_axes_reduces_everything():
    assert run("sum", [EXAMPLE], {"exclude": True})[0].tolist() == [58]


def test_sum_precision_rule():
    # p + bit_length(K): 3x3 elements of precision 4 summed over axis 1 (K = 3 -> 2 bits)
    res = run_with_precision("sum", [EXAMPLE], {"axis": (1,)})
    assert res.precisions == [4 + 2]
    res = run_with_precision("sum", [EXAMPLE])
    assert res.precisions == [4 + (18).bit_length()]
    assert run_with_precision("max", [EXAMPLE], precisions=[10]).precisions == [10]


@pytest.mark.parametrize("attrs, text", [
    ({"axis": (3,)}, r"axis = 3 is outside \[-3, 3\)"),
    ({"axis": (-4,)}, r"axis = -4 is outside \[-3, 3\)"),
    ({"axis": (1, -2)}, "names an axis twice"),
    ({"axis": (0, 0)}, "names an axis twice"),
    ({"keepdims": 1}, "not a boolean"),
    ({"axis": "1"}, "not a tuple of integers"),
])
def test_attribute_errors(attrs, text):
    for op in ("sum", "max"):
        with pytest.raises(InvalidGraphError, match=text) as e:
            run(op, [EXAMPLE], attrs)
        assert f"cvm.{op}" in str(e.value)


def test_sweep_sum_axis1():
    for k, shape in enumerate(REDUCE_SHAPES):
        x = data(shape, k)
        res = run_with_precision("sum", [x], {"axis": (1,)})
        # independent oracle: accumulate the slices along axis 1 one by one
        acc = np.zeros((shape[0], shape[2], shape[3]), dtype=np.int64)
        for j in range(shape[1]):
            acc += x[:, j]
        np.testing.assert_array_equal(res.outputs[0], acc)
        assert res.precisions == [8 + shape[1].bit_length()]


def test_sweep_max():
    for k, shape in enumerate(REDUCE_SHAPES):
        x = data(shape, k)
        y = run("max", [x])[0]
        assert y.tolist() == [max(x.reshape(-1).tolist())]
        y = run("max", [x], {"axis": (1,)})[0]
        best = x[:, 0].astype(np.int64)
        for j in range(1, shape[1]):
            best = np.where(x[:, j] > best, x[:, j], best)
        np.testing.assert_array_equal(y, best)
