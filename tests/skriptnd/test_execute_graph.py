"""Float execution of whole ir.Graphs of standard operators (qsim.runtime)."""
import numpy as np
import pytest

from qsim import ir
from qsim.errors import DataError, MismatchError, QsimError
from qsim.runtime import execute

F32 = ir.DType.F32


def T(name, shape, data=None, dtype=F32):
    if data is not None:
        data = np.asarray(data, dtype=dtype.numpy)
    return ir.Tensor(name, dtype, tuple(shape), data)


def Op(kind, ins, outs, **attrs):
    return ir.Op(ir.OpKind.get(kind), tuple(ins), tuple(outs), attrs, name=outs[0])


def small_cnn(rng):
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    fw = rng.standard_normal((5, 16)).astype(np.float32)
    tensors = [T("x", (1, 3, 4, 4)), T("w", w.shape, w), T("c", (1, 4, 4, 4)), T("r", (1, 4, 4, 4)),
               T("p", (1, 4, 2, 2)), T("f", (1, 16)), T("fw", fw.shape, fw), T("l", (1, 5)), T("y", (1, 5))]
    ops = [Op("nn.conv", ["x", "w", ""], ["c"], padding=(1, 1, 1, 1)),
           Op("nn.relu", ["c"], ["r"]),
           Op("nn.max_pool", ["r"], ["p"], size=(2, 2), stride=(2, 2)),
           Op("layout.flatten", ["p"], ["f"], axis=1),
           Op("nn.linear", ["f", "fw", ""], ["l"]),
           Op("nn.softmax", ["l"], ["y"])]
    return ir.Graph("cnn", ("x",), ("y",), ops, {t.name: t for t in tensors}).verify(), w, fw


def test_small_cnn_against_numpy(rng):
    g, w, fw = small_cnn(rng)
    x = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
    vals = execute(g, {"x": x})
    # independent numpy: zero-padded 3x3 correlation, relu, 2x2 max, dense, softmax
    xp = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
    conv = np.array([[[np.sum(xp[:, i:i + 3, j:j + 3] * w[o]) for j in range(4)] for i in range(4)]
                     for o in range(4)])
    r = np.maximum(conv, 0)
    p = r.reshape(4, 2, 2, 2, 2).max(axis=(2, 4))
    logits = fw @ p.reshape(16)
    e = np.exp(logits - logits.max())
    np.testing.assert_allclose(vals["y"][0], e / e.sum(), rtol=1e-5)
    assert vals["y"].dtype == np.float32
    assert set(vals) == set(g.tensors)


def test_packed_inputs_and_outputs(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    tensors = [T("a", (2, 3)), T("b", (2, 3)), T("c", (2, 3)), T("cat", (2, 9)),
               T("p0", (2, 4)), T("p1", (2, 5)), T("s", (2, 3))]
    ops = [Op("layout.concat", ["a", "b", "c"], ["cat"], axis=1),
           Op("layout.split", ["cat"], ["p0", "p1"], axis=1, sizes=(4, 5)),
           Op("math.sum_n", ["a", "b", "c"], ["s"])]
    g = ir.Graph("packs", ("a", "b", "c"), ("p1", "s"), ops, {t.name: t for t in tensors}).verify()
    vals = execute(g, [a, 2 * a, 3 * a])
    np.testing.assert_array_equal(vals["p1"], np.concatenate([a, 2 * a, 3 * a], 1)[:, 4:])
    np.testing.assert_allclose(vals["s"], 6 * a, rtol=1e-6)


def test_bad_inputs_are_data_errors(rng):
    g, _, _ = small_cnn(rng)
    with pytest.raises(DataError, match=r"input 'x' has shape \[1, 3, 5, 4\]"):
        execute(g, {"x": np.zeros((1, 3, 5, 4), np.float32)})
    with pytest.raises(DataError, match="no value for input"):
        execute(g, {})


def test_declared_shape_mismatch_names_the_op(rng):
    tensors = [T("x", (2, 3)), T("y", (3, 3))]
    g = ir.Graph("bad", ("x",), ("y",), [Op("math.neg", ["x"], ["y"])], {t.name: t for t in tensors})
    with pytest.raises(MismatchError, match=r"math.neg 'y': output 'y' has shape \[2, 3\]"):
        execute(g, {"x": np.zeros((2, 3), np.float32)})


def test_op_errors_name_the_invocation():
    tensors = [T("x", (2, 3)), T("y", (2,))]
    g = ir.Graph("sq", ("x",), ("y",), [Op("layout.squeeze", ["x"], ["y"], axes=(1,))],
                 {t.name: t for t in tensors})
    with pytest.raises(QsimError, match=r"layout.squeeze 'y': .*must be 1"):
        execute(g, {"x": np.zeros((2, 3), np.float32)})
