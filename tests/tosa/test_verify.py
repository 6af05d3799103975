"""Graph.verify() checks TOSA ops with the same validation as qsim.tosa.run."""
import numpy as np
import pytest

import qsim.tosa  # noqa: F401  (registers tosa.* kinds)
from qsim.errors import InvalidGraphError, UsageError
from qsim.ir import DType, Graph, Op, OpKind, Tensor


def _graph(ops, tensors, inputs, outputs):
    return Graph("g", inputs, outputs, ops, {t.name: t for t in tensors})


def _conv_graph(out_shape=(1, 4, 4, 2), out_dtype=DType.I32, **attr_changes):
    attrs = dict(weight=np.ones((2, 3, 3, 1), np.int8), bias=np.zeros(2, np.int32), pad=(1, 1, 1, 1),
                 stride=(1, 1), dilation=(1, 1), input_zp=0, weight_zp=0)
    attrs.update(attr_changes)
    op = Op(OpKind.get("tosa.CONV2D"), ("x",), ("y",), attrs, name="conv1")
    return _graph([op], [Tensor("x", DType.I8, (1, 4, 4, 1)), Tensor("y", out_dtype, out_shape)], ["x"], ["y"])


def test_valid_tosa_graph_verifies():
    assert _conv_graph().verify() is not None


def test_output_shape_mismatch_is_reported_with_op_label():
    with pytest.raises(InvalidGraphError, match=r"tosa.CONV2D 'conv1': output 'y' is declared with shape "
                                                r"\[1, 3, 3, 2\], the operator gives \[1, 4, 4, 2\]"):
        _conv_graph(out_shape=(1, 3, 3, 2)).verify()


def test_output_dtype_mismatch():
    with pytest.raises(InvalidGraphError, match=r"no supported data type mode of CONV2D"):
        _conv_graph(out_dtype=DType.I8).verify()


def test_error_if_in_graph_names_the_op():
    with pytest.raises(InvalidGraphError, match=r"tosa.CONV2D 'conv1': ERROR_IF\(stride_y < 1"):
        _conv_graph(stride=(0, 1)).verify()


def test_missing_attribute_in_graph():
    g = _conv_graph()
    op = g.ops[0]
    attrs = {k: v for k, v in op.attrs.items() if k != "dilation"}
    bad = _graph([Op(op.kind, op.inputs, op.outputs, attrs, name="conv1")], list(g.tensors.values()), ["x"], ["y"])
    with pytest.raises(UsageError, match=r"missing attribute\(s\) dilation"):
        bad.verify()


def test_rescale_output_type_comes_from_the_tensor():
    op = Op(OpKind.get("tosa.RESCALE"), ("x",), ("y",),
            dict(input_zp=0, output_zp=-128, multiplier=np.array([1 << 30]), shift=np.array([30]), scale32=True,
                 double_round=False, per_channel=False), name="rq")
    g = _graph([op], [Tensor("x", DType.I32, (2, 3)), Tensor("y", DType.I8, (2, 3))], ["x"], ["y"])
    g.verify()
    g16 = _graph([op], [Tensor("x", DType.I32, (2, 3)), Tensor("y", DType.U16, (2, 3))], ["x"], ["y"])
    with pytest.raises(InvalidGraphError, match=r"RESCALE has in_t=int32_t .* out_t=uint16_t"):
        g16.verify()


def test_dynamic_shapes_are_rejected():
    op = Op(OpKind.get("tosa.ABS"), ("x",), ("y",), {}, name="a")
    g = _graph([op], [Tensor("x", DType.I32, (None, 3)), Tensor("y", DType.I32, (None, 3))], ["x"], ["y"])
    with pytest.raises(InvalidGraphError, match=r"dynamic shape"):
        g.verify()


def test_cond_if_subgraph_signatures_are_checked():
    def body(kind):
        op = Op(OpKind.get(kind), ("a",), ("b",), {}, name="inner")
        return _graph([op], [Tensor("a", DType.I32, (2,)), Tensor("b", DType.I32, (2,))], ["a"], ["b"])
    then_g, else_g = body("tosa.ABS"), body("tosa.CLZ")
    op = Op(OpKind.get("tosa.COND_IF"), ("x", "c"), ("y",), {}, {"then_graph": then_g, "else_graph": else_g},
            name="if")
    tensors = [Tensor("x", DType.I32, (2,)), Tensor("c", DType.BOOL, ()), Tensor("y", DType.I32, (2,))]
    _graph([op], tensors, ["x", "c"], ["y"]).verify()
    tensors_bad = [Tensor("x", DType.I32, (3,)), Tensor("c", DType.BOOL, ()), Tensor("y", DType.I32, (2,))]
    with pytest.raises(InvalidGraphError, match=r"tensor_list_shape\(input_list\) != tosa_input_shape\(then_graph\)"):
        _graph([op], tensors_bad, ["x", "c"], ["y"]).verify()
