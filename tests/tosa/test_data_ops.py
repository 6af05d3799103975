"""Data layout (2.10), scatter/gather (2.11), reductions (2.9), data nodes (2.14), RESIZE (2.12)."""
import numpy as np
import pytest

import tosa_oracle as oracle
from qsim.errors import InvalidGraphError, UnpredictableError
from qsim.tosa import run

LAYOUT_TYPES = [np.bool_, np.int8, np.int16, np.int32]


def _rand(rng, dtype, shape):
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape, dtype=np.int64).astype(dtype)


@pytest.mark.parametrize("dtype", LAYOUT_TYPES)
def test_layout_ops_move_elements(rng, dtype):
    x = _rand(rng, dtype, (2, 3, 4))
    xl = x.tolist()
    # CONCAT along axis 1: rows of the second tensor follow the first
    y = _rand(rng, dtype, (2, 2, 4))
    got, = run("CONCAT", [x, y, x], {"axis": 1})
    assert got.tolist() == [xl[n] + y.tolist()[n] + xl[n] for n in range(2)]
    # PAD with a constant
    const = True if dtype == np.bool_ else -7
    got, = run("PAD", [x], {"padding": ((0, 1), (2, 0), (1, 1)), "pad_const": const})
    assert got.shape == (3, 5, 6)
    assert got[0, 2, 1] == x[0, 0, 0] and got[2, 0, 0] == const and got[1, 4, 4] == x[1, 2, 3]
    # RESHAPE keeps row-major order
    assert run("RESHAPE", [x], {"new_shape": (4, 6)})[0].ravel().tolist() == x.ravel().tolist()
    # REVERSE
    assert run("REVERSE", [x], {"axis": 2})[0].tolist() == [[row[::-1] for row in plane] for plane in xl]
    # SLICE
    got, = run("SLICE", [x], {"start": (1, 0, 2), "size": (1, 2, 2)})
    assert got.tolist() == [[xl[1][0][2:4], xl[1][1][2:4]]]
    # TILE
    got, = run("TILE", [x], {"multiples": (1, 2, 1)})
    assert got.tolist() == [xl[n] + xl[n] for n in range(2)]
    # TRANSPOSE: output[i][j][k] = input[k][i][j] with perms (2, 0, 1)
    got, = run("TRANSPOSE", [x], {"perms": (2, 0, 1)})
    assert got.shape == (4, 2, 3) and got[3, 1, 2] == x[1, 2, 3]
    # IDENTITY
    assert np.array_equal(run("IDENTITY", [x], {})[0], x)


@pytest.mark.parametrize("op,attrs,x_shape,match", [
    ("CONCAT", {"axis": 3}, (2, 2, 2), r"axis < 0 \|\| axis >= rank\(shapes1\[0\]\)"),
    ("PAD", {"padding": ((0, -1), (0, 0)), "pad_const": 0}, (2, 2), r"pad_size < 0"),
    ("PAD", {"padding": ((0, 1),), "pad_const": 0}, (2, 2), r"padding shape != \[rank\(input1\), 2\]"),
    ("RESHAPE", {"new_shape": (3, 3)}, (2, 4), r"tensor_size\(shape1\) != tensor_size\(shape\)"),
    ("REVERSE", {"axis": -1}, (2, 4), r"axis < 0 \|\| axis >= rank\(shape\)"),
    ("SLICE", {"start": (0, 3), "size": (1, 2)}, (2, 4), r"start\[index\] \+ size\[index\] > shape1\[index\]"),
    ("SLICE", {"start": (0, 0), "size": (1, 0)}, (2, 4), r"size\[index\] <= 0"),
    ("SLICE", {"start": (-1, 0), "size": (1, 1)}, (2, 4), r"start\[index\] < 0"),
    ("SLICE", {"start": (0,), "size": (1,)}, (2, 4), r"rank\(input1\) != length\(start\)"),
    ("TILE", {"multiples": (1,)}, (2, 4), r"length\(multiples\) != rank\(shape1\)"),
    ("TRANSPOSE", {"perms": (0, 0)}, (2, 4), r"indexes_used\[index\] == true"),
    ("TRANSPOSE", {"perms": (0, 2)}, (2, 4), r"index >= rank\(shape1\)"),
])
def test_layout_error_if(op, attrs, x_shape, match):
    with pytest.raises(InvalidGraphError, match=match):
        run(op, [np.zeros(x_shape, np.int8)], attrs)


