import numpy as np

from qsim import ir
from qsim.quant.tosa.target import lower_graph
from qsim.tosa.sknd_form import from_sknd_form, to_sknd_form
from qsim.runtime.executor import execute

from tests.quant.lowering_models import calibrate_minmax, small_cnn


def _same_graph(a: ir.Graph, b: ir.Graph):
    assert a.inputs == b.inputs and a.outputs == b.outputs
    assert set(a.tensors) == set(b.tensors)
    for name, t in a.tensors.items():
        u = b.tensors[name]
        assert (t.dtype, t.shape, t.quant) == (u.dtype, u.shape, u.quant), name
        assert (t.data is None) == (u.data is None) and (t.data is None or np.array_equal(t.data, u.data))
    assert len(a.ops) == len(b.ops)
    for x, y in zip(a.ops, b.ops):
        assert (x.kind, x.inputs, x.outputs, x.name) == (y.kind, y.inputs, y.outputs, y.name)
        assert set(x.attrs) == set(y.attrs)
        for k, v in x.attrs.items():
            w = y.attrs[k]
            if isinstance(v, np.ndarray):
                assert isinstance(w, np.ndarray) and v.dtype == w.dtype and np.array_equal(v, w), k
            else:
                assert v == w, k


def test_round_trip_of_lowered_graph(rng):
    graph = small_cnn(rng)
    calib = [rng.normal(size=(1, 3, 12, 12)).astype(np.float32) for _ in range(3)]
    g = lower_graph(graph, calibrate_minmax(graph, calib)).graph
    s = to_sknd_form(g)
    conv = next(op for op in s.ops if op.kind.name == "tosa.CONV2D")
    assert "weight" not in conv.attrs and len(conv.inputs) == 3
    w = s.tensors[conv.inputs[1]]
    assert w.dtype is ir.DType.I8 and w.quant.bits == 8 and w.is_constant
    rescale = next(op for op in s.ops if op.kind.name == "tosa.RESCALE")
    assert len(rescale.inputs) == 3
    back = from_sknd_form(s).verify()
    _same_graph(g, back)


def test_pad_padding_is_flat_in_sknd_form():
    import qsim.tosa  # noqa: F401
    t = {"x": ir.Tensor("x", ir.DType.I8, (1, 2)), "y": ir.Tensor("y", ir.DType.I8, (3, 5),
                                                                  quant=ir.QuantInfo(0.1, 0))}
    op = ir.Op(ir.OpKind.get("tosa.PAD"), ("x",), ("y",),
               {"padding": np.array([[1, 1], [2, 1]], dtype=np.int32), "pad_const": 0})
    g = ir.Graph("g", ("x",), ("y",), (op,), t).verify()
    s = to_sknd_form(g)
    assert s.ops[0].attrs["padding"] == (1, 1, 2, 1)
    back = from_sknd_form(s).verify()
    x = np.array([[1, 2]], dtype=np.int8)
    assert np.array_equal(execute(back, {"x": x})["y"], execute(g, {"x": x})["y"])
