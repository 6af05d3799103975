"""Transform operators: index-formula oracles, the formalization's sweeps, attribute checks."""
import itertools

import numpy as np
import pytest

from qsim.cvm import run, run_with_precision
from qsim.errors import InvalidGraphError

from .sweep import SHAPES, data


def gather(x, out_shape, index_fn):
    """Y[d] = X[index_fn(d)] evaluated with broadcast index grids (the formulas' own shape)."""
    grids = np.meshgrid(*[np.arange(n) for n in out_shape], indexing="ij")
    return x[tuple(index_fn(grids))]


# ---- repeat ----------------------------------------------------------------------------------
def test_sweep_repeat():
    for k, shape in enumerate(SHAPES):
        axis = k % 4
        x = data(shape, k)
        y = run("repeat", [x], {"repeats": 2, "axis": axis})[0]
        out = tuple(d * 2 if i == axis else d for i, d in enumerate(shape))
        assert y.shape == out
        # Y[.., d_axis, ..] = X[.., floor(d_axis / repeats), ..]: the even and odd rows are X
        np.testing.assert_array_equal(np.take(y, np.arange(0, out[axis], 2), axis=axis), x)
        np.testing.assert_array_equal(np.take(y, np.arange(1, out[axis], 2), axis=axis), x)


def test_repeat_errors():
    x = np.zeros((2, 3), np.int32)
    with pytest.raises(InvalidGraphError, match=r"'axis' = -1 is outside \[0, 2\)"):
        run("repeat", [x], {"repeats": 2, "axis": -1})
    with pytest.raises(InvalidGraphError, match=r"'repeats' = 0 is outside \[1, \+inf\)"):
        run("repeat", [x], {"repeats": 0, "axis": 0})


# ---- tile --------------------------------------------------------------------------------------
def test_sweep_tile():
    reps = (2, 2, 3)
    for k, shape in enumerate(SHAPES):
        x = data(shape, k)
        y = run("tile", [x], {"reps": reps})[0]
        n1, n2, n3 = shape[1:]
        assert y.shape == (1, n1 * 2, n2 * 2, n3 * 3)     # K = max(3, 4) = 4, SR = (1, 2, 2, 3)
        # Y[k] = X[k mod n]: each of the 2 x 2 x 3 blocks is X
        for a, b, c in itertools.product(range(2), range(2), range(3)):
            np.testing.assert_array_equal(y[:, a * n1:(a + 1) * n1, b * n2:(b + 1) * n2, c * n3:(c + 1) * n3], x)
    small = data((1, 3, 2, 5))
    y = run("tile", [small], {"reps": reps})[0]
    np.testing.assert_array_equal(y, gather(small, y.shape, lambda d: [d[i] % small.shape[i] for i in range(4)]))


def test_tile_extends_rank_and_checks_reps():
    x = np.array([1, 2], np.int32)
    assert run("tile", [x], {"reps": (2, 3)})[0].tolist() == [[1, 2, 1, 2, 1, 2]] * 2
    with pytest.raises(InvalidGraphError, match=r"reps\[1\] = 0 is outside \[1, 4096\)"):
        run("tile", [x], {"reps": (2, 0)})
    with pytest.raises(InvalidGraphError, match=r"reps\[0\] = 4096 is outside \[1, 4096\)"):
        run("tile", [x], {"reps": (4096,)})


# ---- flatten, reshape ----------------------------------------------------------------------------
def test_sweep_flatten():
    for k, shape in enumerate(SHAPES):
        x = data(shape, k)
        y = run("flatten", [x])[0]
        assert y.shape == (int(np.prod(shape)),)
        # flatten_index(d) = sum_i d_i * prod_{j>i} n_j
        n1, n2, n3 = shape[1:]
        d = np.meshgrid(np.arange(n1), np.arange(n2), np.arange(n3), indexing="ij")
        np.testing.assert_array_equal(y[d[0] * n2 * n3 + d[1] * n3 + d[2]], x[0])


def test_sweep_reshape():
    """shape (r, l, j, i): the element at flat position f is the same in X and Y."""
    for k, shape in enumerate(SHAPES):
        x = data(shape, k)
        target = (shape[3], shape[2], shape[1], shape[0])
        y = run("reshape", [x], {"shape": target})[0]
        assert y.shape == target
        f = np.arange(x.size)
        np.testing.assert_array_equal(y[np.unravel_index(f, target)], x[np.unravel_index(f, shape)])


def test_reshape_errors():
    x = np.zeros((2, 3), np.int32)
    with pytest.raises(InvalidGraphError, match=r"has 8 elements but input X of shape \[2, 3\] has 6"):
        run("reshape", [x], {"shape": (2, 4)})
    with pytest.raises(InvalidGraphError, match=r"shape\[0\] = -1 is outside"):
        run("reshape", [x], {"shape": (-1, 6)})