def test_concat_shape_mismatch():
    with pytest.raises(InvalidGraphError, match=r"input_shape\[index\] != shapes1\[0\]\[index\] && index != axis"):
        run("CONCAT", [np.zeros((2, 3), np.int8), np.zeros((3, 3), np.int8)], {"axis": 1})
    with pytest.raises(InvalidGraphError, match=r"input1\[1\] is int16_t"):
        run("CONCAT", [np.zeros((2, 3), np.int8), np.zeros((2, 3), np.int16)], {"axis": 1})


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
def test_gather_scatter(rng, dtype):
    values = _rand(rng, dtype, (2, 5, 3))
    idx = np.array([[4, 0, 4], [1, 2, 3]], np.int32)
    got, = run("GATHER", [values, idx], {})
    assert got.tolist() == [[values.tolist()[n][k] for k in idx[n]] for n in range(2)]
    data = _rand(rng, dtype, (2, 2, 3))
    sidx = np.array([[4, 0], [2, 1]], np.int32)
    got, = run("SCATTER", [values, sidx, data], {})
    want = values.copy()
    for n in range(2):
        for w in range(2):
            want[n, sidx[n, w]] = data[n, w]
    assert np.array_equal(got, want)


def test_gather_scatter_requires():
    values = np.zeros((1, 3, 2), np.int8)
    with pytest.raises(UnpredictableError, match=r"REQUIRE\(0 <= k && k < K\).*indices\[0, 1\] = 3"):
        run("GATHER", [values, np.array([[0, 3]], np.int32)], {})
    with pytest.raises(UnpredictableError, match=r"output_modified.*k=1"):
        run("SCATTER", [values, np.array([[1, 1]], np.int32), np.zeros((1, 2, 2), np.int8)], {})
    with pytest.raises(InvalidGraphError, match=r"input shape != \[N,W,C\]"):
        run("SCATTER", [values, np.array([[1, 2]], np.int32), np.zeros((1, 2, 3), np.int8)], {})


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
def test_reduce_max_min(rng, dtype):
    x = _rand(rng, dtype, (2, 3, 4))
    for axis in range(3):
        assert np.array_equal(run("REDUCE_MAX", [x], {"axis": axis})[0], x.max(axis=axis, keepdims=True))
        assert np.array_equal(run("REDUCE_MIN", [x], {"axis": axis})[0], x.min(axis=axis, keepdims=True))


def test_reduce_bool_and_sum():
    b = np.array([[True, False], [True, True]])
    assert run("REDUCE_ALL", [b], {"axis": 1})[0].tolist() == [[False], [True]]
    assert run("REDUCE_ANY", [b], {"axis": 0})[0].tolist() == [[True, True]]
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    assert run("REDUCE_SUM", [x], {"axis": 1})[0].tolist() == [[6], [15]]


def test_reduce_sum_requires_every_partial_sum():
    big = 2 ** 31 - 1
    assert run("REDUCE_SUM", [np.array([big, -5, 5], np.int32)], {"axis": 0})[0].tolist() == [big]
    with pytest.raises(UnpredictableError, match=r"REDUCE_SUM"):
        run("REDUCE_SUM", [np.array([big, 5, -5], np.int32)], {"axis": 0})
    with pytest.raises(InvalidGraphError, match=r"axis < 0 \|\| axis >= rank\(shape1\)"):
        run("REDUCE_SUM", [np.zeros((2,), np.int32)], {"axis": 1})


def test_const():
    v = np.arange(6, dtype=np.int16).reshape(2, 3)
    got, = run("CONST", [], {"values": v})
    assert got.dtype == np.int16 and np.array_equal(got, v)


# ---------------------------------------------------------------- RESIZE

