"""Attribute and shape restrictions not exercised elsewhere in tests/cvm (audit of issue 6:
every check of qsim/cvm reports its violation with the operator, the attribute or input
and the rule). Attribute *types* (an int, a bool, a tuple of ints) are restrictions too:
the formalization types each attribute (TShape, int, boolean, Optional<int>)."""
import numpy as np
import pytest

from qsim.cvm import infer, run
from qsim.errors import InvalidGraphError


def z(*shape):
    return np.zeros(shape, np.int32)


CASES = [
    ("sum", [z(2, 3)], {"exclude": 1}, r"cvm\.sum: attribute 'exclude' = 1 is not a boolean"),
    ("get_valid_count", [z(2, 3)], {}, r"input X has shape \[2, 3\] \(rank 2\); it must have rank 3 "
                                       r"\(\(B, N, K\)\)"),
    ("non_max_suppression", [z(1, 2, 6), z(1)], {"iou_threshold": 50, "max_output_size": 1.5},
     r"'max_output_size' = 1\.5 is not an integer"),
    ("non_max_suppression", [z(1, 2, 6), z(1)], {"iou_threshold": 50, "top_k": "3"},
     r"'top_k' = '3' is not an integer"),
    ("conv2d", [z(1, 1, 3, 3), z(1, 1, 3)], {}, r"input W has shape \[1, 1, 3\] \(rank 3\); it must "
                                                r"have rank 4 \(OIHW\)"),
    ("conv2d", [z(1, 1, 3, 3), z(1, 1, 1, 1)], {"groups": 1.0}, r"'groups' = 1\.0 is not an integer"),
    ("dense", [z(1, 2, 3), z(2, 3)], {}, r"input X .* must have rank 2 \(\(M, K\)\)"),
    ("dense", [z(2, 3), z(3)], {}, r"input W .* must have rank 2 \(\(N, K\)\)"),
    ("dense", [z(2, 3), z(4, 3), z(3)], {}, r"input B has shape \[3\]; the bias must have shape \[4\] \(N\)"),
    ("dense", [z(2, 3), z(4, 3)], {"units": 0}, r"'units' = 0 is outside \[1, \+inf\)"),
    ("dense", [z(2, 3), z(4, 3)], {"use_bias": 1}, r"'use_bias' = 1 is not a boolean"),
    ("max_pool2d", [z(1, 3, 3)], {"pool_size": 2}, r"must have rank 4 \(NCHW\)"),
    ("repeat", [z(2, 3)], {"repeats": 2, "axis": "0"}, r"'axis' = '0' is not an integer"),
    ("tile", [z(2, 3)], {"reps": ()}, r"'reps' is empty"),
    ("concatenate", [z(2, 3)], {"axis": None}, r"'axis' = None is not an integer"),
    ("reshape", [z(2, 3)], {"shape": ()}, r"'shape' is empty"),
    ("squeeze", [z(1, 3)], {"axes": "a"}, r"'axes' = 'a' is not a tuple of integers"),
    ("transpose", [z(2, 3)], {"axes": (0.5, 1)}, r"'axes' = \(0\.5, 1\) is not a tuple of integers"),
    ("strided_slice", [z(2, 3)], {"begin": (1.5,)}, r"'begin' = \(1\.5,\) is not a tuple of integers"),
    ("strided_slice", [z(2, 3)], {"end": "x"}, r"'end' = 'x' is not a tuple of integers"),
    ("slice", [z(2, 3)], {"strides": [True]}, r"'strides' = \[True\] is not a tuple of integers"),
    ("take", [z(2, 3), z(2)], {"axis": 1.5}, r"'axis' = 1\.5 is neither an integer nor None"),
    ("slice_like", [z(2, 3), z(1, 2, 3)], {}, r"shape_like has rank 3, larger than the rank 2 of input X"),
    ("slice_like", [z(2, 3, 4), z(2, 3)], {"axes": (2,)}, r"axis 2 is outside \[-3, 2\)"),
    ("slice_like", [z(2, 3, 4), z(2, 3)], {"axes": (-1,)},
     r"axis -1 is axis 2 of X, which shape_like \(rank 2\) does not have"),
]


@pytest.mark.parametrize("op, inputs, attrs, text", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_restriction_is_reported(op, inputs, attrs, text):
    with pytest.raises(InvalidGraphError, match=text) as err:
        run(op, inputs, attrs)
    assert err.value.message.startswith("cvm.")


def test_concatenate_of_nothing_is_refused_statically():
    with pytest.raises(InvalidGraphError, match="cvm.concatenate: needs at least one input"):
        infer("concatenate", [], {})


def test_cvm_clip_has_no_a_min_a_max():
    """The cvm_clip sweep lists clip's a_max/a_min (docs/cvm.md decision 8): cvm_clip's only
    attribute is precision, so they are unknown attributes, named with the valid ones."""
    from qsim.errors import UsageError
    with pytest.raises(UsageError, match=r"cvm\.cvm_clip: unknown attribute\(s\) a_max, a_min") as err:
        run("cvm_clip", [z(2, 3)], {"precision": 2, "a_max": 10, "a_min": -19})
    assert "precision" in err.value.hint


def test_dense_operands_must_fit_int8():
    """CVM multiplies INT8 operands: dense (like conv2d) needs data and weight precisions <= 8."""
    x, w = z(2, 3), z(4, 3)
    with pytest.raises(InvalidGraphError, match=r"cvm\.dense: input X has precision 9; dense multiplies "
                                                r"INT8 operands"):
        run("dense", [x, w], precisions=[9, 8])
    with pytest.raises(InvalidGraphError, match="input W has precision 10"):
        run("dense", [x, w], precisions=[8, 10])