# ---- concatenate ---------------------------------------------------------------------------------
def test_sweep_concatenate():
    """X and Y of the same swept shape, joined on each axis in turn; plus unequal axis extents."""
    for k, shape in enumerate(SHAPES):
        axis = k % 4
        a, b = data(shape, k), data(shape, k + 3)
        res = run_with_precision("concatenate", [a, b], {"axis": axis}, precisions=[8, 9])
        y = res.outputs[0]
        n = shape[axis]
        # new_idx = sum_{j<i} n^j_axis + d_axis
        np.testing.assert_array_equal(np.take(y, np.arange(n), axis=axis), a)
        np.testing.assert_array_equal(np.take(y, np.arange(n, 2 * n), axis=axis), b)
        assert res.precisions == [9]
    for j1, j2 in itertools.product((1, 14, 27), repeat=2):
        a, b, c = data((1, j1, 18, 24)), data((1, j2, 18, 24), 1), data((1, 1, 18, 24), 2)
        y = run("concatenate", [a, b, c], {"axis": 1})[0]
        assert y.shape == (1, j1 + j2 + 1, 18, 24)
        assert (y[:, :j1] == a).all() and (y[:, j1:j1 + j2] == b).all() and (y[:, -1:] == c).all()


def test_concatenate_errors():
    a, b = np.zeros((2, 3), np.int32), np.zeros((2, 4), np.int32)
    with pytest.raises(InvalidGraphError, match=r"input 1 has shape \[2, 4\].*except axis 0"):
        run("concatenate", [a, b], {"axis": 0})
    with pytest.raises(InvalidGraphError, match=r"'axis' = 2 is outside \[0, 2\)"):
        run("concatenate", [a, a], {"axis": 2})


# ---- expand_dims, squeeze, transpose ----------------------------------------------------------
def test_sweep_expand_dims():
    for k, shape in enumerate(SHAPES):
        x = data(shape, k)
        y = run("expand_dims", [x], {"axis": 2})[0]
        assert y.shape == shape[:2] + (1,) + shape[2:]
        np.testing.assert_array_equal(y[:, :, 0], x)


def test_expand_dims_negative_axis_and_num_newaxis():
    x = np.zeros((2, 3), np.int32)
    assert run("expand_dims", [x], {"axis": -1})[0].shape == (2, 3, 1)       # axis + N + 1
    assert run("expand_dims", [x], {"axis": -3})[0].shape == (1, 2, 3)       # -N-1 -> 0
    assert run("expand_dims", [x], {"axis": 1, "num_newaxis": 3})[0].shape == (2, 1, 1, 1, 3)
    assert run("expand_dims", [x], {"axis": 0, "num_newaxis": 0})[0].shape == (2, 3)
    with pytest.raises(InvalidGraphError, match=r"'axis' = 3 is outside \[-3, 3\)"):
        run("expand_dims", [x], {"axis": 3})
    with pytest.raises(InvalidGraphError, match=r"'num_newaxis' = 4096 is outside \[0, 4096\)"):
        run("expand_dims", [x], {"axis": 0, "num_newaxis": 4096})


def test_sweep_squeeze():
    for k, shape in enumerate(SHAPES):
        x = data(shape, k)
        y = run("squeeze", [x])[0]
        kept = tuple(d for d in shape if d != 1) or (1,)
        assert y.shape == kept
        np.testing.assert_array_equal(y.reshape(-1), x.reshape(-1))


def test_squeeze_axes_and_errors():
    x = np.zeros((1, 3, 1, 2), np.int32)
    assert run("squeeze", [x], {"axes": (-2,)})[0].shape == (1, 3, 2)
    assert run("squeeze", [x], {"axes": (0, 2)})[0].shape == (3, 2)
    with pytest.raises(InvalidGraphError, match="squeezes axis 1, but input X of shape \\[1, 3, 1, 2\\] has extent 3"):
        run("squeeze", [x], {"axes": (1,)})
    with pytest.raises(InvalidGraphError, match=r"axis = 4 is outside \[-4, 4\)"):
        run("squeeze", [x], {"axes": (4,)})