RESIZE_CASES = [  # (IH, IW, shift, stride, offset, border)
    (3, 4, 1, (1, 1), (0, 0), (0, 0)),              # [OH-1] = 2 [IH-1]
    (3, 3, 2, (2, 2), (-3, -3), (1, 1)),            # [OH] = 2 [IH]: shift k+1, stride 2, offset -(2^k+1)
    (4, 5, 11, (1365, 1707), (0, 0), (0, 0)),       # arbitrary downscale-ish strides
    (2, 2, 4, (5, 7), (-16 * 0 + 3, 2), (0, 0)),
]


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
@pytest.mark.parametrize("mode", ["BILINEAR", "NEAREST"])
@pytest.mark.parametrize("case", RESIZE_CASES)
def test_resize_matches_oracle(rng, dtype, mode, case):
    ih, iw, shift, stride, offset, border = case
    oh = int(np.fix(((ih - 1) * (1 << shift) - offset[0]) / stride[0])) + 1 + border[0]
    ow = int(np.fix(((iw - 1) * (1 << shift) - offset[1]) / stride[1])) + 1 + border[1]
    x = _rand(rng, dtype, (1, ih, iw, 2))
    x[0, 0, 0, 0] = np.iinfo(dtype).min
    attrs = dict(output_size=(oh, ow), stride=stride, offset=offset, border=border, shift=shift, mode=mode)
    try:
        want = oracle.resize(x, (oh, ow), stride, offset, shift, mode)
    except AssertionError:        # the sample leaves the input: the spec's REQUIRE
        with pytest.raises(UnpredictableError, match=r"REQUIRE"):
            run("RESIZE", [x], attrs)
        return
    got, = run("RESIZE", [x], attrs)
    expect_dtype = {("BILINEAR", np.int8): np.int32, ("BILINEAR", np.int16): np.int64}.get((mode, dtype), dtype)
    assert got.dtype == expect_dtype and np.array_equal(got, want)


def test_resize_hand_values():
    # 1x2 image [10, 20] upscaled with shift 1, stride 1: x positions 0, 0.5, 1
    x = np.array([10, 20], np.int8).reshape(1, 1, 2, 1)
    attrs = dict(output_size=(1, 3), stride=(1, 1), offset=(0, 0), border=(0, 0), shift=1, mode="BILINEAR")
    # bilinear has 2*shift fractional bits: (10*2*2, (10*1+20*1)*2, 20*2*2) = 40, 60, 80
    assert run("RESIZE", [x], attrs)[0].ravel().tolist() == [40, 60, 80]
    attrs["mode"] = "NEAREST"                 # dx = 1 >= unit/2 picks the right neighbour
    assert run("RESIZE", [x], attrs)[0].ravel().tolist() == [10, 20, 20]


@pytest.mark.parametrize("change,match", [
    (dict(shift=0), r"shift < 1 \|\| shift > 11"), (dict(shift=12), r"shift < 1 \|\| shift > 11"),
    (dict(stride=(0, 1)), r"stride_x <= 0 \|\| stride_y <= 0"),
    (dict(stride=(32, 1)), r"stride_y >= \(16 << shift\)"),
    (dict(offset=(0, -32)), r"offset_x <= \(-16 << shift\)"),
    (dict(output_size=(4, 4)), r"output_size != \[OH, OW\]"),
])
def test_resize_error_if(change, match):
    attrs = dict(output_size=(5, 5), stride=(1, 1), offset=(0, 0), border=(0, 0), shift=1, mode="NEAREST")
    attrs.update(change)
    with pytest.raises(InvalidGraphError, match=match):
        run("RESIZE", [np.zeros((1, 3, 3, 1), np.int8)], attrs)
    with pytest.raises(InvalidGraphError, match=r"not BILINEAR or NEAREST"):
        run("RESIZE", [np.zeros((1, 3, 3, 1), np.int8)], dict(attrs, mode="CUBIC"))


def test_resize_sample_outside_input_is_unpredictable():
    # border 2 adds two output rows whose sample position (3 = 6/2) is past IH - 1 = 2
    attrs = dict(output_size=(7, 5), stride=(1, 1), offset=(0, 0), border=(2, 0), shift=1, mode="NEAREST")
    with pytest.raises(UnpredictableError, match=r"REQUIRE\(iy0 <= iy1\) fails at output y=6"):
        run("RESIZE", [np.zeros((1, 3, 3, 1), np.int8)], attrs)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.bool_, np.float32])
def test_transpose_matches_numpy(dtype):
    """TRANSPOSE's copy (a strided copy per index of a short last output axis, else numpy's):
    np.transpose's values, C-ordered, for every permutation of small and image-like shapes."""
    import itertools
    rng = np.random.default_rng(5)
    for shape in [(2, 3, 40, 41), (1, 4, 64, 70), (3, 5, 7), (2, 9, 30, 20), (1, 2, 1, 3000)]:
        x = (rng.integers(-100, 100, shape) > 0 if dtype is np.bool_ else
             rng.integers(-100, 100, shape).astype(dtype))
        for perms in itertools.permutations(range(len(shape))):
            got, = run("TRANSPOSE", [x], {"perms": perms})
            assert got.flags.c_contiguous and got.dtype == x.dtype
            np.testing.assert_array_equal(got, np.transpose(x, perms))
