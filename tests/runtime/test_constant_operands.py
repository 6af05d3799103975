"""MATMUL's B made from constants (runtime/runners/constant_operands.py): packed once per graph,
not once per run, with the reference backend's bits; a B computed from a graph input is packed
on every run; at the kernel, a read-only B is packed once per array. The kernels' pack calls
are counted (gemm_ops._tosa_ops wrapped)."""
import numpy as np
import pytest

import qsim.tosa  # noqa: F401
from qsim.ir import DType, Graph, Op, OpKind, Tensor
from qsim.kernels import gemm_ops
from qsim.runtime import execute
from qsim.runtime.runners.constant_operands import made_from_constants
from qsim.tosa import run as tosa_run


def _op(name, inputs, outputs, attrs):
    return Op(OpKind.get(f"tosa.{name}"), tuple(inputs), tuple(outputs), attrs, name=outputs[0])


def _graph(rng, *, b_from_input=False, rescale=False):
    """x [2,5,70] x B -> MATMUL (acc) [-> RESCALE (y)]; B = TILE(RESHAPE(w [70,9] constant)) to
    [2,70,9], or, with b_from_input, ADD-free: TILE(RESHAPE(graph input bx))."""
    source = "bx" if b_from_input else "w"
    ops = [_op("RESHAPE", [source], ["w3"], dict(new_shape=(1, 70, 9))),
           _op("TILE", ["w3"], ["b"], dict(multiples=(2, 1, 1))),
           _op("MATMUL", ["x", "b"], ["acc"], dict(A_zp=-128, B_zp=3))]
    tensors = {"x": Tensor("x", DType.I8, (2, 5, 70)), "w3": Tensor("w3", DType.I8, (1, 70, 9)),
               "b": Tensor("b", DType.I8, (2, 70, 9)), "acc": Tensor("acc", DType.I32, (2, 5, 9))}
    w = rng.integers(-128, 128, (70, 9)).astype(np.int8)
    w[0] = -128
    tensors[source] = Tensor(source, DType.I8, (70, 9), data=None if b_from_input else w)
    outputs = ("acc",)
    if rescale:
        ops.append(_op("RESCALE", ["acc"], ["y"], dict(
            input_zp=0, output_zp=-5, multiplier=np.array([1 << 30]), shift=np.array([40]), scale32=True,
            double_round=True, per_channel=False)))
        tensors["y"] = Tensor("y", DType.I8, (2, 5, 9))
        outputs = ("y",)
    inputs = ("x", "bx") if b_from_input else ("x",)
    return Graph("mm", inputs, outputs, tuple(ops), tensors).verify(), w


@pytest.fixture
def packs(monkeypatch):
    """'cached' for each pack of a constant B (pack_matrices_kn), 'per call' for each MATMUL
    kernel call that packs its B itself."""
    real, seen = gemm_ops._tosa_ops, []

    class Counting:
        def __getattr__(self, name):
            return getattr(real, name)

        def pack_matrices_kn(self, *args):
            seen.append("cached")
            return real.pack_matrices_kn(*args)

        def matmul_i8(self, *args):
            seen.append("per call" if args[-1] is None else "packed")
            return real.matmul_i8(*args)

    monkeypatch.setattr(gemm_ops, "_tosa_ops", Counting())
    return seen


@pytest.mark.parametrize("rescale", [False, True], ids=["matmul", "matmul+rescale"])
def test_a_b_made_from_constants_is_packed_once_per_graph(rng, packs, rescale):
    g, w = _graph(rng, rescale=rescale)
    assert made_from_constants(g, "b") and not made_from_constants(g, "x")
    out = g.outputs[0]
    for run in range(3):
        x = rng.integers(-128, 128, (2, 5, 70)).astype(np.int8)
        x[:, 0] = 127
        got = execute(g, [x], keep=[out])[out]
        want = execute(g, [x], backend="reference", keep=[out])[out]
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        if not rescale:      # the spec's product, written out here
            exact = np.einsum("nhc,cw->nhw", x.astype(np.int64) + 128, w.astype(np.int64) - 3)
            np.testing.assert_array_equal(got, exact)
    assert packs == ["cached", "packed", "packed", "packed"]


def test_a_b_computed_from_a_graph_input_is_packed_on_every_run(rng, packs):
    g, _ = _graph(rng, b_from_input=True)
    assert not made_from_constants(g, "b")
    for run in range(2):
        x = rng.integers(-128, 128, (2, 5, 70)).astype(np.int8)
        bx = rng.integers(-128, 128, (70, 9)).astype(np.int8)
        got = execute(g, [x, bx], keep=["acc"])["acc"]
        exact = np.einsum("nhc,cw->nhw", x.astype(np.int64) + 128, bx.astype(np.int64) - 3)
        np.testing.assert_array_equal(got, exact)
    assert packs == ["per call", "per call"]


def test_read_only_matmul_b_is_packed_once_and_a_writable_one_every_call(rng, packs):
    a = rng.integers(-128, 128, (2, 5, 70)).astype(np.int8)
    b = rng.integers(-128, 128, (2, 70, 9)).astype(np.int8)
    attrs = dict(A_zp=-128, B_zp=0)

    def want(b):
        return np.einsum("nhc,ncw->nhw", a.astype(np.int64) + 128, b.astype(np.int64))

    frozen = b.copy()
    frozen.flags.writeable = False
    for _ in range(3):
        np.testing.assert_array_equal(tosa_run("MATMUL", [a, frozen], attrs)[0], want(frozen))
    assert packs == ["cached", "packed", "packed", "packed"]
    for step in range(2):                  # an activation: changed in place between calls
        b[:, step] = 127
        np.testing.assert_array_equal(tosa_run("MATMUL", [a, b], attrs)[0], want(b))
    assert packs[4:] == ["per call", "per call"]