def test_sweep_transpose():
    perms = [(), (0, 2, 3, 1), (3, -2, 1, 0), (-4, -1, -3, -2)]
    for k, shape in enumerate(SHAPES):
        axes = perms[k % 4]
        x = data(shape, k)
        y = run("transpose", [x], {"axes": axes})[0]
        real = [a + 4 if a < 0 else a for a in axes] or [3, 2, 1, 0]
        assert y.shape == tuple(shape[a] for a in real)
        # Y[d_real0, d_real1, ...] = X[d_0, ..., d_3], checked at a few index tuples
        for d in [(0, 0, 0, 0), (0, shape[1] - 1, shape[2] // 2, shape[3] - 1)]:
            assert y[tuple(d[a] for a in real)] == x[d]
        np.testing.assert_array_equal(y, gather(x, y.shape, lambda e: [e[real.index(j)] for j in range(4)]))


def test_transpose_errors():
    x = np.zeros((2, 3, 4), np.int32)
    with pytest.raises(InvalidGraphError, match="must be empty or list all 3 axes"):
        run("transpose", [x], {"axes": (1, 0)})
    with pytest.raises(InvalidGraphError, match="not a permutation"):
        run("transpose", [x], {"axes": (0, -3, 1)})
    with pytest.raises(InvalidGraphError, match=r"axis = 3 is outside \[-3, 3\)"):
        run("transpose", [x], {"axes": (0, 1, 3)})


# ---- slice / strided_slice -------------------------------------------------------------------
def test_sweep_slice_defaults_are_identity():
    for k, shape in enumerate(SHAPES):
        x = data(shape, k)
        for op in ("slice", "strided_slice"):
            np.testing.assert_array_equal(run(op, [x])[0], x)


def test_sweep_strided_slice_with_attributes():
    for k, shape in enumerate(SHAPES):
        x = data(shape, k)
        n1, n2, n3 = shape[1:]
        attrs = {"begin": (0, -n1, n2 // 2), "end": (1, n1 + 5, n2), "strides": (1, 2, 3)}
        y = run("strided_slice", [x], attrs)[0]
        # Y[d] = X[b + s * d]; d_j in [0, ceil((e - b) / s))
        e2 = -(-(n2 - n2 // 2) // 3)
        assert y.shape == (1, -(-n1 // 2), e2, n3)
        np.testing.assert_array_equal(y, x[:, 0::2, n2 // 2::3, :])


def test_strided_slice_negative_strides_and_clipping():
    x = np.arange(10, dtype=np.int32)
    assert run("slice", [x], {"begin": (8,), "end": (2,), "strides": (-3,)})[0].tolist() == [8, 5]
    assert run("slice", [x], {"begin": (-1,), "end": (-11,), "strides": (-4,)})[0].tolist() == [9, 5, 1]
    assert run("slice", [x], {"begin": (-100,), "end": (100,)})[0].tolist() == list(range(10))
    # a full-length slice keeps the last element (begin/end clipped to [0, n], not [0, n-1])
    assert run("slice", [x], {"begin": (0,), "end": (10,)})[0].tolist() == list(range(10))


@pytest.mark.parametrize("attrs, text", [
    ({"strides": (0,)}, r"strides\[0\] is 0"),
    ({"begin": (5,), "end": (5,)}, "select nothing with stride 1"),
    ({"begin": (2,), "end": (5,), "strides": (-1,)}, "select nothing with stride -1"),
    ({"begin": (0, 0)}, "more entries than the rank 1"),
])
def test_strided_slice_errors(attrs, text):
    with pytest.raises(InvalidGraphError, match=text):
        run("strided_slice", [np.arange(10, dtype=np.int32)], attrs)


# ---- take, cvm_lut -------------------------------------------------------------------------------
def test_take_without_axis_clips_flat_indices():
    x = np.array([[10, 20], [30, 40]], np.int32)
    idx = np.array([[-5, 0], [3, 99]], np.int32)
    assert run("take", [x, idx])[0].tolist() == [[10, 10], [40, 40]]


def test_take_with_axis_and_precision():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    idx = np.array([[2, -1], [7, 1]], np.int32)
    res = run_with_precision("take", [x, idx], {"axis": 1}, precisions=[6, 4])
    y = res.outputs[0]
    assert y.shape == (2, 2, 2, 4)                 # rank M + N - 1
    assert y[1, 0, 0].tolist() == x[1, 2].tolist() and y[1, 0, 1].tolist() == x[1, 0].tolist()
    assert y[0, 1, 0].tolist() == x[0, 2].tolist() and y[0, 1, 1].tolist() == x[0, 1].tolist()
    assert res.precisions == [6]
    assert run("take", [x, idx], {"axis": -1})[0].shape == (2, 3, 2, 2)
    with pytest.raises(InvalidGraphError, match=r"'axis' = 3 is outside \[-3, 3\)"):
        run("take", [x, idx], {"axis": 3})


def test_cvm_lut_is_take_without_axis():
    table = np.array([0, 1, 4, 9, 16, 25], np.int32)
    idx = np.array([[3, 0], [7, -2]], np.int32)
    res = run_with_precision("cvm_lut", [idx, table])
    assert res.outputs[0].tolist() == [[9, 0], [25, 0]]
    assert res.precisions == [6]                   # the table's precision (25 <= 31)


# ---- slice_like ------------------------------------------------------------------------------------
def test_sweep_slice_like():
    """axes (0, 1); shape_like (1, j2) for j2 in {1, j}: Y = X[:1, :j2]."""
    for k, shape in enumerate(SHAPES):
        x = data(shape, k)
        for j2 in sorted({1, shape[1]}):
            like = np.zeros((1, j2), np.int32)
            y = run("slice_like", [x, like], {"axes": (0, 1)})[0]
            np.testing.assert_array_equal(y, x[:, :j2])


def test_slice_like_axes_and_errors():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    like = np.zeros((1, 2), np.int32)
    assert run("slice_like", [x, like])[0].shape == (1, 2, 4)            # K = 0: axes 0..M-1
    assert run("slice_like", [x, like], {"axes": (-2,)})[0].shape == (2, 2, 4)
    with pytest.raises(InvalidGraphError, match=r"axis 2 is outside \[-3, 2\)"):
        run("slice_like", [x, like], {"axes": (2,)})
    with pytest.raises(InvalidGraphError, match="exceeds input X's extent"):
        run("slice_like", [x, np.zeros((3,), np.int32)])
